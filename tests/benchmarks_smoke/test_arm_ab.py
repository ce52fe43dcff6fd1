"""The before/after timing of the demo arms across two checkouts: its arithmetic, its worker and its bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import benchmarks.arm_ab as ab


def test_floor_is_steps_times_median_over_seeds_per_job(monkeypatch):
    order = []

    def fake(tree: Path, arm: str) -> dict:
        order.append((str(tree), arm))
        base = 10.0 if str(tree) == "before" else 5.0
        return {"arm": arm, "wall_ms": base + len(order) % 2, "cpu_ms": base, "steps": 100}

    monkeypatch.setattr(ab, "_time", fake)
    res = ab.compare(Path("before"), Path("after"), rounds=2, seeds=2, jobs=2)
    assert order[:2] == [("before", "none"), ("after", "none")]  # interleaved arm by arm
    arms = len(res["arms"])  # the demo's: none, additive, hard
    assert arms == 3 and [a for _, a in order[::2][:arms]] == res["arms"]
    assert res["floor_s"]["before"]["cpu"] == pytest.approx(arms * 10 / 1e3 * 100)
    assert res["floor_s"]["after"]["cpu"] == pytest.approx(arms * 5 / 1e3 * 100)
    assert len(res["after"]["hard"]["all"]) == 2


def test_the_floor_counts_the_seeds_the_demo_trains(monkeypatch):
    """Without ``seeds`` the floor is the demo's own: as many seeds an arm as its plan gives it (five since the demo
    moved to its question's confirmatory seeds), not the two of the demo before it."""
    from benchmarks.demo_floor import demo_seed_count

    monkeypatch.setattr(ab, "_time", lambda tree, arm: {"arm": arm, "wall_ms": 10.0, "cpu_ms": 10.0, "steps": 100})
    res = ab.compare(Path("before"), Path("after"), rounds=1)
    seeds = demo_seed_count()
    assert res["seeds"] == seeds == 5
    assert res["floor_s"]["before"]["cpu"] == pytest.approx(len(res["arms"]) * 10 / 1e3 * 100 * seeds / 2)


def test_two_checkouts_are_required():
    proc = subprocess.run([sys.executable, "-m", "benchmarks.arm_ab", "/tmp", "/tmp"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


def test_the_arms_are_the_demo_plans(tmp_path):
    """The arms timed are the demo's own (its judged arms), so every arm the A/B asks for has a trial to build."""
    from ablations.commands import demo_plan
    from benchmarks.demo_floor import plan_grid

    grid = plan_grid(demo_plan(tmp_path, seeds=1))
    assert list(ab.demo_arms()) == [p["model.attention"] for p in grid]


def test_the_worker_times_one_demo_arm_for_real_in_a_fresh_interpreter():
    """The timed process as ``compare`` starts it (this file loaded by path, ``PYTHONPATH`` at this checkout),
    unpatched, on the demo's first arm: a step in milliseconds of wall and CPU time, and the arm's steps."""
    arm = ab.demo_arms()[0]
    res = ab._time(Path(ab.__file__).resolve().parents[1], arm)
    assert res["arm"] == arm and 0 < res["wall_ms"] < 5000 and 0 < res["cpu_ms"] < 5000
    assert res["steps"] == 20 * 64  # QUICK_RECURRENT: 20 epochs of 4096 examples in batches of 64


def test_an_arm_the_demo_does_not_train_is_one_clear_error():
    import torch

    threads = torch.get_num_threads()
    try:
        with pytest.raises(ValueError, match="not an arm of this checkout's demo"):
            ab.worker("no-such-arm", timed=1, warmup=0)
    finally:
        torch.set_num_threads(threads)  # the worker sets one thread, as a demo trial runs
