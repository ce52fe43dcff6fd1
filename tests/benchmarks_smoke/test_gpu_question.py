"""The GPU section's question row, on a CPU: nvidia-smi parsing, finished-trial counting and the table."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from benchmarks.gpu_question import parse_smi, question_table, run_sweep, trials_of


def test_smi_reading_is_the_first_gpu():
    assert parse_smi("37, 20480\n5, 100\n") == (37.0, 20480.0)
    with pytest.raises(ValueError):
        parse_smi("[N/A], 20480\n")


def test_only_trials_with_a_summary_count(tmp_path: Path):
    for trial, done in (("a", True), ("b", False), ("c", True)):
        (tmp_path / "scaling" / trial).mkdir(parents=True)
        if done:
            (tmp_path / "scaling" / trial / "summary.json").write_text('{"status": "finished"}')
    assert trials_of(tmp_path) == 2


def test_table_marks_the_two_minute_goal():
    row = {"question": "scaling", "jobs": 8, "wall_s": 95.0, "trials": 15, "trials_per_hour": 568.0,
           "gpu_util_mean": 61.0, "gpu_util_peak": 98.0, "gpu_mem_peak_mib": 9000.0}
    table = question_table({"goal_s": 120.0, "rows": [{**row, "goal_met": True}, {**row, "jobs": 1,
                                                                                 "goal_met": False}]})
    assert "| scaling | 8 | 95 s | 15 | 568 | 61% / 98% | 9000 MiB | met |" in table
    assert table.splitlines()[-1].endswith("| not met |")


def test_failed_and_unfinished_trials_do_not_count(tmp_path: Path):
    """A trial that failed, was interrupted or still runs wrote a summary.json too; only finished or diverged
    trials are done (``attnlab_run.rundir.DONE``)."""
    for trial, status in (("a", "finished"), ("b", "failed"), ("c", "diverged"), ("d", "running"),
                          ("e", "interrupted")):
        (tmp_path / "scaling" / trial).mkdir(parents=True)
        (tmp_path / "scaling" / trial / "summary.json").write_text(json.dumps({"status": status}))
    assert trials_of(tmp_path) == 2


def test_a_sweep_past_its_time_limit_is_a_row_not_an_exception(tmp_path: Path):
    """``subprocess.TimeoutExpired`` was uncaught: one slow N lost every row. The sweep's process group is killed
    and the row says it timed out."""
    marker = tmp_path / "child_alive"
    child = f"import time, pathlib; time.sleep(3); pathlib.Path({str(marker)!r}).write_text('x')"
    code = ("import subprocess, sys, time; "
            f"subprocess.Popen([sys.executable, '-c', {child!r}]); time.sleep(30)")
    result = run_sweep([sys.executable, "-c", code], timeout_s=1)
    assert result["timed_out"] and result["returncode"] is None and result["wall_s"] < 10
    time.sleep(4)
    assert not marker.exists(), "the sweep's own trials (its children) must be stopped with it"
