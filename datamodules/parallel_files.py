"""Reading parallel text from disk: line-aligned file pairs, files inside extracted archives, and the
padded length of each encoded pair (what token-budget batching sorts by). What a translation source is
(:class:`~datamodules.sources.Corpus`) lives in :mod:`datamodules.sources`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from torch.utils.data import Subset

from attnlab_core.errors import UsageError
from datamodules.token_store import TokenStore
from datamodules.tokenization import read_lines

TextPair = tuple[str, str]


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
