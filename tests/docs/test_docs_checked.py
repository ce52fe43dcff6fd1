"""The documents a newcomer reads are checked against the code: docs/architecture.md's catalogue lists every module
(generated from their docstrings), docs/usage.md's axis table matches the axes' Literals, and the README and
BENCHMARKS.md stay short (README ≤ 120 lines with a map of ≤ 30; BENCHMARKS.md ≤ 300, its generated table included)."""

from __future__ import annotations

import inspect
import re
import typing

from lit_models import axes
from tests.docs.catalogue import ARCHITECTURE, ROOT, documented

ROW = re.compile(r"^\| [^|]+ \| (?P<paths>[^|]+) \| (?P<arms>[^|]+) \|")


def test_the_architecture_catalogue_is_what_the_modules_say():
    assert ARCHITECTURE.read_text() == documented(), "run: python -m tests.docs.catalogue"


def _families() -> list[type]:
    from lit_models.families.captioner import ShowAttendTell
    from lit_models.families.causal_lm import CausalLM
    from lit_models.families.classifier import SentimentClassifier
    from lit_models.families.full_view import FullViewClassifier
    from lit_models.families.glimpse import RecurrentAttentionModel
    from lit_models.families.recurrent_seq2seq import RecurrentSeq2Seq
    from lit_models.families.regressor import AddingRegressor
    from lit_models.families.seq2seq import TransformerSeq2Seq

    return [TransformerSeq2Seq, RecurrentSeq2Seq, CausalLM, SentimentClassifier, ShowAttendTell,
            RecurrentAttentionModel, FullViewClassifier, AddingRegressor]


def _axis_rows() -> list[tuple[list[str], list[str]]]:
    """(the option names of a row's CLI paths, its arms) for each row of the axis table that lists words."""
    table = (ROOT / "docs" / "usage.md").read_text().split("## Ablation axes")[1].split("\n## ")[0]
    rows = []
    for line in table.splitlines()[2:]:
        match = ROW.match(line)
        arms = re.findall(r"`([^`]+)`", match["arms"]) if match else []
        if arms:
            rows.append((re.findall(r"`--model\.(\w+)`", match["paths"]), arms))
    return rows


def test_the_usage_axis_table_matches_the_code():
    """Each row's arms are exactly the Literal of its option in some family; every axis of axes.py has a row."""
    options: dict[str, list[tuple[str, ...]]] = {}
    for family in _families():
        for name, p in inspect.signature(family).parameters.items():
            if typing.get_origin(p.annotation) is typing.Literal:
                options.setdefault(name, []).append(typing.get_args(p.annotation))
    rows = _axis_rows()
    assert rows
    for names, arms in rows:
        assert names, arms
        for name in names:
            code = options.get(name, [])
            assert tuple(arms) in code, f"--model.{name}: the table lists {arms}, the code {code}"
    listed = [tuple(arms) for _, arms in rows]
    for name, axis in vars(axes).items():
        if typing.get_origin(axis) is typing.Literal:
            assert typing.get_args(axis) in listed, f"axes.{name} has no row in docs/usage.md's axis table"


def test_the_readme_and_the_benchmarks_are_short():
    readme = (ROOT / "README.md").read_text().splitlines()
    assert len(readme) <= 120, len(readme)
    start = readme.index("## Map")
    fence = [i for i, line in enumerate(readme) if i > start and line.startswith("```")]
    assert fence[1] - fence[0] - 1 <= 30, "the README's map is at most 30 lines"
    benchmarks = (ROOT / "BENCHMARKS.md").read_text().splitlines()
    assert len(benchmarks) <= 300, f"BENCHMARKS.md has {len(benchmarks)} lines, its generated table included"


def test_each_preset_history_section_is_a_question():
    """docs/findings/preset_history.md's sections are named after questions, so ``#<question>`` links hold."""
    from ablations.catalog.lookup import question_for

    text = (ROOT / "docs" / "findings" / "preset_history.md").read_text()
    sections = [h for h in re.findall(r"^##+ (.+)$", text, flags=re.M) if h != "Real-data questions"]
    assert sections and all(question_for(name) for name in sections), sections
