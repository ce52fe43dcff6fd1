"""Translation sources (:class:`Corpus`, what a ``TRANSLATION_SOURCES`` entry holds) and reading parallel
text from disk: line-aligned file pairs, files inside extracted archives, and the
padded length of each encoded pair (what token-budget batching sorts by)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from torch.utils.data import Subset

from attnlab_core.errors import UsageError
from datamodules.token_store import TokenStore
from datamodules.tokenization import read_lines
from datamodules.toy_language import GeneratedSplits

if TYPE_CHECKING:
    from datamodules.translation import TranslationData

TextPair = tuple[str, str]
SplitFiles = tuple[Path, Path] | Path
"""A split on disk: two line-aligned plain-text files (source side, target side), or one table file."""


def read_parallel(src_path: Path, tgt_path: Path) -> list[TextPair]:
    """Line-aligned pairs of two plain-text files; blank-on-both-sides lines are skipped."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise UsageError(f"parallel files differ in length: {src_path} has {len(src)} lines, "
                         f"{tgt_path} has {len(tgt)}")
    return [(s, t) for s, t in zip(src, tgt, strict=True) if s.strip() or t.strip()]


def pair_lengths(data: Sequence[tuple[list[int], list[int]]]) -> list[int]:
    """Padded cost max(|src|, |tgt| + 2) per pair; a token store reads it from its offsets."""
    if isinstance(data, TokenStore):
        return data.lengths().tolist()
    if isinstance(data, Subset) and isinstance(data.dataset, TokenStore):
        return data.dataset.lengths()[np.asarray(data.indices)].tolist()
    return [max(len(s), len(t) + 2) for s, t in data]


def find_file(root: Path, name: str) -> Path:
    """The file called ``name`` anywhere under an extracted archive."""
    hits = sorted(root.rglob(name))
    if not hits:
        raise UsageError(f"{root}: the archive has no {name} (unexpected layout)")
    return hits[0]


@dataclass(frozen=True)
class Corpus:
    """How one translation ``source`` is obtained: on disk (``locate``) or generated in memory
    (``generate``, with closed word vocabularies from ``lexicons``).

    Args:
        locate: (datamodule, split) -> the split's files, fetching or preparing them first if needed.
        generate: (seed, split sizes; None = the corpus default) -> pairs and gold alignments per split.
        lexicons: every (source, target) word a generated corpus can produce.
        memory_map: stream the training split from disk unless ``memory_map`` says otherwise.
        requires: init arguments the source cannot do without.
    """

    locate: Callable[[TranslationData, Any], SplitFiles] | None = None
    generate: Callable[[int, dict[str, int | None]], GeneratedSplits] | None = None
    lexicons: Callable[[], tuple[list[str], list[str]]] | None = None
    memory_map: bool = False
    requires: tuple[str, ...] = ()
