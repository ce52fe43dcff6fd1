"""Every sweep file is W&B-schema-valid, follows the LightningCLI conventions, belongs to a
question, and every value the engine can propose parses through the real CLI.

The questions on real data (``ablations.catalog.questions_real``) run configs that their data sources bring; a sweep
whose config is not in this checkout is skipped, with the reason, where a test needs the config."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from ablations.catalog.lookup import question_for
from ablations.catalog.questions import QUESTIONS, REPO, SWEEPS_DIR
from ablations.catalog.questions_real import REAL_QUESTIONS
from ablations.runner import (
    load_sweep,
    proposable_values,
    render_args,
    schema_violations,
    trial_name,
    varied_keys,
)
from attnlab_core.errors import UsageError
from tests.datamodules.real_data import skip_real_data

SWEEPS = sorted(SWEEPS_DIR.glob("*.yaml"))
IDS = [p.stem for p in SWEEPS]


def _config_of(sweep: dict[str, Any]) -> Path:
    command = [str(c) for c in sweep["command"]]
    return REPO / command[command.index("--config") + 1]


def _require_config(path: Path, sweep: dict[str, Any]) -> Path:
    """The sweep's config; the test is skipped (naming it) when this checkout does not have it yet."""
    config = _config_of(sweep)
    if not config.is_file() and sweep["name"] in REAL_QUESTIONS:
        pytest.skip(f"{path.name}: {config.relative_to(REPO)} comes with its real data source, not in this checkout")
    return config


def _skip_without_data(sweep: dict[str, Any]) -> None:
    """Skip, naming the install step, when a real-data question's data is absent (a fresh machine, the README's
    `pytest -n auto`); under ATTNLAB_REQUIRE_REAL_DATA=1 (CI) the skip fails (tests/conftest.py). Called only
    where a row failed, so the real sweeps whose configs parse without their data are still checked."""
    if sweep["name"] in REAL_QUESTIONS:
        from ablations.real_data import data_problem

        if (problem := data_problem(REAL_QUESTIONS[sweep["name"]])) is not None:
            skip_real_data(problem)


def _nulls(node: Any, path: str = "") -> list[str]:
    if node is None:
        return [path]
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _nulls(v, f"{path}.{k}")]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _nulls(v, f"{path}[{i}]")]
    return []


def test_sweeps_exist():
    assert len(SWEEPS) >= 7, "sweeps/ lost a question"
    assert {q.sweep for q in [*QUESTIONS.values(), *REAL_QUESTIONS.values()]} <= {p.name for p in SWEEPS}
    assert not set(QUESTIONS) & set(REAL_QUESTIONS), "a question is synthetic or on real data, never both"


@pytest.mark.parametrize("path", SWEEPS, ids=IDS)
def test_schema_valid(path):
    assert schema_violations(load_sweep(path)) == []


@pytest.mark.parametrize("path", SWEEPS, ids=IDS)
def test_sweep_conventions(path):
    raw = yaml.safe_load(path.read_text())
    sweep = load_sweep(path)
    assert raw["name"] == path.stem, "the sweep name is the experiment name and the file stem"
    assert _nulls(raw) == [], "a null renders as --x=None, which the CLI rejects"
    command = [str(c) for c in sweep["command"]]
    assert command[:3] == ["${env}", "${interpreter}", "${program}"] and command[-1] == "${args}"
    assert command.index("fit") < command.index("--config") < command.index("${args}"), "config before ${args}"
    assert _require_config(path, sweep).is_file(), f"{path.name} references a missing config"
    assert (REPO / sweep["program"]).is_file()
    seeds = sweep["parameters"]["seed_everything"]["values"]
    assert len(set(seeds)) >= 3 and all(isinstance(s, int) for s in seeds)
    assert all(not k.startswith("-") and ".init_args." not in k for k in sweep["parameters"]), "flat CLI paths"


@pytest.mark.parametrize("path", SWEEPS, ids=IDS)
def test_question_matches_sweep(path):
    sweep = load_sweep(path)
    question = question_for(sweep["name"])
    assert question is not None and question.sweep == path.name
    assert set(question.axes) <= set(varied_keys(sweep)), "a question's axes are swept parameters"
    assert sweep["metric"]["name"].split("/")[0] in ("val", "test", "train")
    overridden = {a.split("=")[0].removeprefix("--") for a in question.quick}
    assert not overridden & set(sweep["parameters"]), "--scale quick must never override a swept parameter"
    assert question.claim and question.source and question.full, "the findings table needs claim, source, full preset"


def test_norm_verdict_reads_the_swept_warm_up():
    from ablations.catalog.questions import NORM_WARMUP

    values = load_sweep(SWEEPS_DIR / "norm.yaml")["parameters"]["model.warmup_steps"]["values"]
    assert sorted(values) == [0, NORM_WARMUP]


def test_real_verdicts_read_the_swept_arms():
    """The real questions' verdict constants are the arms their sweeps define (the arms themselves are read from
    the sweeps: tests/ablations/test_arms.py)."""
    from ablations.catalog.questions_real import NORM_BIBLE_WARMUP

    norm = load_sweep(SWEEPS_DIR / "norm_bible.yaml")["parameters"]
    assert sorted(norm["model.warmup_steps"]["values"]) == [0, NORM_BIBLE_WARMUP]
    assert norm["model.encoder_layers"]["value"] == norm["model.decoder_layers"]["value"] == 6, "deep: 6+6 layers"
    assert load_sweep(SWEEPS_DIR / "positions_bible.yaml")["parameters"]["data.max_len"]["value"] == 40


def test_lm_positions_web_reads_the_configs_contexts():
    """Perplexity at L, 2L and 4L: the question's keys are the contexts lm_web.yaml trains and tests with."""
    from ablations.catalog.questions_real import LM_CONTEXT

    question = REAL_QUESTIONS["lm_positions_web"]
    sweep = load_sweep(question.sweep_path)
    data = yaml.safe_load(_require_config(question.sweep_path, sweep).read_text())["data"]["init_args"]
    assert data["context"] == LM_CONTEXT and data["eval_contexts"] == [LM_CONTEXT, 2 * LM_CONTEXT, 4 * LM_CONTEXT]
    assert question.metric == f"test/ppl_by_ctx/ctx_{4 * LM_CONTEXT:05d}"


def _parse(config: Path, args: list[str]) -> tuple[int, str, str]:
    """Exit code, printed config and stderr of ``attnlab fit --config CONFIG ARGS --print_config``."""
    from attnlab_run.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main(["fit", "--config", str(config), *args, "--print_config"])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    return code, out.getvalue(), err.getvalue()


def _build_model(printed: str) -> None:
    """Construct the printed config's model (vocabulary sizes from the data, as the CLI links them):
    catches arms that parse but cannot be built (e.g. heads not dividing d_model)."""
    cfg = yaml.safe_load(printed)
    module, _, name = cfg["model"]["class_path"].rpartition(".")
    kwargs = dict(cfg["model"].get("init_args") or {})
    vocab = (cfg["data"].get("init_args") or {}).get("vocab_size")
    if vocab is None:  # a vocabulary built from the data (captioning): ask the datamodule, as the CLI's link does
        data_module, _, data_name = cfg["data"]["class_path"].rpartition(".")
        data = getattr(importlib.import_module(data_module), data_name)(**(cfg["data"].get("init_args") or {}))
        vocab = getattr(data, "tgt_vocab_size", None)
    model_class = getattr(importlib.import_module(module), name)
    accepted = inspect.signature(model_class).parameters
    for key in ("src_vocab_size", "tgt_vocab_size", "vocab_size"):
        if key in accepted:
            kwargs[key] = kwargs.get(key) or vocab
    model_class(**{k: v for k, v in kwargs.items() if k in accepted})


@pytest.mark.parametrize("path", SWEEPS, ids=IDS)
def test_every_value_parses(path):
    """One --print_config per row: row i takes value i (mod count) of every parameter, so every
    value of every parameter is parsed at least once, rendered exactly as the agent renders it,
    followed by the quick-scale overrides; then the arm's model is built."""
    sweep = load_sweep(path)
    config = _require_config(path, sweep)
    values = {k: proposable_values(k, spec) for k, spec in sweep["parameters"].items()}
    rows = max(len(v) for v in values.values())
    quick = list(question_for(sweep["name"]).quick)
    for i in range(rows):
        params = {k: v[i % len(v)] for k, v in values.items()}
        code, printed, err = _parse(config, render_args(params) + quick)
        if code != 0:
            _skip_without_data(sweep)
        assert code == 0, f"{path.name}: {render_args(params)} does not parse: {err.strip()}"
        try:
            _build_model(printed)
        except UsageError:
            _skip_without_data(sweep)
            raise


def test_trial_names_are_distinct_and_stable():
    for path in SWEEPS:
        sweep = load_sweep(path)
        keys = varied_keys(sweep)
        grid = [{}]
        for k in keys:
            grid = [{**g, k: v} for g in grid for v in sweep["parameters"][k]["values"]]
        names = [trial_name(g, keys) for g in grid]
        assert len(set(names)) == len(names)
        assert names == [trial_name(g, keys) for g in grid]
