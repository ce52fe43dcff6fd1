"""``attnlab findings`` on a tiny question set whose trials are already finished (fake run directories in
the runner's trial names): nothing trains, every trial is skipped (resumability), the progress line
counts them, and the README has its header, one row per claim and a section with figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_report import ACC, fake_run

from ablations.catalog.questions import QUESTIONS
from ablations.findings import Progress, findings_main
from ablations.runner import Outcome, Trial

SEEDS = (1, 2, 3, 4, 5)  # sweeps/scaling.yaml
TRIALS = len(SEEDS) * len(ACC)


def _finished_scaling(root: Path) -> None:
    exp = root / "scaling"
    for scale, acc in ACC.items():
        for seed in SEEDS:
            fake_run(exp, scale, seed, acc=acc)


def test_findings_skips_finished_trials_and_writes_the_readme(tmp_path: Path, capsys):
    root, out = tmp_path / "runs", tmp_path / "docs"
    _finished_scaling(root)
    assert findings_main(["--root", str(root), "--out", str(out), "--only", "scaling"]) == 0
    printed = capsys.readouterr().out
    assert f"findings: {TRIALS}/{TRIALS} trials" in printed and printed.count("skipped (finished)") == TRIALS
    assert printed.count(" ETA ") == TRIALS, "a progress line after every trial"
    text = (out / "README.md").read_text()
    assert "- **Command:** `attnlab findings --root" in text and "- **CPU:** " in text and "- **Wall time:** " in text
    row = next(line for line in text.splitlines() if line.startswith("| [scaling](#scaling)"))
    mean = ACC["sqrt_dk"] + sum(SEEDS) / len(SEEDS) / 100  # fake_run adds seed / 100
    assert "Vaswani" in row and "**pending: confirmatory seeds not run** | supported |" in row
    assert f"sqrt_dk {mean:.3f} ± 0.016" in row
    assert "## scaling" in text and "![scaling curves](scaling/curves.png)" in text
    assert (out / "scaling" / "report.md").is_file() and (out / "scaling" / "curves.png").stat().st_size > 1000
    assert "Full (GPU) preset" in text and "Quick preset" in text


def test_findings_only_refreshes_its_question_and_keeps_the_others(tmp_path: Path):
    """--only X rewrites X's row and section from X's runs; questions reported earlier keep theirs."""
    root, out = tmp_path / "runs", tmp_path / "docs"
    _finished_scaling(root)
    assert findings_main(["--root", str(root), "--out", str(out), "--only", "scaling", "--report-only"]) == 0
    saved = json.loads((out / "scaling" / "result.json").read_text())
    assert saved["trials"] == TRIALS and saved["cpus"] and saved["written"]
    saved["key_numbers"] = "kept from an earlier run"
    (out / "scaling" / "result.json").write_text(json.dumps(saved))
    heads = root / "heads"
    for seed in (1, 2, 3):
        fake_run(heads, "sqrt_dk", seed, acc=0.5)
    assert findings_main(["--root", str(root), "--out", str(out), "--only", "heads", "--report-only"]) == 0
    text = (out / "README.md").read_text()
    assert "kept from an earlier run" in text, "an earlier question's row survives a run of another"
    assert "| [heads](#heads)" in text and "## heads" in text and "## scaling" in text
    assert f"- **Runs:** {TRIALS} trials at commit" in text and "| norm |" in text and "| not run | not run |" in text
    assert saved["quick"] == list(QUESTIONS["scaling"].quick), "the preset the runs were made with is kept"


def test_findings_dry_run_lists_what_is_left(tmp_path: Path, capsys):
    root = tmp_path / "runs"
    _finished_scaling(root)
    (root / "scaling" / "attn_scale=dk,seed=2" / "summary.json").unlink()
    assert findings_main(["--root", str(root), "--out", str(tmp_path / "docs"), "--only", "scaling", "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("skipped (finished)") == TRIALS - 1 and "attn_scale=dk,seed=2\n" in printed
    assert not (tmp_path / "docs" / "README.md").exists()


def test_findings_without_runs_and_bad_input(tmp_path: Path, capsys):
    assert findings_main(["--root", str(tmp_path / "none"), "--out", str(tmp_path / "d"), "--report-only"]) == 1
    assert findings_main(["--jobs", "0"]) == 2
    assert "at least 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        findings_main(["--only", "no_such_question"])


def test_progress_eta_uses_the_trials_that_ran(tmp_path: Path):
    trial = Trial(name="t", params={}, run_dir=tmp_path, command=[])
    progress = Progress(total=10, jobs=2)
    progress.update(Outcome(trial=trial, status="skipped (finished)", skipped=True))
    assert progress.eta_s() is None and "1/10 trials" in progress.line()
    progress.update(Outcome(trial=trial, status="finished", wall_s=100.0))
    progress.update(Outcome(trial=trial, status="finished", wall_s=60.0))
    assert progress.eta_s() == pytest.approx(7 * 80.0 / 2)  # 7 left, 80 s each, 2 at once


def test_the_readme_says_when_the_trials_ran(tmp_path: Path):
    """The header spans the first trial's start to the last one's end, from the runner's trial.json records,
    so a report rebuilt later (``--report-only``) still shows how long the run took."""
    root, out = tmp_path / "runs", tmp_path / "docs"
    _finished_scaling(root)
    runs = sorted(p for p in (root / "scaling").iterdir() if p.is_dir())
    t0 = 1_764_583_200.0  # 10:00 UTC, the day the lines below read
    for i, run in enumerate(runs):
        (run / "trial.json").write_text(json.dumps({"status": "finished", "wall_s": 50.0, "finished": t0 + 10 * i}))
    assert findings_main(["--root", str(root), "--out", str(out), "--only", "scaling", "--report-only"]) == 0
    span = 50 + 10 * (len(runs) - 1)
    line = next(x for x in (out / "README.md").read_text().splitlines() if x.startswith("- **Trials ran:**"))
    assert "2025-12-01 09:59 UTC to 2025-12-01 10:" in line and f"{span // 60}:{span % 60:02d} from the first" in line
    assert f"({len(runs)} trials of 1 questions" in line


def test_a_preset_changed_after_its_verdict_says_so(tmp_path: Path, monkeypatch):
    """A question whose quick preset changed after its verdict was seen says so in the README and its report."""
    from dataclasses import replace

    note = "train_size 12000 added for time alone, after the verdict at the whole split"
    monkeypatch.setitem(QUESTIONS, "scaling", replace(QUESTIONS["scaling"], preset_changed=note))
    root, out = tmp_path / "runs", tmp_path / "docs"
    _finished_scaling(root)
    assert findings_main(["--root", str(root), "--out", str(out), "--only", "scaling", "--report-only"]) == 0
    line = f"- **Preset changed after its verdict was seen:** {note}"
    assert line in (out / "README.md").read_text() and line in (out / "scaling" / "report.md").read_text()
    monkeypatch.setitem(QUESTIONS, "scaling", replace(QUESTIONS["scaling"], preset_changed=""))
    assert findings_main(["--root", str(root), "--out", str(out), "--only", "scaling", "--report-only"]) == 0
    assert "Preset changed" not in (out / "README.md").read_text() + (out / "scaling" / "report.md").read_text()


def test_a_question_rerun_days_later_is_its_own_sitting_not_days_of_running():
    """One span over a set refreshed with --only would count the days between the sittings as running time."""
    from ablations.reports.findings_readme import _span_line
    from ablations.reports.record import QuestionResult

    def result(name: str, start: float, minutes: float, trials: int) -> QuestionResult:
        return QuestionResult(name=name, verdict="", key_numbers="", report="", figures=[],
                              trials_span=[start, start + 60 * minutes], trials=trials)

    t0 = 1_764_583_200.0  # 10:00 UTC, the day the lines below read
    together = [result("a", t0, 30, 10), result("b", t0 + 60 * 31, 20, 5)]  # back to back: one sitting
    (line,) = _span_line(together)
    assert "2025-12-01 10:00 UTC to 2025-12-01 10:51 UTC: 0:51:00 from the first" in line
    assert "(15 trials of 2 questions" in line and "sittings" not in line
    later = [*together, result("c", t0 + 4 * 86_400, 17, 15)]  # rerun four days later
    (line,) = _span_line(later)
    assert "in 2 sittings" in line and "0:51:00 (15 trials of 2 questions)" in line
    assert "2025-12-05 10:00 UTC to 2025-12-05 10:17 UTC: 0:17:00 (15 trials of 1 questions)" in line
    assert "96:" not in line, "no span across the days between"
