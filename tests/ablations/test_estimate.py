"""The time a sweep or the demo says it will take: one measured demo time quoted everywhere, and a start line,
printed before the first trial, whose estimate is trials × a measured trial time / jobs (issue #44)."""

from __future__ import annotations

import json
from pathlib import Path

from ablations.engine.estimate import (
    DEMO_WALL_S,
    Measured,
    demo_timeout_s,
    demo_trial,
    findings_trial,
    planned_trials,
    start_line,
)

REPO = Path(__file__).parents[2]


def test_one_demo_time_is_quoted_everywhere():
    from ablations.commands import SUMMARIES, demo_parser

    quoted = f"{DEMO_WALL_S:.0f} s"
    assert quoted in (REPO / "README.md").read_text()
    assert quoted in (REPO / "docs" / "sweeps.md").read_text()
    assert quoted in (REPO / "BENCHMARKS.md").read_text().split("`attnlab demo`, warm (the default)")[1][:40]
    assert quoted in demo_parser().format_help().replace("\n", " ").replace("  ", " ")
    assert f"about {DEMO_WALL_S / 60:.0f} min" in SUMMARIES["demo"]


def test_the_demo_estimate_is_its_benchmark_and_its_timeout_leaves_a_slow_cpu_room():
    line = start_line("demo", trials=10, jobs=2, measured=demo_trial())
    assert "about 4 min" in line and "10 trials, 2 at once" in line
    assert demo_timeout_s() >= 3 * 159, "a newcomer's busy CPU ran additive trials in 155-159 s"


def test_a_sweeps_estimate_is_trials_times_a_measured_trial_over_jobs(tmp_path):
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "result.json").write_text(json.dumps({"trials": 15, "trial_wall_s": 900.0,
                                                            "cpus": ["AMD EPYC (family 25)"]}))
    measured = findings_trial("q", tmp_path)
    assert measured == Measured(60.0, "AMD EPYC, 2 cores, docs/findings/q/result.json")
    assert "about 15 min" in start_line("q", trials=15, jobs=1, measured=measured)
    assert "about 8 min" in start_line("q", trials=15, jobs=2, measured=measured)  # ceil(15 / 2) rounds
    assert findings_trial("absent", tmp_path) is None
    assert "no estimate" in start_line("q", trials=15, jobs=1, measured=None)
    assert "1 core left idle: --jobs 2 would use it" in start_line("q", trials=3, jobs=1, measured=None, idle_cores=1)


def test_planned_trials_counts_the_grid_and_the_baselines():
    sweep = {"method": "grid", "parameters": {"a": {"values": [1, 2, 3]}, "b": {"value": 1},
                                              "seed_everything": {"values": [1, 2]}}}
    assert planned_trials(sweep, count=None) == 6
    assert planned_trials(sweep, count=4) == 4
    assert planned_trials(sweep, count=None, baselines=2) == 8
    assert planned_trials({"method": "random", "parameters": {}}, count=None) is None


def test_sweep_says_its_estimate_before_the_first_trial(monkeypatch, capsys):
    import ablations.runner
    from ablations.commands import sweep_main

    seen = []

    def no_trials(plan, **kwargs):
        seen.append(capsys.readouterr().out)
        return []

    monkeypatch.setattr(ablations.runner, "run_sweep", no_trials)
    assert sweep_main(["positions", "--scale", "quick", "--root", "/nonexistent/never-written"]) == 0
    (first,) = seen
    assert first.startswith("positions: 15 trials, 1 at once") and "s a trial measured on" in first, first


def test_sweep_help_quotes_measured_trial_times():
    from ablations.commands import sweep_parser

    text = sweep_parser().format_help()
    assert "well under a minute" not in text and "leaves the other cores" in text.replace("\n", " ").replace("  ", "")
