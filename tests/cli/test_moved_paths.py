"""Old class paths keep working after lit_models' root modules moved into subpackages (``lit_models.moved``).

A run made before the move names its model ``lit_models.seq2seq.TransformerSeq2Seq`` in its ``config.yaml``
and in its checkpoint's ``_class_path``. Such a run is made here the way the old code wrote it (a fit, then its
saved config and checkpoint rewritten to the old path), and every reader of it is exercised for real: a fit
from a config naming the old path, ``attnlab test --ckpt_path`` with the old or the new config, a resume
(``--ckpt_path last``, compared key by key with the saved config) and the report's run record."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import yaml

from attnlab_run.cli import main
from attnlab_run.evaluations import evaluation_records, finished_evaluations, record_path
from attnlab_run.rundir import Status, read_summary
from lit_models.moved import MOVED, current
from tests.cli.quiet_runs import _quiet  # noqa: F401 - autouse fixture

REPO = Path(__file__).parents[2]
CONFIG = REPO / "ablations" / "configs" / "transformer_reverse.yaml"
OLD = "lit_models.seq2seq.TransformerSeq2Seq"
NEW = "lit_models.families.seq2seq.TransformerSeq2Seq"
TINY = ["--trainer.enable_progress_bar=false", "--trainer.log_every_n_steps=1", "--model.d_model=16",
        "--model.d_ff=32", "--model.encoder_layers=1", "--model.decoder_layers=1", "--data.train_size=32",
        "--data.val_size=8", "--data.test_size=8", "--data.batch_size=8", "--run.figure_drawings=1"]


def _old_config(tmp_path: Path) -> Path:
    """The shipped config with its model named by the old path."""
    config = yaml.safe_load(CONFIG.read_text())
    assert config["model"]["class_path"] == NEW
    config["model"]["class_path"] = OLD
    path = tmp_path / "transformer_reverse.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _fit(config: Path, root: Path, *extra: str) -> None:
    try:
        main(["fit", "--config", str(config), f"--run.root={root}", "--run.name=P", *TINY, *extra])
    finally:
        os.environ.pop("ATTNLAB_RUN_DIR", None)
        os.environ.pop("ATTNLAB_RESUME_CKPT", None)


def _written(run: Path) -> dict[str, int]:
    """Evaluation id -> when its finished record was written (the same options again rewrite one record)."""
    return {k: record_path(run, k).stat().st_mtime_ns for k in finished_evaluations(evaluation_records(run))}


@pytest.fixture(scope="module")
def old_run(tmp_path_factory) -> Path:
    """A ten-step run whose config.yaml and checkpoints name the model by its old path, as the old code wrote
    them; fitted from a config naming the old path (so that fit runs)."""
    root = tmp_path_factory.mktemp("old")
    os.environ["WANDB_MODE"] = "disabled"
    _fit(_old_config(root), root, "--trainer.max_steps=10")
    run = root / "transformer_reverse" / "P"
    assert read_summary(run).status is Status.FINISHED and read_summary(run).global_step == 10
    saved = run / "config.yaml"
    saved.write_text(saved.read_text().replace(NEW, OLD))
    for ckpt in (run / "checkpoints").glob("*.ckpt"):
        state = torch.load(ckpt, weights_only=True)
        state["hyper_parameters"]["_class_path"] = OLD
        torch.save(state, ckpt)
    assert OLD in saved.read_text() and NEW not in saved.read_text()
    return run


def test_old_and_new_module_paths_are_one_module():
    import lit_models.seq2seq as old

    import lit_models.families.seq2seq as new

    assert old is new and old.__spec__.name == new.__name__ == "lit_models.families.seq2seq"
    from lit_models.captioner import ShowAttendTell

    assert ShowAttendTell.__module__ == "lit_models.families.captioner"


def test_current_rewrites_old_paths_only():
    assert current(OLD) == NEW and current("lit_models.seq2seq") == "lit_models.families.seq2seq"
    for unchanged in (NEW, "lit_models.builders.build_transformer", "lit_models.seq2seqx.A", "datamodules.x.Y"):
        assert current(unchanged) == unchanged
    assert all(current(old) == new for old, new in MOVED.items())


def test_fit_from_an_old_class_path_runs(old_run):
    """The fixture fitted from a config naming the old path; its model is the moved class."""
    assert read_summary(old_run).global_step == 10


@pytest.mark.parametrize("config", ["saved", "shipped"])
def test_test_accepts_a_checkpoint_naming_the_old_path(old_run, config):
    """``attnlab test --ckpt_path`` of an old checkpoint, with the run's own (old-path) config or the shipped
    (new-path) one: the checkpoint's class and the config's are one class."""
    cfg = old_run / "config.yaml" if config == "saved" else CONFIG
    before = _written(old_run)
    try:
        main(["test", "--config", str(cfg), f"--run.root={old_run.parents[1]}", "--run.name=P", *TINY,
              f"--ckpt_path={old_run / 'checkpoints' / 'last.ckpt'}"])
    finally:
        os.environ.pop("ATTNLAB_RUN_DIR", None)
    written = {k for k, v in _written(old_run).items() if before.get(k) != v}
    assert len(written) == 1 and written.pop().startswith("test-"), _written(old_run)


@pytest.mark.parametrize("config", ["saved", "shipped"])
def test_a_resume_of_an_old_run_continues(old_run, tmp_path, config):
    """``--ckpt_path last`` compares the new config with the saved one key by key: the old path is the same
    model, not a change that refuses the resume (with the run's own config or the shipped one)."""
    import shutil

    root = tmp_path / "root"
    shutil.copytree(old_run.parents[1], root)
    run = root / "transformer_reverse" / "P"
    _fit(run / "config.yaml" if config == "saved" else CONFIG, root, "--trainer.max_steps=12", "--ckpt_path=last")
    assert read_summary(run).global_step == 12 and read_summary(run).status is Status.FINISHED


def test_the_run_record_names_the_current_class(old_run):
    from ablations.reports.results import load_run

    assert load_run(old_run).params["model.class_path"] == NEW
