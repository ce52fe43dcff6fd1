"""Acceptance of issue #7, as a user would try it: ``attnlab fit`` as a real subprocess, preempted
with SIGTERM under W&B (offline) and resumed, and killed with SIGKILL several times at arbitrary
steps and resumed each time. ``pytest -m slow tests/cli/test_faults_slow.py`` (a few minutes)."""

from __future__ import annotations

import csv
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).parents[2]
CONFIG = str(REPO / "ablations" / "configs" / "transformer_reverse.yaml")
# 1024 / 32 = 32 optimizer steps per epoch, 3 epochs: 96 planned steps.
SMALL = ["--data.init_args.train_size=1024", "--data.init_args.val_size=128", "--data.init_args.test_size=8",
         "--data.init_args.batch_size=32", "--model.init_args.d_model=32", "--model.init_args.d_ff=64",
         "--model.init_args.encoder_layers=1", "--model.init_args.decoder_layers=1",
         "--model.init_args.warmup_steps=30", "--trainer.max_epochs=3", "--trainer.log_every_n_steps=4",
         "--trainer.enable_progress_bar=false", "--run.checkpoint_every_n_steps=4"]
PLANNED_STEPS = 96


def _command(root: Path, name: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "attnlab_run.cli", "fit", "--config", CONFIG, f"--run.root={root}",
            f"--run.name={name}", *SMALL, *extra]


def _env(wandb_mode: str = "disabled") -> dict[str, str]:
    return {**os.environ, "WANDB_MODE": wandb_mode, "WANDB_SILENT": "true", "OMP_NUM_THREADS": "1"}


def _step_of(ckpt: Path) -> int:
    return int(torch.load(ckpt, weights_only=True, map_location="cpu")["global_step"])


def _wait_for_progress(proc: subprocess.Popen, ckpt: Path, beyond: int, timeout_s: float = 600) -> None:
    """Until ``ckpt`` holds a step > ``beyond`` (or the process ends)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline and proc.poll() is None:
        try:
            if ckpt.is_file() and _step_of(ckpt) > beyond:
                return
        except (RuntimeError, EOFError, OSError):  # never expected: writes are atomic
            raise AssertionError(f"{ckpt} could not be read while training") from None
        time.sleep(0.05)


def _final_val_loss(run: Path) -> float:
    rows = [r for r in csv.DictReader((run / "metrics.csv").open()) if r.get("val/loss")]
    return float(rows[-1]["val/loss"])


@pytest.mark.slow
def test_sigterm_under_wandb_saves_last_exits_nonzero_and_resumes(tmp_path):
    run = tmp_path / "transformer_reverse" / "pre"
    last = run / "checkpoints" / "last.ckpt"
    proc = subprocess.Popen(_command(tmp_path, "pre"), cwd=REPO, env=_env("offline"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _wait_for_progress(proc, last, beyond=0)
    proc.send_signal(signal.SIGTERM)
    err = proc.communicate(timeout=300)[1]
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert "attnlab: preempted" in err
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "preempted"
    stopped_at = _step_of(last)
    assert 0 < stopped_at < PLANNED_STEPS
    first_ids = {p.name for p in (run / "wandb").glob("offline-run-*")}
    resumed = subprocess.run(_command(tmp_path, "pre", "--ckpt_path=last"), cwd=REPO, env=_env("offline"),
                             capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["global_step"] == PLANNED_STEPS
    assert {p.name for p in (run / "wandb").glob("offline-run-*")} - first_ids, "the resumed process has a new W&B run"


def _fit_in_process(root: Path, name: str, *extra: str) -> None:
    from attnlab_run.cli import main

    main(["fit", "--config", CONFIG, f"--run.root={root}", f"--run.name={name}", *SMALL, *extra])


@pytest.mark.slow
def test_sigkill_at_arbitrary_steps_resumes_to_the_planned_steps_and_loss(tmp_path):
    """Three SIGKILLs at random steps of a subprocess, each followed by ``--ckpt_path last``; the run
    ends with the planned optimizer steps and a final val/loss within noise of an uninterrupted run
    (noise: the spread between two seeds of the uninterrupted run). The references and the last,
    completing resume run in this process to save interpreter start-ups."""
    t0 = time.time()
    _fit_in_process(tmp_path, "whole")
    whole_s = time.time() - t0
    _fit_in_process(tmp_path, "other_seed", "--seed_everything=2")
    rng = random.Random(7)
    run = tmp_path / "transformer_reverse" / "killed"
    last = run / "checkpoints" / "last.ckpt"
    kills: list[int] = []
    t0 = time.time()
    for attempt in range(3):
        extra = ["--ckpt_path=last"] if attempt else []
        proc = subprocess.Popen(_command(tmp_path, "killed", *extra), cwd=REPO, env=_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_for_progress(proc, last, beyond=kills[-1] if kills else 0)
        time.sleep(rng.uniform(0.0, 1.5))  # an arbitrary point: mid-step, mid-save, mid-validation
        assert proc.poll() is None, "the run finished before it could be killed"
        proc.kill()
        proc.wait()
        kills.append(_step_of(last))  # loadable with weights_only: never a torn file
    _fit_in_process(tmp_path, "killed", "--ckpt_path=last")
    killed_s = time.time() - t0
    runs = tmp_path / "transformer_reverse"
    summary = json.loads((run / "summary.json").read_text())
    whole = json.loads((runs / "whole" / "summary.json").read_text())
    loss = {name: _final_val_loss(runs / name) for name in ("whole", "killed", "other_seed")}
    noise = abs(loss["whole"] - loss["other_seed"])
    report = {"last_ckpt_step_at_each_kill": kills, "steps": summary["global_step"], "planned": PLANNED_STEPS,
              "val_loss": loss, "seed_noise": noise, "wall_s_uninterrupted": round(whole_s, 1),
              "wall_s_killed_incl_3_restarts": round(killed_s, 1)}
    print(json.dumps(report))
    assert summary["status"] == "finished" and whole["global_step"] == summary["global_step"] == PLANNED_STEPS
    assert _step_of(last) == PLANNED_STEPS
    assert abs(loss["killed"] - loss["whole"]) <= max(noise, 0.02 * loss["whole"]), report
