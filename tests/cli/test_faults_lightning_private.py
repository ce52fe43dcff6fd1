"""The private Lightning 2.6 names ``attnlab_run/faults.py`` and ``attnlab_run/preemption.py`` rely on
still exist (pyproject bounds lightning < 2.7). If one is renamed, this fails with its name instead of
preemption silently going back to Lightning's SIGTERM handling or resumes silently landing one epoch off (#24)."""

from __future__ import annotations

import inspect

from lightning.pytorch.loops.fetchers import _DataFetcher
from lightning.pytorch.loops.fit_loop import _FitLoop
from lightning.pytorch.trainer.connectors.signal_connector import _HandlersCompose, _SignalConnector

from attnlab_run.preemption import _chained_handlers


def test_the_sigterm_notifier_is_recognised_and_left_out_of_the_chain():
    connector = _SignalConnector.__new__(_SignalConnector)
    user_handler_calls: list[int] = []
    compose = _HandlersCompose([connector._sigterm_notifier_fn, lambda signum, frame: user_handler_calls.append(1)])
    chained = _chained_handlers(compose)
    assert len(chained) == 1, "Lightning's _sigterm_notifier_fn must be recognised by its name"
    chained[0](15, None)
    assert user_handler_calls == [1]
    assert "self.received_sigterm = True" in inspect.getsource(_SignalConnector._sigterm_notifier_fn)


def test_the_loop_state_we_adjust_on_resume_still_exists():
    for name in ("restarted_on_epoch_end", "restarted_mid_epoch", "reset_restart_stage", "epoch_progress"):
        assert hasattr(_FitLoop, name) or name in inspect.getsource(_FitLoop.__init__), name
    assert "_iteration_based_training" in inspect.getsource(_FitLoop.restarting.fset)
    init = inspect.getsource(_FitLoop.__init__)
    assert "self._data_fetcher" in init and "self._combined_loader" in init
    assert "self.iterator = iter(" in inspect.getsource(_DataFetcher.__iter__)


def test_the_logger_connector_calls_we_make_before_a_mid_epoch_stop_still_exist():
    """A stop at on_train_batch_end first logs that step's metrics as the loop would right after the hook."""
    from lightning.pytorch.loops.training_epoch_loop import _TrainingEpochLoop
    from lightning.pytorch.trainer.connectors.logger_connector.logger_connector import _LoggerConnector

    assert callable(_LoggerConnector.on_batch_end) and callable(_LoggerConnector.update_train_step_metrics)
    source = inspect.getsource(_TrainingEpochLoop.advance)
    hook = source.index('"on_train_batch_end"')
    assert hook < source.index("_logger_connector.on_batch_end()") < source.index("update_train_step_metrics()")

