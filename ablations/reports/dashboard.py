"""``attnlab dashboard <question> --entity E --project P``: a saved W&B workspace view for one ablation
question, built with ``wandb-workspaces`` (the optional ``dashboard`` extra).

The view shows only the question's runs (W&B group = question, job type fit, and eval where the answer is a
``test/*`` number: :func:`job_types`), grouped by arm (the
question's axes, the same config keys the sweep sets; a question with baseline arms also by ``model.class_path``,
since a baseline's runs, started with ``--run.experiment=<question>``, share the group but not the axes) in the
runs table and in every panel:

- the question's metric per arm as bars (mean, standard-deviation whiskers over seeds) and, unless it is
  a ``test/*`` number (one point per run), its learning curve per arm (mean line, std band);
- parallel coordinates over the question's axes and its metric;
- one panel per probe: a learning curve for ``val/*`` / ``train/*`` keys (prefix probes such as
  ``val/attn_entropy/`` as one regex panel), bars for ``test/*`` keys;
- the attention-map / caption-overlay images of each run (a media panel with W&B's step slider).

Every key is written the way the W&B backend stores a run of this suite (``keys_of``): the runs log
flat dotted config keys (``model.positions``), stored as ``{"model.positions": {"value": ...}}``, so a
config column is ``config:model.positions.value`` (``wandb-workspaces`` assumes nested dicts and would
write ``model.value.positions``); history and summary keys are the logged names; the x-axis is
``trainer/global_step``, the step metric Lightning's ``WandbLogger`` defines for every key.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal
from urllib.parse import urlparse

from ablations.catalog.lookup import question_for
from ablations.catalog.questions import QUESTIONS, Question
from ablations.catalog.questions_real import REAL_QUESTIONS
from attnlab_core.errors import OneLineParser

STEP = "trainer/global_step"
"""The x-axis: Lightning's ``WandbLogger`` logs it with every row and makes it the step metric of ``*``."""

REPORT_ONLY = re.compile(r"^(curve/|attn/entropy_|run/)|/(len_drop|len_slope|beyond)/")
"""Keys ``ablations.reports.derived`` computes from a run directory for ``attnlab report``; no W&B run carries them."""

MEDIA_KEYS: dict[str, tuple[str, ...]] = {
    q.name: q.media for q in (*QUESTIONS.values(), *REAL_QUESTIONS.values()) if q.media
}
"""W&B image keys of each question's figures, synthetic and real: each ``Question.media``. A question whose runs
draw no figures (``lm_positions_web``: a language model on running text, ``CausalLM.validation_step``) has no
media panel."""


def media_keys(question: Question) -> list[str]:
    """The question's image keys, ``{arm}`` expanded over its sweep's values of its (single) axis."""
    keys = question.media
    if not any("{arm}" in k for k in keys):
        return list(keys)
    from ablations.engine.sweepspec import load_sweep

    (axis,) = question.axes
    spec = load_sweep(question.sweep_path)["parameters"][axis]
    return [k.format(arm=arm) for k in keys for arm in spec.get("values", [spec.get("value")])]


Store = Literal["history", "history-regex", "summary", "config", "run", "media"]


@dataclass(frozen=True)
class Reference:
    """One key a saved workspace reads from the runs: where (section / panel), which store, the backend key,
    and for a run filter the value it requires."""

    where: str
    store: Store
    key: str
    value: Any = None


@dataclass(frozen=True)
class RunKeys:
    """What one W&B run carries, as the backend stores it: run attributes (``group``, ``jobType``, ...), its
    top-level config keys (flat, ``model.positions``), history keys, summary values by key, and image keys."""

    run: dict[str, Any]
    config: frozenset[str]
    history: frozenset[str]
    summary: Mapping[str, Any]
    media: frozenset[str]


def single_point(key: str) -> bool:
    """``test/*`` keys are logged once per run (after fit): bars, not curves."""
    return key.startswith("test/")


@cache
def _flat_config_column() -> type:
    import wandb_workspaces.reports.v2 as wr

    class FlatConfigColumn(wr.ParallelCoordinatesPlotColumn):
        """A parallel-coordinates column for a flat dotted config key: ``config:<key>.value``."""

        def _to_model(self) -> Any:
            model = super()._to_model()
            model.accessor = f"config:{self.metric.name}.value"
            return model

    return FlatConfigColumn


def _probe_panel(probe: str, run_keys: Collection[str], band: dict[str, str]) -> Any | None:
    """A probe's panel: bars for ``test/*`` keys (a prefix: the buckets in ``run_keys``), else a curve."""
    import wandb_workspaces.reports.v2 as wr

    if single_point(probe):
        keys = sorted(k for k in run_keys if k.startswith(probe)) if probe.endswith("/") else [probe]
        return wr.BarPlot(title=probe, metrics=keys, orientation="v", **band) if keys else None
    if probe.endswith("/"):
        return wr.LinePlot(title=probe, x=STEP, metric_regex=f"^{re.escape(probe)}", **band)
    return wr.LinePlot(title=probe, x=STEP, y=[probe], **band)


def job_types(question: Question) -> list[str]:
    """The W&B job types a question's workspace shows: its fits, and where its metric or a probe is a ``test/*``
    number also the evaluations, where `attnlab test --ckpt_path best` after a plain `attnlab fit` puts the test
    numbers (a sweep trial tests inside its fit, ``--run.test_after_fit``). A fit that was both tested in-fit and
    evaluated again shows its test numbers twice."""
    from attnlab_run.wandb_run import EVAL_JOB_TYPE

    return ["fit", EVAL_JOB_TYPE] if any(map(single_point, (question.metric, *question.probes))) else ["fit"]


def build_workspace(question: Question, *, entity: str, project: str, run_keys: Collection[str] = ()) -> Any:
    """The workspace view (not saved). ``run_keys``: summary keys of the question's runs, which name the
    buckets of a ``test/`` prefix probe (without them that probe gets no panel)."""
    import wandb_workspaces.reports.v2 as wr
    import wandb_workspaces.workspaces as ws

    metric, axes, column = question.metric, list(question.axes), _flat_config_column()
    band = {"groupby_aggfunc": "mean", "groupby_rangefunc": "stddev"}
    answer = [wr.BarPlot(title=f"{metric} per arm (mean ± std over seeds)", metrics=[metric], orientation="v",
                         **band)]
    if not single_point(metric):
        answer.append(wr.LinePlot(title=f"{metric} (mean ± std over seeds)", x=STEP, y=[metric], **band))
    answer.append(wr.ParallelCoordinatesPlot(title="axes → metric", columns=[
        *(column(metric=wr.Config(axis)) for axis in axes),
        wr.ParallelCoordinatesPlotColumn(metric=wr.SummaryMetric(metric))]))
    probes = [p for p in (_probe_panel(probe, run_keys, band) for probe in question.probes
                          if not REPORT_ONLY.search(probe)) if p is not None]
    settings = ws.SectionPanelSettings(x_axis=STEP)
    sections = [ws.Section(name=f"{question.name}: {metric} by arm", is_open=True, panels=answer,
                           panel_settings=settings),
                ws.Section(name="probes", is_open=True, panels=probes, panel_settings=settings)]
    if media := media_keys(question):
        sections.append(ws.Section(name="attention", is_open=True, panel_settings=settings, panels=[
            wr.MediaBrowser(title="attention maps (step slider)", media_keys=media, mode="gallery",
                            gallery_axis="step")]))
    # a baseline arm (Question.baselines; another model class, in the question's group) has no axis values:
    # its model class tells its runs apart
    keys = [*axes, *(["model.class_path"] if question.baselines else [])]
    runset = ws.RunsetSettings(
        filters=[ws.Metric("Group") == question.name, ws.Metric("JobType").isin(job_types(question))],
        groupby=[ws.Config(f"{key}.value") for key in keys],  # given whole: groupby_str_to_key keeps it
        pinned_columns=["run:displayName", *(f"config:{key}.value" for key in keys), f"summary:{metric}"],
    )
    return ws.Workspace(entity=entity, project=project, name=f"attnlab · {question.name}", sections=sections,
                        runset_settings=runset, settings=ws.WorkspaceSettings(x_axis=STEP))


def _panel_references(where: str, panel: dict[str, Any]) -> Iterator[Reference]:
    config = panel.get("config") or {}
    kind = panel.get("viewType", "")
    if config.get("xAxis"):
        yield Reference(where, "history", config["xAxis"])
    if config.get("useMetricRegex"):
        yield Reference(where, "history-regex", config["metricRegex"])
    store: Store = "history" if kind == "Run History Line Plot" else "summary"
    for key in config.get("metrics") or []:
        yield Reference(where, store, key)
    for col in config.get("columns") or []:
        section, _, key = col["accessor"].partition(":")
        yield Reference(where, section, key)  # type: ignore[arg-type]
    for key in config.get("mediaKeys") or []:
        yield Reference(where, "media", key)


def _filter_leaves(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if isinstance(node.get("key"), dict) and "op" in node:
            yield node
        for value in node.values():
            yield from _filter_leaves(value)
    elif isinstance(node, list):
        for item in node:
            yield from _filter_leaves(item)


def references(view: Any) -> list[Reference]:
    """Every key the serialised workspace (wandb-workspaces' ``_to_model()``) reads from a run: panel
    metrics, regexes, x-axes, columns and media keys, the runset's filters, grouping and table columns."""
    spec = view._to_model().model_dump(by_alias=True, mode="json")["spec"]["section"]
    out = [Reference("workspace settings", "history", spec["settings"]["xAxis"])]
    for section in spec["panelBankConfig"]["sections"]:
        out.append(Reference(section["name"], "history", section["localPanelSettings"]["xAxis"]))
        for panel in section["panels"]:
            title = (panel.get("config") or {}).get("chartTitle") or panel.get("viewType")
            out.extend(_panel_references(f"{section['name']} / {title}", panel))
    for runset in spec["runSets"]:
        for leaf in _filter_leaves(runset.get("filters")):
            out.append(Reference("runset filter", leaf["key"]["section"], leaf["key"]["name"], leaf.get("value")))
        out.extend(Reference("runset grouping", g["section"], g["name"]) for g in runset.get("grouping") or [])
        for col in (runset.get("runFeed") or {}).get("columnOrder") or []:
            section, _, key = col.partition(":")
            out.append(Reference("runs table", section, key))  # type: ignore[arg-type]
    return out


RUN_ATTRIBUTES = frozenset({"displayName", "name", "createdAt", "state", "tags"})
"""Run attributes every W&B run has (``group`` / ``jobType`` are checked against the run's own values)."""


def _number(value: Any) -> bool:
    """Whether a summary value is what a bar, a table column or a sweep can read: a plain number (not the
    ``{"max": ..., "last": ...}`` dict a ``define_metric(summary=...)`` leaves, nor a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _passes(ref: Reference, run: RunKeys) -> bool:
    """Whether ``run`` passes a runset filter ``ref`` (a value, or a list of accepted values)."""
    if ref.key in RUN_ATTRIBUTES:
        return True
    if ref.key not in run.run:
        return False
    return ref.value is None or (run.run[ref.key] in ref.value if isinstance(ref.value, list)
                                 else run.run[ref.key] == ref.value)


def _answers(ref: Reference, run: RunKeys) -> bool:
    if ref.store == "config":
        return ref.key.endswith(".value") and ref.key.removesuffix(".value") in run.config
    if ref.store == "history-regex":
        return any(re.search(ref.key, k) for k in run.history)
    if ref.store == "summary":
        return ref.key in run.summary and _number(run.summary[ref.key])
    return ref.key in getattr(run, ref.store, ())


def unresolved(refs: Collection[Reference], *runs: RunKeys) -> list[str]:
    """The references the ``runs`` cannot answer, one line each (empty: the workspace shows them in full).

    A run filter (store ``run``) must pass every run given; any other key must be answered by at least one of
    them (a fit and its evaluation: the curves come from the fit, a ``test/*`` bar from either), a summary key
    with a number."""
    bad = []
    for ref in refs:
        ok = (all(_passes(ref, run) for run in runs) if ref.store == "run"
              else any(_answers(ref, run) for run in runs))
        if not ok:
            bad.append(f"{ref.where}: {ref.store} key {ref.key!r}" + (f" = {ref.value!r}" if ref.value else ""))
    return bad


def credentials_problem() -> str | None:
    """None when wandb's own credential lookup finds a key for its configured server (``WANDB_API_KEY``, an
    identity token, the netrc entry ``wandb login`` writes, its settings: ``attnlab_run.wandb_mode``, the rule that
    decides online or offline), else the one line that says how to provide them."""
    from attnlab_run.wandb_mode import wandb_finds_credentials

    if wandb_finds_credentials():
        return None
    host = urlparse(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname or "api.wandb.ai"
    return (f"no W&B credentials for {host}: run `wandb login` or set WANDB_API_KEY "
            "(--dry-run lists the panels without them)")


def logged_summary_keys(question: Question, *, entity: str, project: str, limit: int = 20) -> set[str]:
    """Summary keys of up to ``limit`` of the question's runs on W&B (names the buckets of prefix probes)."""
    import wandb

    runs = wandb.Api().runs(f"{entity}/{project}", filters={"group": question.name, "jobType": "fit"}, per_page=limit)
    keys: set[str] = set()
    for i, run in enumerate(runs):
        if i >= limit:
            break
        keys.update(run.summary.keys())
    return keys


def describe(view: Any) -> list[str]:
    """The panels and runset of ``view`` with the keys each reads, one line per place (``--dry-run``)."""
    by_place: dict[str, list[str]] = {}
    for ref in references(view):
        text = f"{ref.store}:{ref.key}" + (f" = {ref.value!r}" if ref.value is not None else "")
        by_place.setdefault(ref.where, []).append(text)
    return [f"{where}: {', '.join(keys)}" for where, keys in by_place.items()]


def dashboard_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="attnlab dashboard",
        description="Save a W&B workspace view for one question: its metric per arm (mean ± std over seeds), "
                    "learning curves per arm, parallel coordinates over its axes, its probes, the attention images "
                    "and the runs table grouped by arm. Needs `pip install attnlab[dashboard]` (wandb-workspaces); "
                    "saving needs network and W&B credentials, --dry-run neither.")
    p.add_argument("question", choices=sorted([*QUESTIONS, *REAL_QUESTIONS]),
                   help="the ablation question, synthetic or on real data (= the runs' W&B group)")
    p.add_argument("--entity", required=True, help="W&B entity (user or team) that owns the project")
    p.add_argument("--project", default="attnlab", help="W&B project of the runs (default: attnlab)")
    p.add_argument("--dry-run", action="store_true",
                   help="build the view and print its panels with the keys each reads; no network, saves nothing")
    return p


def dashboard_main(argv: list[str]) -> int:
    """``attnlab dashboard``: save (or with ``--dry-run`` print) a question's W&B workspace view; exit 2 without
    wandb-workspaces or, when saving, without W&B credentials."""
    args = dashboard_parser().parse_args(argv)
    question = question_for(args.question)
    assert question is not None  # argparse's choices are the questions
    problem = None if args.dry_run else credentials_problem()
    if problem:
        print(f"attnlab dashboard: error: {problem}", file=sys.stderr)
        return 2
    try:
        keys = set() if args.dry_run else logged_summary_keys(question, entity=args.entity, project=args.project)
        view = build_workspace(question, entity=args.entity, project=args.project, run_keys=keys)
    except ImportError:
        print("attnlab dashboard: error: needs wandb-workspaces: pip install 'attnlab[dashboard]'", file=sys.stderr)
        return 2
    print("\n".join(describe(view)))
    skipped = [p for p in question.probes if REPORT_ONLY.search(p)]
    waiting = [p for p in question.probes if single_point(p) and p.endswith("/") and not any(
        k.startswith(p) for k in keys)]
    if skipped:
        print("not on W&B (computed by `attnlab report` from the run directories): " + ", ".join(skipped))
    if waiting:
        print("bars over the buckets the runs logged (read from W&B when saving; none found yet): "
              + ", ".join(waiting))
    if args.dry_run:
        return 0
    saved = view.save()
    print(f"saved: {saved.url}")
    return 0
