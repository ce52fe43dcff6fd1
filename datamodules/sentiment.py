"""Sentiment classification data: an offline synthetic language (default), IMDB, SST-2, MR, local files.

The synthetic language (the offline default) is built so that poolings differ: a long neutral
filler text holds one to ``max_phrases`` polarity phrases, each a polarity word optionally
preceded by a negator ("not good" is negative). The label is the polarity of the **first**
phrase; later phrases are distractors of random polarity. A mean over all states mixes the
distractors in; a last-state read-out must carry the decision across the rest of the text; an
attention pooling can pick the deciding phrase. :func:`synthetic_label` is the rule, applied to the
final text (so a filler negator that lands before a polarity word counts too).

Real corpora (:mod:`datamodules.sentiment_sources`: one ``SENTIMENT_SOURCES`` entry each, reading a frozen
``SentimentSpec``): IMDB (Maas et al. 2011; ``aclImdb/{train,test}/{pos,neg}/*.txt``), SST-2 (GLUE TSV
``sentence<TAB>label`` with header; GLUE's test labels are hidden, so its dev set is our test
set), MR (the human-rated Rotten Tomatoes snippets of the vaderSentiment sdist, with tweets / NYT /
Amazon snippets as out-of-domain test sets: :mod:`datamodules.vader_snippets`) and local TSV/CSV/JSONL
files with text and label columns. Where no validation split is published, ``val_size`` examples are
held out of train with a seeded shuffle. Bad input (label outside the declared set, non-UTF-8 bytes,
an empty split) is a one-line UsageError naming the file, line or split.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import Tensor
from torch.utils.data import DataLoader

from attnlab_core.errors import UsageError
from attnlab_core.progress import track
from datamodules.batching import N_SPECIAL, UNK, SplitDataModule, pad_sequences
from datamodules.sentiment_sources import SENTIMENT_SOURCES, Example, SentimentSource
from datamodules.sources import SentimentSpec, describe_training_files
from datamodules.splits import Split, split_seed
from datamodules.tokenization import Tokenization, Tokenizer, WordVocab, load_tokenizer, prepare_tokenizer
from datamodules.vader_snippets import VaderDomain

POSITIVE = ("good", "great", "excellent", "wonderful", "superb", "brilliant")
NEGATIVE = ("bad", "awful", "terrible", "boring", "dull", "poor")
NEGATORS = ("not", "never")
FILLER = (
    "the a this that it its movie film plot story actor actress scene scenes camera music director script "
    "character characters ending dialogue cast screen sound cinema series episode studio and or but with of "
    "in on at was is were are has had seems feels looks quite rather very really just also then again"
).split()
SYNTHETIC_LEXICON = (*NEGATORS, *POSITIVE, *NEGATIVE, *FILLER)
SYNTHETIC_SIZES = {"train": 10000, "val": 500, "test": 2000}
BINARY_NAMES = ["negative", "positive"]


class ClassificationBatch(NamedTuple):
    """tokens (B, S) right-padded with PAD; labels (B,) class indices."""

    tokens: Tensor
    labels: Tensor


def collate_classification(items: Sequence[tuple[list[int], int]]) -> ClassificationBatch:
    """``(ids, label)`` items -> :class:`ClassificationBatch`."""
    return ClassificationBatch(pad_sequences([i[0] for i in items]), torch.tensor([i[1] for i in items]))


# --------------------------------------------------------------------------- synthetic language
def synthetic_label(words: Sequence[str]) -> int:
    """1 (positive) or 0: the polarity of the first polarity word, flipped by a negator just before it."""
    for i, w in enumerate(words):
        if w in POSITIVE or w in NEGATIVE:
            positive = w in POSITIVE
            if i > 0 and words[i - 1] in NEGATORS:
                positive = not positive
            return int(positive)
    raise ValueError("a synthetic text needs at least one polarity word")


def generate_sentiment(
    *, n: int, min_words: int, max_words: int, max_phrases: int, filler: Sequence[str], rng: random.Random
) -> list[Example]:
    """Draw ``n`` synthetic (text, label) examples.

    Args:
        n: examples. min_words / max_words: filler length range (inclusive).
        max_phrases: polarity phrases per text are uniform in 1..max_phrases.
        filler: neutral words. rng: source of randomness (consumed).
    """
    out: list[Example] = []
    for _ in range(n):
        words = [rng.choice(NEGATORS) if rng.random() < 0.03 else rng.choice(filler)
                 for _ in range(rng.randint(min_words, max_words))]
        slots = sorted((rng.randint(0, len(words)) for _ in range(rng.randint(1, max_phrases))), reverse=True)
        for slot in slots:  # right to left, so earlier slots keep their index
            phrase = [rng.choice(POSITIVE if rng.random() < 0.5 else NEGATIVE)]
            if rng.random() < 0.3:
                phrase.insert(0, rng.choice(NEGATORS))
            words[slot:slot] = phrase
        out.append((" ".join(words), synthetic_label(words)))
    return out


def synthetic_vocab(vocab_size: int) -> WordVocab:
    """The synthetic lexicon cut or padded (``w0``, ``w1``, ... neutral words) to ``vocab_size`` ids."""
    extra = [f"w{i}" for i in range(max(0, vocab_size - N_SPECIAL - len(SYNTHETIC_LEXICON)))]
    return WordVocab(words=[*SYNTHETIC_LEXICON, *extra][: vocab_size - N_SPECIAL])


def _shuffled(items: list[Example], seed: int) -> list[Example]:
    items = list(items)
    random.Random(seed).shuffle(items)
    return items


class SentimentData(SplitDataModule):
    """Sentiment classification batches (:class:`ClassificationBatch`) from one ``source``.

    Under DDP the loaders shard themselves (``build_dataloader``): seeded ``DistributedSampler`` for
    train, an exactly-once ``UnpaddedShardSampler`` for val/test. Vocabulary sizes are init
    arguments, so the CLI can link ``src_vocab_size`` to the model before any data is read. Split sizes:
    synthetic: exact sizes (default 10000 / 500 / 2000); real: caps after a seeded shuffle (``None``:
    all), and ``val_size`` is the held-out size when val is carved from train (default: min(1000, 10%
    of train)).

    Args:
        source: synthetic | imdb | sst2 | mr | files.
        data_dir: downloads, extracted corpora and SentencePiece models live here.
        test_domain: ``mr`` only: the test set, its own held-out ids (``mr``, default) or all of
            ``tweets`` | ``nyt`` | ``amazon`` (out of domain); train and val stay the mr splits.
        train_path / val_path / test_path: ``files`` source: TSV/CSV/JSONL with a header
            (val_path optional: then ``val_size`` examples are held out of train).
        text_column / label_column: column (or JSON key) names for ``files``.
        labels: the declared label values for ``files``; class i = ``labels[i]`` (default ``["0", "1"]``).
        tokenizer: word | bpe | unigram (real text; the synthetic language is always word-level).
        vocab_size: total vocabulary size, the 4 special ids included.
        max_len: texts longer than this many tokens are truncated (the first ``max_len`` kept).
        min_words / max_words / max_phrases: synthetic filler length range and phrases per text.
    """

    def __init__(
        self,
        *,
        source: SentimentSource = "synthetic",
        data_dir: str = "data",
        test_domain: VaderDomain | None = None,
        train_path: str | None = None,
        val_path: str | None = None,
        test_path: str | None = None,
        text_column: str = "text",
        label_column: str = "label",
        labels: list[str] | None = None,
        tokenizer: Tokenization = "word",
        vocab_size: int = 128,
        max_len: int = 400,
        min_words: int = 10,
        max_words: int = 60,
        max_phrases: int = 3,
        **split: Any,
    ) -> None:
        super().__init__(split=self.split_spec(**split))
        self.save_hyperparameters()
        self.labels = list(labels) if labels is not None else ["0", "1"]
        spec = SentimentSpec(data_dir=Path(data_dir), train_path=train_path, val_path=val_path, test_path=test_path,
                             text_column=text_column, label_column=label_column, labels=tuple(self.labels),
                             test_domain=test_domain)
        self.use_source(SENTIMENT_SOURCES, source, spec)
        self.tokenizer_kind: Tokenization = tokenizer
        self._validate()
        self.tokenizer: Tokenizer | None = synthetic_vocab(vocab_size) if self.corpus.read is None else None
        self.datasets: dict[str, list[tuple[list[int], int]]] = {}
        self.texts: dict[str, list[Example]] = {}

    def _validate(self) -> None:
        hp = self.hparams
        minimum = N_SPECIAL + len(NEGATORS) + len(POSITIVE) + len(NEGATIVE) + 1
        if self.corpus.read is None and hp.vocab_size < minimum:
            raise UsageError(f"vocab_size must be >= {minimum} for the synthetic language, got {hp.vocab_size}")
        if hp.vocab_size <= N_SPECIAL:
            raise UsageError(f"vocab_size must be > {N_SPECIAL}, got {hp.vocab_size}")
        if not 1 <= hp.min_words <= hp.max_words or hp.max_phrases < 1:
            raise UsageError(f"need 1 <= min_words <= max_words and max_phrases >= 1, got "
                             f"{hp.min_words}, {hp.max_words}, {hp.max_phrases}")
        domain = hp.test_domain
        if domain is not None and domain not in self.corpus.test_domains:
            raise UsageError(f"--data.init_args.test_domain={domain} is not a test set of source={self.source} "
                             f"(it offers: {', '.join(self.corpus.test_domains) or 'none'})")
        if len(set(self.labels)) != len(self.labels) or len(self.labels) < 2:
            raise UsageError(f"labels must be at least two distinct values, got {self.labels}")
        if hp.max_len < 1:
            raise UsageError(f"max_len must be >= 1, got {hp.max_len}")

    # ----------------------------------------------------------------- vocabulary facts
    @property
    def src_vocab_size(self) -> int:
        """Input vocabulary size (the init argument; linked to the model by the CLI)."""
        return self.hparams.vocab_size

    @property
    def class_names(self) -> list[str]:
        """Class index -> name (figure labels)."""
        return self.labels if self.corpus.declared_labels else BINARY_NAMES

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    # ----------------------------------------------------------------- raw splits
    def raw_splits(self) -> dict[str, list[Example]]:
        """(text, label) examples of every split, deterministic in (source, files, sizes, seed)."""
        if not self.texts:
            self.texts = self._synthetic() if self.corpus.read is None else self._real()
            for split, items in self.texts.items():
                if not items:
                    raise UsageError(f"sentiment data ({self.source}): the {split} split is empty")
        return self.texts

    def _synthetic(self) -> dict[str, list[Example]]:
        hp = self.hparams
        filler = self.tokenizer.itos[N_SPECIAL + len(NEGATORS) + len(POSITIVE) + len(NEGATIVE):]
        return {
            split: generate_sentiment(
                n=n, min_words=hp.min_words, max_words=hp.max_words,
                max_phrases=hp.max_phrases, filler=filler, rng=random.Random(split_seed(hp.seed, split)),
            )
            for split, n in self.sizes.or_defaults(SYNTHETIC_SIZES).items()
        }

    def _real(self) -> dict[str, list[Example]]:
        train, val, test = self.corpus.read(self.spec)
        train = _shuffled(train, self.seed)
        if val is None:
            held = self.sizes.held_out(len(train))
            val, train = train[:held], train[held:]
        splits = {"train": train, "val": _shuffled(val, self.seed + 1), "test": _shuffled(test, self.seed + 2)}
        return {split: self.sizes.cap(items, split) for split, items in splits.items()}

    # ----------------------------------------------------------------- Lightning hooks
    def prepare_data(self) -> None:
        """Download/extract the corpus and train SentencePiece once (no state is kept here)."""
        if self.corpus.read is not None:
            texts = [t for t, _ in self.raw_splits()["train"]]
            prepare_tokenizer(self.tokenizer_kind, texts, **self._tok_options())

    def setup(self, stage: str) -> None:
        """Load the tokenizer and encode every split (same result on every rank)."""
        if self.datasets:
            return
        splits = self.raw_splits()
        if self.tokenizer is None:
            self.tokenizer = load_tokenizer(self.tokenizer_kind, [t for t, _ in splits["train"]], **self._tok_options())
        max_len = self.hparams.max_len
        for split, items in splits.items():
            self.datasets[split] = [((self.tokenizer.encode(t) or [UNK])[:max_len], y)
                                    for t, y in track(items, what=f"encoding the {split} split", unit="texts")]

    def _tok_options(self) -> dict[str, Any]:
        """Options of the tokenizer helpers; ``origin`` names the training file (``files``) or split in errors."""
        path = Path(self.hparams.train_path) if self.source == "files" else None
        origin = describe_training_files(path, side=None, columns=("", "")) or f"the {self.source} training split"
        return {"cache_dir": self.data_dir / "tokenizers", "name": f"sentiment-{self.source}",
                "vocab_size": self.hparams.vocab_size, "origin": origin}

    def _loader(self, split: Split) -> DataLoader:
        return self.loader(self.datasets[split], split, collate_fn=collate_classification)  # type: ignore[arg-type]

    def decode_tokens(self, ids: Sequence[int] | Tensor) -> str:
        """Ids -> text (words joined by spaces, or detokenized SentencePiece); stops at EOS."""
        if self.tokenizer is None:
            raise RuntimeError("decode_tokens needs setup() first (the tokenizer is loaded there)")
        return self.tokenizer.decode(ids.tolist() if isinstance(ids, Tensor) else list(ids))
