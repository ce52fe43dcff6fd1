"""The private Lightning hooks ``attnlab_run.recording`` relies on still exist and are still called where we
expect (pyproject bounds lightning < 2.7 for this reason). If Lightning renames or stops calling one,
this fails with the name, instead of resumed runs silently losing or mangling their metrics.csv."""

from __future__ import annotations

import inspect

from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter

from attnlab_run.recording import ResumableCSVLogger


def test_csv_writer_still_calls_the_hooks_we_override():
    init_src = "".join(inspect.getsource(c.__init__) for c in ExperimentWriter.__mro__
                       if c is not object and "__init__" in vars(c))
    assert "_check_log_dir_exists" in init_src, "ExperimentWriter no longer calls _check_log_dir_exists in __init__"
    callers = [name for name, fn in inspect.getmembers(ExperimentWriter, inspect.isfunction)
               if name != "_rewrite_with_new_header" and "_rewrite_with_new_header" in inspect.getsource(fn)]
    assert callers, "no ExperimentWriter method calls _rewrite_with_new_header any more"


def test_csv_logger_still_has_the_private_state_we_use(tmp_path):
    logger = CSVLogger(save_dir=str(tmp_path), name="", version="")
    assert hasattr(logger, "_experiment") and hasattr(logger, "_fs"), "CSVLogger lost _experiment/_fs"
    resumable = ResumableCSVLogger(save_dir=str(tmp_path), name="", version="")
    resumable.log_metrics({"a": 1.0}, step=0)
    resumable.save()
    assert (tmp_path / "metrics.csv").read_text().splitlines()[0] == "a,step"


def test_the_loggers_step_is_still_the_fit_loops_batches_that_stepped():
    """lit_models.callbacks.figures.logged_step puts a drawing's images at the step of its validation's metrics: the one
    Lightning's logger connector hands the loggers when no step is given."""
    from lightning.pytorch.loops.training_epoch_loop import _TrainingEpochLoop
    from lightning.pytorch.trainer.connectors.logger_connector.logger_connector import _LoggerConnector

    assert "fit_loop.epoch_loop._batches_that_stepped" in inspect.getsource(_LoggerConnector.log_metrics)
    assert "_batches_that_stepped" in inspect.getsource(_TrainingEpochLoop.__init__)
