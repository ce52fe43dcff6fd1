"""#50: a resume continues the same run or is refused; a branch is a new run that records its parent.

Every key of the ``fit`` parser (read from the CLI's own ``--print_config``) is changed in turn: a resume
refuses it naming the key, except the documented :data:`continuation.EXTENDABLE` keys. That is checked at
the config level (no training per key); a few keys from every section go through the real command line,
and the issue's reproduction runs end to end."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from attnlab_run.cli import main
from attnlab_run.continuation import EXTENDABLE, NOT_COMPARED, comparable, differences
from attnlab_run.rundir import Status, read_summary
from attnlab_run.trainer_setup import flatten
from tests.cli.quiet_runs import _quiet  # noqa: F401 - autouse fixture
from tests.cli.trees import tree

REPO = Path(__file__).parents[2]
CONFIG = str(REPO / "ablations" / "configs" / "transformer_reverse.yaml")
TINY = ["--trainer.enable_progress_bar=false", "--trainer.log_every_n_steps=1", "--model.d_model=16",
        "--model.d_ff=32", "--model.encoder_layers=1", "--model.decoder_layers=1", "--data.train_size=32",
        "--data.val_size=8", "--data.test_size=8", "--data.batch_size=8", "--run.figure_drawings=1"]


def _parser_keys() -> dict[str, Any]:
    """Every key of the fit parser with its value for the shipped config, from the CLI's own --print_config."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["fit", "--config", CONFIG, "--print_config"])
    os.environ.pop("ATTNLAB_RUN_DIR", None)
    return flatten(out.getvalue())


def _changed(value: Any) -> Any:
    """Another value of the same kind."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "_other"
    if isinstance(value, list):
        return [*value, "other"]
    return "other"  # None, a mapping


KEYS = _parser_keys()


def test_the_extendable_keys_are_keys_of_the_parser():
    assert EXTENDABLE <= set(KEYS), f"documented keys the parser does not have: {sorted(EXTENDABLE - set(KEYS))}"
    assert {k.split(".")[0] for k in KEYS} >= {"model", "data", "trainer", "run", "decode", "seed_everything"}


@pytest.mark.parametrize("key", sorted(comparable(KEYS)))
def test_a_resume_refuses_every_changed_key_but_the_extendable_ones(key):
    changed = {**KEYS, key: _changed(KEYS[key])}
    found = differences(KEYS, changed)
    if key in EXTENDABLE:
        assert found == [], f"{key} extends training or only logs: a resume may change it"
    else:
        assert found == [(key, KEYS[key], changed[key])], f"a resume that changes {key} must be refused naming it"


def test_the_command_only_keys_are_never_compared():
    assert NOT_COMPARED & set(comparable(KEYS)) == set()
    assert differences(KEYS, {**KEYS, "model.dict_kwargs.d_model": 7}) == []


@pytest.fixture(scope="module")
def ten_steps(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("resume")
    os.environ["WANDB_MODE"] = "disabled"
    try:
        main(["fit", "--config", CONFIG, f"--run.root={root}", "--run.name=P", *TINY, "--trainer.max_steps=10"])
    finally:
        os.environ.pop("ATTNLAB_RUN_DIR", None)
        os.environ.pop("ATTNLAB_RESUME_CKPT", None)
    return root


# one key of each section through the real command line: (option, the key the line names)
THROUGH_THE_CLI = [("--data.train_size=512", "data.train_size: 32 → 512"),
                   ("--model.dropout=0.4", "model.dropout: 0.1 → 0.4"),
                   ("--trainer.gradient_clip_val=0.5", "trainer.gradient_clip_val: 1.0 → 0.5"),
                   ("--decode.strategy=beam", 'decode.strategy: "greedy" → "beam"'),
                   ("--seed_everything=7", "seed_everything: 1 → 7"),
                   ("--run.mode=min", 'run.mode: "max" → "min"')]


@pytest.mark.parametrize(("option", "named"), THROUGH_THE_CLI)
def test_a_changed_resume_is_one_line_and_writes_nothing(ten_steps, capsys, option, named):
    run = ten_steps / "transformer_reverse" / "P"
    before = tree(run)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["fit", "--config", CONFIG, f"--run.root={ten_steps}", "--run.name=P", *TINY,
              "--trainer.max_steps=20", "--ckpt_path=last", option])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and err[0].startswith("attnlab: error:"), err
    assert named in err[0] and "--run.branch_from" in err[0]
    assert tree(run) == before, "a refused resume wrote into the run"


def test_fit_with_ckpt_path_best_is_one_line_and_rewrites_nothing(ten_steps, capsys):
    run = ten_steps / "transformer_reverse" / "P"
    before = tree(run)
    with pytest.raises(SystemExit) as exc:
        main(["fit", "--config", CONFIG, f"--run.root={ten_steps}", "--run.name=P", *TINY, "--ckpt_path=best"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and "--ckpt_path=best is for test/validate" in err[0]
    assert tree(run) == before


def test_the_issue_reproduction_refuses_train_size_and_extends_to_step_20(ten_steps, tmp_path):
    """Refused with a changed data.train_size; ``--trainer.max_steps=20 --ckpt_path last`` alone resumes to 20;
    a branch then starts from P's checkpoint with the changed data and records P as its parent."""
    common = ["--config", CONFIG, f"--run.root={ten_steps}", *TINY]
    with pytest.raises(SystemExit):
        main(["fit", *common, "--run.name=P", "--trainer.max_steps=20", "--ckpt_path=last", "--data.train_size=512"])
    main(["fit", *common, "--run.name=P", "--trainer.max_steps=20", "--ckpt_path=last"])
    run = ten_steps / "transformer_reverse" / "P"
    assert read_summary(run).global_step == 20 and read_summary(run).status is Status.FINISHED
    assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 20

    main(["fit", *common, "--run.name=B", "--trainer.max_steps=24", "--trainer.max_epochs=100", "--data.train_size=64",
          f"--run.branch_from={run}"])
    branch = read_summary(ten_steps / "transformer_reverse" / "B")
    assert branch.status is Status.FINISHED and branch.global_step == 24, "the branch continued from step 20"
    assert branch.parent == {"run_dir": str(run.resolve()),
                             "checkpoint": str((run / "checkpoints" / "last.ckpt").resolve())}
    assert read_summary(run).global_step == 20, "the parent is left as it was"
    saved = (ten_steps / "transformer_reverse" / "B" / "config.yaml").read_text()
    assert f"branch_from: {run}" in saved and "train_size: 64" in saved
    assert json.loads((run / "summary.json").read_text())["status"] == "finished"


def test_the_automatic_resume_of_a_preempted_run_is_compared_too(ten_steps, tmp_path, capsys):
    """A preempted run's directory resumes on its own (no --ckpt_path): the same comparison refuses a change."""
    import shutil

    root = tmp_path / "root"
    shutil.copytree(ten_steps, root)
    run = root / "transformer_reverse" / "P"
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "status": "preempted"}))
    before = tree(run)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["fit", "--config", CONFIG, f"--run.root={root}", "--run.name=P", *TINY, "--trainer.max_steps=20",
              "--data.val_size=16"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and "data.val_size: 8 → 16" in err[0], err
    assert tree(run) == before


def test_a_resume_may_add_a_callback(ten_steps, tmp_path):
    """``trainer.callbacks`` is EXTENDABLE: a resume that adds a callback (here LearningRateMonitor) continues."""
    import shutil

    root = tmp_path / "root"
    shutil.copytree(ten_steps, root)
    run = root / "transformer_reverse" / "P"
    steps = read_summary(run).global_step
    added = json.dumps({"class_path": "lightning.pytorch.callbacks.LearningRateMonitor"})
    main(["fit", "--config", CONFIG, f"--run.root={root}", "--run.name=P", *TINY, f"--trainer.max_steps={steps + 2}",
          "--trainer.max_epochs=100", "--ckpt_path=last", f"--trainer.callbacks+={added}"])
    assert read_summary(run).global_step == steps + 2 and read_summary(run).status is Status.FINISHED
