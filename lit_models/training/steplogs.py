"""Per-step ``self.log`` calls made only on the steps whose values something reads.

Lightning hands a training step's ``on_step`` values to the loggers every ``log_every_n_steps`` steps
(and on the step training stops); on the other steps each ``self.log`` call still stores its value,
which the next call overwrites unread. That store is not free: about 0.3 ms a call on the AMD EPYC of
BENCHMARKS.md's time section (a trivial module with three logged values a step: 1.6 against 0.65 ms a
step with none), 1.2 s of a 1,280-step quick recurrent trial that logs three values a step.

:func:`is_read` says whether a call's value would be read; the base module's ``log`` skips the ones that would
not. Two readers: the loggers, at Lightning's flush steps, and whatever reads ``trainer.callback_metrics`` (the
run's ``summary.json``, checkpoint and early-stopping monitors) after a validation, at an epoch's end and at the
fit's end. So a value is logged on a flush step, on the batch a validation may follow, on an epoch's
last batch and on the fit's last step; what every reader receives is then what it received when every step
logged (``tests/models/test_steplogs.py`` compares the two). Left different: a callback that reads a *train*
metric from ``callback_metrics`` on other steps (a checkpoint every N steps monitoring ``train/loss``) reads the
last logged step's value, as does the progress bar between flushes; and on a step where a callback stops
training after the training step (Lightning's ``Timer`` for ``--trainer.max_time``) the flush carries the last
logged step's values, not its own.

Only ``training_step``'s calls are judged (the families' train/loss, p_gold, reward and the like, logged
every step). A callback's per-step values are left alone.

Lightning keeps a per-step value until the epoch ends and hands it to the loggers at every flush in between,
under the flush's step, whether or not it was logged again. A value logged on some steps only (the gradient
probe's first 50) then reaches W&B and metrics.csv as a flat line of its last value to the epoch's end.
:func:`forget` drops such stored values once their last step has passed (``grad_probes.GradientNorms``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import lightning as L

STEP_HOOK = "training_step"  # the hook whose calls are judged; Lightning's defaults there: on_step=True, on_epoch=False


def is_read(module: L.LightningModule, args: tuple, kwargs: Mapping[str, Any]) -> bool:
    """False only for a per-step value (no ``on_epoch=True``) logged by ``training_step`` on a step that Lightning
    will not flush and after which nothing reads ``callback_metrics`` (:func:`read_after`); True in every other case,
    including any call it cannot judge."""
    trainer = module._trainer
    if trainer is None or args or kwargs.get("on_epoch") or module._current_fx_name != STEP_HOOK:
        return True
    try:
        return flushes(trainer) or read_after(trainer)
    except (AttributeError, NotImplementedError, TypeError):  # a Lightning without them, or not in a fit: log
        return True


def flushes(trainer: L.Trainer) -> bool:
    """Whether Lightning hands this training step's values to the loggers (``log_every_n_steps``, a fast dev run).
    Raises AttributeError on a Lightning without these attributes (callers choose their default)."""
    return bool(trainer._logger_connector.should_update_logs) or bool(trainer.fast_dev_run)


def is_flush_step(trainer: L.Trainer) -> bool:
    """:func:`flushes`, False where the trainer cannot say (a Lightning without the attributes, or not in a fit)."""
    try:
        return flushes(trainer)
    except (AttributeError, NotImplementedError, TypeError):
        return False


def read_after(trainer: L.Trainer) -> bool:
    """Whether ``callback_metrics`` may be read right after this training batch: a validation may follow it (its
    index, within the epoch or overall, is a multiple of ``val_check_batch``), it ends the epoch, or it is the fit's
    last step. An over-approximation of Lightning's own checks: logging on a step nobody reads costs only time."""
    loop = trainer.fit_loop.epoch_loop
    if loop.batch_progress.is_last_batch or 0 < trainer.max_steps <= trainer.global_step + 1:
        return True
    every = trainer.val_check_batch
    if every is None or not math.isfinite(every) or every < 1:
        return False
    return (loop.batch_idx + 1) % int(every) == 0 or (loop.total_batch_idx + 1) % int(every) == 0


def forget(trainer: L.Trainer, prefixes: tuple[str, ...]) -> int:
    """Drop the stored per-step values whose names start with one of ``prefixes``, so that Lightning's later
    flushes in this epoch do not re-send them; a later ``log`` of the same name stores it afresh. Returns how many
    it dropped (0 where the trainer keeps no stored values, as outside a fit loop)."""
    results = getattr(trainer, "_results", None)
    dropped = 0
    for item in (results or {}).values():
        meta = getattr(item, "meta", None)
        if meta is not None and str(meta.name).startswith(prefixes) and not item.has_reset:
            item.reset()  # Lightning's own end-of-epoch reset: the value leaves the flushes until logged again
            dropped += 1
    return dropped
