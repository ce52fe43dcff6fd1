"""The translation data contract: what a ``TRANSLATION_SOURCES`` entry (:class:`Corpus`) is and what it
reads (:class:`SourceSpec`, a small frozen record of the data options), so that a source never sees the
DataModule and the source modules (``parallel_files``, ``iwslt``, ``bible``) never import ``translation``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from datamodules.splits import Split, SplitSizes
from datamodules.toy_language import GeneratedSplits

SplitFiles = tuple[Path, Path] | Path
"""A split on disk: two line-aligned plain-text files (source side, target side), or one table file."""


@dataclass(frozen=True)
class SourceSpec:
    """The data options a translation source reads (nothing else of the DataModule).

    Args:
        data_dir: downloads, extracted or prepared corpora, tokenizer models.
        src_lang / tgt_lang: language codes (file suffixes, or the ``bible`` source's module table keys).
        train_path / val_path / test_path: the ``files`` source's table files or plain-text prefixes.
        sword_path: the ``bible`` source's SWORD library (``None``: ``$SWORD_PATH``, else /usr/share/sword).
    """

    data_dir: Path
    src_lang: str
    tgt_lang: str
    train_path: str | None = None
    val_path: str | None = None
    test_path: str | None = None
    sword_path: str | None = None

    def path(self, split: Split) -> str | None:
        """The ``<split>_path`` option."""
        return {"train": self.train_path, "val": self.val_path, "test": self.test_path}[split]


@dataclass(frozen=True)
class Corpus:
    """How one translation ``source`` is obtained: on disk (``locate``) or generated in memory
    (``generate``, with closed word vocabularies from ``lexicons``).

    Args:
        locate: (spec, split) -> the split's files, fetching or preparing them first if needed.
        generate: (seed, split sizes; a size of None takes the corpus default) -> pairs and gold alignments per split.
        lexicons: every (source, target) word a generated corpus can produce.
        memory_map: stream the training split from disk unless ``memory_map`` says otherwise.
        requires: init arguments the source cannot do without.
        check: (spec) -> None, raising ``UsageError`` at construction (before anything is created) when
            what the source reads is absent (a package, a module library).
    """

    locate: Callable[[SourceSpec, Split], SplitFiles] | None = None
    generate: Callable[[int, SplitSizes], GeneratedSplits] | None = None
    lexicons: Callable[[], tuple[list[str], list[str]]] | None = None
    memory_map: bool = False
    requires: tuple[str, ...] = ()
    check: Callable[[SourceSpec], None] | None = None


def describe_training_files(files: SplitFiles | None, *, side: int | None, columns: tuple[str, str]) -> str | None:
    """The training text of one side (0, 1) or of both (None) as an error names it: its plain-text
    file(s), or its table file and column; None when the split has no files (yet)."""
    if files is None:
        return None
    if isinstance(files, Path):
        return f"the training file {files}" + ("" if side is None else f" (column {columns[side]})")
    chosen = files if side is None else files[side:side + 1]
    return f"the training file{'s' if len(chosen) > 1 else ''} " + " and ".join(map(str, chosen))
