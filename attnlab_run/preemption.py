"""Fault tolerance, the signal side: preemption (SIGTERM / SIGINT / SIGUSR1 -> ``last.ckpt``, W&B run
marked preempting, exit ``128 + signal``); the checkpoints it resumes from are :mod:`attnlab_run.faults`'s.

How it fits Lightning 2.6 (``trainer/connectors/signal_connector.py``, ``loops/fit_loop.py``):
Lightning installs its own SIGTERM handler (it sets ``trainer.received_sigterm``; the loops then
raise ``SIGTERMException``, a ``SystemExit`` with code 0, at points of their choosing) and, under
SLURM with ``auto_requeue``, a SIGUSR1 handler that writes ``hpc_ckpt_<n>.ckpt`` and runs
``scontrol requeue``. :class:`PreemptionCheckpoint` takes these signals over when training starts:
it calls the handlers it finds except Lightning's SIGTERM notifier (whose stop after an epoch-end
validation resumed one epoch short, #24), forwards SIGTERM to the launcher's ranks as the notifier
did, and stops only where a resume is exact: the end of a batch that is not its epoch's last, or
``on_train_epoch_end``. It writes ``last.ckpt``, marks the W&B run preempting, exits ``128 + signal``.
"""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.loggers import WandbLogger
from lightning.pytorch.utilities.exceptions import SIGTERMException

from attnlab_run.faults import at_epoch_end_batch

log = logging.getLogger(__name__)
PREEMPTION_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)


class Preempted(SystemExit):
    """Raised at a step boundary after a preemption signal; the process exits with 128 + signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + int(signum))
        self.signum = int(signum)


def is_preemption(exception: BaseException) -> bool:
    """True for our :class:`Preempted` and for Lightning's ``SIGTERMException``."""
    return isinstance(exception, (Preempted, SIGTERMException))


def preemption_exit_code(exception: BaseException) -> int:
    """Exit status of a preempted run: 128 + signal (143 for SIGTERM; Lightning 2.6 would exit 0)."""
    return exception.code if isinstance(exception, Preempted) else 128 + int(signal.SIGTERM)


class PreemptionCheckpoint(L.Callback):
    """SIGTERM / SIGINT / SIGUSR1 -> ``last.ckpt`` at the next step boundary, W&B run marked preempting,
    exit ``128 + signal``.

    The stop is taken only at points a resume reproduces exactly: a batch's ``on_train_batch_end``
    (not an epoch's last batch: see :func:`at_epoch_end_batch`) or ``on_train_epoch_end`` (after that
    epoch's validation). A signal during validation or during a checkpoint write only sets a flag.

    Lightning 2.6's own SIGTERM notifier is *not* called: it sets ``trainer.received_sigterm``, on
    which the loops raise ``SIGTERMException`` at places of their own choosing — after the epoch-end
    validation of an epoch's last batch (a state the resume misreads as one epoch further, #24: the
    resumed run ended one epoch short) or in the middle of a validation. What it did besides, forward
    SIGTERM to the ranks its launcher started, is done here. Every other handler found at train start
    (Lightning's SLURM requeue on SIGUSR1, a user's own) is still called. A flag Lightning set before
    train start (a signal during the sanity check) is taken over. SIGINT is not forwarded (a terminal
    sends it to every rank already); a second SIGINT goes to the previous handler (Python's
    ``KeyboardInterrupt``: stop at once, nothing saved beyond the last ``last.ckpt``). Under DDP the
    decision to stop is reduced over ranks so every rank stops at the same step.

    Args:
        ckpt_path: where the preemption checkpoint goes (``<run>/checkpoints/last.ckpt``, so
            ``--ckpt_path last`` finds it whatever W&B run id the resumed process gets).
    """

    def __init__(self, *, ckpt_path: Path) -> None:
        self.ckpt_path = Path(ckpt_path)
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}
        self._trainer: L.Trainer | None = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._trainer = trainer
        if threading.current_thread() is not threading.main_thread():  # a host may still call request()
            log.info("not in the main thread: preemption signals are not handled here")
            return
        if trainer.received_sigterm:  # Lightning's notifier saw one before training started
            self.signum = int(signal.SIGTERM)
            _clear_lightning_sigterm(trainer)
        for sig in PREEMPTION_SIGNALS:
            self._previous[int(sig)] = signal.getsignal(sig)
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        repeated = self.signum is not None
        self.signum = int(signum)
        if signum == signal.SIGINT:
            if repeated and callable(self._previous.get(int(signum))):
                self._previous[int(signum)](signum, frame)  # the second Ctrl+C: KeyboardInterrupt now
            return
        if signum == signal.SIGTERM and not repeated and self._trainer is not None:
            launcher = self._trainer.strategy.launcher
            if launcher is not None:
                launcher.kill(signum)
        for handler in _chained_handlers(self._previous.get(int(signum))):
            handler(signum, frame)

    def request(self, signum: int) -> None:
        """Stop at the next exact point as if ``signum`` had arrived (a host whose main thread got it:
        ``ablations.stacked`` runs each seed's fit in a thread of its own)."""
        self.signum = int(signum)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        if not at_epoch_end_batch(trainer):  # an epoch's last batch: stop at on_train_epoch_end instead
            self._stop_if_requested(trainer, flush_batch_logs=True)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._stop_if_requested(trainer)

    def _stop_if_requested(self, trainer: L.Trainer, *, flush_batch_logs: bool = False) -> None:
        requested = self.signum is not None
        if trainer.world_size > 1:
            requested = trainer.strategy.reduce_boolean_decision(requested, all=False)
        if requested:
            if flush_batch_logs:  # what the loop does right after on_train_batch_end: the step's metrics are logged
                trainer._logger_connector.on_batch_end()
                trainer._logger_connector.update_train_step_metrics()
            raise Preempted(self.signum or signal.SIGTERM)

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        if not is_preemption(exception):
            return
        if self._trainer is None:  # Lightning's SIGTERMException before training started: nothing to save
            log.warning("preempted before training started: %s left as it was", self.ckpt_path)
        else:
            trainer.save_checkpoint(str(self.ckpt_path), weights_only=False)  # the whole training state
            log.warning("preempted (signal %s): saved %s", self.signum or int(signal.SIGTERM), self.ckpt_path)
        if trainer.is_global_zero:
            mark_wandb_preempting(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.teardown(trainer, pl_module, "fit")

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        """Put back the handlers found at train start (Lightning then restores its own originals)."""
        if threading.current_thread() is threading.main_thread():
            for sig, handler in self._previous.items():
                if handler is not None:
                    signal.signal(sig, handler)
        self._previous = {}
        self._trainer = None


def _chained_handlers(previous: Any) -> list[Any]:
    """The callables a handler found at train start stands for, Lightning's SIGTERM notifier left out.

    Lightning 2.6 registers a ``_HandlersCompose`` (``trainer/connectors/signal_connector.py``) whose
    ``signal_handlers`` list its ``_sigterm_notifier_fn``, under SLURM its requeue / bypass handlers,
    and the handler it found itself (``SIG_DFL`` / ``SIG_IGN`` are ints and are skipped, as it does).
    """
    handlers = list(getattr(previous, "signal_handlers", [previous]))
    return [h for h in handlers if callable(h) and getattr(h, "__name__", "") != "_sigterm_notifier_fn"]


def _clear_lightning_sigterm(trainer: L.Trainer) -> None:
    """Lightning 2.6 keeps the flag its loops test on its private signal connector."""
    connector = getattr(trainer, "_signal_connector", None)
    if connector is not None:
        connector.received_sigterm = False


def mark_wandb_preempting(trainer: L.Trainer) -> None:
    """``Run.mark_preempting()`` on every W&B run: a sweep agent then requeues the run (with a non-zero exit)."""
    for logger in trainer.loggers:
        if isinstance(logger, WandbLogger) and getattr(logger, "_experiment", None) is not None:
            try:
                logger.experiment.mark_preempting()
            except Exception as err:  # noqa: BLE001 - W&B trouble must not lose the checkpoint/exit path
                log.warning("could not mark the W&B run preempting: %s", err)
