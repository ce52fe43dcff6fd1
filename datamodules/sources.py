"""The data contract of every task: a source (one entry of a task's ``*_SOURCES`` registry, a :class:`Source`)
reads a small frozen spec of exactly the data options its task's sources use (a :class:`DataSpec`), never
the DataModule, so no source module imports its DataModule module.

- translation: :class:`TranslationSpec`, entries :class:`Corpus` (``parallel_files``, ``iwslt``, ``bible``);
- captioning: :class:`CaptionSpec`, entries ``caption_sources.CaptionCorpus``;
- sentiment: :class:`SentimentSpec`, entries ``sentiment.SentimentCorpus`` (and ``vader_snippets``);
- digits: :class:`DigitSpec`, entries ``digits.DigitCorpus`` (and ``mnist5k``);
- running text (language modelling): :class:`TextSpec`, entries ``text_sources.TextCorpus``.

Each entry declares the spec fields it cannot do without (``requires``, checked by
``SplitDataModule.use_source``) and an optional ``check`` run at construction (before anything is created).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from datamodules.splits import Split, SplitSizes
from datamodules.toy_language import GeneratedSplits

SplitFiles = tuple[Path, Path] | Path
"""A split on disk: two line-aligned plain-text files (source side, target side), or one table file."""


@dataclass(frozen=True, kw_only=True)
class DataSpec:
    """The data options every task's sources may read.

    Args:
        data_dir: downloads, extracted or prepared corpora, tokenizer models.
        train_path / val_path / test_path: a ``files`` / ``folder`` source's per-split files.
    """

    data_dir: Path
    train_path: str | None = None
    val_path: str | None = None
    test_path: str | None = None

    def path(self, split: Split) -> str | None:
        """The ``<split>_path`` option."""
        return {"train": self.train_path, "val": self.val_path, "test": self.test_path}[split]


Spec = TypeVar("Spec", bound=DataSpec)


@dataclass(frozen=True, kw_only=True)
class Source(Generic[Spec]):
    """What every registry entry declares besides its readers.

    Args:
        requires: spec fields (init arguments of the same name) the source cannot do without.
        check: (spec) -> None, raising ``UsageError`` at construction (before anything is created) when
            what the source reads is absent (a package, a module library, a downloaded file).
    """

    requires: tuple[str, ...] = ()
    check: Callable[[Spec], None] | None = None


@dataclass(frozen=True, kw_only=True)
class TranslationSpec(DataSpec):
    """The data options a translation source reads.

    Args:
        src_lang / tgt_lang: language codes (file suffixes, or the ``bible`` source's module table keys).
        sword_path: the ``bible`` source's SWORD library (``None``: ``$SWORD_PATH``, else /usr/share/sword).
    """

    src_lang: str
    tgt_lang: str
    sword_path: str | None = None


@dataclass(frozen=True, kw_only=True)
class CaptionSpec(DataSpec):
    """The data options a captioning source reads.

    Args:
        image_dir: image root (``None``: the source's default under ``data_dir``, or the working directory).
        karpathy_json: the Karpathy-layout JSON of ``source=karpathy``.
        image_column / caption_column: the ``folder`` tables' column (or JSONL key) names.
        use_restval: Karpathy ``restval`` images join the training split.
        seed / sizes: what a drawn source draws (its split sizes; ``None`` takes the source's default).
        image_size: side of the square model input (sources that render images in memory render at it).
        stamps_path: the ``clipart`` source's stamps folder (``None``: /usr/share/tuxpaint/stamps).
    """

    image_dir: str | None = None
    karpathy_json: str | None = None
    image_column: str = "image"
    caption_column: str = "caption"
    use_restval: bool = True
    seed: int
    sizes: SplitSizes
    image_size: int = 224
    stamps_path: str | None = None


@dataclass(frozen=True, kw_only=True)
class SentimentSpec(DataSpec):
    """The data options a sentiment source reads.

    Args:
        text_column / label_column: the ``files`` tables' column (or JSON key) names.
        labels: the declared label values of ``files`` (class i = ``labels[i]``).
        test_domain: the test set of a source that offers several (``mr``; ``None``: its own).
    """

    text_column: str = "text"
    label_column: str = "label"
    labels: tuple[str, ...] = ("0", "1")
    test_domain: str | None = None


@dataclass(frozen=True, kw_only=True)
class DigitSpec(DataSpec):
    """The data options a digit source reads.

    Args:
        seed / sizes: the seed of a source's split order and every split's size.
    """

    seed: int
    sizes: SplitSizes


@dataclass(frozen=True, kw_only=True)
class TextSpec(DataSpec):
    """The data options a running-text source reads.

    Args:
        path: the ``file`` source's UTF-8 text file.
        sword_path: the ``web`` source's SWORD library (``None``: ``$SWORD_PATH``, else /usr/share/sword).
    """

    path: str | None = None
    sword_path: str | None = None


@dataclass(frozen=True, kw_only=True)
class Corpus(Source[TranslationSpec]):
    """How one translation ``source`` is obtained: on disk (``locate``) or generated in memory
    (``generate``, with closed word vocabularies from ``lexicons``).

    Args:
        locate: (spec, split) -> the split's files, fetching or preparing them first if needed.
        generate: (seed, split sizes; a size of None takes the corpus default) -> pairs and gold alignments per split.
        lexicons: every (source, target) word a generated corpus can produce.
        memory_map: stream the training split from disk unless ``memory_map`` says otherwise.
    """

    locate: Callable[[TranslationSpec, Split], SplitFiles] | None = None
    generate: Callable[[int, SplitSizes], GeneratedSplits] | None = None
    lexicons: Callable[[], tuple[list[str], list[str]]] | None = None
    memory_map: bool = False


def describe_training_files(files: SplitFiles | None, *, side: int | None, columns: tuple[str, str]) -> str | None:
    """The training text of one side (0, 1) or of both (None) as an error names it: its plain-text
    file(s), or its table file and column; None when the split has no files (yet)."""
    if files is None:
        return None
    if isinstance(files, Path):
        return f"the training file {files}" + ("" if side is None else f" (column {columns[side]})")
    chosen = files if side is None else files[side:side + 1]
    return f"the training file{'s' if len(chosen) > 1 else ''} " + " and ".join(map(str, chosen))
