"""Seeds stacked: K seeds of one arm trained in one process as one vectorised model.

The K LightningModules are built as K alone runs would build them (each after its own
``seed_everything``), their parameters and buffers are stacked along a new leading dimension
(``torch.func.stack_module_state``), and one training step maps the family's ``training_loss``
over the K parameter sets with ``torch.func.vmap`` (``functional_call`` swaps each set in).
Dropout draws independently per seed (``randomness="different"``). The K losses are summed and
back-propagated once: seeds share no parameter, so each slice of a stacked gradient is exactly
that seed's gradient.

What stays per seed, as K alone runs would have it:

- gradient clipping by norm: the norm is over one seed's gradients (its slice of every stacked
  tensor), with ``torch.nn.utils.clip_grad_norm_``'s coefficient max_norm / (norm + 1e-6), ≤ 1;
- the optimizer: the family's own (AdamW, Loshchilov & Hutter 2019, Alg. 2) over the stacked
  tensors. Every AdamW operation is elementwise and its step count is per tensor, so one AdamW over
  (K, ...) tensors is K AdamWs with the same hyper-parameters; the learning-rate schedule is the
  family's, stepped once per step as in each alone run;
- divergence: a seed whose objective is not finite stops there (``diverged_at``), its parameters and
  optimizer state frozen from that step on, as an alone run skips that step and stops.

Evaluation and decoding are not vectorised: :meth:`StackedSeeds.unstack` writes each seed's slice
back into its own module, which then validates, tests and decodes with its own code.

Hosted in K trainers (``attnlab_run.lockstep``), a stack does only the vectorised part,
:meth:`StackedSeeds.gradients`; :meth:`StackedSeeds.share_storage` makes each module's tensors views
of its slice, so each trainer clips, steps and checkpoints its own seed as an alone run does.

A family is stacked only when :func:`refusal` returns None; otherwise it says why and the seeds run
alone.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call, stack_module_state, vmap
from torch.utils._pytree import tree_map

from lit_models.training.reinforce import ReinforceTerm

CLIP_EPS = 1e-6  # torch.nn.utils.clip_grad_norm_'s denominator guard (what Lightning's norm clipping uses)

PURE_LOSS = "training_loss"  # the family method that stacking maps over seeds


class NotStackable(ValueError):
    """The family cannot be stacked (the message says why); its seeds run alone."""


def refusal(module: nn.Module) -> str | None:
    """Why ``module``'s family cannot be stacked, or None when nothing is known against it.

    Stacking needs a ``training_loss(batch, step)`` that is a function of parameters and batch only,
    whose every operation has a ``vmap`` batching rule. What is not caught here (an op without one)
    stops the first :meth:`StackedSeeds.training_step`, before any update, as ``NotStackable``.
    """
    name = type(module).__name__
    if not callable(getattr(module, PURE_LOSS, None)):
        return f"{name} has no training_loss(batch, step), the pure function stacking maps over seeds"
    if any(isinstance(m, nn.RNNBase) for m in module.modules()):
        return f"{name} runs nn.RNN/GRU/LSTM on packed sequences, whose lengths are read with .item() (vmap cannot)"
    if any(isinstance(m, ReinforceTerm) for m in module.modules()):
        return f"{name} has a REINFORCE term: its moving-average baseline is module state updated at every step"
    return None


class _Objective(nn.Module):
    """``functional_call`` calls ``forward``; this one is the family's ``training_loss``."""

    def __init__(self, family: nn.Module) -> None:
        super().__init__()
        self.family = family

    def forward(self, batch: Any, step: int) -> tuple[Tensor, dict[str, Tensor]]:
        # the class's method: a hosted seed's own instance hook (attnlab_run.lockstep) asks the stack
        return getattr(type(self.family), PURE_LOSS)(self.family, batch, step)


class StackedSeeds:
    """K modules of one arm trained as one: :meth:`training_step` per batch, :meth:`unstack` to evaluate.

    Args:
        modules: the K seeds' modules, each built after its own seed (same class and hyper-parameters).
        gradient_clip_val: the trainer's norm clipping (None or 0: none), applied per seed.
        total_steps: optimizer steps of the run (the trainer's ``estimated_stepping_batches``: the
            horizon of the cosine schedule).
    """

    def __init__(
        self, modules: Sequence[nn.Module], *, gradient_clip_val: float | None = None, total_steps: int = 1
    ) -> None:
        self.modules = list(modules)
        _check_one_arm(self.modules)
        # a copy: functional_call swaps its tensors, while a hosted seed 0 may be evaluating
        self.objective = _Objective(copy.deepcopy(self.modules[0])).train()
        params, buffers = stack_module_state([_Objective(m) for m in self.modules])
        self.params: dict[str, Tensor] = params
        self.buffers: dict[str, Tensor] = buffers
        self.clip = float(gradient_clip_val or 0.0)
        plan = _Plan(gradient_clip_val=self.clip, estimated_stepping_batches=total_steps)
        self.optimizer, self.scheduler = _stacked_optimizer(self.modules[0], plan, list(self.params.values()))
        self.step = 0
        self.diverged_at: list[int | None] = [None] * len(self.modules)

    @property
    def k(self) -> int:
        return len(self.modules)

    def training_step(self, batch: Any | Sequence[Any], *, per_seed: bool = False) -> dict[str, Tensor]:
        """One optimizer step of every seed still training; returns each logged value as a (K,) tensor.

        Args:
            batch: the batch all seeds train on (the usual case: the seeds of an arm share the data
                seed, hence the data and its order), or with ``per_seed`` K batches of equal shapes.
        """
        own = list(batch) if per_seed else [batch] * self.k
        total, logs = self.gradients(batch, self.step, per_seed=per_seed)
        finite = torch.isfinite(total)
        for k, module in enumerate(self.modules):
            if not finite[k] and self.diverged_at[k] is None:
                self.diverged_at[k] = self.step
            if self.diverged_at[k] is None:
                module.tokens_seen += module.batch_tokens(own[k])
        frozen = [k for k in range(self.k) if self.diverged_at[k] is not None]
        self._clip_per_seed()
        with _Frozen(self, frozen):
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self.step += 1
        return logs

    def gradients(self, batch: Any, step: int, *, per_seed: bool = False) -> tuple[Tensor, dict[str, Tensor]]:
        """Forward and backward of every seed at optimizer step ``step``: each stacked tensor's ``.grad``
        holds the K seeds' gradients (a non-finite seed's are zero). Returns the (K,) objectives and
        each logged value as a (K,) tensor, detached."""
        stacked = tree_map(lambda *xs: torch.stack(xs), *batch) if per_seed else batch
        for p in self.params.values():
            p.grad = None
        total, logs = self._objectives(stacked, per_seed, step)
        finite = torch.isfinite(total.detach())
        total.where(finite, torch.zeros_like(total)).sum().backward()
        return total.detach(), {name: value.detach() for name, value in logs.items()}

    def _objectives(self, batch: Any, per_seed: bool, step: int) -> tuple[Tensor, dict[str, Tensor]]:
        """(K,) objectives and logged values; an op vmap cannot batch raises ``NotStackable``."""
        mapped = vmap(self._seed_objective, in_dims=(0, 0, 0 if per_seed else None, None), randomness="different")
        try:
            return mapped(self.params, self.buffers, batch, step)
        except RuntimeError as e:
            if "vmap" not in str(e):
                raise
            raise NotStackable(f"{type(self.modules[0]).__name__}: {str(e).splitlines()[0]}") from e

    def _seed_objective(self, params: dict, buffers: dict, batch: Any, step: int) -> tuple[Tensor, dict[str, Tensor]]:
        return functional_call(self.objective, (params, buffers), (batch, step))

    def _clip_per_seed(self) -> None:
        """Scale each seed's gradients by min(1, max_norm / (‖g_seed‖₂ + 1e-6)) (``clip_grad_norm_``)."""
        grads = [p.grad for p in self.params.values() if p.grad is not None]
        if self.clip <= 0 or not grads:
            return
        norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads], dim=1).norm(dim=1)  # (K,)
        coef = (self.clip / (norms + CLIP_EPS)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.view(-1, *([1] * (g.dim() - 1))))

    def optimizer_state(self, k: int) -> dict[str, Any]:
        """Seed ``k``'s optimizer ``state_dict``, as its alone run's optimizer would hold it (its slice of
        every per-element state; shared scalars such as AdamW's step as they are): for its checkpoint."""
        whole = self.optimizer.state_dict()
        own = {
            i: {name: v[k].clone() if torch.is_tensor(v) and v.dim() > 0 else v for name, v in state.items()}
            for i, state in whole["state"].items()
        }
        return {"state": own, "param_groups": whole["param_groups"]}

    @torch.no_grad()
    def unstack(self) -> list[nn.Module]:
        """Write each seed's slice back into its own module (for validation, test, decoding, checkpoints)."""
        for k, module in enumerate(self.modules):
            own = _own_tensors(module)
            for name, stacked in (self.params | self.buffers).items():
                own[name].copy_(stacked[k])
        return self.modules


    @torch.no_grad()
    def share_storage(self) -> None:
        """Make each module's parameters and buffers views of its slice of the stacked tensors: whatever
        steps a module (its own trainer's optimizer) steps its slice, and the next :meth:`gradients` sees it."""
        for k, module in enumerate(self.modules):
            own = _own_tensors(module)
            for name, stacked in (self.params | self.buffers).items():
                own[name].data = stacked.detach()[k]


class _Frozen:
    """Keep the parameters and optimizer state of the seeds in ``frozen`` unchanged across a step."""

    def __init__(self, stack: StackedSeeds, frozen: Iterable[int]) -> None:
        self.stack, self.frozen = stack, list(frozen)

    def __enter__(self) -> None:
        opt = self.stack.optimizer
        self.saved = (
            [
                (t, t[self.frozen].clone())
                for p in self.stack.params.values()
                for t in (p, *[s for s in opt.state.get(p, {}).values() if torch.is_tensor(s) and s.dim() > 0])
            ]
            if self.frozen
            else []
        )

    def __exit__(self, *exc: object) -> None:
        with torch.no_grad():
            for t, old in self.saved:
                t[self.frozen] = old


def _own_tensors(module: nn.Module) -> dict[str, Tensor]:
    """A seed's parameters and buffers under the names of the stacked tensors."""
    return dict(_Objective(module).named_parameters()) | dict(_Objective(module).named_buffers())


def _check_one_arm(modules: list[nn.Module]) -> None:
    """Stacking needs ≥ 1 module, all of one stackable family with the same hyper-parameters."""
    if not modules:
        raise ValueError("stacking needs at least one seed")
    why = refusal(modules[0])
    if why is not None:
        raise NotStackable(f"cannot stack: {why}")
    first = modules[0]
    for m in modules[1:]:
        if type(m) is not type(first) or dict(m.hparams) != dict(first.hparams):
            raise ValueError("stacked seeds must be one arm: same family and hyper-parameters")


@dataclass(frozen=True)
class _Plan:
    """What a family's ``configure_optimizers`` reads from its trainer, for a stack that has none."""

    gradient_clip_val: float
    estimated_stepping_batches: int
    precision: str = "32-true"


def _stacked_optimizer(template: nn.Module, plan: _Plan, params: list[Tensor]) -> tuple[torch.optim.Optimizer, Any]:
    """The family's own optimizer and per-step schedule (``configure_optimizers``), over the stacked tensors.

    The template's optimizer gives the class and the hyper-parameters (its ``defaults``); its
    ``LambdaLR`` gives the multiplier of the peak learning rate per step. The template sees ``plan``
    as its trainer while it configures them (and its own trainer, if any, again afterwards).
    """
    own, template._trainer = template._trainer, plan
    try:
        conf = template.configure_optimizers()
    finally:
        template._trainer = own
    opt0, sched0 = conf["optimizer"], conf["lr_scheduler"]["scheduler"]
    if len(opt0.param_groups) != 1 or not isinstance(sched0, torch.optim.lr_scheduler.LambdaLR):
        raise ValueError("stacking supports one parameter group and a LambdaLR schedule")
    if conf["lr_scheduler"].get("interval") != "step":
        raise ValueError("stacking steps the schedule per optimizer step")
    accepted = inspect.signature(type(opt0)).parameters  # AdamW's defaults also hold Adam's fixed flags
    opt = type(opt0)(params, **{k: v for k, v in opt0.defaults.items() if k in accepted})
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, sched0.lr_lambdas[0])
