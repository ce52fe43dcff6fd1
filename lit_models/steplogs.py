"""Per-step ``self.log`` calls made only on the steps whose logs reach a logger.

Lightning hands a training step's ``on_step`` values to the loggers every ``log_every_n_steps`` steps
(and on the step training stops); on the other steps each ``self.log`` call still stores its value,
which the next call overwrites unread. That store is not free: about 0.3 ms a call on the AMD EPYC of
BENCHMARKS.md's time section (a trivial module with three logged values a step: 1.6 against 0.65 ms a
step with none), 1.2 s of a 1,280-step quick recurrent trial that logs three values a step.

:func:`reaches_logger` says whether a call would reach a logger; the base module's ``log`` skips the
ones that would not. What the loggers and the progress bar receive is unchanged: every flushed step
logs the values of that same step, as before (``tests/models/test_steplogs.py`` compares the two).
One difference remains: on a step where a callback stops training *after* the training step
(Lightning's ``Timer`` for ``--trainer.max_time``), that step is flushed with the training step's values
of the last logging step, not its own.

Only ``training_step``'s calls are judged (the families' train/loss, p_gold, reward and the like, logged
every step). A callback's per-step values are left alone: ``probes.GradientNorms`` logs only its first
steps, and Lightning re-sends a stored value at every later flush of the epoch, which skipping would
change (or, with ``log_every_n_steps`` above its window, lose).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import lightning as L

STEP_HOOK = "training_step"  # the hook whose calls are judged; Lightning's defaults there: on_step=True, on_epoch=False


def reaches_logger(module: L.LightningModule, args: tuple, kwargs: Mapping[str, Any]) -> bool:
    """False only for a per-step value (no ``on_epoch=True``) logged by ``training_step`` on a step that
    Lightning will not flush; True in every other case, including any call it cannot judge."""
    trainer = module._trainer
    if trainer is None or args or kwargs.get("on_epoch") or module._current_fx_name != STEP_HOOK:
        return True
    connector = getattr(trainer, "_logger_connector", None)
    try:
        return bool(connector.should_update_logs) or bool(trainer.fast_dev_run)
    except (AttributeError, NotImplementedError):  # a Lightning without it, or not in a fit: log as before
        return True
