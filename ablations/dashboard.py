"""``attnlab dashboard <question> --entity E --project P``: a saved W&B workspace view for one ablation
question, built with ``wandb-workspaces`` (the optional ``dashboard`` extra).

The view shows only the question's runs (W&B group = question, job type fit), grouped by arm (the
question's axes, the same config keys the sweep sets):

- the question's metric against step, mean over seeds with a standard-deviation band per arm;
- the same metric as bars per arm (mean ± std), next to the runs table grouped by arm;
- parallel coordinates over the question's axes and its metric;
- one line plot per probe (prefix probes such as ``val/acc_by_len/`` as one regex panel each);
- the attention-map / caption-overlay images of each run (media browser).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ablations.questions import QUESTIONS, Question

TRANSFORMER_MAPS = ("attention/cross/ex0", "attention/enc_self/ex0", "attention/dec_self/ex0")
MEDIA_KEYS: dict[str, tuple[str, ...]] = {
    **{name: TRANSFORMER_MAPS for name in ("scaling", "norm", "positions", "forcing", "heads")},
    "attention_bottleneck": ("attention/cross/ex0",),
    "cells": ("attention/cross/ex0",),
    "caption_attention": ("attention/caption_additive/ex0", "attention/caption_hard/ex0",
                          "attention/caption_none/ex0"),
    "sentiment_pooling": ("attention/importance/ex0",),
}
"""W&B image keys of each question's figures (``AttentionFigures``: ``attention/<figure>/ex<i>``)."""


def build_workspace(question: Question, *, entity: str, project: str) -> Any:
    """The workspace view (not saved): sections for the metric, the arms, the probes and the images."""
    import wandb_workspaces.reports.v2 as wr
    import wandb_workspaces.workspaces as ws

    metric, axes = question.metric, list(question.axes)
    band = {"groupby_aggfunc": "mean", "groupby_rangefunc": "stddev"}
    answer = ws.Section(name=f"{question.name}: {metric} by arm", is_open=True, panels=[
        wr.LinePlot(title=f"{metric} (mean ± std over seeds)", x="Step", y=[metric], **band),
        wr.BarPlot(title=f"final {metric} per arm (mean ± std)", metrics=[metric], **band),
    ])
    arms = ws.Section(name="arms", is_open=True, panels=[wr.ParallelCoordinatesPlot(
        title="axes → metric",
        columns=[*(wr.ParallelCoordinatesPlotColumn(metric=f"c::{axis}") for axis in axes),
                 wr.ParallelCoordinatesPlotColumn(metric=f"summary:{metric}")])])
    probes = ws.Section(name="probes", is_open=True, panels=[
        wr.LinePlot(title=probe, x="Step", metric_regex=f"^{probe}.*") if probe.endswith("/")
        else wr.LinePlot(title=probe, x="Step", y=[probe], **band)
        for probe in question.probes])
    sections = [answer, arms, probes]
    media = MEDIA_KEYS.get(question.name, ())
    if media:
        sections.append(ws.Section(name="attention", is_open=True,
                                   panels=[wr.MediaBrowser(title="attention maps", media_keys=list(media))]))
    runset = ws.RunsetSettings(
        filters=[ws.Metric("Group") == question.name, ws.Metric("JobType") == "fit"],
        groupby=[ws.Config(axis) for axis in axes],
    )
    return ws.Workspace(entity=entity, project=project, name=f"attnlab · {question.name}", sections=sections,
                        runset_settings=runset)


def dashboard_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="attnlab dashboard",
        description="Save a W&B workspace view for one question: its metric by arm (mean ± std over seeds), the "
                    "runs grouped by arm, parallel coordinates over its axes, its probes and the attention images. "
                    "Needs network, W&B credentials and `pip install attnlab[dashboard]` (wandb-workspaces).")
    p.add_argument("question", choices=sorted(QUESTIONS), help="the ablation question (= the runs' W&B group)")
    p.add_argument("--entity", required=True, help="W&B entity (user or team) that owns the project")
    p.add_argument("--project", default="attnlab", help="W&B project of the runs (default: attnlab)")
    p.add_argument("--dry-run", action="store_true", help="build the view and print its panels, save nothing")
    return p


def dashboard_main(argv: list[str]) -> int:
    """``attnlab dashboard``: save a W&B workspace view for a question (exit 2 without wandb-workspaces)."""
    args = dashboard_parser().parse_args(argv)
    try:
        view = build_workspace(QUESTIONS[args.question], entity=args.entity, project=args.project)
    except ImportError:
        print("attnlab dashboard: error: needs wandb-workspaces: pip install 'attnlab[dashboard]'", file=sys.stderr)
        return 2
    for section in view.sections:
        print(f"{section.name}: " + ", ".join(type(p).__name__ for p in section.panels))
    if args.dry_run:
        return 0
    saved = view.save()
    print(f"saved: {saved.url}")
    return 0
