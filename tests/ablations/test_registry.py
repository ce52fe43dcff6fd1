"""A new question is its sweep file plus one ``Question`` entry: every consumer finds it with no list of its own.

For every registered question, synthetic (``ablations.catalog.questions.QUESTIONS``) and on real data
(``ablations.catalog.questions_real.REAL_QUESTIONS``): ``attnlab findings`` runs and reports it, in the registry's
order,
and ``--only`` accepts it; ``attnlab dashboard`` offers it, with the figures its entry names; docs/sweeps.md lists
it; its verdict reads where the finding should show from its entry (``Question.shows_at``); the figures it
computes are drawn (``Question.figures``).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from ablations import findings
from ablations.catalog.lookup import DOCS, question_for, render_docs
from ablations.catalog.questions import QUESTIONS, REPO
from ablations.catalog.questions_real import REAL_QUESTIONS
from ablations.reports import dashboard
from ablations.verdicts.stats import Stat, stat

ALL = {**QUESTIONS, **REAL_QUESTIONS}


def _choices(parser, dest: str) -> list[str]:
    return next(a.choices for a in parser._actions if a.dest == dest)


@pytest.mark.parametrize("real", [False, True], ids=["synthetic", "real"])
def test_findings_runs_every_registered_question_in_the_registry_order(real: bool):
    pool, order, wrong = findings._selection(findings.findings_parser().parse_args(["--real"] if real else []))
    assert wrong is None and pool is (REAL_QUESTIONS if real else QUESTIONS)
    assert tuple(order) == tuple(pool), "attnlab findings' order is the registry's"


@pytest.mark.parametrize("name", sorted(ALL))
def test_every_consumer_finds_the_question(name: str):
    question = ALL[name]
    assert question_for(name) is question
    assert name in _choices(findings.findings_parser(), "only"), "attnlab findings --only"
    assert name in _choices(dashboard.dashboard_parser(), "question"), "attnlab dashboard"
    assert dashboard.MEDIA_KEYS.get(name, ()) == question.media, "the dashboard's figures are the entry's"
    sweeps_md = (REPO / "docs" / "sweeps.md").read_text(encoding="utf-8")
    assert f"| `{name}` |" in sweeps_md, f"docs/sweeps.md lists no {name}: run python -m ablations.catalog.lookup"


def test_the_docs_question_tables_are_generated_from_the_entries():
    text = (REPO / DOCS).read_text(encoding="utf-8")
    assert render_docs(text) == text, ("docs/sweeps.md's question tables are stale: run "
                                       "python -m ablations.catalog.lookup")
    name = next(iter(QUESTIONS))
    stale = text.replace(QUESTIONS[name].claim, "an old claim", 1)
    assert render_docs(stale) == text, "the tables are rebuilt, whatever was between the markers"
    with pytest.raises(ValueError, match="no '<!-- questions:real"):
        render_docs(text.replace("<!-- /questions:real -->", ""))


@pytest.mark.parametrize("name", ["heads", "cells_adding", "norm_bible"])
def test_the_verdict_reads_where_the_finding_shows_from_the_entry(name: str):
    """Nothing learned: the verdict's "not shown at this scale" names the entry's ``shows_at``."""
    question = replace(ALL[name], shows_at="a scale only this test names")
    bad = 1e6 if question.goal == "minimize" else 0.0
    nothing = {arm: _AllMetrics(stat([bad, bad, bad], [1, 2, 3])) for arm in question.swept}
    line = question.judge(nothing)
    assert line.startswith("not shown at this scale") and "a scale only this test names" in line, line


class _AllMetrics(dict):
    """An arm whose every metric is ``value``."""

    def __init__(self, value: Stat) -> None:
        super().__init__()
        self.value = value

    def get(self, key, default=None):
        return self.value


@pytest.mark.parametrize("name", sorted(n for n, q in ALL.items() if q.figures))
def test_the_entry_draws_its_computed_figures(name: str, tmp_path):
    """``attnlab findings`` adds the figures the entry computes (``Question.figures``) to the question's section."""
    paths = ALL[name].figures(tmp_path)
    assert paths and all(p.is_file() and p.parent == tmp_path for p in paths)
