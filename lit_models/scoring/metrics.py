"""Losses and torchmetrics shared by every seq2seq family.

All metric state is summed (texts: gathered) across DDP ranks at ``compute()``, with no per-step collectives
(what that buys under DDP: ``training.evaluation``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchmetrics import Metric

from attnlab_core.tokens import PAD

LENGTH_BUCKET = 5  # target lengths 1-5, 6-10, ... share a bucket
MAX_BUCKETS = 64


def smoothed_distribution(gold: Tensor, *, num_classes: int, eps: float) -> Tensor:
    """Label-smoothed targets (Szegedy et al. 2016; Vaswani §5.4): (1-ε)·onehot + ε/K.

    Args:
        gold: (N,) class ids. Returns (N, K); the gold class gets 1 - ε + ε/K.
    """
    dist = torch.full((gold.numel(), num_classes), eps / num_classes, device=gold.device)
    return dist.scatter_add_(1, gold[:, None], torch.full_like(dist[:, :1], 1.0 - eps))


def label_smoothed_loss(logits: Tensor, labels: Tensor, *, eps: float) -> Tensor:
    """Mean cross-entropy against ``smoothed_distribution`` over non-PAD labels, in float32.

    Args:
        logits: (B, T, V). labels: (B, T) with PAD where there is no target.
    """
    return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=PAD, label_smoothing=eps)


def token_nll(logits: Tensor, labels: Tensor) -> Tensor:
    """(B, T) next-token negative log-likelihood in float32, 0 where the label is PAD (never label-smoothed).

    Args:
        logits: (B, T, V). labels: (B, T) with PAD where there is no target.
    """
    return F.cross_entropy(logits.float().transpose(1, 2), labels, ignore_index=PAD, reduction="none")


class Ratio(Metric):
    """correct / total, summed over batches and ranks; 0 while nothing is counted. ``total`` may be fractional
    (seconds, for a rate): it is never rounded up to 1."""

    full_state_update = False

    def __init__(self) -> None:
        super().__init__()
        self.add_state("correct", torch.tensor(0.0), dist_reduce_fx="sum")
        self.add_state("total", torch.tensor(0.0), dist_reduce_fx="sum")

    def update(self, correct: Tensor, total: Tensor | int) -> None:
        self.correct += correct.sum().float()
        self.total += torch.as_tensor(total, dtype=torch.float, device=self.total.device).sum()

    def compute(self) -> Tensor:
        return torch.where(self.total > 0, self.correct / self.total, torch.zeros_like(self.correct))


class LengthBucketAccuracy(Metric):
    """Mean of a per-sequence score per target-length bucket (width ``LENGTH_BUCKET``): exact match
    (bool scores) or the share of correct positions (float scores)."""

    full_state_update = False

    def __init__(self) -> None:
        super().__init__()
        self.add_state("correct", torch.zeros(MAX_BUCKETS), dist_reduce_fx="sum")
        self.add_state("total", torch.zeros(MAX_BUCKETS), dist_reduce_fx="sum")

    def update(self, correct: Tensor, lengths: Tensor) -> None:
        """correct: (B,) bool or float in [0, 1]; lengths: (B,) target lengths (content tokens)."""
        self._add(correct.float(), torch.ones_like(correct, dtype=torch.float), lengths)

    def _add(self, values: Tensor, weights: Tensor, lengths: Tensor) -> None:
        """Add (B,) ``values`` and their (B,) ``weights`` to the buckets of the (B,) ``lengths``."""
        idx = ((lengths - 1).clamp_min(0) // LENGTH_BUCKET).clamp_max(MAX_BUCKETS - 1)
        self.correct.index_add_(0, idx, values)
        self.total.index_add_(0, idx, weights)

    def reduce(self, total: Tensor, weight: Tensor) -> Tensor:
        """A bucket's value from its summed values and weights: their mean."""
        return total / weight

    def compute(self) -> dict[str, Tensor]:
        out = {}
        for b in torch.nonzero(self.total).flatten().tolist():
            lo, hi = b * LENGTH_BUCKET + 1, (b + 1) * LENGTH_BUCKET
            out[f"len_{lo:03d}_{hi:03d}"] = self.reduce(self.correct[b], self.total[b])
        return out


class LengthBucketPerplexity(LengthBucketAccuracy):
    """Perplexity per target-length bucket: exp of the mean NLL per scored target token (the answer's tokens and
    EOS, teacher-forced, never label-smoothed) over the bucket's sequences, token-weighted (Press et al. 2022's
    perplexity, read here by answer length instead of context)."""

    def update(self, nll: Tensor, lengths: Tensor) -> None:  # type: ignore[override]
        """nll: (B, T) per-position NLL, 0 where the label is PAD; lengths: (B,) target lengths (content tokens),
        so each sequence scores ``lengths + 1`` tokens (its EOS too)."""
        self._add(nll.float().sum(1), (lengths + 1).float(), lengths)

    def reduce(self, total: Tensor, weight: Tensor) -> Tensor:
        return torch.exp(total / weight)


def gather_objects(items: list) -> list:
    """All ranks' items, rank order (a no-op without an initialised process group)."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return items
    parts: list = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(parts, items)
    return [x for part in parts for x in part]


class TextCorpusMetric(Metric):
    """A corpus score of texts: (hypothesis, references) pairs are kept over batches, gathered from every rank at
    ``compute()`` and scored together, so under DDP the score is the single-process one.

    ``forward`` adds the batch to the corpus and returns the batch's own score. Subclasses define :meth:`score`.
    """

    full_state_update = False

    def __init__(self) -> None:
        super().__init__()
        self.add_state("count", torch.tensor(0.0), dist_reduce_fx="sum")
        self.pairs: list[tuple[str, list[str]]] = []

    def update(self, preds: Sequence[str], target: Sequence[Sequence[str]]) -> None:
        """preds: hypotheses; target: the references of each hypothesis."""
        if len(preds) != len(target):
            raise ValueError(f"{len(preds)} hypotheses but {len(target)} reference lists")
        self.pairs.extend((p, list(t)) for p, t in zip(preds, target, strict=True))
        self.count += len(preds)

    def forward(self, preds: Sequence[str], target: Sequence[Sequence[str]]) -> Tensor:
        self.update(preds, target)
        return self._value(list(zip(preds, target, strict=True)))

    def compute(self) -> Tensor:
        return self._value(gather_objects(self.pairs))

    def reset(self) -> None:
        super().reset()
        self.pairs = []

    def _value(self, pairs: list) -> Tensor:
        value = self.score([p for p, _ in pairs], [list(t) for _, t in pairs]) if pairs else 0.0
        return torch.tensor(value, device=self.count.device)

    def score(self, hyps: list[str], refs: list[list[str]]) -> float:
        raise NotImplementedError


class SacreCorpusMetric(TextCorpusMetric):
    """A sacrebleu corpus metric through its public ``corpus_score``, on a 0-1 scale like the other metrics.

    A hypothesis may have fewer references than another: sacrebleu skips the ``None`` that fill its streams.

    Args:
        scorer: a ``sacrebleu.metrics`` BLEU or CHRF object with its settings.
    """

    def __init__(self, scorer: object) -> None:
        super().__init__()
        self._scorer = scorer

    def score(self, hyps: list[str], refs: list[list[str]]) -> float:
        width = max(len(r) for r in refs)
        streams = [[r[i] if i < len(r) else None for r in refs] for i in range(width)]
        return self._scorer.corpus_score(hyps, streams).score / 100.0


class CorpusSacreBLEU(SacreCorpusMetric):
    """sacrebleu's corpus BLEU (Papineni et al. 2002), no smoothing: 13a tokenization and 4-grams for translation;
    ``tokenize="none"`` (split on spaces) and ``max_ngram_order`` 1-4 give the captioner's BLEU-1..4.

    Replaces torchmetrics' ``SacreBLEUScore`` (same score), whose pure-Python n-gram counting was 60% of
    a validation pass of the demo's recurrent model under ``cProfile`` (0.59 of 0.94 s, 256 examples).
    """

    def __init__(self, *, tokenize: str = "13a", max_ngram_order: int = 4) -> None:
        from sacrebleu.metrics import BLEU

        super().__init__(BLEU(tokenize=tokenize, smooth_method="none", max_ngram_order=max_ngram_order))


class CorpusCHRF(SacreCorpusMetric):
    """chrF (Popović 2015) exactly as sacrebleu's ``corpus_chrf`` computes it: F_β per n-gram order from the
    corpus sums, averaged over the orders the corpus has. (torchmetrics' ``CHRFScore`` averages precision
    and recall over the orders before taking F_β, which differs by up to ~17 points on short segments.)
    """

    def __init__(self, *, char_order: int = 6, word_order: int = 0, beta: int = 2) -> None:
        from sacrebleu.metrics import CHRF

        super().__init__(CHRF(char_order=char_order, word_order=word_order, beta=beta))


def build_seq2seq_metrics() -> nn.ModuleDict:
    """token_acc (teacher-forced), exact_match, BLEU and chrF (free-running), per-length exact match, token accuracy
    and (teacher-forced) perplexity.

    BLEU and chrF are computed on detokenized text with one reference; ``metric_signatures``
    gives the SacreBLEU signatures of exactly these settings.
    """
    return nn.ModuleDict(
        {
            "loss": Ratio(),  # token-weighted mean of the teacher-forced loss (exact under DDP)
            "token_acc": Ratio(),
            "exact_match": Ratio(),
            "bleu": CorpusSacreBLEU(),  # sacrebleu's BLEU, 13a, smooth_method="none"
            "chrf": CorpusCHRF(word_order=0),  # chrF (Popović 2015), not chrF++; sacrebleu's statistics
            "acc_by_len": LengthBucketAccuracy(),
            "token_acc_by_len": LengthBucketAccuracy(),  # free-running: share of gold positions matched
            "ppl_by_len": LengthBucketPerplexity(),  # teacher-forced answer perplexity per length bucket
        }
    )


def positions_matched(pred: Tensor, gold: Tensor) -> Tensor:
    """(B,) share of gold's non-PAD positions (EOS included) where pred has the same id.

    Position-aligned, so a free-running output that drops or repeats a token scores only the
    prefix before the slip: a graded version of :func:`sequences_equal` for length studies.
    """
    width = max(pred.size(1), gold.size(1))
    p = F.pad(pred, (0, width - pred.size(1)), value=PAD)
    g = F.pad(gold, (0, width - gold.size(1)), value=PAD)
    keep = g != PAD
    return ((p == g) & keep).sum(1).float() / keep.sum(1).clamp_min(1)


def sequences_equal(pred: Tensor, gold: Tensor) -> Tensor:
    """Row-wise equality of two right-padded (B, L1) / (B, L2) id tensors, ignoring PAD width."""
    width = max(pred.size(1), gold.size(1))
    p = F.pad(pred, (0, width - pred.size(1)), value=PAD)
    g = F.pad(gold, (0, width - gold.size(1)), value=PAD)
    return (p == g).all(dim=1)


def metric_signatures() -> dict[str, str]:
    """SacreBLEU signatures of the BLEU / chrF settings above (one reference per hypothesis).

    sacrebleu reports ``nrefs`` only after scoring, hence the one-pair corpus. BLEU (:class:`CorpusSacreBLEU`)
    and chrF (:class:`CorpusCHRF`) match sacrebleu's corpus functions on randomized corpora
    (tests/models/test_metric_oracles.py).
    """
    from sacrebleu.metrics import BLEU, CHRF

    out = {}
    for name, metric in (("bleu", BLEU(tokenize="13a", smooth_method="none")), ("chrf", CHRF(word_order=0))):
        metric.corpus_score(["a"], [["a"]])
        out[f"{name}_signature"] = str(metric.get_signature())
    return out
