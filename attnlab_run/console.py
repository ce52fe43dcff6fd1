"""Lightning's console lines wait until a loop starts, so refused input is the only line on stderr.

Lightning logs its device banner ("GPU available: False, used: False", "TPU available: ...") when the
Trainer is built, and more lines (``LOCAL_RANK ...``, the model summary) before the first loop. Input
that is checked later, when the data is prepared or set up (a word vocabulary larger than its corpus,
parallel files of different lengths, a package that is not installed), would print its one-line
error after them. :class:`HeldConsole` holds every record of the ``lightning.pytorch`` and
``lightning.fabric`` loggers from the start of the command until the first loop (sanity check, train,
validate, test or predict) starts, then prints them in their order, before any progress bar; when
the command ends in refused input, they are dropped; when it ends any other way (a crash, a
preemption, a run with no loop at all) they are printed then. A successful run prints exactly what it
printed before, a moment later.
"""

from __future__ import annotations

import logging
from typing import Any

import lightning as L

HELD_LOGGERS = ("lightning.pytorch", "lightning.fabric")
"""The loggers Lightning prints its console lines through (each has its own stream handler)."""


class _Collector(logging.Handler):
    """Keeps (holding logger, record) pairs, in the order they were logged."""

    def __init__(self, *, holder: str, records: list[tuple[str, logging.LogRecord]]) -> None:
        super().__init__()
        self.holder, self.records = holder, records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((self.holder, record))


class HeldConsole(L.Callback):
    """Holds Lightning's console lines from :meth:`hold` until a loop starts (:meth:`release`), or drops
    them (:meth:`discard`) when the command ends in refused input. Idempotent; one per command."""

    def __init__(self) -> None:
        self._saved: dict[str, tuple[list[logging.Handler], bool]] = {}
        self._records: list[tuple[str, logging.LogRecord]] = []

    @property
    def holding(self) -> bool:
        return bool(self._saved)

    def hold(self) -> None:
        """Route the records of :data:`HELD_LOGGERS` into this object instead of their handlers."""
        if self._saved:
            return
        for name in HELD_LOGGERS:
            logger = logging.getLogger(name)
            self._saved[name] = (list(logger.handlers), logger.propagate)
            for handler in self._saved[name][0]:
                logger.removeHandler(handler)
            logger.addHandler(_Collector(holder=name, records=self._records))
            logger.propagate = False

    def release(self) -> None:
        """Give the loggers their handlers back and print what was held, in order."""
        for holder, record in self._restore():
            logging.getLogger(holder).handle(record)

    def discard(self) -> None:
        """Give the loggers their handlers back and drop what was held."""
        self._restore()

    def _restore(self) -> list[tuple[str, logging.LogRecord]]:
        for name, (handlers, propagate) in self._saved.items():
            logger = logging.getLogger(name)
            for handler in [h for h in logger.handlers if isinstance(h, _Collector)]:
                logger.removeHandler(handler)
            for handler in handlers:
                logger.addHandler(handler)
            logger.propagate = propagate
        self._saved = {}
        held, self._records[:] = list(self._records), []
        return held

    # A loop starts: the data is prepared and set up, the model is built; progress bars come next.
    def on_sanity_check_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.release()

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.release()

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.release()

    def on_test_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.release()

    def on_predict_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.release()

    def __getstate__(self) -> dict[str, Any]:
        """Nothing held travels to a spawned process (handlers hold locks; the child has its own console)."""
        return {"_saved": {}, "_records": []}
