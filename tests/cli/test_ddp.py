"""DDP on CPU (gloo) through the real CLI: 2 processes evaluate every test example exactly once
(same metrics as 1 process on an odd-sized test set) and create exactly one run directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from attnlab_run.cli import main
from tests.tiny_fit import tiny_fit

REPO = Path(__file__).resolve().parents[2]
TINY = tiny_fit(seed=7, max_epochs=1, task="copy", vocab_size=8, min_len=1, max_len=6, train_size=16, val_size=5,
                test_size=11, batch_size=4)
EXACT = ("test/exact_match", "test/token_acc", "test/bleu")  # torchmetrics states, summed across ranks
BY_LEN = ("test/acc_by_len/", "test/token_acc_by_len/", "test/ppl_by_len/")  # per-length buckets, summed likewise


def _attnlab() -> list[str]:
    """The console script next to this interpreter, else the CLI module file (what the sweeps run)."""
    script = Path(sys.executable).with_name("attnlab")
    return [str(script)] if script.is_file() else [sys.executable, str(REPO / "attnlab_run" / "cli.py")]


def _summary(root: Path) -> tuple[list[Path], dict[str, float]]:
    runs = sorted(p.parent for p in root.glob("*/*/summary.json"))
    return runs, json.loads((runs[0] / "summary.json").read_text())["metrics"] if runs else {}


@pytest.mark.ddp
def test_two_process_test_counts_every_example_once(tmp_path):
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    common = ["test", "--config", str(config), "--run.experiment=ddp"]
    main([*common, f"--run.root={tmp_path / 'one'}"])
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    env.pop("ATTNLAB_RUN_DIR", None)  # set by the in-process run above; a fresh rank 0 must choose its own
    cmd = [*_attnlab(), *common, f"--run.root={tmp_path / 'two'}", "--trainer.devices=2", "--trainer.strategy=ddp"]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]

    one_runs, one = _summary(tmp_path / "one")
    two_runs, two = _summary(tmp_path / "two")
    assert len(two_runs) == 1, f"DDP created {len(two_runs)} run directories: {two_runs}"
    assert [p.name for p in (tmp_path / "two" / "ddp").iterdir()] == [two_runs[0].name]
    keys = [k for k in one if k in EXACT or k.startswith(BY_LEN)]
    assert len(keys) >= 4 and set(keys) <= set(two)
    assert {k.split("/")[1] for k in keys if k.startswith(BY_LEN)} == {p.split("/")[1] for p in BY_LEN}
    for key in keys:
        assert two[key] == pytest.approx(one[key], rel=1e-5, abs=1e-6), key
    assert two["test/loss"] == pytest.approx(one["test/loss"], abs=1e-5), "test/loss must weight every token once"


@pytest.fixture(autouse=True)
def _no_stray_run_dir_env():
    """main() exports ATTNLAB_RUN_DIR for DDP children; do not leak it into later tests."""
    before = os.environ.get("ATTNLAB_RUN_DIR")
    yield
    if before is None:
        os.environ.pop("ATTNLAB_RUN_DIR", None)
    else:
        os.environ["ATTNLAB_RUN_DIR"] = before


def test_ddp_children_reuse_the_run_directory(tmp_path, monkeypatch):
    """Rank > 0 takes rank 0's directory from the environment instead of naming a fresh one."""
    from attnlab_run.launch import RUN_DIR_ENV
    from attnlab_run.recording import RunOptions
    from attnlab_run.rundir import resolve_run_dir

    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path / "chosen"))
    monkeypatch.setenv("LOCAL_RANK", "1")
    chosen = resolve_run_dir(RunOptions(root=str(tmp_path)), default_experiment="x", ckpt_path=None)
    assert chosen == tmp_path / "chosen"
