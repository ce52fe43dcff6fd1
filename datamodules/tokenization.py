"""Text in, ids out: reading corpus files with precise errors, word vocabularies, SentencePiece.

Every vocabulary reserves ids 0..3 for PAD/BOS/EOS/UNK (``datamodules.batching``), SentencePiece
included (its ``pad_id``/``bos_id``/``eos_id``/``unk_id`` training options).

SentencePiece (Kudo & Richardson 2018; ``bpe`` = Sennrich et al. 2016, ``unigram`` = Kudo 2018) is
trained **once**, in ``prepare_data``, on the training split only, and cached under a name derived
from a hash of the corpus and every training setting; the model is written to a temporary file and
moved into place with ``os.replace``, so a crash, a too-large vocabulary or several ranks/nodes
writing at once never leave a half-written model. ``setup`` loads it on every rank.

A word vocabulary, like a SentencePiece model, has exactly ``vocab_size`` ids (the model's embedding
and output sizes): a training text that cannot fill it is refused in one line naming the option, the
text's files and the largest value allowed (:func:`vocab_too_large`), never silently shrunk.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal, Protocol

import sentencepiece as spm

from attnlab_core.atomic import atomic_write
from attnlab_core.errors import UsageError
from attnlab_core.progress import amount, stage, track
from datamodules.batching import BOS, EOS, N_SPECIAL, PAD, UNK, ids_to_text

Tokenization = Literal["word", "bpe", "unigram"]
"""Vocabulary: whitespace/punctuation words (most frequent first), SentencePiece BPE or unigram."""

SPECIAL_PIECES = ("<pad>", "<s>", "</s>", "<unk>")  # ids PAD, BOS, EOS, UNK
_WORD = re.compile(r"\w+(?:'\w+)?|[^\w\s]")


# --------------------------------------------------------------------------- reading files
def read_text(path: Path) -> str:
    """The whole file as text; a missing file or invalid UTF-8 is a one-line UsageError with file:line."""
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise UsageError(
            f"{path}:{line}: not valid UTF-8 (byte 0x{data[err.start]:02x}); re-encode the file as UTF-8"
        ) from None


def read_lines(path: Path) -> list[str]:
    """Lines of a UTF-8 file split on ``\\n`` only (never on U+2028 & co, which would shift line counts)."""
    text = read_text(path)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


Record = tuple[int, list[str]]
"""(1-based line number, the requested fields in order)."""


def read_records(path: Path, *, fields: Sequence[str]) -> list[Record]:
    """Read ``fields`` from a TSV / CSV (header row) or JSONL file, chosen by the file's suffix.

    TSV is read unquoted (GLUE style: quotes are text); CSV with standard quoting.
    Errors (missing column or key, wrong column count, invalid JSON) name file:line.
    """
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _read_jsonl(path, fields)
    if suffix not in (".tsv", ".csv"):
        raise UsageError(f"{path}: unsupported file type {suffix!r}; use .tsv, .csv or .jsonl")
    dialect = {"delimiter": "\t", "quoting": csv.QUOTE_NONE} if suffix == ".tsv" else {}
    reader = csv.reader(io.StringIO(read_text(path), newline=""), **dialect)
    header = next(reader, None)
    if header is None:
        return []
    header = [h.strip() for h in header]
    missing = [f for f in fields if f not in header]
    if missing:
        raise UsageError(f"{path}:1: no column {missing[0]!r} in the header (columns: {', '.join(header)})")
    index = [header.index(f) for f in fields]
    out: list[Record] = []
    for row in reader:
        if not row or row == [""]:
            continue
        if len(row) != len(header):
            raise UsageError(f"{path}:{reader.line_num}: expected {len(header)} columns, got {len(row)}")
        out.append((reader.line_num, [row[i] for i in index]))
    return out


def _read_jsonl(path: Path, fields: Sequence[str]) -> list[Record]:
    out: list[Record] = []
    for n, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise UsageError(f"{path}:{n}: invalid JSON ({err.msg})") from None
        if not isinstance(obj, dict) or any(f not in obj for f in fields):
            missing = next(f for f in fields if not isinstance(obj, dict) or f not in obj)
            raise UsageError(f"{path}:{n}: no key {missing!r} in this record")
        out.append((n, [str(obj[f]) for f in fields]))
    return out


# --------------------------------------------------------------------------- tokenizers
class Tokenizer(Protocol):
    """Text <-> ids with PAD/BOS/EOS/UNK = 0..3; ``size`` = number of ids it can produce."""

    size: int

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def piece(self, i: int) -> str: ...


def word_tokenize(text: str) -> list[str]:
    """Lower-cased words (with in-word apostrophes) and single punctuation marks."""
    return _WORD.findall(text.lower())


class WordVocab:
    """Word-level vocabulary: ids 0..3 special, then ``words`` in order.

    Args:
        words: content words (no duplicates, none of the special pieces).
    """

    def __init__(self, *, words: Sequence[str]) -> None:
        self.itos = [*SPECIAL_PIECES, *words]
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("WordVocab words must be distinct and must not repeat the special pieces")
        self.size = len(self.itos)

    @classmethod
    def build(cls, texts: Iterable[str], *, vocab_size: int) -> WordVocab:
        """The ``vocab_size - 4`` most frequent words of ``texts`` (ties: alphabetical), deterministic;
        fewer when the texts have fewer distinct words (:func:`load_tokenizer` refuses that)."""
        counts = Counter(w for t in texts for w in word_tokenize(t))
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return cls(words=[w for w, _ in ranked[: max(vocab_size - N_SPECIAL, 0)] if w not in SPECIAL_PIECES])

    def encode(self, text: str) -> list[int]:
        return [self.stoi.get(w, UNK) for w in word_tokenize(text)]

    def decode(self, ids: Sequence[int]) -> str:
        """Space-joined words; stops at EOS, drops PAD/BOS (see ``ids_to_text``)."""
        return ids_to_text(ids, itos=self.itos)

    def piece(self, i: int) -> str:
        """The word of id ``i`` (one label per id, for figures); UNK's for an id past the vocabulary."""
        return self.itos[i] if 0 <= i < len(self.itos) else self.itos[UNK]


class SentencePieceTokenizer:
    """A trained SentencePiece model; ``decode`` detokenizes (for BLEU on detokenized text)."""

    def __init__(self, *, path: Path) -> None:
        self.path = path
        self.model = spm.SentencePieceProcessor(model_file=str(path))
        self.size = self.model.get_piece_size()

    def encode(self, text: str) -> list[int]:
        return list(self.model.encode(text))

    def decode(self, ids: Sequence[int]) -> str:
        """Detokenized text of the ids before the first EOS (PAD/BOS dropped)."""
        keep: list[int] = []
        for i in ids:
            if i == EOS:
                break
            if i not in (PAD, BOS):
                keep.append(int(i))
        return self.model.decode(keep)

    def piece(self, i: int) -> str:
        """The piece of id ``i`` as SentencePiece writes it (``▁`` marks a word start)."""
        return self.model.id_to_piece(int(i))


# --------------------------------------------------------------------------- SentencePiece training
def corpus_digest(texts: Iterable[str]) -> str:
    """sha256 of the texts (each followed by a newline): the corpus part of the cache key."""
    return _corpus_stats(texts)[0]


def _corpus_stats(texts: Iterable[str]) -> tuple[str, int, int]:
    """(:func:`corpus_digest`, number of texts, UTF-8 bytes) in one pass, with a progress line."""
    h, count, size = hashlib.sha256(), 0, 0
    for t in track(texts, what="hashing the training corpus", unit="sentences"):
        data = t.encode("utf-8")
        h.update(data)
        h.update(b"\n")
        count, size = count + 1, size + len(data) + 1
    return h.hexdigest(), count, size


def spm_settings(*, model_type: Literal["bpe", "unigram"], vocab_size: int, character_coverage: float) -> dict:
    """Every option passed to the SentencePiece trainer (all of them enter the cache key)."""
    return {
        "model_type": model_type,
        "vocab_size": vocab_size,
        "character_coverage": character_coverage,
        "pad_id": PAD, "bos_id": BOS, "eos_id": EOS, "unk_id": UNK,
        "input_sentence_size": 2_000_000,
        "shuffle_input_sentence": True,
        "max_sentence_length": 65536,
        "hard_vocab_limit": True,
    }


def spm_model_path(*, cache_dir: Path, name: str, digest: str, settings: dict) -> Path:
    """``<cache_dir>/<name>-<model_type><vocab_size>-<hash of corpus + settings>.model``."""
    key = hashlib.sha256((digest + json.dumps(settings, sort_keys=True)).encode()).hexdigest()[:16]
    return cache_dir / f"{name}-{settings['model_type']}{settings['vocab_size']}-{key}.model"


def train_sentencepiece(
    texts: Iterable[str],
    *,
    cache_dir: Path,
    name: str,
    model_type: Literal["bpe", "unigram"],
    vocab_size: int,
    character_coverage: float = 1.0,
    origin: str | None = None,
) -> Path:
    """Train (or find in the cache) a SentencePiece model on ``texts``; return its path.

    Idempotent and race-free: the path is a function of the corpus and settings; the model is
    written to a temporary file in ``cache_dir`` and ``os.replace``-d into place. A vocabulary the
    corpus cannot support raises a one-line UsageError with both sizes and writes nothing.

    Args:
        texts: training-split sentences only (never validation or test text); any re-iterable
            (it is read twice: for the cache key, then by the trainer, which samples
            ``input_sentence_size`` sentences of a streamed corpus).
        cache_dir: where models live. name: readable prefix of the file name.
        model_type: ``bpe`` or ``unigram``. vocab_size: total pieces, the 4 specials included.
        character_coverage: share of characters covered (1.0 for small alphabets; 0.9995 for CJK).
        origin: the training text as errors name it (its files); None: ``the <name> training corpus``.
    """
    settings = spm_settings(model_type=model_type, vocab_size=vocab_size, character_coverage=character_coverage)
    digest, count, size = _corpus_stats(texts)
    path = spm_model_path(cache_dir=cache_dir, name=name, digest=digest, settings=settings)
    if path.is_file():
        return path
    if not any(t.strip() for t in texts):
        raise UsageError(f"cannot train SentencePiece for {name}: the training split has no text")
    buffer = io.BytesIO()
    what = (f"training SentencePiece {model_type} ({vocab_size} pieces) for {name} on "
            f"{amount(count, 'sentences')} ({amount(size, 'bytes')})")
    try:
        with stage(what):
            spm.SentencePieceTrainer.train(
                sentence_iterator=track(texts, what="  reading sentences", unit="sentences", total=count),
                model_writer=buffer, minloglevel=2, num_threads=min(4, os.cpu_count() or 1), **settings,
            )
    except RuntimeError as err:
        least = re.search(r"smaller than required_chars\. (\d+) vs (\d+)", str(err))
        if least is not None:  # the specials and every character of the text need a piece each
            text = origin or f"the {name} training corpus"
            raise UsageError(f"--data.vocab_size={vocab_size} is too small for {text}: SentencePiece ({model_type}) "
                             f"needs a piece for each of its {least.group(2)} characters and special tokens; "
                             f"give --data.vocab_size={least.group(2)} or more") from None
        most = re.search(r"value <= (\d+)", str(err))
        if most is None:
            raise
        raise vocab_too_large(vocab_size=vocab_size, origin=origin or f"the {name} training corpus",
                              why=f"SentencePiece ({model_type}) supports at most {most.group(1)}",
                              most=int(most.group(1))) from None
    atomic_write(path, buffer.getvalue())
    return path


def load_sentencepiece(path: Path, *, vocab_size: int) -> SentencePieceTokenizer:
    """Load a model that ``prepare_data`` trained; its size must equal the declared ``vocab_size``."""
    if not path.is_file():
        raise RuntimeError(f"SentencePiece model {path} is missing: prepare_data() must run before setup()")
    tok = SentencePieceTokenizer(path=path)
    if tok.size != vocab_size:
        raise RuntimeError(f"{path} has {tok.size} pieces, expected vocab_size={vocab_size}")
    return tok


# --------------------------------------------------------------------------- datamodule helpers
def vocab_too_large(*, vocab_size: int, origin: str, why: str, most: int) -> UsageError:
    """The one-line refusal of a vocabulary larger than its training text supports (words and
    SentencePiece alike): the option, the text's files, why, and the largest value allowed."""
    return UsageError(f"--data.vocab_size={vocab_size} is too large for {origin}: {why}; "
                      f"give --data.vocab_size={most} or less")


def prepare_tokenizer(
    kind: Tokenization, texts: Iterable[str], *, cache_dir: Path, name: str, vocab_size: int,
    origin: str | None = None,
) -> None:
    """``prepare_data`` half: train and cache SentencePiece (``bpe``/``unigram``); for ``word``, only
    check that the training text fills ``vocab_size`` (nothing is cached), so both refuse a vocabulary
    too large for the text here, before the loggers start. ``origin`` names the text's files in errors."""
    if kind == "word":
        load_tokenizer(kind, texts, cache_dir=cache_dir, name=name, vocab_size=vocab_size, origin=origin)
    else:
        train_sentencepiece(texts, cache_dir=cache_dir, name=name, model_type=kind, vocab_size=vocab_size,
                            origin=origin)


def load_tokenizer(
    kind: Tokenization, texts: Iterable[str], *, cache_dir: Path, name: str, vocab_size: int,
    origin: str | None = None,
) -> Tokenizer:
    """``setup`` half, on every rank: build the word vocabulary of ``texts`` or load the cached model.

    A word vocabulary must have exactly ``vocab_size`` ids, as a SentencePiece model does: a corpus
    with fewer distinct words is refused in one line (:func:`vocab_too_large`) instead of leaving the
    model ids that no word has (they could only ever decode as ``<unk>``).
    """
    if kind == "word":
        vocab = WordVocab.build(texts, vocab_size=vocab_size)
        if vocab.size < vocab_size:
            words = vocab.size - N_SPECIAL
            raise vocab_too_large(
                vocab_size=vocab_size, origin=origin or f"the {name} training corpus", most=vocab.size,
                why=f"it has {words} distinct words + {N_SPECIAL} special tokens = {vocab.size} ids")
        return vocab
    settings = spm_settings(model_type=kind, vocab_size=vocab_size, character_coverage=1.0)
    path = spm_model_path(cache_dir=cache_dir, name=name, digest=corpus_digest(texts), settings=settings)
    return load_sentencepiece(path, vocab_size=vocab_size)
