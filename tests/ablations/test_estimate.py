"""The time a sweep or the demo says it will take: one measured demo time quoted everywhere, and a start line,
printed before the first trial, whose estimate is trials × a measured trial time / jobs (issue #44)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ablations.catalog.questions import QUESTIONS
from ablations.engine.estimate import (
    DEMO_BENCH_S,
    DEMO_BENCH_TRIALS,
    DEMO_JOBS,
    DEMO_TRIALS,
    Measured,
    demo_estimate_s,
    demo_quote,
    demo_timeout_s,
    demo_trial,
    findings_trial,
    minutes,
    planned_trials,
    start_line,
)

REPO = Path(__file__).parents[2]
BENCHMARKS_DEMO_ROW = (REPO / "BENCHMARKS.md").read_text().split("`attnlab demo`, warm (the default)")[1][:40]


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_one_demo_time_is_quoted_everywhere():
    from ablations.commands import SUMMARIES, demo_parser

    quote = demo_quote()
    assert quote in _flat((REPO / "README.md").read_text())
    assert quote in _flat((REPO / "docs" / "sweeps.md").read_text().replace("#", ""))
    assert f"{DEMO_BENCH_S:.0f} s" in BENCHMARKS_DEMO_ROW
    assert quote in _flat(demo_parser().format_help()) and quote in SUMMARIES["demo"]
    assert DEMO_BENCH_TRIALS == DEMO_TRIALS, "the quoted benchmark must have run the default demo's trials"
    assert f"{DEMO_TRIALS} trials" in quote and "measured" in quote


def test_the_demo_estimate_counts_the_trials_the_default_demo_plans(tmp_path):
    """DEMO_TRIALS is the default demo's own plan (judged arms × its seeds), not a number set beside it."""
    from ablations.commands import DEMO_QUESTION, demo_plan
    from ablations.reports.demo_lines import demo_seeds

    seeds, _ = demo_seeds(QUESTIONS[DEMO_QUESTION])
    trials = planned_trials(demo_plan(tmp_path, seeds=seeds).sweep, count=None)
    assert trials == DEMO_TRIALS, f"the default demo plans {trials} trials; the quoted estimate assumes {DEMO_TRIALS}"
    line = start_line("demo", trials=trials, jobs=DEMO_JOBS, measured=demo_trial())
    assert f"about {minutes(demo_estimate_s())}" in line
    assert math.isclose(demo_estimate_s(), math.ceil(trials / DEMO_JOBS) * DEMO_BENCH_S * DEMO_JOBS / DEMO_BENCH_TRIALS)
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
