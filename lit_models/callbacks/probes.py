"""Probes: Lightning callbacks that measure what an ablation is about, logged as metrics.

* ``AttentionEntropy``: entropy of every attention map per layer and map type on a fixed
  validation batch -> ``val/attn_entropy/<map name>`` (nats; 0 = one-hot, log(keys) = uniform).
* ``GradientNorms`` (``lit_models.callbacks.grad_probes``): gradient norms per layer, and through the softmax, for the
  first optimizer steps -> ``train/grad_norm/<layer>``, ``train/grad_qk/<layer>``.
* ``AlignmentMass``: the share of cross-attention mass on the source position of each output token
  (anti-diagonal for reverse, diagonal for copy, the positions holding the token for sort), per layer
  (mean over heads) -> ``val/align_mass/...`` (Bahdanau et al. 2015, Fig. 3; the readings in the class).
* ``MaxLogit`` (``lit_models.callbacks.logit_probe``): the largest attention logit of the training batch on logging
  steps -> ``train/max_logit`` (Wortsman et al. 2023: attention-logit growth before divergence).
* ``FreeRunningLoss``: the exposure-bias gap -> ``val/free_running_loss`` and ``val/exposure_gap``
  (free-running minus teacher-forced loss on a fixed batch).

Each probe checks for the capability it needs, declared in ``lit_models.protocols``
(``AttentionMapsNet``, ``StepwiseNet``, ``SourceTargetBatch``, ``NamesTask``, ``SmoothedLoss``), and
skips modules without it. Probes compute on rank 0 only and log with ``rank_zero_only=True``: no
collectives, so they are DDP-safe.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab_core.tokens import PAD
from lit_models.callbacks.grad_probes import GradientNorms
from lit_models.callbacks.logit_probe import MaxLogit
from lit_models.protocols import AttentionMapsNet, NamesTask, SmoothedLoss, SourceTargetBatch, StepwiseNet
from lit_models.training.evaluation import EvaluationModule

log = logging.getLogger(__name__)



class FixedBatch:
    """The first ``size`` examples of the first validation batch (the same every epoch: val is not shuffled)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.src: Tensor | None = None
        self.tgt: Tensor | None = None

    def capture(self, batch: Any, batch_idx: int, dataloader_idx: int) -> None:
        """Keep the batch's src/tgt on CPU if this is the first validation batch and it has them."""
        if self.src is not None or batch_idx != 0 or dataloader_idx != 0 or not isinstance(batch, SourceTargetBatch):
            return
        if isinstance(batch.src, Tensor) and isinstance(batch.tgt, Tensor):
            self.src, self.tgt = batch.src[: self.size].detach().cpu(), batch.tgt[: self.size].detach().cpu()

    def on(self, device: torch.device) -> tuple[Tensor, Tensor] | None:
        """(src (B, S), tgt (B, T)) on ``device``, or None before a batch was captured."""
        if self.src is None or self.tgt is None:
            return None
        return self.src.to(device), self.tgt.to(device)


def _should_probe(trainer: L.Trainer) -> bool:
    return trainer.is_global_zero and not trainer.sanity_checking


def network(pl_module: L.LightningModule) -> nn.Module | None:
    """The module's network: ``net`` of every attnlab family (``EvaluationModule``), None for others."""
    return pl_module.net if isinstance(pl_module, EvaluationModule) else None


class BatchProbe(L.Callback):
    """A probe that reads a fixed batch: the first ``examples`` of the first validation batch.

    At the end of each validation (rank zero, not the sanity check), once a batch was captured, a network that
    is a ``reads`` (a protocol of ``lit_models.protocols``) is handed to :meth:`probe` with the batch.
    """

    reads: ClassVar[type] = nn.Module

    def __init__(self, *, examples: int = 32) -> None:
        self.batch = FixedBatch(examples)

    def on_validation_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                                batch_idx: int, dataloader_idx: int = 0) -> None:
        self.batch.capture(batch, batch_idx, dataloader_idx)

    @torch.no_grad()
    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        net, data = network(pl_module), self.batch.on(pl_module.device)
        if _should_probe(trainer) and data is not None and isinstance(net, self.reads):
            self.probe(trainer, pl_module, net, *data)

    def probe(self, trainer: L.Trainer, pl_module: L.LightningModule, net: Any, src: Tensor, tgt: Tensor) -> None:
        """Log the probe's numbers (``pl_module.log``) on the fixed batch: ``src`` (B, S), ``tgt`` (B, T)."""
        raise NotImplementedError


class AttentionEntropy(BatchProbe):
    """Mean attention entropy per map (``enc_self/layer1``, ``cross/layer2``, ...) on a fixed batch.

    Entropy H = -sum_k w_k log w_k over the keys of each query row, averaged over heads, real
    (non-PAD) query rows and examples. Maps come from the network's ``attention_maps(src, tgt_in)``
    with the gold decoder input (teacher-forced maps). Rows are masked with the source mask for
    ``enc*`` maps and the target mask otherwise (the naming convention of ``attention_maps``).

    Args:
        examples: examples of the first validation batch to use.
    """

    reads = AttentionMapsNet

    def probe(self, trainer: L.Trainer, pl_module: L.LightningModule, net: AttentionMapsNet, src: Tensor,
              tgt: Tensor) -> None:
        tgt_in = tgt[:, :-1]
        for name, weights in net.attention_maps(src, tgt_in).items():
            if weights is None or weights.dim() != 4:
                continue
            value = attention_entropy(weights, query_mask=_query_mask(name, weights, src, tgt_in))
            if torch.isnan(value):  # no row is a distribution (e.g. attention "none" returns zeros)
                continue
            pl_module.log(f"val/attn_entropy/{name}", value, rank_zero_only=True, batch_size=src.size(0))


def _query_mask(name: str, weights: Tensor, src: Tensor, tgt_in: Tensor) -> Tensor:
    """(B, Tq) bool: real query rows of a (B, H, Tq, Tk) map."""
    tq = weights.size(2)
    if name.startswith("enc") and tq == src.size(1):
        return src != PAD
    if tq == tgt_in.size(1):
        return tgt_in != PAD
    return torch.ones(weights.shape[0], tq, dtype=torch.bool, device=weights.device)


def attention_entropy(weights: Tensor, *, query_mask: Tensor) -> Tensor:
    """Mean entropy (nats) of attention rows; nan when no row qualifies.

    Args:
        weights: (B, H, Tq, Tk) rows summing to 1 (zeros on masked keys: 0 log 0 = 0). Rows that
            do not sum to 1 (an all-zero map of an arm without attention) are left out.
        query_mask: (B, Tq) bool, True for rows to average.
    """
    w = weights.float()
    h = -torch.special.xlogy(w, w).sum(-1)  # (B, H, Tq)
    keep = query_mask[:, None, :].expand_as(h) & ((w.sum(-1) - 1.0).abs() < 1e-3)
    return h[keep].mean() if keep.any() else h.new_tensor(float("nan"))


def target_positions(src: Tensor, tgt: Tensor, task: str) -> Tensor | None:
    """(B, T, S) bool: for each decoder query t (predicting ``tgt[:, t + 1]``) the source positions of the token
    it predicts (the ``predicted`` reading; ``fed_positions`` gives the other).

    reverse: S_b - 1 - t; copy: t; sort: every position holding the token emitted next. Queries
    past the source length (the EOS step) have none. None for other tasks.
    """
    b, s = src.shape
    t = tgt.size(1) - 1
    lengths = (src != PAD).sum(1)  # (B,)
    q = torch.arange(t, device=src.device)[None, :, None]  # (1, T, 1)
    k = torch.arange(s, device=src.device)[None, None, :]  # (1, 1, S)
    inside = q < lengths[:, None, None]  # (B, T, 1)
    if task == "reverse":
        return inside & (k == lengths[:, None, None] - 1 - q)
    if task == "copy":
        return inside & (k == q)
    if task == "sort":
        nxt = tgt[:, 1:]  # (B, T) the token emitted at query t
        return inside & (src[:, None, :] == nxt[:, :, None]) & (src[:, None, :] != PAD)
    return None


def fed_positions(predicted: Tensor) -> Tensor:
    """(B, T, S) bool: for each decoder query t the source positions of the token it is *fed* (``tgt[:, t]``):
    the ``predicted`` targets one query later. Query 0 is fed <s>, which has no source position."""
    return torch.cat([torch.zeros_like(predicted[:, :1]), predicted[:, :-1]], dim=1)


def alignment_mass(weights: Tensor, target: Tensor) -> Tensor:
    """Mean over heads and over queries that have a target of the attention mass on the target positions.

    Args:
        weights: (B, H, T, S) cross-attention. target: (B, T, S) bool from ``target_positions``.
    """
    mass = (weights.float().mean(1) * target).sum(-1)  # (B, T)
    rows = target.any(-1)
    return mass[rows].mean() if rows.any() else mass.new_tensor(float("nan"))


READINGS = ("predicted", "fed")


def alignment_readings(weights: Tensor, predicted: Tensor) -> dict[str, Tensor]:
    """The mass on each output token's source position, read at the two queries that can read it.

    ``predicted``: at the query that predicts the token (row t of the map, which predicts y_{t+1}): Bahdanau et
    al.'s α_ij indexed by the step that emits output word i (their eq. 6 scores it with s_{i-1}). ``fed``: at the
    query that is fed the token (one row later). A decoder that reads, while predicting y_{t+1}, the source of
    the token it was just fed (y_t; the encoder state there also carries its neighbour, in reversal the token
    predicted, which a left-to-right encoder read one step before) is sharply aligned in the ``fed`` reading and
    near uniform in the ``predicted`` one.

    Args:
        weights: (B, H, T, S) cross-attention. predicted: (B, T, S) from ``target_positions``.
    """
    return {"predicted": alignment_mass(weights, predicted), "fed": alignment_mass(weights, fed_positions(predicted))}


class AlignmentMass(BatchProbe):
    """Cross-attention mass on each output token's source position, on a fixed validation batch (synthetic tasks).

    Logs, per cross-attention map and reading (``alignment_readings``), ``val/align_mass/<reading>/<map>``;
    the best map of each reading, ``val/align_mass/predicted`` and ``val/align_mass/fed``; and ``val/align_mass``,
    the larger of the two: what the claim reads (Bahdanau et al. 2015, Fig. 3: each output word aligns with its
    source word without supervision), the alignment of each output token wherever the decoder reads its source.
    The task is read from the datamodule's ``task`` (``NamesTask``: ``copy`` / ``reverse`` / ``sort``); other data
    is skipped.
    """

    reads = AttentionMapsNet

    def probe(self, trainer: L.Trainer, pl_module: L.LightningModule, net: AttentionMapsNet, src: Tensor,
              tgt: Tensor) -> None:
        dm = trainer.datamodule
        task = dm.task if isinstance(dm, NamesTask) else None
        if not isinstance(task, str):
            return
        target = target_positions(src, tgt, task)
        if target is None:
            return
        best: dict[str, Tensor] = {}
        for name, weights in net.attention_maps(src, tgt[:, :-1]).items():
            if not name.startswith("cross") or weights is None or weights.shape[-2:] != target.shape[-2:]:
                continue
            if ((weights.sum(-1) - 1.0).abs() > 1e-3).all():  # no distribution (attention "none")
                continue
            for reading, value in alignment_readings(weights, target).items():
                pl_module.log(f"val/align_mass/{reading}/{name}", value, rank_zero_only=True, batch_size=src.size(0))
                best[reading] = value if reading not in best else torch.maximum(best[reading], value)
        for reading, value in best.items():
            pl_module.log(f"val/align_mass/{reading}", value, rank_zero_only=True, batch_size=src.size(0))
        readings = torch.stack([best[r] for r in READINGS if r in best]) if best else src.new_empty(0).float()
        readings = readings[~readings.isnan()]
        if readings.numel():
            pl_module.log("val/align_mass", readings.max(), rank_zero_only=True, batch_size=src.size(0))


class FreeRunningLoss(BatchProbe):
    """Exposure bias: loss of the gold targets when the decoder is fed its own greedy tokens.

    Decodes a fixed validation batch twice through ``net.step()``: fed the gold previous token
    (teacher forcing) and fed its own argmax (free running). Logs ``val/free_running_loss`` and
    ``val/exposure_gap`` = free-running minus teacher-forced loss, both with the module's
    label smoothing so the gap compares like with like (Ranzato et al. 2016; Bengio et al. 2015).

    Args:
        examples: examples of the first validation batch to use.
    """

    reads = StepwiseNet

    def probe(self, trainer: L.Trainer, pl_module: L.LightningModule, net: StepwiseNet, src: Tensor,
              tgt: Tensor) -> None:
        eps = pl_module.label_smoothing if isinstance(pl_module, SmoothedLoss) else 0.0
        teacher = stepwise_loss(net, src, tgt, feed="gold", label_smoothing=eps)
        free = stepwise_loss(net, src, tgt, feed="own", label_smoothing=eps)
        pl_module.log("val/free_running_loss", free, rank_zero_only=True, batch_size=src.size(0))
        pl_module.log("val/exposure_gap", free - teacher, rank_zero_only=True, batch_size=src.size(0))


def stepwise_loss(net: StepwiseNet, src: Tensor, tgt: Tensor, *, feed: str, label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy of the gold labels ``tgt[:, 1:]`` over a step-by-step decode.

    Args:
        net: implements ``encode(src) -> state`` and ``step(prev (B,), state) -> (logits (B, V), state)``.
        src: (B, S) source ids. tgt: (B, T) ``[BOS, y.., EOS, PAD..]``.
        feed: ``gold`` feeds ``tgt[:, t]`` at step t (teacher forcing); ``own`` feeds the previous argmax.
    """
    tgt_in, labels = tgt[:, :-1], tgt[:, 1:]
    state = net.encode(src)
    prev, logits = tgt_in[:, 0], []
    for t in range(tgt_in.size(1)):
        step_logits, state = net.step(prev, state)  # (B, V)
        logits.append(step_logits)
        if t + 1 < tgt_in.size(1):
            prev = tgt_in[:, t + 1] if feed == "gold" else step_logits.argmax(-1)
    stacked = torch.stack(logits, dim=1)  # (B, T, V)
    return F.cross_entropy(stacked.float().flatten(0, 1), labels.flatten(), ignore_index=PAD,
                           label_smoothing=label_smoothing)


def default_probes() -> list[L.Callback]:
    """The probes the CLI attaches to every fit (each skips modules that lack what it needs)."""
    return [AttentionEntropy(), GradientNorms(), FreeRunningLoss(), AlignmentMass(), MaxLogit()]
