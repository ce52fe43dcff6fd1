"""BLEU (and accuracy) by length: the per-bucket series a figure draws, and the figure files a report writes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from ablations.reports.plots_len import ACC_FAMILIES, BLEU_FAMILIES, arm_series, plot_by_length


def run(arm: str, seed: int, status: str = "finished") -> SimpleNamespace:
    """A run of the bottleneck question: BLEU falls with length without attention, stays with it."""
    slope = 0.05 if arm == "none" else 0.0
    metrics = {f"test/bleu_by_len/len_{lo:03d}_{lo + 4:03d}": 0.3 - slope * i + seed / 100
               for i, lo in enumerate((1, 6, 11))}
    metrics |= {f"test/count_by_len/len_{lo:03d}_{lo + 4:03d}": 100 - 30 * i for i, lo in enumerate((1, 6, 11))}
    return SimpleNamespace(metrics=metrics, params={"model.attention": arm}, status=status)


ARMS = {("none",): [run("none", 1), run("none", 2), run("none", 3, "diverged")],
        ("additive",): [run("additive", 1), run("additive", 2)], ("dot",): [run("dot", 1, "failed")]}
ORDER = [("none",), ("additive",), ("dot",)]


def test_series_average_finished_seeds_per_bucket_and_drop_arms_without_any():
    series = arm_series(ARMS, ORDER, "test/bleu_by_len", [(1, 5), (6, 10), (11, 15)])
    assert list(series) == [("none",), ("additive",)]  # dot has no finished seed
    none = series[("none",)]
    assert [s.n for s in none] == [2, 2, 2]  # the diverged seed is not averaged
    assert [s.mean for s in none] == pytest.approx([0.315, 0.265, 0.215])
    assert [s.mean for s in series[("additive",)]] == pytest.approx([0.315] * 3)


def test_report_figures_go_to_their_own_files(tmp_path: Path):
    bleu = plot_by_length(ARMS, ORDER, label=str, out=tmp_path, families=BLEU_FAMILIES, name="bleu_by_len")
    assert bleu == tmp_path / "bleu_by_len.png" and bleu.stat().st_size > 1000
    # no accuracy-by-length keys in these runs: no accuracy figure, rather than an empty one
    assert plot_by_length(ARMS, ORDER, label=str, out=tmp_path, families=ACC_FAMILIES, name="acc_by_len") is None
