"""``attnlab sweep --jobs N`` spreads trials over the visible GPUs (issue #43, item 9): each trial process sees
one GPU (``CUDA_VISIBLE_DEVICES``), the one the fewest live trials use, so two jobs on a two-GPU machine never
share a GPU while the other idles. Simulated: the sweep's environment names GPUs 3 and 5 (or nvidia-smi is a
stand-in listing two), and each stand-in trial records what it sees."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from ablations.engine.trialrun import visible_gpus
from ablations.runner import make_plan, run_sweep

PROGRAM = '''
import os, sys, time, json
from pathlib import Path
args = dict(a[2:].split("=", 1) for a in sys.argv[2:] if a.startswith("--"))
run = Path(args["run.root"]) / args["run.experiment"] / args["run.name"]
run.mkdir(parents=True, exist_ok=True)
(run / "gpu").write_text(os.environ.get("CUDA_VISIBLE_DEVICES", "all"))
time.sleep(0.5)
(run / "summary.json").write_text(json.dumps({"status": "finished", "metrics": {"val/score": 1.0}}))
'''


def sweep(tmp_path: Path) -> dict:
    program = tmp_path / "gpu_program.py"
    program.write_text(PROGRAM)
    return {"name": "gpus", "program": str(program), "method": "grid", "metric": {"name": "val/score"},
            "parameters": {"x": {"values": [1, 2, 3, 4]}},
            "command": ["${env}", "${interpreter}", "${program}", "fit", "${args}"]}


def seen(tmp_path: Path, jobs: int) -> list[str]:
    plan = make_plan(sweep(tmp_path), root=tmp_path / "runs", scale="full", threads=1, interpreter=sys.executable,
                     warm=False)
    outcomes = run_sweep(plan, jobs=jobs, echo=lambda line: None)
    assert [o.status for o in outcomes] == ["finished"] * 4
    return [(o.trial.run_dir / "gpu").read_text() for o in outcomes]


def test_jobs_spread_trials_over_the_visible_gpus(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    gpus = seen(tmp_path, jobs=2)
    assert set(gpus) == {"3", "5"} and gpus.count("3") == gpus.count("5") == 2, gpus


def test_one_job_keeps_every_gpu(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert seen(tmp_path, jobs=1) == ["3,5"] * 4


@pytest.mark.parametrize(("listed", "expected"), [("0,1,2", ["0", "1", "2"]), ("1,-1,2", ["1"]), ("", [])])
def test_visible_gpus_from_cuda_visible_devices(listed: str, expected: list[str]) -> None:
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": listed}) == expected


def test_visible_gpus_counted_by_nvidia_smi(tmp_path, monkeypatch) -> None:
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 (UUID: a)'\necho 'GPU 1: NVIDIA H100 (UUID: b)'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
    assert visible_gpus({}) == ["0", "1"]
