"""K seeds' own ``Trainer.fit`` runs, one thread each, meeting at every training step (issue #26).

Each seed runs exactly what its alone ``attnlab fit`` runs: its trainer, callbacks, loggers, run
directory, validation, checkpoints, summary and test after the fit. One thing differs: its module's
``training_loss`` is an instance hook that waits until every seed still training has asked for the
same step, then the last one to arrive runs the vectorised forward and backward of all of them
(:meth:`lit_models.training.stacking.StackedSeeds.gradients`). Each seed gets back its objective as a scalar
whose backward hands its slice of the stacked gradients to its own parameters, which
:meth:`~lit_models.training.stacking.StackedSeeds.share_storage` made views of the stacked tensors. From there
on it is the seed's own code path: its training_step's finiteness check (divergence), ``tokens_seen``,
``self.log`` of the train metrics, the gradient probes, clipping by its own norm, its own AdamW and
learning-rate schedule stepping its slice in place, its own checkpoints (with its own optimizer state).

Only one meeting computes at a time, and the seeds evaluate between meetings; a seed that stops
(diverged, preempted, failed) leaves, and the others meet without it (its slice, no longer stepped,
stays as it was).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import partial
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils._pytree import tree_flatten

from lit_models.training.stacking import PURE_LOSS, StackedSeeds


class PeerFailed(RuntimeError):
    """A meeting could not be held: the seeds disagreed (step or batch) or the stacked step raised."""


class _Handoff(torch.autograd.Function):
    """A seed's objective as a scalar whose backward gives its parameters their slices of the stacked grads."""

    @staticmethod
    def forward(ctx: Any, value: Tensor, grads: tuple[Tensor | None, ...], *params: Tensor) -> Tensor:
        ctx.grads = grads
        return value.clone()

    @staticmethod
    def backward(ctx: Any, _: Tensor) -> tuple[Any, ...]:
        return (None, None, *ctx.grads)


class Lockstep:
    """The meeting point of K hosted seeds (same arm, same data order).

    Args:
        modules: the K seeds' modules, each built after its own seed, before any fit starts.
    """

    def __init__(self, modules: Sequence[nn.Module]) -> None:
        self.stack = StackedSeeds(modules)
        self.stack.share_storage()
        self.names = list(self.stack.params)
        self.present = set(range(self.stack.k))
        self.waiting: dict[int, tuple[Any, int]] = {}
        self.results: dict[int, tuple[Tensor, dict[str, Tensor]]] = {}
        self.meetings = 0
        self.error: BaseException | None = None
        self.cond = threading.Condition()
        for k, module in enumerate(self.stack.modules):
            setattr(module, PURE_LOSS, partial(self._objective, k))

    def leave(self, k: int) -> None:
        """Seed ``k`` trains no more (its fit ended, however): the others meet without it."""
        with self.cond:
            self.present.discard(k)
            self.waiting.pop(k, None)
            if self.waiting and set(self.waiting) >= self.present:
                self._meet()

    def _objective(self, k: int, batch: Any, step: int) -> tuple[Tensor, dict[str, Tensor]]:
        """Seed ``k``'s ``training_loss``: wait for the meeting of ``step``; its objective and logs."""
        with self.cond:
            meeting = self.meetings
            self.waiting[k] = (batch, step)
            if set(self.waiting) >= self.present:
                self._meet()
            while self.meetings == meeting and self.error is None:
                self.cond.wait()
            if k not in self.results:
                raise PeerFailed("the stacked step failed in another seed's thread") from self.error
            value, logs = self.results.pop(k)
        params = [p for _, p in _named(self.stack.modules[k], self.names)]
        grads = tuple(None if g is None else g[k] for g in (self.stack.params[n].grad for n in self.names))
        return _Handoff.apply(value, grads, *params), logs

    def _meet(self) -> None:
        """Every seed present has asked: one vectorised step for all (called holding the lock)."""
        try:
            (batch, step), *others = [self.waiting[k] for k in sorted(self.waiting)]
            for other, other_step in others:
                if other_step != step or not _same(batch, other):
                    raise PeerFailed("stacked seeds must train on the same batches at the same steps")
            self._follow_moves()
            with torch.enable_grad():
                total, logs = self.stack.gradients(batch, step)
            self.results = {k: (total[k], {n: v[k] for n, v in logs.items()}) for k in self.waiting}
        except BaseException as err:  # noqa: BLE001 - every waiting seed must wake up and fail with it
            self.error = err
        self.waiting = {}
        self.meetings += 1
        self.cond.notify_all()


    def _follow_moves(self) -> None:
        """Restack where a seed's trainer moved its module since the stack was built (``Module.to`` to its
        device or dtype replaces each parameter's ``.data``, which then is no view of the stack any more): the
        new stack holds the modules' current values where they now are, and shares its storage with them."""
        if all(_views(module, self.stack, k) for k, module in enumerate(self.stack.modules)):
            return
        first = next(p for p in self.stack.modules[min(self.waiting)].parameters())
        for module in self.stack.modules:  # a seed that left before its move follows the others
            module.to(device=first.device, dtype=first.dtype)
        hooks = [vars(module).pop(PURE_LOSS) for module in self.stack.modules]  # the stack deep-copies seed 0
        self.stack = StackedSeeds(self.stack.modules)
        self.stack.share_storage()
        for module, hook in zip(self.stack.modules, hooks, strict=True):
            setattr(module, PURE_LOSS, hook)


def _views(module: nn.Module, stack: StackedSeeds, k: int) -> bool:
    """Whether each of ``module``'s parameters is a view of its slice ``k`` of the stacked tensors."""
    return all(p.untyped_storage().data_ptr() == stack.params[n].untyped_storage().data_ptr()
               and p.data_ptr() == stack.params[n][k].data_ptr() for n, p in _named(module, list(stack.params)))


def _named(module: nn.Module, names: list[str]) -> list[tuple[str, Tensor]]:
    """``module``'s parameters under the stack's names (``family.<name>``), in the stack's order."""
    own = {f"family.{n}": p for n, p in module.named_parameters()}
    return [(n, own[n]) for n in names]


def _same(a: Any, b: Any) -> bool:
    """Whether two batches hold equal tensors (the seeds of an arm share the data seed, hence each batch)."""
    (la, sa), (lb, sb) = tree_flatten(a), tree_flatten(b)
    if sa != sb or len(la) != len(lb):
        return False
    return all(torch.equal(x, y) if torch.is_tensor(x) else x == y for x, y in zip(la, lb, strict=True))
