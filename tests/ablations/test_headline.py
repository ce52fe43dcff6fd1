"""The findings headline is the confirmatory answer only (issue #42): pending without confirmatory runs, refused
when the plan file was committed after the runs' commit, when it is not committed, or when the preset differs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from ablations.reports import headline
from ablations.reports.record import QuestionResult

FLAGS = ["--trainer.max_epochs=3"]


def git(repo: Path, *args: str, when: int | None = None) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin"}
    if when is not None:
        env |= {"GIT_AUTHOR_DATE": f"@{when} +0000", "GIT_COMMITTER_DATE": f"@{when} +0000"}
    done = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    git(tmp_path, "add", "code.py")
    git(tmp_path, "commit", "-qm", "code", when=1_000_000)
    return tmp_path


def result(commit: str, quick: list[str] = FLAGS) -> QuestionResult:
    return QuestionResult(name="heads", verdict="supported: x", key_numbers="", report="heads/report.md", figures=[],
                          commits=[commit], quick=list(quick))


def commit_plan(repo: Path, when: int) -> tuple[Path, dict]:
    plan = {"plan": "heads/v1", "preset": {"flags": FLAGS}}
    path = repo / "plans" / "heads.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(plan))
    git(repo, "add", "plans/heads.yaml")
    git(repo, "commit", "-qm", "plan", when=when)
    return path, plan


def test_a_result_whose_runs_follow_the_plan_is_headlined(repo: Path):
    path, plan = commit_plan(repo, when=2_000_000)
    (repo / "code.py").write_text("x = 2\n")
    git(repo, "commit", "-qam", "later code", when=3_000_000)
    runs_at = git(repo, "rev-parse", "HEAD")
    assert headline.headline(result(runs_at), plan, path, path.read_text()) == "supported"
    assert headline.headline(None, plan, path, path.read_text()) == headline.PENDING


def test_a_plan_committed_after_its_runs_is_refused(repo: Path):
    runs_at = git(repo, "rev-parse", "HEAD")  # the runs' commit, before the plan existed
    path, plan = commit_plan(repo, when=2_000_000)
    assert headline.headline(result(runs_at), plan, path, path.read_text()).startswith(
        "refused: the plan was committed after")


def test_a_preset_other_than_the_plans_or_an_uncommitted_plan_is_refused(repo: Path):
    path, plan = commit_plan(repo, when=2_000_000)
    runs_at = git(repo, "rev-parse", "HEAD")
    assert headline.headline(result(runs_at, quick=["--trainer.max_epochs=6"]), plan, path, path.read_text()) == (
        "refused: the runs' preset differs from the plan's")
    loose = repo / "plans" / "norm.yaml"
    loose.write_text(yaml.safe_dump(plan))
    assert headline.headline(result(runs_at), plan, loose, loose.read_text()) == (
        "refused: the plan file is not committed")
    assert headline.headline(result("0" * 40), plan, path, path.read_text()).startswith(
        "refused: the runs' commit is not recorded")


def test_the_change_table_names_old_new_and_why():
    old = {"heads": result("abc")}
    rows = headline.change_rows(["heads", "norm"], old, {"heads": headline.PENDING},
                                {"heads": {"changes": "selection (8 heads | fixed)"}, "norm": None})
    assert rows[2] == f"| [heads](#heads) | supported | {headline.PENDING} | selection (8 heads \\| fixed) |"
    assert rows[3].startswith("| [norm](#norm) | not run | pending") and rows[3].endswith("| no plan |")


def test_a_committed_plan_file_that_is_not_its_plans_rendering_is_refused(repo: Path):
    """The file was committed before the runs, but the plan in code has since changed: the registration no longer
    says what the headline would be judged against."""
    path, plan = commit_plan(repo, when=2_000_000)
    (repo / "code.py").write_text("x = 2\n")
    git(repo, "commit", "-qam", "later code", when=3_000_000)
    runs_at = git(repo, "rev-parse", "HEAD")
    changed = path.read_text().replace("heads/v1", "heads/v2")
    assert headline.headline(result(runs_at), plan, path, changed).startswith(
        "refused: the plan file differs from its plan's rendering")
    assert headline.headline(result(runs_at), plan, path, path.read_text()) == "supported"
