"""The one AdamW every LightningModule trains with (Loshchilov & Hutter 2019, "Decoupled Weight Decay
Regularization"), in torch's fused implementation where the parameters' device and dtype have a kernel.

The fused kernel does a tensor's whole update (moments, bias correction, decay, parameter) in one pass
over memory instead of one pass per elementwise op; the update is the same AdamW, and on the benchmark's
base Transformer it makes the CPU optimizer step several times faster (issue #17, ``BENCHMARKS.md``).
Torch (>= 2.4, the project's floor) has fused AdamW kernels on CPU and CUDA for fp32, bf16, fp16 and fp64;
for anything else (other devices, complex tensors) this falls back to the multi-tensor ``foreach`` path
(torch's own default on CUDA). Torch checks fused support only at the first ``step()``, so the check
is made here, when the optimizer is built.

One case keeps the unfused form on purpose: Lightning refuses gradient clipping under a mixed-precision
plugin (``16-mixed``/``bf16-mixed``) for any optimizer that unscales gradients inside its own step, which
the fused ones declare — so with ``gradient_clip_val > 0`` and a ``*-mixed`` precision the optimizer is
the ``foreach`` one (same update, same hyper-parameters).

The optimiser's knobs (peak learning rate, its schedule, warm-up, weight decay) are the fields of
:class:`Optimisation`; every family takes them in its ``**options`` (the decoder families through
``decoder_training.DecoderTraining``, which extends it) and names only the defaults it changes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from attnlab_core.options import with_defaults
from lit_models.axes import LRSchedule
from lit_models.policies.schedules import LR_SCHEDULES
from lit_models.validation import RangeChecked

log = logging.getLogger(__name__)
FUSED_DEVICES = ("cpu", "cuda")  # where torch >= 2.4 has fused AdamW kernels


def adamw(
    params: Iterable[nn.Parameter], *, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
    weight_decay: float = 1e-2, fused: bool = True,
) -> torch.optim.AdamW:
    """AdamW over ``params``, fused where torch supports their device and dtype (else ``foreach``).

    Args:
        params: the parameters (all of them, frozen ones included, so checkpoints index them as before).
        lr, betas, eps, weight_decay: AdamW's hyper-parameters (torch's defaults).
        fused: try the fused kernel first; False gives the ``foreach`` implementation.
    """
    params = list(params)
    kw = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    if fused and all(fused_kernel(p) for p in params):
        return torch.optim.AdamW(params, fused=True, **kw)
    log.debug("AdamW: foreach (fused requested: %s)", fused)
    return torch.optim.AdamW(params, fused=False, foreach=True, **kw)


def fused_kernel(p: torch.Tensor) -> bool:
    """Whether torch has a fused AdamW kernel for this tensor's device and dtype."""
    return p.device.type in FUSED_DEVICES and torch.is_floating_point(p)


def module_adamw(module: nn.Module, **hparams: float | tuple[float, float]) -> torch.optim.AdamW:
    """:func:`adamw` over a LightningModule's parameters, unfused only where its trainer would refuse
    the fused one (gradient clipping under a ``*-mixed`` precision; see the module docstring)."""
    trainer = getattr(module, "_trainer", None)
    clipping = trainer is not None and bool(trainer.gradient_clip_val)
    mixed = trainer is not None and str(trainer.precision).endswith("-mixed")
    return adamw(module.parameters(), fused=not (clipping and mixed), **hparams)


@dataclass(frozen=True, kw_only=True)
class Optimisation(RangeChecked):
    """AdamW (Loshchilov & Hutter 2019) and its learning-rate schedule (``schedules``), stepped per batch.

    Args:
        lr: peak learning rate.
        lr_schedule: noam | constant | cosine (``schedules``).
        warmup_steps: linear warm-up steps (Vaswani et al. 2017: 4000).
        weight_decay: AdamW decoupled weight decay (Loshchilov & Hutter 2019; Vaswani et al.: 0).

    Each knob is held to ``validation.RANGES`` when built (``RangeChecked``; the CLI checks the same table at
    parse time).
    """

    lr: float = 1e-3
    lr_schedule: LRSchedule = "noam"
    warmup_steps: int = 400
    weight_decay: float = 0.0


CONSTANT_LR = with_defaults(Optimisation, fixed={"lr_schedule": "constant", "warmup_steps": 0})
"""The optimiser group of a family trained at a constant learning rate: ``lr`` and ``weight_decay`` only."""


def scheduled_adamw(module: Any, **adam: float | tuple[float, float]) -> dict[str, Any]:
    """A LightningModule's ``configure_optimizers``: :func:`module_adamw` with the :class:`Optimisation`
    knobs of its ``hparams`` (``adam``: further AdamW arguments, e.g. ``betas``) and their ``lr_schedule``
    as a per-step LambdaLR over the trainer's estimated steps (1 without a trainer)."""
    hp = module.hparams
    opt = module_adamw(module, lr=hp.lr, weight_decay=hp.weight_decay, **adam)
    total = max(1, int(module.trainer.estimated_stepping_batches)) if module._trainer else 1
    fn = LR_SCHEDULES[hp.lr_schedule]
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: fn(s + 1, warmup=hp.warmup_steps, total=total))
    return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
