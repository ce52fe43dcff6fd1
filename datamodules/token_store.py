"""Large parallel corpora without loading them into RAM: streamed text in, memory-mapped token ids out.

:class:`ParallelText` reads two line-aligned files lazily (any number of times), checking UTF-8
(file and line in the error) and equal line counts (both files and both counts in the error).
:func:`build_token_store` encodes it once into a directory of flat ``int32`` token files and
``int64`` offsets, written under a temporary name and renamed into place, so a crash never leaves
a half-written store that a later run would trust. :class:`TokenStore` maps them read-only: every
DDP rank and DataLoader worker shares the page cache instead of holding its own copy, and
sequence lengths (for token-budget batching) come from the offsets without touching the tokens.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from torch.utils.data import Dataset

from attnlab_core.errors import UsageError
from attnlab_core.progress import Progress
from datamodules.batching import UNK

Encoder = Callable[[str], list[int]]
SIDES = ("src", "tgt")


def _lines(path: Path) -> Iterator[str]:
    """Lines of a UTF-8 file without their newline, read lazily; bad bytes name the file and line."""
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    with path.open("rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                yield raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as err:
                raise UsageError(f"{path}:{number}: not valid UTF-8 (byte 0x{raw[err.start]:02x}); "
                                 "re-encode the file as UTF-8") from None


class ParallelText:
    """Re-iterable (source, target) pairs of two line-aligned plain-text files, never held in memory.

    Pairs blank on both sides are skipped (as :func:`datamodules.translation.read_parallel` does).
    """

    def __init__(self, src_path: Path, tgt_path: Path) -> None:
        self.paths = (Path(src_path), Path(tgt_path))

    def __iter__(self) -> Iterator[tuple[str, str]]:
        src, tgt = (_lines(p) for p in self.paths)
        counts = [0, 0]
        for s in src:
            counts[0] += 1
            t = next(tgt, None)
            if t is None:
                break
            counts[1] += 1
            if s.strip() or t.strip():
                yield s, t
        counts[0] += sum(1 for _ in src)
        counts[1] += sum(1 for _ in tgt)
        if counts[0] != counts[1]:
            raise UsageError(f"parallel files differ in length: {self.paths[0]} has {counts[0]} lines, "
                             f"{self.paths[1]} has {counts[1]}")

    def side(self, index: int) -> _Side:
        """Re-iterable texts of one side (0 = source, 1 = target)."""
        return _Side(self, (index,))

    def both_sides(self) -> _Side:
        """Re-iterable source then target text of every pair (a shared vocabulary's corpus)."""
        return _Side(self, (0, 1))

    def line_count(self) -> int:
        """Lines of the source file (an upper bound on the pairs; counted in binary, fast)."""
        with self.paths[0].open("rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))

    def fingerprint(self) -> str:
        """Cheap identity of the two files (path, size, mtime): part of a token store's cache key."""
        parts = [f"{p.resolve()}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in self.paths]
        return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


class _Side:
    def __init__(self, text: ParallelText, indices: tuple[int, ...]) -> None:
        self.text, self.indices = text, indices

    def __iter__(self) -> Iterator[str]:
        for pair in self.text:
            for i in self.indices:
                yield pair[i]


def build_token_store(text: ParallelText, *, directory: Path, encoders: tuple[Encoder, Encoder],
                      max_len: int) -> Path:
    """Encode ``text`` into ``directory`` once (a no-op when it exists); return ``directory``.

    Pairs with more than ``max_len`` tokens on either side are dropped (training data only); an
    empty source becomes ``[UNK]``. Files: ``{src,tgt}.bin`` (int32 ids, concatenated) and
    ``{src,tgt}.idx.npy`` (int64 offsets, N + 1 of them).
    """
    if (directory / "done").is_file():
        return directory
    tmp = directory.with_name(f".{directory.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        offsets = _write_tokens(text, tmp, encoders=encoders, max_len=max_len)
        if len(offsets[0]) == 1:
            raise UsageError(f"{text.paths[0]}: no training pair has at most max_len={max_len} tokens per side")
        for side, off in zip(SIDES, offsets, strict=True):
            np.save(tmp / f"{side}.idx.npy", np.asarray(off, dtype=np.int64))
        (tmp / "done").write_text("ok\n")
        if directory.exists():  # another process finished first: keep its store
            shutil.rmtree(tmp)
        else:
            os.replace(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return directory


def _write_tokens(text: ParallelText, out: Path, *, encoders: tuple[Encoder, Encoder],
                  max_len: int) -> tuple[list[int], list[int]]:
    offsets: tuple[list[int], list[int]] = ([0], [0])
    bar = Progress(what=f"encoding {text.paths[0].name} into a token store", unit="pairs", delay_s=0.5)
    if bar.enabled:  # only a person watching pays for the extra pass that gives the ETA
        bar.total = text.line_count()
    with (out / "src.bin").open("wb") as fs, (out / "tgt.bin").open("wb") as ft, bar:
        for s, t in text:
            bar.update(1)
            ids = (encoders[0](s) or [UNK], encoders[1](t))
            if len(ids[0]) > max_len or len(ids[1]) > max_len:
                continue
            for f, seq, off in zip((fs, ft), ids, offsets, strict=True):
                f.write(np.asarray(seq, dtype=np.int32).tobytes())
                off.append(off[-1] + len(seq))
    return offsets


class TokenStore(Dataset):
    """Read-only memory-mapped (source ids, target ids) pairs of a :func:`build_token_store` directory."""

    def __init__(self, directory: Path) -> None:
        if not (directory / "done").is_file():
            raise RuntimeError(f"token store {directory} is missing: prepare_data() must run before setup()")
        self.offsets = [np.load(directory / f"{side}.idx.npy") for side in SIDES]
        self.tokens = [self._map(directory / f"{side}.bin") for side in SIDES]

    @staticmethod
    def _map(path: Path) -> np.ndarray:
        if path.stat().st_size == 0:
            return np.zeros(0, dtype=np.int32)
        return np.memmap(path, dtype=np.int32, mode="r")

    def __len__(self) -> int:
        return len(self.offsets[0]) - 1

    def __getitem__(self, i: int) -> tuple[list[int], list[int]]:
        src, tgt = ((tok[off[i]: off[i + 1]]).tolist() for tok, off in zip(self.tokens, self.offsets, strict=True))
        return src, tgt

    def lengths(self) -> np.ndarray:
        """(N,) padded-cost length of each pair, max(|src|, |tgt| + 2), from the offsets alone."""
        src, tgt = (np.diff(off) for off in self.offsets)
        return np.maximum(src, tgt + 2)
