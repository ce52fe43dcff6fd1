"""Corpus BLEU per source-length bucket: the fixed-vector bottleneck in its original form.

Bahdanau et al. (2015, Fig. 2) and Cho et al. (2014, Fig. 4) plot BLEU against source sentence
length: an encoder-decoder without attention degrades on long sentences, one with attention much
less. :class:`BLEUByLength` groups hypotheses by source length into buckets of ``width`` tokens
(``len_001_005``, ``len_006_010``, ... as ``acc_by_len`` names them) and computes SacreBLEU's corpus
BLEU (13a tokenization, no smoothing, the settings of ``test/bleu``) within each bucket, with
:class:`~lit_models.scoring.metrics.CorpusSacreBLEU` per bucket — the same implementation as the overall
score. Deviation from the papers: lengths are counted in source tokens (words for
word vocabularies, subword pieces for SentencePiece), not in words.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torchmetrics import Metric

from lit_models.scoring.metrics import LENGTH_BUCKET, CorpusSacreBLEU

SOURCE_BUCKETS = 16  # the last bucket also holds every longer source


def bucket_index(lengths: Tensor, *, width: int, buckets: int) -> Tensor:
    """(B,) bucket of each source length: b holds lengths b·width+1 .. (b+1)·width; the last, every longer one."""
    return ((lengths - 1).clamp_min(0) // width).clamp_max(buckets - 1)


def bucket_name(b: int, width: int) -> str:
    """``len_<lo>_<hi>`` of bucket ``b`` (as ``acc_by_len`` names its buckets)."""
    return f"len_{b * width + 1:03d}_{(b + 1) * width:03d}"


class CountByLength(Metric):
    """Sentences per source-length bucket (``test/count_by_len/len_<lo>_<hi>``), summed across ranks: how many
    sentences each ``bleu_by_len`` score rests on (a verdict reads only buckets with enough of them)."""

    full_state_update = False

    def __init__(self, *, width: int = LENGTH_BUCKET, buckets: int = SOURCE_BUCKETS) -> None:
        super().__init__()
        self.width = width
        self.add_state("count", torch.zeros(buckets), dist_reduce_fx="sum")

    def update(self, lengths: Tensor) -> None:
        """lengths: (B,) source lengths."""
        idx = bucket_index(lengths.to(self.count.device), width=self.width, buckets=self.count.numel())
        self.count.index_add_(0, idx, torch.ones_like(idx, dtype=self.count.dtype))

    def compute(self) -> dict[str, Tensor]:
        return {bucket_name(b, self.width): self.count[b] for b in torch.nonzero(self.count).flatten().tolist()}


class BLEUByLength(Metric):
    """SacreBLEU corpus BLEU (0..1, like ``test/bleu``) of each source-length bucket.

    Under DDP every bucket's n-gram counts are summed across ranks before its score is computed
    (each per-bucket metric syncs its own state), so the score equals the single-process one.

    Args:
        width: tokens per bucket (bucket b holds lengths b·width+1 .. (b+1)·width).
        buckets: number of buckets; the last one also holds longer sources.
    """

    full_state_update = False

    def __init__(self, *, width: int = LENGTH_BUCKET, buckets: int = SOURCE_BUCKETS) -> None:
        super().__init__()
        self.width = width
        self.per_bucket = nn.ModuleList(CorpusSacreBLEU() for _ in range(buckets))
        self.add_state("count", torch.zeros(buckets), dist_reduce_fx="sum")

    def update(self, hyps: Sequence[str], refs: Sequence[Sequence[str]], lengths: Tensor) -> None:
        """hyps: B detokenized outputs; refs: B lists of references; lengths: (B,) source lengths."""
        idx = bucket_index(lengths.to(self.count.device), width=self.width, buckets=len(self.per_bucket))
        for b in idx.unique().tolist():
            rows = (idx == b).nonzero().flatten().tolist()
            self.per_bucket[b].update([hyps[i] for i in rows], [refs[i] for i in rows])
        self.count.index_add_(0, idx, torch.ones_like(idx, dtype=self.count.dtype))

    def compute(self) -> dict[str, Tensor]:
        """``len_<lo>_<hi>`` -> BLEU of that bucket, for buckets holding at least one sentence.

        ``count`` is already summed over ranks here, so every rank computes (and syncs) the same
        buckets in the same order.
        """
        out = {}
        for b in torch.nonzero(self.count).flatten().tolist():
            out[bucket_name(b, self.width)] = self.per_bucket[b].compute()
        return out

    def reset(self) -> None:
        super().reset()
        for metric in self.per_bucket:
            metric.reset()
