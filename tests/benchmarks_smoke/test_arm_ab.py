"""The before/after timing of the demo arms across two checkouts: its arithmetic and its bad input."""

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
    assert res["floor_s"]["before"]["cpu"] == pytest.approx(5 * 10 / 1e3 * 100)
    assert res["floor_s"]["after"]["cpu"] == pytest.approx(5 * 5 / 1e3 * 100)
    assert len(res["after"]["hard"]["all"]) == 2


def test_two_checkouts_are_required():
    proc = subprocess.run([sys.executable, "-m", "benchmarks.arm_ab", "/tmp", "/tmp"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
