"""Every question's arms and metric come from its sweep file, and nothing falls out of a verdict unseen.

For every question (synthetic and on real data): every arm the sweep sweeps is judged by the verdict or declared
ranked-only on its ``Question``; the verdict names no arm the sweep does not sweep; ranked-only arms are ranked;
the question's metric is the sweep's; docs/sweeps.md lists every question.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from ablations.catalog.arms import REST, Arms, UnsweptArm, sweep_metric
from ablations.catalog.lookup import question_for
from ablations.catalog.questions import QUESTIONS, REPO, Question
from ablations.catalog.questions_real import REAL_QUESTIONS
from ablations.verdicts.rules import name
from ablations.verdicts.stats import Stat, stat

ALL = {**QUESTIONS, **REAL_QUESTIONS}


def _judged(question: Question) -> Arms:
    """The question's arms after its verdict has read them (on no statistics: every verdict names its arms
    before it reads a number)."""
    arms = question.arms()
    try:
        question.verdict({}, arms)
    except UnsweptArm as err:
        pytest.fail(f"{question.name}: {err}")
    return arms


@pytest.mark.parametrize("name_", sorted(ALL))
def test_every_swept_arm_is_judged_or_ranked_only(name_: str):
    question = question_for(name_)
    assert question is ALL[name_]
    arms = _judged(question)
    assert not arms.unjudged(), (
        f"sweeps/{question.sweep} sweeps {arms.unjudged()}, which the {name_} verdict neither judges nor ranks: "
        "judge it in the verdict (Arms.arm) or declare it in the Question's ranked_only")
    assert set(arms.judged) <= {*question.swept, *question.baseline_arms}, "a judged arm is swept or a baseline"
    if question.ranked_only != REST:
        declared = set(arms.declared_ranked)
        assert declared <= set(question.swept), f"{name_}: ranked_only names arms the sweep does not sweep"
        assert not declared & set(arms.judged), f"{name_}: an arm is both judged and ranked-only"


class _AnyMetric(Mapping[str, Stat]):
    """An arm that has every metric (three seeds), so any ranking a verdict makes lists it; iterated (a verdict
    copying an arm's numbers), it lists the question's metric and exact-key probes."""

    def __init__(self, question: Question) -> None:
        self.keys_ = [question.metric, *(p for p in question.probes if not p.endswith("/"))]

    def __getitem__(self, key: str) -> Stat:
        return stat([0.4, 0.5, 0.6], [1, 2, 3])

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys_)

    def __len__(self) -> int:
        return len(self.keys_)


@pytest.mark.parametrize("name_", sorted(n for n, q in ALL.items() if q.ranked_only))
def test_ranked_only_arms_are_ranked(name_: str):
    question = ALL[name_]
    ranked = _judged(question).declared_ranked
    line = question.judge({arm: _AnyMetric(question) for arm in question.swept})
    for arm in ranked:
        assert re.search(rf"(: |, ){re.escape(name(arm))} ", line), f"{name_}: {name(arm)} is not ranked in {line}"


def test_a_verdict_naming_an_unswept_arm_fails():
    arms = Arms(swept=[("a",), ("b",)], where="sweeps/x.yaml")
    assert arms.arm("a") == ("a",)
    with pytest.raises(UnsweptArm, match=r"arm \('c',\), which sweeps/x.yaml does not sweep"):
        arms.arm("c")
    loose = Arms.of({("a",): {}})
    assert loose.arm("c") == ("c",), "a verdict called on hand-made statistics reads any arm"


def test_an_arm_neither_judged_nor_ranked_is_reported():
    arms = Arms(swept=[("a",), ("b",), ("c",)], ranked_only=("c",))
    arms.arm("a")
    assert arms.unjudged() == [("b",)]
    rest = Arms(swept=[("a",), ("b",)], ranked_only=REST)
    rest.arm("a")
    assert rest.unjudged() == [] and rest.declared_ranked == (("b",),)


@pytest.mark.parametrize("name_", sorted(ALL))
def test_the_metric_is_the_sweeps(name_: str):
    """One declaration: the question's metric and goal are its sweep file's ``metric``."""
    question = ALL[name_]
    assert (question.metric, question.goal) == sweep_metric(question.sweep_path)


def _docs_tables(text: str) -> dict[str, list[str]]:
    """Question names per table of docs/sweeps.md's "The questions" section, by the line that introduces it."""
    section = text.split("## The questions", 1)[1].split("\n## ", 1)[0]
    tables: dict[str, list[str]] = {}
    intro = ""
    for line in section.splitlines():
        if line.startswith("On "):
            intro = line
        elif (row := re.match(r"^\| `(\w+)` \|", line)) and intro:
            tables.setdefault(intro, []).append(row[1])
    return tables


def test_docs_list_every_question():
    tables = _docs_tables((REPO / "docs" / "sweeps.md").read_text(encoding="utf-8"))
    generated = next(v for k, v in tables.items() if k.startswith("On generated data"))
    real = next(v for k, v in tables.items() if k.startswith("On real data"))
    assert sorted(generated) == sorted(QUESTIONS), "docs/sweeps.md's table of synthetic questions"
    assert sorted(real) == sorted(REAL_QUESTIONS), "docs/sweeps.md's table of questions on real data"


def test_docs_table_reader_sees_a_missing_question(tmp_path: Path):
    text = (REPO / "docs" / "sweeps.md").read_text(encoding="utf-8")
    dropped = "\n".join(ln for ln in text.splitlines() if not ln.startswith("| `heads` |"))
    generated = next(v for k, v in _docs_tables(dropped).items() if k.startswith("On generated data"))
    assert "heads" not in generated and sorted(generated) != sorted(QUESTIONS)
