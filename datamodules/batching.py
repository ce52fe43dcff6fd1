"""Batch types, special token ids and padding shared by every datamodule and model.

Token ids 0..3 are reserved in every vocabulary (synthetic, sentencepiece, word-level):
PAD=0, BOS=1, EOS=2, UNK=3.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor

PAD, BOS, EOS, UNK = 0, 1, 2, 3
N_SPECIAL = 4


class Seq2SeqBatch(NamedTuple):
    """A padded batch of source/target pairs.

    Attributes:
        src: (B, S) source ids, right-padded with PAD (no BOS/EOS).
        tgt: (B, T) target ids ``[BOS, y_1 .. y_n, EOS, PAD ...]``; decoder input is
            ``tgt[:, :-1]`` and labels are ``tgt[:, 1:]``.
    """

    src: Tensor
    tgt: Tensor


def pad_sequences(seqs: Sequence[Sequence[int]], *, pad: int = PAD) -> Tensor:
    """Right-pad integer sequences into a (B, L) long tensor."""
    width = max((len(s) for s in seqs), default=0)
    out = torch.full((len(seqs), max(width, 1)), pad, dtype=torch.long)
    for i, s in enumerate(seqs):
        if len(s):
            out[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
    return out


def collate_pairs(pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> Seq2SeqBatch:
    """Collate ``(src_ids, tgt_ids)`` pairs; BOS/EOS are added around each target here."""
    src = pad_sequences([p[0] for p in pairs])
    tgt = pad_sequences([[BOS, *p[1], EOS] for p in pairs])
    return Seq2SeqBatch(src=src, tgt=tgt)
