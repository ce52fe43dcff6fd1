"""Fault injection: send a signal to this very process at an exact point of training.

For rehearsing preemption (and for the tests of ``attnlab_run/faults.py``) without racing a
``sleep``: the signal is delivered by the process itself at a given optimizer step and phase, so
the point is the same on every run. Add it like any callback::

    attnlab fit ... --trainer.callbacks+='{"class_path": "attnlab_run.fault_injection.SignalAt",
                                           "init_args": {"step": 8, "phase": "validation", "signal": "TERM"}}'

Phases (``step`` is ``trainer.global_step``, the optimizer steps done):

- ``batch``: at the end of the training batch that made step ``step`` (an epoch's last batch when
  ``step`` is a multiple of the epoch length).
- ``validation``: after the first batch of the (non-sanity) validation that runs at step ``step``.
- ``checkpoint``: in the middle of writing the first checkpoint saved at step ``step``: the signal is
  sent while ``torch.save`` serialises it (a ``SIGKILL`` leaves a torn temporary file behind).
- ``evaluation``: after the first batch of a ``test`` / ``validate`` / ``predict`` command (``step`` is
  not read: an evaluation does not step).
"""

from __future__ import annotations

import collections
import os
import signal as signal_module
from typing import Any, Literal

import lightning as L
import torch

Phase = Literal["batch", "validation", "checkpoint", "evaluation"]


def signal_number(name: str) -> signal_module.Signals:
    """``TERM`` / ``SIGTERM`` / ``15`` -> ``signal.SIGTERM``."""
    text = str(name).strip().upper()
    if text.isdigit():
        return signal_module.Signals(int(text))
    return signal_module.Signals[text if text.startswith("SIG") else f"SIG{text}"]


class _SignalWhenPickled:
    """Sends the signal when ``torch.save`` reaches it, and is stored as an empty ``OrderedDict``
    (a type ``weights_only`` loading accepts), so the checkpoint stays loadable."""

    def __init__(self, signum: int) -> None:
        self.signum = signum

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        os.kill(os.getpid(), self.signum)
        return collections.OrderedDict, ()


class SignalAt(L.Callback):
    """Send ``signal`` to this process once, at optimizer step ``step`` in ``phase``.

    Args:
        step: the ``trainer.global_step`` at which to fire (not read in the ``evaluation`` phase).
        phase: ``batch``, ``validation``, ``checkpoint`` or ``evaluation`` (see the module docstring).
        signal: a signal name (``TERM``, ``INT``, ``USR1``, ``KILL``) or number.
    """

    def __init__(self, *, step: int, phase: Phase = "batch", signal: str = "TERM") -> None:
        if phase not in ("batch", "validation", "checkpoint", "evaluation"):
            raise ValueError(f"phase must be batch, validation, checkpoint or evaluation, got {phase!r}")
        self.step, self.phase, self.signum = int(step), phase, int(signal_number(signal))
        self.fired = False

    def _due(self, trainer: L.Trainer, phase: Phase) -> bool:
        if phase == "evaluation":
            return not self.fired and self.phase == "evaluation" and trainer.state.fn != "fit"
        return (not self.fired and phase == self.phase and trainer.global_step == self.step
                and not trainer.sanity_checking)

    def _fire(self) -> None:
        self.fired = True
        os.kill(os.getpid(), self.signum)

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if self._due(trainer, "batch"):
            self._fire()

    def on_validation_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if self._due(trainer, "validation") or self._due(trainer, "evaluation"):
            self._fire()

    def on_test_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if self._due(trainer, "evaluation"):
            self._fire()

    def on_predict_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if self._due(trainer, "evaluation"):
            self._fire()

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        if self._due(trainer, "checkpoint"):
            self.fired = True
            checkpoint["fault_injection"] = _SignalWhenPickled(self.signum)


class NonFiniteAt(L.Callback):
    """Make the loss non-finite on one DDP rank only, at optimizer step ``step``: before that training batch,
    this rank's first trainable parameter is filled with NaN (the other ranks' stay finite).

    Args:
        step: the ``trainer.global_step`` of the training batch whose loss turns non-finite.
        rank: the ``trainer.global_rank`` on which it does.
    """

    def __init__(self, *, step: int, rank: int = 0) -> None:
        self.step, self.rank = int(step), int(rank)

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        if trainer.global_step == self.step and trainer.global_rank == self.rank:
            first = next(p for p in pl_module.parameters() if p.requires_grad)
            with torch.no_grad():
                first.fill_(float("nan"))


class RaiseAt(SignalAt):
    """Raise ``RuntimeError`` once where ``SignalAt`` would send its signal (``signal`` is not read): a run or an
    evaluation that fails with an exception rather than a signal."""

    def _fire(self) -> None:
        self.fired = True
        raise RuntimeError(f"injected fault ({self.phase})")
