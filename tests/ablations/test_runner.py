"""The offline runner's mechanics, with a stand-in training program that starts in milliseconds:
every grid point runs once, failures are recorded and the sweep goes on, re-runs skip finished
trials and retry failed ones, --count bounds the trials, jobs run in parallel, timeouts kill."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from ablations.runner import SweepError, load_sweep, make_plan, run_sweep


@pytest.fixture()
def fake_sweep(fake_program: Path) -> dict:
    return {"name": "fake", "program": str(fake_program), "method": "grid",
            "metric": {"name": "val/score", "goal": "maximize"},
            "parameters": {"x": {"values": [1, "bad", 2, "nan"]}, "seed_everything": {"values": [1, 2]},
                           "fixed": {"value": 7}},
            "command": ["${env}", "${interpreter}", "${program}", "fit", "${args}"]}


def _plan(sweep: dict, root: Path, **kw):
    return make_plan(sweep, root=root, scale="full", threads=1, interpreter=sys.executable, **kw)


def test_grid_runs_every_point_records_failures_and_reruns_skip(fake_sweep, tmp_path, capsys):
    root = tmp_path / "runs"
    outcomes = run_sweep(_plan(fake_sweep, root), jobs=2)
    status = {o.trial.name: o.status for o in outcomes}
    assert len(status) == 8
    assert status["seed=1,x=1"] == "finished" and status["seed=2,x=2"] == "finished"
    assert status["seed=1,x=bad"] == "failed" and status["seed=2,x=nan"] == "diverged"
    failed = json.loads((root / "fake" / "seed=1,x=bad" / "trial.json").read_text())
    assert failed["status"] == "failed" and failed["returncode"] == 2
    assert abs(failed["finished"] - time.time()) < 600 and failed["wall_s"] >= 0  # when it ended, for the span
    assert "not allowed" in (root / "fake" / "seed=1,x=bad" / "trial.log").read_text()
    argv = json.loads((root / "fake" / "seed=2,x=1" / "summary.json").read_text())["argv"]
    assert argv[1:] == ["fit", "--fixed=7", "--seed_everything=2", "--x=1", f"--run.root={root.resolve()}",
                        "--run.experiment=fake", "--run.name=seed=2,x=1"]
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 8 and lines[-1].startswith("[8/8] ")

    again = run_sweep(_plan(fake_sweep, root), jobs=1)
    by_name = {o.trial.name: o for o in again}
    assert all(by_name[n].skipped for n, s in status.items() if s in ("finished", "diverged"))
    assert by_name["seed=1,x=bad"].status == "failed" and not by_name["seed=1,x=bad"].skipped
    calls = (root / "fake" / "seed=1,x=1" / "calls").read_text().split()
    assert calls == ["fit"], "a finished trial is not run again"


def test_count_bounds_started_trials_and_continues_next_time(fake_sweep, tmp_path):
    root = tmp_path / "runs"
    first = run_sweep(_plan(fake_sweep, root), count=3)
    assert [o.trial.name for o in first] == ["seed=1,x=1", "seed=1,x=bad", "seed=1,x=2"]  # engine's grid order
    second = run_sweep(_plan(fake_sweep, root), count=2)  # the failed one is retried and counts
    assert [(o.trial.name, o.skipped) for o in second] == [
        ("seed=1,x=1", True), ("seed=1,x=bad", False), ("seed=1,x=2", True), ("seed=1,x=nan", False)]


def test_dry_run_prints_commands_and_runs_nothing(fake_sweep, tmp_path, capsys):
    outcomes = run_sweep(_plan(fake_sweep, tmp_path / "runs"), dry_run=True)
    assert len(outcomes) == 8 and all(o.status == "planned" for o in outcomes)
    assert not (tmp_path / "runs").exists()
    assert "--x=bad --run.root=" in capsys.readouterr().out


def test_random_search_needs_count_and_repeats_its_proposals(fake_sweep, tmp_path):
    sweep = {**fake_sweep, "method": "random",
             "parameters": {"x": {"distribution": "uniform", "min": 0.0, "max": 1.0}, "seed_everything": {"value": 1}}}
    with pytest.raises(SweepError, match="--count"):
        run_sweep(_plan(sweep, tmp_path / "runs"))
    first = run_sweep(_plan(sweep, tmp_path / "runs"), count=2)
    second = run_sweep(_plan(sweep, tmp_path / "runs"), count=1)
    assert [o.trial.name for o in second[:2]] == [o.trial.name for o in first]
    assert [o.skipped for o in second] == [True, True, False]


def _with_test_after_fit(sweep: dict) -> dict:
    command = ["${env}", "${interpreter}", "${program}", "fit", "--run.test_after_fit=true", "${args}"]
    return {**sweep, "command": command}


def test_test_after_fit_comes_from_the_trial_command(fake_sweep, tmp_path):
    fake_sweep["parameters"] = {"x": {"values": [1, "nan"]}, "seed_everything": {"value": 1}}
    outcomes = {o.trial.name: o for o in run_sweep(_plan(_with_test_after_fit(fake_sweep), tmp_path / "runs"))}
    ran = (tmp_path / "runs" / "fake" / "x=1" / "calls").read_text().split()
    assert ran == ["fit", "test"] and outcomes["x=1"].summary_metrics["test/score"] == 1.0
    assert (tmp_path / "runs" / "fake" / "x=nan" / "calls").read_text().split() == ["fit"], "no test after divergence"
    assert "--run.test_after_fit=true" in outcomes["x=1"].trial.command
    plain = run_sweep(_plan(fake_sweep, tmp_path / "plain"))
    assert all("test/score" not in o.summary_metrics for o in plain), "the runner adds no test of its own"


def test_failed_test_after_fit_fails_the_trial_and_is_retried(fake_sweep, tmp_path):
    fake_sweep["parameters"] = {"x": {"values": [1]}}
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "fail-tests").touch()
    plan = _plan(_with_test_after_fit(fake_sweep), tmp_path / "runs")
    assert [o.status for o in run_sweep(plan)] == ["failed"]
    (tmp_path / "runs" / "fail-tests").unlink()
    again = run_sweep(plan)
    assert [(o.status, o.skipped) for o in again] == [("finished", False)]


def test_timeout_stops_a_trial_and_records_it(fake_sweep, tmp_path):
    fake_sweep["parameters"] = {"x": {"values": ["slow", 1]}}
    outcomes = run_sweep(_plan(fake_sweep, tmp_path / "runs"), timeout_s=1.0)
    assert [(o.trial.name, o.status) for o in outcomes] == [("x=slow", "failed"), ("x=1", "finished")]


def test_schema_violation_is_refused(fake_sweep, tmp_path):
    with pytest.raises(SweepError, match="schema"):
        _plan({**fake_sweep, "method": "sideways"}, tmp_path)


def test_load_sweep_defaults_name_to_file_stem(tmp_path):
    path = tmp_path / "my_question.yaml"
    path.write_text("method: grid\nparameters: {x: {values: [1]}}\n")
    assert load_sweep(path)["name"] == "my_question"


def test_eta_from_the_trials_run_so_far():
    from ablations.runner import Outcome, Trial, eta_seconds, progress_line

    trial = Trial(name="x=1", params={}, run_dir=Path("r"), command=[])
    done = [Outcome(trial=trial, status="finished", wall_s=30.0), Outcome(trial=trial, status="finished", wall_s=50.0),
            Outcome(trial=trial, status="skipped (finished)", skipped=True)]
    assert eta_seconds(done, total=7, jobs=2) == 40.0 * 4 / 2
    assert eta_seconds(done, total=None, jobs=1) is None
    assert progress_line(3, 7, done[0], None, eta_s=600).endswith("30s  ETA 10 min")


def test_quiet_sweep_prints_only_the_totals(fake_sweep, tmp_path, capsys):
    import yaml

    from ablations.commands import sweep_main

    path = tmp_path / "fake.yaml"
    path.write_text(yaml.safe_dump({**fake_sweep, "parameters": {"x": {"values": [1, 2]}}}))
    assert sweep_main([str(path), "--root", str(tmp_path / "runs"), "--quiet"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert not any(line.startswith("[") for line in out) and "2 finished" in out[0]


def test_the_engine_sees_each_trials_metrics(fake_sweep, tmp_path):
    """Bayes search reads ``summary_metrics``; it must arrive whichever sweeps release pip chose (0.2.0 under
    pydantic 2 ignores that field's own name and keeps only its alias)."""
    from ablations.runner import _engine_record

    trial = _plan(fake_sweep, tmp_path / "runs").trial({"x": 1, "seed_everything": 1, "fixed": 7})
    record = _engine_record(trial, "finished", {"val/score": 0.75})
    assert record.summary_metrics == {"val/score": 0.75} and record.config["x"] == {"value": 1}


def test_a_trials_progress_bar_redraws_every_50_steps_unless_the_user_chose(fake_sweep, tmp_path, monkeypatch):
    from lightning.pytorch.callbacks import TQDMProgressBar

    monkeypatch.delenv("TQDM_MINITERS", raising=False)
    env = _plan(fake_sweep, tmp_path).env
    assert env["TQDM_MINITERS"] == "50"
    monkeypatch.setenv("TQDM_MINITERS", env["TQDM_MINITERS"])
    assert TQDMProgressBar().refresh_rate == 50, "Lightning's bar reads the variable the runner sets"
    monkeypatch.setenv("TQDM_MINITERS", "7")
    assert _plan(fake_sweep, tmp_path).env["TQDM_MINITERS"] == "7", "a value the user set is kept"

