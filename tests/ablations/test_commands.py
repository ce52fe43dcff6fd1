"""``attnlab sweep | report | demo`` argument handling and exit codes."""

from __future__ import annotations

import pytest
import yaml

from ablations.commands import demo_main, report_main, sweep_main
from ablations.reports.derived import derive


def test_sweep_help_explains_the_options(capsys):
    with pytest.raises(SystemExit) as exit_:
        sweep_main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for option in ("--count", "--dry-run", "--scale", "--root", "--jobs", "wandb agent"):
        assert option in out


def test_missing_sweep_is_a_usage_error(capsys):
    assert sweep_main(["no_such_sweep"]) == 2
    assert "no sweep file" in capsys.readouterr().err


def test_dry_run_by_question_name_prints_quick_commands(capsys, tmp_path):
    assert sweep_main(["norm", "--dry-run", "--count", "2", "--scale", "quick", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    trial = "attnlab/cli.py fit --config ablations/configs/transformer_reverse.yaml --run.experiment=norm"
    assert out.count(trial) == 2
    assert "--trainer.max_epochs=3" in out and "--run.experiment=norm" in out and "2 planned" in out
    assert not any(tmp_path.iterdir())


def test_sweep_exit_code_reports_failed_trials(tmp_path, fake_program, capsys):
    sweep = {"name": "fake", "program": str(fake_program), "method": "grid",
             "metric": {"name": "val/score", "goal": "maximize"}, "parameters": {"x": {"values": [1, "bad"]}},
             "command": ["${env}", "${interpreter}", "${program}", "fit", "${args}"]}
    path = tmp_path / "fake.yaml"
    path.write_text(yaml.safe_dump(sweep))
    assert sweep_main([str(path), "--root", str(tmp_path / "runs")]) == 1
    out = capsys.readouterr().out
    assert "[1/2] x=1  finished" in out and "[2/2] x=bad  failed (exit 2)" in out and "1 failed" in out
    assert sweep_main([str(path), "--root", str(tmp_path / "runs"), "--report"]) == 1
    assert "report: " in capsys.readouterr().out
    assert report_main([str(tmp_path / "runs")]) == 0


def test_demo_help(capsys):
    with pytest.raises(SystemExit):
        demo_main(["--help"])
    assert "attention_bottleneck" in capsys.readouterr().out


def _mean_over_seeds(runs, arm: str, key: str) -> float:
    values = [derive(r)[key] for r in runs if r.params.get("model.attention") == arm and r.status == "finished"]
    assert values, f"no finished {arm} run with {key}"
    return sum(values) / len(values)


@pytest.mark.slow
@pytest.mark.demo
def test_demo_shows_the_bottleneck(tmp_path, capsys):
    """Issue #12's acceptance: at the demo's budget soft attention (additive, the plan's judged arm) stays within
    0.15 exact match of its shortest length bucket at the longest training bucket, while without attention exact
    match falls to near 0 there (measured 0.00); issue #42's: the headline is the main claim's answer, with the
    hard-attention check beneath it. Its wall time is a benchmark
    (``python -m benchmarks run --sections time``), not an assertion: it depends on the CPU kind (425 s on an
    AVX-512 EPYC, 850 s on an AVX2-only one). CI leaves this test out (``-m "slow and not demo"``)."""
    from ablations.reports.results import load_experiment

    assert demo_main(["--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "attention=additive" in out and "report" in out
    assert "\nHeadline: supported\n" in out and "Secondary checks (listed, not part of the headline):" in out, out
    assert all(len(line) <= 100 for line in out[out.index("Headline: "):].splitlines())
    assert (tmp_path / "attention_bottleneck" / "report.md").is_file()
    runs = load_experiment(tmp_path / "attention_bottleneck")
    drop = _mean_over_seeds(runs, "additive", "val/len_drop/acc_by_len")
    assert drop <= 0.15, f"soft attention falls with length: shortest - longest bucket {drop:.3f}"
    longest = _mean_over_seeds(runs, "none", "val/acc_by_len/len_011_015")
    assert longest <= 0.1, f"without attention exact match at lengths 11-15 is {longest:.3f}, not near 0"


def test_dispatch_leaves_lightning_subcommands_alone(capsys):
    from ablations.commands import dispatch

    assert dispatch(["fit", "--config", "x.yaml"]) is None and dispatch([]) is None
    assert dispatch(["sweep", "no_such_sweep"]) == 2


def test_long_commands_write_their_progress_lines_through_to_a_redirected_log(monkeypatch):
    """``nohup attnlab findings > log``: the progress lines must not sit in Python's block buffer."""
    import io
    import sys

    from attnlab.cli import _line_buffered

    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8")  # what a redirected stdout is: not line buffered
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))
    _line_buffered()
    print("findings: 1/205 trials")
    assert raw.getvalue() == b"findings: 1/205 trials\n"
