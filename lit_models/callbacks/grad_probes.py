"""Gradient probes: the gradient L2 norm per layer for the first optimizer steps -> ``train/grad_norm/<layer>``
(Xiong et al. 2020 compare exactly this for Post- vs Pre-Norm), and ``train/grad_qk/<layer>``: the gradient reaching the
query and key projections (``in_proj`` rows [0, 2D), fewer with grouped keys) divided by the logit scale s. W_q and
W_k get gradient only through the softmax, so this is the "gradient through the softmax" that saturation shrinks
(Vaswani et al. 2017, §3.2.1, footnote 4)."""

from __future__ import annotations

import re
from typing import Any, ClassVar

import lightning as L
import torch
from torch import Tensor
from torch.amp.grad_scaler import OptState

from lit_models.blocks.attention import MultiHeadAttention
from lit_models.training.steplogs import forget

LAYER = re.compile(r"^(?:net\.)?((?:encoder|decoder)\.layers\.\d+)\.")


class GradientNorms(L.Callback):
    """Gradient L2 norm per layer for the first ``steps`` optimizer steps (before clipping; unscaled under a
    GradScaler: read in ``on_before_optimizer_step`` and divided by the scale it still carries).

    Parameters are grouped by ``net.encoder.layers.{i}`` / ``net.decoder.layers.{i}``; the rest
    by their first two name components under ``net`` (embeddings, generator, recurrent stacks).
    Logged as ``train/grad_norm/<group>`` and ``train/grad_norm/total``. Under DDP the gradients
    are already averaged across ranks here, so rank 0's value is the global one. The sums of squares stay on the device
    until one host read per logged step (:func:`norms`).

    After its steps its stored values are dropped (``steplogs.forget``), so no flat line of the last one follows
    in W&B and metrics.csv.

    Args:
        steps: number of initial optimizer steps to log.
    """

    KEYS: ClassVar[tuple[str, str]] = ("train/grad_norm/", "train/grad_qk/")

    def __init__(self, *, steps: int = 50) -> None:
        self.steps = steps

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        if trainer.global_step >= self.steps:
            forget(trainer, self.KEYS)

    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer: Any) -> None:
        if trainer.global_step >= self.steps or not trainer.is_global_zero:
            return
        unscale = 1.0 / pending_scale(trainer, optimizer)
        squares = dict(zip(self.KEYS, (layer_grad_squares(pl_module), qk_grad_squares(pl_module)), strict=True))
        for name, value in norms(squares).items():
            pl_module.log(name, value * unscale, on_step=True, on_epoch=False, rank_zero_only=True)


def pending_scale(trainer: L.Trainer, optimizer: Any) -> float:
    """The factor the gradients still carry at ``on_before_optimizer_step``: a GradScaler's scale (``16-mixed``)
    where it has not unscaled them yet, which is where the optimizer unscales inside its own step (the fused
    AdamW: Lightning then skips ``unscale_``); else 1."""
    scaler = getattr(trainer.precision_plugin, "scaler", None)
    if scaler is None or not scaler.is_enabled():
        return 1.0
    inner = getattr(optimizer, "optimizer", optimizer)  # a LightningOptimizer wraps the torch one
    state = scaler._per_optimizer_states.get(id(inner), {})  # GradScaler's record of unscale_ (no public one)
    return 1.0 if state.get("stage") is OptState.UNSCALED else float(scaler.get_scale())


def parameter_group(name: str) -> str:
    """``net.encoder.layers.3.ff.w1.weight`` -> ``encoder.layers.3``; ``net.src_embed.table.weight`` ->
    ``src_embed.table``."""
    match = LAYER.match(name)
    if match:
        return match.group(1)
    parts = name.split(".")
    parts = parts[1:] if parts[0] == "net" else parts
    return ".".join(parts[:2]) if len(parts) > 2 else parts[0]


def norms(squares: dict[str, dict[str, Tensor]]) -> dict[str, float]:
    """``{prefix: {group: Σ g²}}`` (device scalars) -> ``{prefix + group: L2 norm}``, plus ``prefix + "total"`` for
    each prefix with a group: stacked on the device and copied to the host in one read, not one per parameter."""
    names = [(prefix, group) for prefix, groups in squares.items() for group in groups]
    if not names:
        return {}
    values = dict(zip(names, torch.stack([squares[p][g] for p, g in names]).tolist(), strict=True))  # one read
    out: dict[str, float] = {}
    for prefix, groups in squares.items():
        if groups:
            out.update({prefix + group: values[prefix, group] ** 0.5 for group in groups})
            out[prefix + "total"] = sum(values[prefix, group] for group in groups) ** 0.5
    return out


def _add(sq: dict[str, Tensor], group: str, grad: Tensor, *, scale: float = 1.0) -> None:
    """Σ (g / scale)² of ``grad`` added to ``sq[group]``, in float32 on the gradient's device."""
    part = grad.detach().float().pow(2).sum() / scale**2
    sq[group] = sq[group] + part if group in sq else part


def layer_grad_squares(module: torch.nn.Module) -> dict[str, Tensor]:
    """Σ g² of each parameter group (:func:`parameter_group`), device scalars; parameters without grad skipped."""
    sq: dict[str, Tensor] = {}
    for name, p in module.named_parameters():
        if p.grad is not None:
            _add(sq, parameter_group(name), p.grad)
    return sq


def qk_grad_squares(module: torch.nn.Module) -> dict[str, Tensor]:
    """Σ g² / s² of the gradient through the attention softmax, per layer group, device scalars.

    W_q and W_k (rows [0, (h + G)·d_k) of every packed ``in_proj``, [0, 2D) without grouped keys, weight and
    bias) get gradient only through the softmax: dL/dW_q = s · (dL/dlogits) · k xᵀ with s the logit scale.
    Dividing by s leaves the part that Vaswani et al. (2017, §3.2.1) say saturation shrinks, free of the
    trivial factor s itself.
    """
    sq: dict[str, Tensor] = {}
    for name, mod in module.named_modules():
        if not isinstance(mod, MultiHeadAttention) or mod.scale <= 0:
            continue
        proj, scale = mod.in_proj, float(mod.scale)
        group = parameter_group(f"{name}.in_proj.weight")
        rows = (mod.heads + mod.kv_heads) * mod.d_k  # [W_q; W_k; W_v] stacked: W_q's h and W_k's G heads
        for p in (proj.weight, proj.bias):
            if p is not None and p.grad is not None:
                _add(sq, group, p.grad[:rows], scale=scale)
    return sq


def layer_grad_norms(module: torch.nn.Module) -> dict[str, float]:
    """L2 norm of the gradient of each parameter group, plus ``total`` (one host read)."""
    return norms({"": layer_grad_squares(module)})


def qk_grad_norms(module: torch.nn.Module) -> dict[str, float]:
    """Gradient through the attention softmax (:func:`qk_grad_squares`), per layer group, plus ``total``."""
    return norms({"": qk_grad_squares(module)})
