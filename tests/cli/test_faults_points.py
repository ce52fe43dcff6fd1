"""#24: a run stopped by SIGTERM, SIGINT, SIGUSR1 or SIGKILL at any point — mid-epoch, an epoch's last
batch, during validation, while a checkpoint is written — and resumed with ``--ckpt_path last`` makes
exactly the planned optimizer steps and ends with the scheduler step and the weights (bit-exact) of
the same run uninterrupted.

The signal is sent by the process itself at an exact step and phase
(:class:`attnlab_run.fault_injection.SignalAt`, added with ``--trainer.callbacks+=``), never after a
sleep. SIGTERM / SIGINT / SIGUSR1 run in this process (the handlers are real); SIGKILL needs a child
process. The full grid is ``-m slow``; the default suite keeps one case per point and per signal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from attnlab_run.cli import main

REPO = Path(__file__).parents[2]
CONFIG = str(REPO / "ablations" / "configs" / "transformer_reverse.yaml")
EPOCH = 4  # 32 examples / batch 8: 4 optimizer steps per epoch, 2 epochs
PLANNED = 2 * EPOCH
TINY = ["--data.init_args.train_size=32", "--data.init_args.val_size=8", "--data.init_args.test_size=8",
        "--data.init_args.batch_size=8", "--model.init_args.d_model=16", "--model.init_args.d_ff=32",
        "--model.init_args.encoder_layers=1", "--model.init_args.decoder_layers=1",
        "--trainer.enable_progress_bar=false", "--trainer.max_epochs=2", f"--trainer.max_steps={PLANNED}",
        "--trainer.log_every_n_steps=1",
        "--run.figure_drawings=1"]
# (phase, step): the points of #24
POINTS = {"mid_epoch": ("batch", EPOCH // 2), "last_batch": ("batch", EPOCH),
          "validation": ("validation", EPOCH), "checkpoint_write": ("checkpoint", EPOCH)}
SIGNALS = {"SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT, "SIGUSR1": signal.SIGUSR1}
DEFAULT_SUITE = {("SIGTERM", p) for p in POINTS} | {("SIGINT", "last_batch"), ("SIGUSR1", "validation")}


def _args(root: Path, name: str, *extra: str) -> list[str]:
    return ["fit", "--config", CONFIG, f"--run.root={root}", f"--run.name={name}", *TINY, *extra]


def _inject(phase: str, step: int, sig: str) -> str:
    spec = {"class_path": "attnlab_run.fault_injection.SignalAt",
            "init_args": {"step": step, "phase": phase, "signal": sig}}
    return f"--trainer.callbacks+={json.dumps(spec)}"


def _final(run: Path) -> dict[str, Any]:
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    summary = json.loads((run / "summary.json").read_text())
    return {"step": ckpt["global_step"], "sched": ckpt["lr_schedulers"][0]["last_epoch"],
            "weights": ckpt["state_dict"], "status": summary["status"], "summary_step": summary["global_step"]}


def _assert_same_as_uninterrupted(run: Path, whole: dict[str, Any]) -> None:
    got = _final(run)
    assert (got["status"], got["summary_step"], got["step"], got["sched"]) == ("finished", PLANNED, PLANNED,
                                                                                 whole["sched"])
    for key, value in whole["weights"].items():
        assert torch.equal(value, got["weights"][key]), key


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("whole")
    main(_args(root, "whole"))
    ref = _final(root / "transformer_reverse" / "whole")
    assert ref["step"] == PLANNED and ref["sched"] == PLANNED
    return ref


def _cases(kind: str) -> list[Any]:
    return [pytest.param(s, p, id=f"{s}-{p}",
                         marks=() if kind == "default" and (s, p) in DEFAULT_SUITE else pytest.mark.slow)
            for s in SIGNALS for p in POINTS]


@pytest.mark.parametrize(("sig", "point"), _cases("default"))
def test_a_signal_at_any_point_resumes_to_the_uninterrupted_run(tmp_path, capsys, whole, sig, point):
    phase, step = POINTS[point]
    found = signal.getsignal(SIGNALS[sig])  # what the fit must put back (another test may have left its own)
    with pytest.raises(SystemExit) as stopped:
        main(_args(tmp_path, "r", _inject(phase, step, sig.removeprefix("SIG"))))
    assert stopped.value.code == 128 + SIGNALS[sig]
    assert "attnlab: preempted" in capsys.readouterr().err
    run = tmp_path / "transformer_reverse" / "r"
    stopped_at = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["global_step"]
    assert step <= stopped_at < PLANNED, "stopped at the first safe point after the signal"
    assert json.loads((run / "summary.json").read_text())["status"] == "preempted"
    assert signal.getsignal(SIGNALS[sig]) == found, "handlers restored"
    main(_args(tmp_path, "r", "--ckpt_path=last"))
    _assert_same_as_uninterrupted(run, whole)


def _child(root: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, "-m", "attnlab_run.cli", *_args(root, "k", *extra)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("point", [pytest.param(p, marks=() if p == "checkpoint_write" else pytest.mark.slow)
                                   for p in POINTS])
def test_sigkill_at_any_point_resumes_to_the_uninterrupted_run(tmp_path, whole, point):
    """SIGKILL saves nothing: the resume starts from the last ``last.ckpt`` (the end of epoch 1: the
    points are taken in epoch 2) and replays the lost steps with the same data and random draws."""
    phase, step = POINTS[point]
    killed = _child(tmp_path, _inject(phase, step + EPOCH, "KILL"))
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    run = tmp_path / "transformer_reverse" / "k"
    assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == EPOCH
    leftovers = [p.name for p in (run / "checkpoints").iterdir() if p.suffix != ".ckpt"]
    if phase == "checkpoint":
        assert leftovers, "the kill came in the middle of a write: its temporary file is left behind"
    main(_args(tmp_path, "k", "--ckpt_path=last"))
    _assert_same_as_uninterrupted(run, whole)
