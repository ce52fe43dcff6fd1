"""``attnlab dashboard``: every key a question's saved workspace reads resolves against a real run.

One tiny trial per model family (a few steps, W&B offline) is run once per session with the trial command
the sweep agent would start; its ``.wandb`` transaction log is read back as the W&B backend stores the run
(run attributes, flat config keys, history, summary and image keys); each question's workspace is built
with wandb-workspaces, serialised with its own ``_to_model()``, and every panel metric, regex, x-axis,
column, media key, filter and grouping key is looked up in that run. The questions on real data
(``ablations.catalog.questions_real``) get the same check on a tiny trial of their own families on the real
corpora (``-m slow``; skipped, naming the install step, where the data is absent).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ablations.catalog.lookup import question_for
from ablations.catalog.questions import QUESTIONS, REPO
from ablations.catalog.questions_real import REAL_QUESTIONS
from ablations.real_data import data_problem
from ablations.runner import load_sweep, render_args, render_command
from tests.datamodules.real_data import skip_real_data

pytest.importorskip("wandb_workspaces")

from ablations.reports.dashboard import (  # noqa: E402 - after the importorskip
    MEDIA_KEYS,
    STEP,
    RunKeys,
    build_workspace,
    job_types,
    media_keys,
    references,
    unresolved,
)

TRANSFORMER = {"model.d_model": 16, "model.heads": 2, "model.d_ff": 32, "model.warmup_steps": 2}
SIZES = {"data.train_size": 64, "data.val_size": 8, "data.test_size": 8, "data.batch_size": 16}
RECURRENT = {"model.embed_dim": 8, "model.hidden_size": 16, "model.warmup_steps": 2}
FAMILIES: dict[str, tuple[str, dict[str, Any]]] = {
    "transformer_reverse": ("positions", {**TRANSFORMER, "model.encoder_layers": 1, "model.decoder_layers": 1,
                                          **SIZES}),
    "rnn_reverse": ("attention_bottleneck", {**RECURRENT, **SIZES, "data.max_len": 12, "model.attention": "additive"}),
    "multi30k_gru_attention": ("bottleneck_translation", {**RECURRENT, **SIZES, "data.vocab_size": 300,
                                                          "model.attention": "additive"}),  # none draws no map
    # tested up to 40 (rope_reverse reads the 36-40 bucket; lm_positions' sweep stops at 20), the tables long enough
    "lm_reverse": ("lm_positions", {**TRANSFORMER, "model.layers": 1, **SIZES, "data.test_size": 48,
                                    "data.test_max_len": 40, "model.max_positions": 96}),
    "caption_soft": ("caption_attention", {"model.cnn_width": 8, "model.hidden_size": 16, "model.embed_dim": 8,
                                           "model.grid_size": 2, **SIZES}),
    "sentiment_lstm_attention": ("sentiment_pooling", {"model.pooling": "attention", "model.embed_dim": 8,
                                                        "model.hidden_size": 8,
                                                        "model.attn_size": 8, **SIZES, "data.val_size": 16}),
    "adding": ("cells_adding", {"model.hidden_size": 8, "data.seq_len": 20, **SIZES}),
}
"""Model family (the sweep's ``--config``) -> the question whose sweep runs it, and the tiny overrides.
Where a family serves several questions the one whose sweep also tests (``--run.test_after_fit``) runs; the
arm is one whose runs log every probe and image (attention on: the arm without it has no attention maps)."""

REAL_SIZES = {"data.train_size": 200, "data.val_size": 8, "data.test_size": 8, "data.batch_size": 16}
REAL_FAMILIES: dict[str, tuple[str, dict[str, Any]]] = {
    "bible_gru_attention": ("bottleneck_bible", {**RECURRENT, **REAL_SIZES, "data.vocab_size": 300,
                                                 "model.attention": "additive"}),
    # the sweep's data.max_len 40 would drop nearly every training pair of a 300-piece vocabulary
    "bible_transformer": ("positions_bible", {**TRANSFORMER, "model.encoder_layers": 1, "model.decoder_layers": 1,
                                              **REAL_SIZES, "data.vocab_size": 300, "data.max_len": 100}),
    # 200 snippets have 1,658 distinct words: the config's 9000-word vocabulary would be refused
    "mr_lstm_attention": ("sentiment_pooling_mr", {"model.pooling": "attention", "model.embed_dim": 8,
                                                   "model.hidden_size": 8, "model.attn_size": 8, **REAL_SIZES,
                                                   "data.vocab_size": 1000}),
    "ram_mnist": ("ram_mnist", {"model.hidden_size": 16, "model.glimpse_hidden": 8, "model.location_hidden": 8,
                                "model.glimpse_size": 16, **SIZES}),
    "lm_web": ("lm_positions_web", {**TRANSFORMER, "model.layers": 1, **SIZES}),
    # 200 stamps, a 64x64 image and a 2x2 grid of a narrow CNN: the real images and vocabulary, tiny network
    "clipart_soft": ("caption_attention_clipart", {"model.cnn_width": 8, "model.hidden_size": 16,
                                                   "model.embed_dim": 8, "model.grid_size": 2, **REAL_SIZES}),
}
"""The real-data families, as :data:`FAMILIES`; their trials read the real corpora with ``data.data_dir`` one
directory shared by the session (the Bible splits and tokenizers are prepared once)."""

ALL_FAMILIES = {**FAMILIES, **REAL_FAMILIES}


def _question(name: str) -> Any:
    question = question_for(name)
    assert question is not None, name
    return question


def family(question: str) -> str:
    command = [str(c) for c in load_sweep(_question(question).sweep_path)["command"]]
    return Path(command[command.index("--config") + 1]).stem


def _top(item: Any) -> str:
    return item.key or item.nested_key[0]


def run_keys(run_dir: Path) -> RunKeys:
    """The W&B run under ``run_dir/wandb``: :func:`log_keys` of its log."""
    (path,) = sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb"))
    return log_keys(path)


def log_keys(path: Path) -> RunKeys:
    """The W&B run of the offline log ``path`` as the backend stores it: config keys as logged (flat, dotted),
    top-level history keys, summary values, and the history keys holding images."""
    from tests.cli.wandb_records import complete_records

    attrs: dict[str, Any] = {}
    config: set[str] = set()
    history: set[str] = set()
    summary: dict[str, Any] = {}
    media: set[str] = set()
    for rec in complete_records(path):
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            attrs = {"group": rec.run.run_group, "jobType": rec.run.job_type}
            config.update(u.key for u in rec.run.config.update)
        elif kind == "config":
            config.update(u.key for u in rec.config.update)
        elif kind == "history":
            history.update(_top(i) for i in rec.history.item)
            media.update(i.nested_key[0] for i in rec.history.item if list(i.nested_key[1:]) == ["_type"]
                         and json.loads(i.value_json).startswith(("images/", "image-file")))
        elif kind == "summary":
            for u in rec.summary.update:
                value = json.loads(u.value_json)
                # a nested part (name.max) is no number a panel reading the name could show
                summary[_top(u)] = {".".join(u.nested_key[1:]): value} if len(u.nested_key) > 1 else value
    return RunKeys(run=attrs, config=frozenset(config - {"_wandb"}), history=frozenset(history),
                   summary=summary, media=frozenset(media))


def family_params(name: str) -> dict[str, Any]:
    """The sweep values of the family's trial: the first of each parameter, then the tiny overrides."""
    question, tiny = ALL_FAMILIES[name]
    sweep = load_sweep(_question(question).sweep_path)
    params = {k: spec["values"][0] if "values" in spec else spec["value"] for k, spec in sweep["parameters"].items()}
    return {**params, **tiny}


def _trial_params(name: str, root: Path, data_dir: Path) -> dict[str, Any]:
    params = {**family_params(name), "seed_everything": 1, "trainer.max_epochs": 1, "trainer.log_every_n_steps": 1,
              "trainer.enable_progress_bar": False, "run.root": str(root)}
    if name in REAL_FAMILIES:
        params["data.data_dir"] = str(data_dir)
    return params


def _attnlab(command: list[str], **env_vars: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(WANDB_MODE="offline", WANDB_PROJECT="attnlab", OMP_NUM_THREADS="1", **env_vars,
               PYTHONPATH=f"{REPO}{os.pathsep}{env.get('PYTHONPATH', '')}")
    proc = subprocess.run([sys.executable, "-m", "attnlab", *command], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _tiny_trial(name: str, root: Path, data_dir: Path) -> RunKeys:
    """The sweep agent's trial: the sweep's command with the family's values (W&B run id from the agent)."""
    question = ALL_FAMILIES[name][0]
    sweep = load_sweep(_question(question).sweep_path)
    _attnlab(render_command(sweep, _trial_params(name, root, data_dir))[3:], WANDB_RUN_ID=f"{name}-t1")
    return run_keys(root / question / f"{name}-t1")


def _manual_fit_and_test(name: str, root: Path, data_dir: Path) -> tuple[RunKeys, RunKeys]:
    """The README's manual path on the family's config: ``attnlab fit`` (no test inside the fit), then
    ``attnlab test --ckpt_path best`` of the same run: (the fit's W&B run, the evaluation's)."""
    question = ALL_FAMILIES[name][0]
    command = [str(c) for c in load_sweep(_question(question).sweep_path)["command"]]
    config = command[command.index("--config") + 1]
    params = {**_trial_params(name, root, data_dir), "run.test_after_fit": False}
    args = ["--config", config, f"--run.experiment={question}", "--run.name=manual", *render_args(params)]
    _attnlab(["fit", *args])
    _attnlab(["test", *args, "--ckpt_path=best"])
    fit, evaluation = (log_keys(p) for p in _two_runs(root / question / "manual"))
    return fit, evaluation


def _two_runs(run_dir: Path) -> list[Path]:
    """The fit's and the evaluation's .wandb logs (the fit's has job type fit), in that order."""
    from tests.cli.wandb_records import complete_records

    logs = sorted(run_dir.glob("**/offline-run-*/run-*.wandb"))
    jobs = {p: next(r.run.job_type for r in complete_records(p) if r.WhichOneof("record_type") == "run")
            for p in logs}
    assert sorted(jobs.values()) == ["eval", "fit"], jobs
    return sorted(logs, key=lambda p: jobs[p] != "fit")


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """family -> the keys of its tiny trial, each family run at most once a session; the real-data families
    share one data directory (whose downloads/ links the repository's, where the MR sdist lies)."""
    cache: dict[str, RunKeys] = {}
    data_dir = tmp_path_factory.mktemp("data")
    if (REPO / "data" / "downloads").is_dir():
        (data_dir / "downloads").symlink_to(REPO / "data" / "downloads")

    def get(name: str) -> RunKeys:
        if name not in cache:
            cache[name] = _tiny_trial(name, tmp_path_factory.mktemp(name), data_dir)
        return cache[name]

    return get


@pytest.fixture(scope="session")
def tiny_manual(tmp_path_factory):
    """family -> (fit, evaluation) of its manual fit + test (:func:`_manual_fit_and_test`), once a session."""
    cache: dict[str, tuple[RunKeys, RunKeys]] = {}
    data_dir = tmp_path_factory.mktemp("data")
    if (REPO / "data" / "downloads").is_dir():
        (data_dir / "downloads").symlink_to(REPO / "data" / "downloads")

    def get(name: str) -> tuple[RunKeys, RunKeys]:
        if name not in cache:
            cache[name] = _manual_fit_and_test(name, tmp_path_factory.mktemp(f"{name}-manual"), data_dir)
        return cache[name]

    return get


def question_run(question: str, tiny_run) -> RunKeys:
    """The family's run as a run of ``question``: siblings in a family differ in ``--run.experiment``, which
    names the W&B group (test_agent_rendering checks that), so the group attribute is the question's."""
    run = tiny_run(family(question))
    return RunKeys(run={**run.run, "group": question}, config=run.config, history=run.history,
                   summary=run.summary, media=run.media)


def _other_arms_images(question: str, arm: Any) -> set[str]:
    """Image keys named after an arm other than the run's (``{arm}`` in ``MEDIA_KEYS``): no run of this arm
    logs them; the template itself is checked on the run's own arm."""
    templates = [k for k in MEDIA_KEYS.get(question, ()) if "{arm}" in k]
    return {k for k in media_keys(_question(question)) if templates and k not in {t.format(arm=arm) for t in templates}}


REAL_RUN_CASES = [name if family(name) == "transformer_reverse" else pytest.param(name, marks=pytest.mark.slow)
                  for name in sorted(QUESTIONS)] + [pytest.param(name, marks=pytest.mark.slow)
                                                    for name in sorted(REAL_QUESTIONS)]
"""One family's tiny trial (~20 s of CPU) covers the five Transformer questions in the default suite; the
other six synthetic families and the five real-data ones (one trial each) run with ``-m slow``."""


def test_every_questions_family_has_a_tiny_trial_here():
    """The slow cases above look a question's family up in ALL_FAMILIES; a question added without one would
    fail only in the slow set (as caption_attention_clipart did): caught here in the default suite."""
    missing = {name: family(name) for name in [*QUESTIONS, *REAL_QUESTIONS] if family(name) not in ALL_FAMILIES}
    assert not missing, f"add a tiny trial to FAMILIES / REAL_FAMILIES for {missing}"
    assert all(ALL_FAMILIES[family(name)][0] in {*QUESTIONS, *REAL_QUESTIONS} for name in QUESTIONS)


@pytest.mark.parametrize("name", REAL_RUN_CASES)
def test_every_key_of_the_workspace_resolves_against_a_real_run(name, tiny_run):
    question = _question(name)
    if name in REAL_QUESTIONS and (problem := data_problem(question)):
        skip_real_data(problem)  # the source's own one-line error: it names the package to install
    run = question_run(name, tiny_run)
    view = build_workspace(question, entity="someone", project="attnlab", run_keys=run.summary)
    refs = references(view)
    arm = family_params(family(name)).get(question.axes[0])
    other_arms = _other_arms_images(name, arm)
    assert unresolved([r for r in refs if r.key not in other_arms], run) == []
    assert {r.key for r in refs if r.store == "history" and r.key.startswith(("_", "trainer/"))} == {STEP}
    assert not [r for r in refs if r.store.startswith("history") and "test/" in r.key], "test/* is one point: bars"
    grouped = [*question.axes, *(["model.class_path"] if question.baselines else [])]  # a baseline's own arm
    assert {(r.store, r.key) for r in refs if r.where == "runset grouping"} == {
        ("config", f"{key}.value") for key in grouped}
    assert ("summary", question.metric) in {(r.store, r.key) for r in refs if r.where == "runs table"}
    # the sweep's metric.name (what a W&B sweep and its bayes search read) is a number in the trial's summary
    assert isinstance(run.summary.get(question.metric), (int, float)), (question.metric, run.summary)
    kinds = {type(p).__name__ for s in view.sections for p in s.panels}
    assert {"BarPlot", "LinePlot", "ParallelCoordinatesPlot"} <= kinds, kinds
    assert ("MediaBrowser" in kinds) == bool(run.media), (kinds, run.media)
    settings = view._to_model().model_dump(by_alias=True)["spec"]["section"]["settings"]
    assert settings["useRunsTableGroupingInPanels"], "panels group by arm, seeds as the band"


def _misspell(view: Any, case: str) -> str:
    """Break one key of the positions workspace; return the text the checker must report."""
    import wandb_workspaces.reports.v2 as wr
    import wandb_workspaces.workspaces as ws

    answer, probes, media = view.sections
    if case == "bar metric":
        answer.panels[0].metrics = ["test/exact_mach"]
        return "test/exact_mach"
    if case == "probe curve":
        probes.panels[0].y = ["val/exact_mach"]
        return "val/exact_mach"
    if case == "x-axis":
        probes.panels[0].x = "trainer/globalstep"
        return "trainer/globalstep"
    if case == "parallel column, nested form":
        answer.panels[-1].columns = [wr.ParallelCoordinatesPlotColumn(metric=wr.Config("model.positions"))]
        return "model.value.positions"
    if case == "grouping, nested form":
        view.runset_settings.groupby = [ws.Config("model.positions")]
        return "model.value.positions"
    if case == "media key":
        media.panels[0].media_keys = ["attention/crosss/ex0"]
        return "attention/crosss/ex0"
    assert case == "group filter"
    view.runset_settings.filters = [ws.Metric("Group") == "postions"]
    return "postions"


@pytest.mark.parametrize("case", [None, "bar metric", "probe curve", "x-axis", "parallel column, nested form",
                                  "grouping, nested form", "media key", "group filter"])
def test_the_checker_reports_one_misspelt_key(case, tiny_run):
    run = question_run("positions", tiny_run)
    view = build_workspace(QUESTIONS["positions"], entity="someone", project="attnlab", run_keys=run.summary)
    if case is None:
        assert unresolved(references(view), run) == []
        return
    wrong = _misspell(view, case)
    found = unresolved(references(view), run)
    assert len(found) == 1 and wrong in found[0], found


@pytest.mark.parametrize("name", REAL_RUN_CASES)
def test_a_manual_fit_and_test_fills_every_panel(name, tiny_manual):
    """The README's manual path (`attnlab fit`, then `attnlab test --ckpt_path best`): the evaluation is a W&B
    run of its own (job type eval), which the workspace shows beside the fit where the answer is a test/* number;
    every key resolves against the pair, each summary key to a number, the question's metric included."""
    question = _question(name)
    if name in REAL_QUESTIONS and (problem := data_problem(question)):
        skip_real_data(problem)
    fit, evaluation = (RunKeys(run={**r.run, "group": name}, config=r.config, history=r.history, summary=r.summary,
                               media=r.media) for r in tiny_manual(family(name)))
    view = build_workspace(question, entity="someone", project="attnlab", run_keys={**fit.summary,
                                                                                     **evaluation.summary})
    refs = references(view)
    other_arms = _other_arms_images(name, family_params(family(name)).get(question.axes[0]))
    shown = [fit, evaluation] if "eval" in job_types(question) else [fit]  # the runs the workspace shows
    assert unresolved([r for r in refs if r.key not in other_arms], *shown) == []
    home = evaluation if question.metric.startswith("test/") else fit
    assert isinstance(home.summary.get(question.metric), (int, float)), (question.metric, home.summary)


def test_a_summary_key_holding_a_dict_is_unresolved(tiny_run):
    """``define_metric(summary="max,last")`` leaves ``{"max": ..., "last": ...}`` under the name, which W&B shows
    as ``name.max``: a bar, a table column or a sweep reading the name finds no number (wandb#2428)."""
    run = question_run("positions", tiny_run)
    view = build_workspace(QUESTIONS["positions"], entity="someone", project="attnlab", run_keys=run.summary)
    broken = RunKeys(run=run.run, config=run.config, history=run.history, media=run.media,
                     summary={**run.summary, "test/exact_match": {"max": 0.5, "last": 0.5}})
    found = unresolved(references(view), broken)
    assert found and all("test/exact_match" in line for line in found), found
