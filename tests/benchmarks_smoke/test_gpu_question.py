"""The GPU section's question row, on a CPU: nvidia-smi parsing, finished-trial counting and the table."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.gpu_question import parse_smi, question_table, trials_of


def test_smi_reading_is_the_first_gpu():
    assert parse_smi("37, 20480\n5, 100\n") == (37.0, 20480.0)
    with pytest.raises(ValueError):
        parse_smi("[N/A], 20480\n")


def test_only_trials_with_a_summary_count(tmp_path: Path):
    for trial, done in (("a", True), ("b", False), ("c", True)):
        (tmp_path / "scaling" / trial).mkdir(parents=True)
        if done:
            (tmp_path / "scaling" / trial / "summary.json").write_text("{}")
    assert trials_of(tmp_path) == 2


def test_table_marks_the_two_minute_goal():
    row = {"question": "scaling", "jobs": 8, "wall_s": 95.0, "trials": 15, "trials_per_hour": 568.0,
           "gpu_util_mean": 61.0, "gpu_util_peak": 98.0, "gpu_mem_peak_mib": 9000.0}
    table = question_table({"goal_s": 120.0, "rows": [{**row, "goal_met": True}, {**row, "jobs": 1,
                                                                                 "goal_met": False}]})
    assert "| scaling | 8 | 95 s | 15 | 568 | 61% / 98% | 9000 MiB | met |" in table
    assert table.splitlines()[-1].endswith("| not met |")
