"""Each question's report links to its section of docs/findings/preset_history.md: the anchor exists for every
question, and the relative link resolves from every folder the findings write reports into."""

from __future__ import annotations

import re
import unicodedata

import pytest

from ablations.catalog.lookup import QUESTIONS, REAL_QUESTIONS, question_for
from ablations.reports.report import PRESET_HISTORY, adhoc_question, preset_history_line, write_report
from ablations.reports.results import load_experiment
from tests.ablations.test_report import runs_dir  # noqa: F401 - fixture

FINDINGS = PRESET_HISTORY.parent
LINK = re.compile(r"^- \*\*Preset history:\*\* \[[^]]+\]\(([^)#]+)#([^)]+)\)$")


def github_anchor(heading: str) -> str:
    """The fragment GitHub gives a markdown heading: lower case, punctuation but ``-``/``_`` dropped, spaces
    -> ``-``."""
    text = unicodedata.normalize("NFKC", heading).strip().lower()
    return re.sub(r"\s", "-", re.sub(r"[^\w\- ]", "", text))


def anchors(markdown: str) -> set[str]:
    return {github_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", markdown, flags=re.M)}


def test_the_anchor_rule_can_fail():
    assert anchors("# Preset history: how\n## bottleneck_bible\n## Real-data questions\n") == {
        "preset-history-how", "bottleneck_bible", "real-data-questions"}
    assert "kv_heads" not in anchors("## kv heads\n")


@pytest.mark.parametrize("name", [*QUESTIONS, *REAL_QUESTIONS])
def test_every_question_has_its_section(name):
    assert name in anchors(PRESET_HISTORY.read_text()), f"docs/findings/preset_history.md has no section #{name}"


# where `attnlab findings` writes a question's report: the quick findings, replication, confirmation, power, real data
FOLDERS = ["", "replication", "confirm", "power", "real", "real/replication", "real/confirm"]


@pytest.mark.parametrize("folder", FOLDERS)
@pytest.mark.parametrize("name", ["cells", "ram_mnist"])
def test_the_link_resolves_from_each_report_folder(folder, name):
    out = FINDINGS / folder / name
    [line] = preset_history_line(question_for(name), out)
    target, anchor = LINK.match(line).groups()
    assert (out / target).resolve() == PRESET_HISTORY and anchor == name


def test_an_adhoc_experiment_links_nothing():
    assert preset_history_line(adhoc_question("my_experiment", []), FINDINGS / "my_experiment") == []


def test_the_written_report_carries_the_line_once(runs_dir):  # noqa: F811 - the fixture
    exp = runs_dir / "scaling"
    report = write_report("scaling", load_experiment(exp), exp)
    lines = [ln for ln in report.path.read_text().splitlines() if ln.startswith("- **Preset history:**")]
    assert len(lines) == 1
    target, anchor = LINK.match(lines[0]).groups()
    assert (exp / target).resolve() == PRESET_HISTORY and anchor == "scaling"
