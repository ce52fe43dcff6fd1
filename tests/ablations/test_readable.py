"""The report at a terminal (issue #44): at most 100 columns, step counts in whole steps inside the steps a run took,
per-length accuracy printed, and an arm that learned little named."""

from __future__ import annotations

from types import SimpleNamespace

from ablations.reports.readable import WIDTH, count_cell, learned_little, length_rows, split_table, terminal_text
from ablations.verdicts.stats import stat


def test_a_wide_table_splits_into_groups_that_each_start_with_the_arm():
    header = ["arm", "n", *(f"metric/{i}" for i in range(12))]
    rows = [[f"arm{a}", "3/3", *("0.1234 ± 0.0123 [0.1000, 0.1500]" for _ in range(12))] for a in range(3)]
    text = split_table(header, rows)
    lines = text.splitlines()
    assert max(map(len, lines)) <= WIDTH
    assert all(f"metric/{i}" in text for i in range(12))
    blocks = text.split("\n\n")
    assert len(blocks) > 1 and all(b.splitlines()[2].startswith("arm0 ") for b in blocks)


def test_step_counts_are_whole_steps_clipped_to_the_steps_a_run_took():
    s = stat([150.0, 1281.0, 1281.0])  # two seeds never reached the target: their last step + 1
    cell = count_cell(s, 1280)
    assert "." not in cell and cell.endswith("(clipped)") and "[0, 1281]" in cell, cell
    # no seed reached it (positions' confirmatory report read "1129 ± 0 [1129, 1128] (clipped)"): lo ≤ mean ≤ hi
    assert count_cell(stat([1129.0] * 20), 1128) == "1129 ± 0 [1129, 1129]"
    assert count_cell(stat([200.0, 210.0, 205.0]), 1280) == "205 ± 5 [193, 217]"
    assert count_cell(stat([]), 10) == "—"


def test_an_arm_far_below_the_best_is_named_and_only_for_a_bounded_higher_is_better_metric():
    means = {"sinusoidal": 0.381, "alibi": 0.018, "none": 0.009, "rope": 0.278}
    lines = learned_little("test/exact_match", "maximize", (0.0, 1.0), means)
    assert [line.split()[0] for line in lines] == ["alibi", "none"] and "sinusoidal: 0.381" in lines[0]
    assert learned_little("val/loss", "minimize", (0.0, float("inf")), {"a": 1.0, "b": 0.01}) == []


def test_per_length_accuracy_reaches_the_terminal():
    def run(acc: float) -> SimpleNamespace:
        return SimpleNamespace(status="finished", metrics={"val/acc_by_len/len_001_005": acc,
                                                           "val/acc_by_len/len_011_015": acc / 2})

    arms = {("none",): [run(0.9), run(0.8)], ("additive",): [run(1.0)]}
    header, rows = length_rows("val/exact_match", arms, list(arms), label=lambda a: a[0],
                               value=lambda r, k: r.metrics[k])
    assert header == ["arm", "len 1-5", "len 11-15"] and rows[0] == ["none", "0.850", "0.425"]
    text = terminal_text(["arm", "n"], [["none", "2/2"]], (header, rows), ["x " * 80])
    assert "len 11-15" in text and max(map(len, text.splitlines())) <= WIDTH
