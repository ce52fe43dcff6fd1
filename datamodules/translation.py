"""Machine-translation corpora, one :data:`TRANSLATION_SOURCES` entry per ``source``, tokenized with
SentencePiece (or words) into :class:`Seq2SeqBatch`\\ es:

- ``synthetic`` (the offline default of the translation configs): the generated pair of
  :mod:`datamodules.toy_language`, seeded, with gold word alignments (:meth:`TranslationData.alignments`);
  word-level over its closed lexicons (one per side, or their union with ``shared_vocab``), so
  ``tokenizer``, ``vocab_size`` and the language codes do not apply; sizes default to ``SPLIT_SIZES`` there.

- ``multi30k``: the WMT16 multimodal task-1 release (Elliott et al. 2016), 29,000 / 1,014 / 1,000
  sentence pairs; the three published archives are downloaded once into ``data_dir/downloads``,
  verified against their published sha256 (the values torchtext ships), extracted safely and read as
  ``train|val|test.<lang>``.
- ``iwslt14``: fairseq's split of the WIT3 ``de-en.tgz`` (160k / 7k / 6.75k pairs), made here from
  a copy of the archive at ``data_dir/downloads/de-en.tgz`` (:mod:`datamodules.iwslt`), or read
  from ``data_dir/iwslt14/train|valid|test.<lang>`` if already prepared.
- ``wmt14``: not downloaded (4.5M pairs). Prepare it with fairseq's ``prepare-wmt14en2de.sh``
  **without the final BPE step** (SentencePiece is trained here) and put ``train|valid|test.<lang>``
  under ``data_dir/wmt14/``. Its training split is streamed and memory-mapped (``memory_map``).
- ``bible``: verse pairs of two SWORD Bible modules read offline (``es`` Reina-Valera 1909, ``en`` King
  James; 28,046 / 1,509 / 1,529 pairs, held-out whole books; :mod:`datamodules.bible`), written once as
  ``train|val|test.<lang>`` under ``data_dir/bible/``; the library is ``sword_path`` (or ``$SWORD_PATH``,
  else /usr/share/sword).
- ``files``: each of ``train_path`` / ``val_path`` / ``test_path`` is a ``.tsv``/``.csv``/``.jsonl``
  file with ``src_column`` / ``tgt_column`` (header row), or a prefix ``P`` of two plain-text files
  ``P.<src_lang>`` and ``P.<tgt_lang>`` (one sentence per line; different line counts are an error
  naming both files).

SentencePiece is trained once in ``prepare_data`` on the training split (shared by both sides, or one
model per side), cached by a content hash; ``setup`` loads it on every rank. ``decode_tokens``
detokenizes target ids, so BLEU is computed on detokenized text (SacreBLEU 13a).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Literal

from torch import Tensor
from torch.utils.data import DataLoader, Subset

from attnlab_core.errors import UsageError
from attnlab_core.progress import track
from datamodules.batching import (
    BOS,
    EOS,
    N_SPECIAL,
    PAD,
    UNK,
    SplitDataModule,
    collate_pairs,
)
from datamodules.bible import check_bible, locate_bible
from datamodules.bucketing import TokenBudgetBatchSampler, token_budget_loader  # noqa: F401
from datamodules.download import Resource, extract, fetch
from datamodules.iwslt import prepare_iwslt14
from datamodules.parallel_files import find_file, pair_lengths, read_parallel
from datamodules.sources import Corpus, SplitFiles, TranslationSpec, describe_training_files
from datamodules.splits import SPLITS, Split
from datamodules.token_store import ParallelText, TokenStore, build_token_store
from datamodules.tokenization import (
    Tokenization,
    Tokenizer,
    WordVocab,
    load_tokenizer,
    prepare_tokenizer,
    read_records,
)
from datamodules.toy_language import Alignment, generate_splits, source_lexicon, target_lexicon

TranslationSource = Literal["synthetic", "multi30k", "iwslt14", "wmt14", "bible", "files"]
"""Parallel corpus: the generated pair (offline), Multi30k (downloaded), IWSLT14 / WMT14
(fairseq-prepared), Bible verses (SWORD modules, offline), or local files."""

TextPair = tuple[str, str]

_SHEF = "http://www.quest.dcs.shef.ac.uk/wmt16_files_mmt/"
_MIRROR = "https://raw.githubusercontent.com/neychev/small_DL_repo/master/datasets/Multi30k/"
MULTI30K: dict[str, Resource] = {
    "train": Resource(url=_SHEF + "training.tar.gz", mirrors=(_MIRROR + "training.tar.gz",),
                      checksum="sha256:20140d013d05dd9a72dfde46478663ba05737ce983f478f960c1123c6671be5e"),
    "val": Resource(url=_SHEF + "validation.tar.gz", mirrors=(_MIRROR + "validation.tar.gz",),
                    checksum="sha256:a7aa20e9ebd5ba5adce7909498b94410996040857154dab029851af3a866da8c"),
    "test": Resource(url=_SHEF + "mmt16_task1_test.tar.gz", mirrors=(_MIRROR + "mmt16_task1_test.tar.gz",),
                     checksum="sha256:0681be16a532912288a91ddd573594fbdd57c0fbb81486eff7c55247e35326c2"),
}
"""The published Multi30k task-1 archives (files ``train|val|test.{de,en,...}`` inside)."""
MULTI30K_PREFIX = {"train": "train", "val": "val", "test": "test"}
PREPARED_PREFIX = {"train": "train", "val": "valid", "test": "test"}  # fairseq's prepare-*.sh names


def _multi30k(spec: TranslationSpec, split: Split) -> SplitFiles:
    """Download (once, checksummed) and extract the split's archive; its ``<split>.<lang>`` files."""
    root = extract(fetch(MULTI30K[split], cache_dir=spec.data_dir / "downloads"), spec.data_dir / "multi30k" / split)
    name = MULTI30K_PREFIX[split]
    return find_file(root, f"{name}.{spec.src_lang}"), find_file(root, f"{name}.{spec.tgt_lang}")


def _prepared(spec: TranslationSpec, split: Split, *, name: str, script: str) -> SplitFiles:
    """``data_dir/<name>/<train|valid|test>.<lang>`` as fairseq's ``prepare-<script>.sh`` writes them."""
    prefix = spec.data_dir / name / PREPARED_PREFIX[split]
    src, tgt = (prefix.with_name(f"{prefix.name}.{lang}") for lang in (spec.src_lang, spec.tgt_lang))
    if not src.is_file():
        raise UsageError(
            f"{name} is not downloaded automatically: run fairseq's examples/translation/"
            f"prepare-{script}.sh without its BPE step "
            f"and put train|valid|test.{{{spec.src_lang},{spec.tgt_lang}}} in {prefix.parent} (or use source=files)"
        )
    return src, tgt


def _iwslt14(spec: TranslationSpec, split: Split) -> SplitFiles:
    """Split a local copy of the WIT3 archive as fairseq does (once), then read it as prepared."""
    langs = (spec.src_lang, spec.tgt_lang)
    if not (spec.data_dir / "iwslt14" / f"train.{langs[0]}").is_file():
        prepare_iwslt14(spec.data_dir, langs=langs)
    return _prepared(spec, split, name="iwslt14", script="iwslt14")


def _files(spec: TranslationSpec, split: Split) -> SplitFiles:
    """``train_path`` / ``val_path`` / ``test_path``: a table file or the prefix of two plain-text files."""
    path = Path(str(spec.path(split)))
    if path.suffix.lower() in (".tsv", ".csv", ".jsonl"):
        return path
    return path.with_name(f"{path.name}.{spec.src_lang}"), path.with_name(f"{path.name}.{spec.tgt_lang}")


TRANSLATION_SOURCES: dict[str, Corpus] = {
    "synthetic": Corpus(generate=generate_splits, lexicons=lambda: (source_lexicon(), target_lexicon())),
    "multi30k": Corpus(locate=_multi30k),
    "iwslt14": Corpus(locate=_iwslt14),
    "wmt14": Corpus(locate=partial(_prepared, name="wmt14", script="wmt14en2de"), memory_map=True),
    "bible": Corpus(locate=locate_bible, check=check_bible),
    "files": Corpus(locate=_files, requires=("train_path", "val_path", "test_path")),
}
"""Every :data:`TranslationSource`, resolved in ``TranslationData.__init__``."""


class TranslationData(SplitDataModule):
    """Parallel text -> :class:`datamodules.batching.Seq2SeqBatch` (src (B, S), tgt (B, T) with BOS/EOS).

    Loaders shard themselves under DDP (``build_dataloader``): a seeded ``DistributedSampler`` for
    train, an exactly-once ``UnpaddedShardSampler`` for val/test. Split sizes are caps (``None``: all);
    train is a seeded random subset, val/test their first examples.

    Args:
        source: synthetic | multi30k | iwslt14 | wmt14 | bible | files.
        src_lang / tgt_lang: language codes (file suffixes; Multi30k has de, en, fr, cs; bible: en, es).
        data_dir: downloads, extracted corpora and SentencePiece models.
        train_path / val_path / test_path: ``files`` source: a table file or a plain-text prefix.
        src_column / tgt_column: column (or JSON key) names in table files.
        sword_path: ``bible`` source: the SWORD library (mods.d/ + modules/); None: ``$SWORD_PATH``,
            else /usr/share/sword.
        tokenizer: bpe | unigram (SentencePiece) | word.
        vocab_size: size of each vocabulary, the 4 special ids included (known at init, so the CLI
            links src/tgt vocabulary sizes to the model before any data exists).
        shared_vocab: one vocabulary trained on both sides (needed for ``tying=all``) or one per side.
        max_len: training pairs with more tokens than this on either side are dropped (val/test never).
        max_tokens: if set, batches hold at most this many padded tokens (length-bucketed,
            :class:`TokenBudgetBatchSampler`) instead of ``batch_size`` pairs.
        memory_map: stream the training split from disk: SentencePiece reads it as a stream and it
            is encoded once into a memory-mapped :class:`~datamodules.token_store.TokenStore` under
            ``data_dir/stores`` (no text or ids held in RAM). ``None``: on for ``wmt14`` only. Needs
            plain-text files (not TSV/JSONL); ``train_size`` then takes a seeded subset of the
            encoded pairs, and the vocabulary is trained on the whole training split.
    """

    def __init__(
        self,
        *,
        source: TranslationSource = "multi30k",
        src_lang: str = "de",
        tgt_lang: str = "en",
        data_dir: str = "data",
        train_path: str | None = None,
        val_path: str | None = None,
        test_path: str | None = None,
        src_column: str = "src",
        tgt_column: str = "tgt",
        sword_path: str | None = None,
        tokenizer: Tokenization = "bpe",
        vocab_size: int = 8000,
        shared_vocab: bool = True,
        max_len: int = 128,
        max_tokens: int | None = None,
        memory_map: bool | None = None,
        **split: Any,
    ) -> None:
        super().__init__(split=self.split_spec(**split))
        self.save_hyperparameters()
        spec = TranslationSpec(data_dir=Path(data_dir), src_lang=src_lang, tgt_lang=tgt_lang, train_path=train_path,
                               val_path=val_path, test_path=test_path, sword_path=sword_path)
        self.use_source(TRANSLATION_SOURCES, source, spec)
        if vocab_size <= N_SPECIAL or src_lang == tgt_lang:
            raise UsageError(f"need vocab_size > {N_SPECIAL} and two languages, got {vocab_size}, "
                             f"{src_lang}-{tgt_lang}")
        if max_tokens is not None and max_tokens < 1:
            raise UsageError(f"max_tokens must be >= 1 (or null for batch_size batches), got {max_tokens}")
        self.memory_map = self.corpus.memory_map if memory_map is None else memory_map
        if self.memory_map and self.corpus.locate is None:
            raise UsageError(f"memory_map needs a corpus on disk; source={source} is generated in memory")
        self.gold: dict[str, list[Alignment]] = {}
        self.texts: dict[str, list[TextPair]] = {}
        self.tokenizers: tuple[Tokenizer, Tokenizer] | None = None
        self.datasets: dict[str, Sequence[tuple[list[int], list[int]]]] = {}

    @property
    def src_vocab_size(self) -> int:
        """Source vocabulary size (known at init; the CLI links it to the model)."""
        return self._closed_vocabs()[0].size if self.corpus.lexicons else self.hparams.vocab_size

    @property
    def tgt_vocab_size(self) -> int:
        """Target vocabulary size (known at init; the CLI links it to the model)."""
        return self._closed_vocabs()[1].size if self.corpus.lexicons else self.hparams.vocab_size

    def _closed_vocabs(self) -> tuple[WordVocab, WordVocab]:
        """A generated corpus's closed word vocabularies: one per side, or their union for both."""
        src, tgt = self.corpus.lexicons()
        if self.hparams.shared_vocab:
            both = WordVocab(words=sorted(set(src) | set(tgt)))
            return both, both
        return WordVocab(words=src), WordVocab(words=tgt)

    def alignments(self, split: Split) -> list[Alignment]:
        """Gold word alignments of ``raw_splits()[split]`` (generated sources only): sorted
        (source word, target word) index links; the indices are token positions (word vocabulary).
        Val/test are never filtered, so they also index ``datasets[split]`` one to one."""
        if self.corpus.generate is None:
            raise UsageError(f"gold alignments exist for generated sources only, not {self.source}")
        self.raw_splits()
        return self.gold[split]

    # ----------------------------------------------------------------- raw text
    def raw_splits(self) -> dict[str, list[TextPair]]:
        """Text pairs of every split (downloading Multi30k first if needed); with ``memory_map`` the
        training split is streamed from disk instead and is empty here."""
        if not self.texts and self.corpus.generate is not None:
            generated = self.corpus.generate(self.seed, self.sizes)
            self.texts = {split: [(p.src, p.tgt) for p in pairs] for split, pairs in generated.items()}
            self.gold = {split: [p.alignment for p in pairs] for split, pairs in generated.items()}
        if not self.texts:
            texts = {split: [] if split == "train" and self.memory_map else self._read(split) for split in SPLITS}
            for split, pairs in texts.items():
                if not pairs and not (split == "train" and self.memory_map):
                    raise UsageError(f"translation data ({self.source}): the {split} split is empty")
            random.Random(self.seed).shuffle(texts["train"])
            self.texts = {split: self.sizes.cap(pairs, split) for split, pairs in texts.items()}
        return self.texts

    def _read(self, split: Split) -> list[TextPair]:
        paths = self._split_paths(split)
        if isinstance(paths, Path):
            hp = self.hparams
            return [(s, t) for _, (s, t) in read_records(paths, fields=(hp.src_column, hp.tgt_column))]
        return read_parallel(*paths)

    def _split_paths(self, split: Split) -> SplitFiles:
        """The two plain-text files of ``split`` (fetching or preparing them first), or its table file."""
        if self.corpus.locate is None:
            raise UsageError(f"source={self.source} is generated in memory: it has no files")
        return self.corpus.locate(self.spec, split)

    def _train_stream(self) -> ParallelText:
        """The training split as a re-iterable stream (``memory_map`` mode)."""
        paths = self._split_paths("train")
        if isinstance(paths, Path):
            raise UsageError(f"memory_map needs plain-text parallel files, not the table {paths}")
        return ParallelText(*paths)

    # ----------------------------------------------------------------- tokenizers
    def _vocab_jobs(self) -> list[tuple[str, Iterable[str], str]]:
        """(model name, training texts, their files as errors name them) per vocabulary: one shared,
        or one per side."""
        hp = self.hparams
        if self.memory_map:
            stream, suffix = self._train_stream(), "-stream"
            sides = [stream.both_sides()] if hp.shared_vocab else [stream.side(0), stream.side(1)]
        else:
            train, suffix = self.raw_splits()["train"], ""
            src, tgt = [s for s, _ in train], [t for _, t in train]
            sides = [src + tgt] if hp.shared_vocab else [src, tgt]
        names, files = ["shared"] if hp.shared_vocab else [hp.src_lang, hp.tgt_lang], self._split_paths("train")
        return [(f"{self.source}-{hp.src_lang}{hp.tgt_lang}-{name}{suffix}", texts,
                 describe_training_files(files, side=None if hp.shared_vocab else i,
                                         columns=(hp.src_column, hp.tgt_column))
                 or f"the {self.source} training split")
                for i, (name, texts) in enumerate(zip(names, sides, strict=True))]

    def prepare_data(self) -> None:
        """Download/extract (Multi30k), train SentencePiece and (``memory_map``) encode the training
        split into its token store, once; keeps no state for other ranks."""
        if self.corpus.locate is None:
            return
        for name, texts, origin in self._vocab_jobs():
            prepare_tokenizer(self.hparams.tokenizer, texts, cache_dir=self.data_dir / "tokenizers", name=name,
                              vocab_size=self.hparams.vocab_size, origin=origin)
        if self.memory_map:
            src_tok, tgt_tok = self._load_tokenizers()
            build_token_store(self._train_stream(), directory=self._store_dir(), max_len=self.hparams.max_len,
                              encoders=(src_tok.encode, tgt_tok.encode))

    def _load_tokenizers(self) -> tuple[Tokenizer, Tokenizer]:
        hp = self.hparams
        if self.corpus.lexicons:
            return self._closed_vocabs()
        toks = [load_tokenizer(hp.tokenizer, texts, cache_dir=self.data_dir / "tokenizers", name=name,
                               vocab_size=hp.vocab_size, origin=origin) for name, texts, origin in self._vocab_jobs()]
        return toks[0], toks[-1]

    def _store_dir(self) -> Path:
        """``data_dir/stores/<source>-<langs>-<hash of files, tokenizer settings, max_len>``."""
        hp = self.hparams
        key = f"{self._train_stream().fingerprint()}|{hp.tokenizer}|{hp.vocab_size}|{hp.shared_vocab}|{hp.max_len}"
        digest = hashlib.sha256(key.encode()).hexdigest()[:16]
        return self.data_dir / "stores" / f"{self.source}-{hp.src_lang}{hp.tgt_lang}-{digest}"

    def setup(self, stage: str) -> None:
        """Load the tokenizers and encode every split, identically on every rank."""
        if self.datasets:
            return
        hp = self.hparams
        self.tokenizers = self._load_tokenizers()
        src_tok, tgt_tok = self.tokenizers
        for split, pairs in self.raw_splits().items():
            if split == "train" and self.memory_map:
                self.datasets[split] = self._train_store()
                continue
            encoded = [(src_tok.encode(s) or [UNK], tgt_tok.encode(t))
                       for s, t in track(pairs, what=f"encoding the {split} split", unit="pairs")]
            if split == "train":
                encoded = [p for p in encoded if len(p[0]) <= hp.max_len and len(p[1]) <= hp.max_len]
            self.datasets[split] = encoded

    def _train_store(self) -> Sequence[tuple[list[int], list[int]]]:
        """The memory-mapped training pairs, or a seeded ``train_size`` subset of them."""
        store = TokenStore(self._store_dir())
        keep = self.sizes.train_subset(len(store), self.hparams.seed)
        return store if keep is None else Subset(store, keep)

    def _loader(self, split: Split) -> DataLoader:
        hp, data = self.hparams, self.datasets[split]
        if hp.max_tokens is not None:
            lengths = pair_lengths(data)
            return token_budget_loader(data, lengths=lengths, max_tokens=hp.max_tokens, train=split == "train",
                                       seed=hp.seed, num_workers=hp.num_workers, collate_fn=collate_pairs)
        return self.loader(data, split, collate_fn=collate_pairs)  # type: ignore[arg-type]

    def _decode(self, side: int, ids: Sequence[int] | Tensor) -> str:
        if self.tokenizers is None:
            raise RuntimeError("decoding needs setup() first (the tokenizers are loaded there)")
        return self.tokenizers[side].decode(ids.tolist() if isinstance(ids, Tensor) else list(ids))

    def decode_tokens(self, ids: Sequence[int] | Tensor) -> str:
        """Target ids -> detokenized text (stops at EOS, drops PAD/BOS): what BLEU compares."""
        return self._decode(1, ids)

    def decode_source(self, ids: Sequence[int] | Tensor) -> str:
        """Source ids -> detokenized text (for figure labels with separate vocabularies)."""
        return self._decode(0, ids)

    def token_labels(self, ids: Sequence[int] | Tensor, *, side: Literal["src", "tgt"]) -> list[str]:
        """One label per id up to the first EOS (PAD/BOS dropped): attention-figure tick labels."""
        if self.tokenizers is None:
            raise RuntimeError("token_labels needs setup() first (the tokenizers are loaded there)")
        tok = self.tokenizers[0 if side == "src" else 1]
        seq = ids.tolist() if isinstance(ids, Tensor) else list(ids)
        if EOS in seq:
            seq = seq[: seq.index(EOS)]
        return [tok.piece(i) for i in seq if i not in (PAD, BOS)]
