"""``attnlab findings --replicate``: a disjoint seed set, its own folders, and the README's replicated column
(fake finished runs, as in test_findings: nothing trains)."""

from __future__ import annotations

from pathlib import Path

from test_report import ACC, fake_run

from ablations.findings import findings_main
from ablations.verdicts.replication import FIRST_SEED, SUBDIR, folders, replicated, seed_values

SWEEP = {"parameters": {"seed_everything": {"values": [1, 2, 3, 4, 5]}}}  # sweeps/scaling.yaml's seeds


def test_the_replication_seeds_never_meet_the_presets_seeds():
    assert seed_values(SWEEP, None, replicate=False) is None, "the sweep's own seeds"
    assert seed_values(SWEEP, 2, replicate=False) == [1, 2]
    again = seed_values(SWEEP, None, replicate=True)
    assert again == list(range(FIRST_SEED, FIRST_SEED + 5)) and not set(again) & {1, 2, 3, 4, 5}
    assert seed_values(SWEEP, 7, replicate=True) == list(range(FIRST_SEED, FIRST_SEED + 7))
    assert FIRST_SEED > 100, "far above any seed count a sweep or --seeds uses"


def test_folders_and_the_replicated_cell(tmp_path: Path):
    assert folders(tmp_path / "r", tmp_path / "o", None) == (tmp_path / "r", tmp_path / "o")
    assert folders(tmp_path / "r", tmp_path / "o", SUBDIR) == (tmp_path / "r/replication",
                                                                       tmp_path / "o/replication")
    assert replicated("supported: a | b", "supported: c") == "yes (supported)"
    assert replicated("supported: a", "supported where shown: b") == "no (supported where shown)"
    assert replicated("inconclusive (the 95% interval straddles the bound): x", "not supported: y") == \
        "no (not supported)"
    assert replicated("supported: a", None) == "not run" and replicated(None, "supported") == "not run"


def _finished(root: Path, seeds: range, acc: dict[str, float]) -> None:
    """Finished fake runs; fake_run's metrics grow with the seed, so seed s >= FIRST_SEED is written as s - 1000
    and renamed."""
    for scale, value in acc.items():
        for seed in seeds:
            run = fake_run(root / "scaling", scale, seed % 1000, acc=value)
            if seed != seed % 1000:
                for name in ("config.yaml", "summary.json"):
                    text = (run / name).read_text()
                    (run / name).write_text(text.replace(f"seed_everything: {seed % 1000}", f"seed_everything: {seed}")
                                            .replace(f'"seed": {seed % 1000}', f'"seed": {seed}'))
                run.rename(run.with_name(f"attn_scale={scale},seed={seed}"))


def test_the_readme_says_whether_each_verdict_replicated(tmp_path: Path, capsys):
    root, out = tmp_path / "runs", tmp_path / "docs"
    _finished(root, range(1, 6), ACC)
    assert findings_main(["--root", str(root), "--out", str(out), "--only", "scaling"]) == 0
    row = next(line for line in (out / "README.md").read_text().splitlines() if line.startswith("| [scaling]"))
    assert "| supported | not run |" in row, "no replication yet"
    flat = {scale: 0.9 for scale in ACC}  # on the new seeds every arm learns alike: the claim does not replicate
    _finished(root / "replication", range(FIRST_SEED, FIRST_SEED + 5), flat)
    assert findings_main(["--root", str(root), "--out", str(out), "--only", "scaling", "--replicate"]) == 0
    printed = capsys.readouterr().out
    assert f"seed={FIRST_SEED}" in printed and printed.count("skipped (finished)") == 2 * 15
    text = (out / "README.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| [scaling]"))
    assert "| supported | no (" in row, "the main seeds' verdict stands; the replication's differs"
    assert "- **Replication, exploratory** (seeds 1001 and up): " in text and "(replication/scaling/report.md)" in text
    assert (out / "replication" / "scaling" / "report.md").is_file()
    assert (out / "scaling" / "result.json").is_file(), "the main seed set's result is kept"
