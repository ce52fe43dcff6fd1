"""The comparison report of one ablation question: table (mean ± std over seeds), learning
curves with seed bands, accuracy by length, probe plots, the arms' attention maps side by
side, and the verdict. Written as ``report.md`` + PNGs into ``<root>/<experiment>/``.

Values: the final (last logged) value of each metric per run, except ``train/...`` probes,
which are averaged over the steps they were logged (e.g. gradient norms at the start of
training). Means are over finished runs; diverged and failed runs are counted, not averaged.
"""

from __future__ import annotations

import logging
import math
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

from ablations.catalog.arms import UnsweptArm, swept_values  # noqa: E402
from ablations.catalog.lookup import question_for  # noqa: E402
from ablations.catalog.plan import seed_set  # noqa: E402
from ablations.catalog.questions import Arm, ArmStats, Question, Stat  # noqa: E402
from ablations.engine.sweepspec import SweepError  # noqa: E402
from ablations.reports.derived import derive  # noqa: E402
from ablations.reports.domains import domains_section  # noqa: E402
from ablations.reports.plots import plot_attention, plot_seeds  # noqa: E402
from ablations.reports.plots_len import ACC_FAMILIES, BLEU_FAMILIES, plot_by_length  # noqa: E402
from ablations.reports.plots_runs import plot_curves, plot_probe  # noqa: E402
from ablations.reports.readable import count_cell, learned_little, length_rows, terminal_text  # noqa: E402
from ablations.reports.results import RunRecord, arm_stats, group_arms, stat, varying_params  # noqa: E402
from ablations.verdicts.ranges import is_count, metric_range  # noqa: E402
from attnlab_run.environment import differences  # noqa: E402

log = logging.getLogger(__name__)


@dataclass
class Report:
    """What ``write_report`` produced: the markdown path, the plain-text table and the verdict."""

    path: Path
    table: str
    verdict: str
    figures: list[Path]
    warning: str | None = None


def adhoc_question(name: str, runs: list[RunRecord]) -> Question:
    """A stand-in for experiments without a registered question: axes are the parameters that vary."""
    monitors = [r.metrics for r in runs if "val/exact_match" in r.metrics]
    metric = "val/exact_match" if monitors else "val/loss"
    return Question(name=name, sweep=f"{name}.yaml", axes=varying_params(runs), metric=metric,
                    goal="maximize" if metric != "val/loss" else "minimize", probes=("val/loss",),
                    expected="(no question registered for this experiment)",
                    verdict=lambda stats, arms=None: "no verdict: ad-hoc experiment without a registered question")


def run_value(run: RunRecord, key: str) -> float:
    """Final value of ``key``; ``train/...`` keys averaged over their logged steps; derived numbers too."""
    if key.startswith("train/"):
        vals = [v for _, v in run.curve(key)]
        if vals:
            return sum(vals) / len(vals)
    if key in run.metrics:
        return run.metrics[key]
    return derive(run).get(key, math.nan)


def question_values(question: Question):  # noqa: ANN201 (a RunRecord -> metrics callable)
    """The per-run numbers a question's verdict reads: metrics plus ``ablations.reports.derived`` (steps to its
    target)."""
    return lambda run: derive(run, metric=question.metric, target=question.target, goal=question.goal)


def _arm_label(question: Question, arm: Arm) -> str:
    if arm in question.baseline_arms:
        return f"baseline: {arm[0]}"
    if not question.axes:
        return "all runs"
    return ", ".join(f"{a.split('.')[-1]}={v}" for a, v in zip(question.axes, arm, strict=True))


def _sweep_order(question: Question) -> list[list[Any]]:
    """The value order of each axis in the sweep file (empty lists when the file is unknown)."""
    try:
        return swept_values(question.sweep_path, question.axes)
    except (SweepError, UnsweptArm):
        return [[] for _ in question.axes]


def sorted_arms(question: Question, arms: Mapping[Arm, list[RunRecord]]) -> list[Arm]:
    """Arms in the sweep file's value order (unknown values last, by their text), then the baseline arms."""
    order, baselines = _sweep_order(question), list(question.baseline_arms)

    def key(arm: Arm) -> tuple:
        if arm in baselines:
            return 1, baselines.index(arm), ()
        return 0, 0, tuple((vals.index(v), "") if v in vals else (len(vals), str(v))
                           for vals, v in zip(order, arm, strict=True))

    return sorted(arms, key=key)


# --------------------------------------------------------------------- table
def _columns(question: Question, runs: list[RunRecord]) -> list[str]:
    """Metric, then exact-key probes, then ``prefix*`` averages (acc_by_len only plotted)."""
    keys = {k for r in runs for k in derive(r)} | {k for r in runs for row in r.history for k in row}
    cols = [question.metric]
    for probe in question.probes:
        if probe.endswith("/"):
            if "acc_by_len" not in probe and any(k.startswith(probe) for k in keys):
                cols.append(probe + "*")
        elif probe in keys and probe not in cols:
            cols.append(probe)
    if question.target is not None and any(r.curve(question.metric) for r in runs):
        cols.append("curve/steps_to_target")
    return cols


def _column_stat(runs: list[RunRecord], column: str, question: Question | None = None) -> Stat:
    if column == "curve/steps_to_target" and question is not None:
        return stat([question_values(question)(r).get(column, math.nan) for r in runs])
    if not column.endswith("*"):
        return stat([run_value(r, column) for r in runs])
    prefix, per_run = column[:-1], []
    for r in runs:
        keys = {k for k in r.metrics if k.startswith(prefix)} | {k for row in r.history for k in row
                                                                 if k.startswith(prefix)}
        vals = [run_value(r, k) for k in sorted(keys) if not k.endswith("/total")]
        vals = [v for v in vals if math.isfinite(v)]
        per_run.append(sum(vals) / len(vals) if vals else math.nan)
    return stat(per_run)


def _notes(runs: list[RunRecord]) -> str:
    counts: dict[str, int] = {}
    for r in runs:
        if r.status != "finished":
            counts[r.status] = counts.get(r.status, 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


Rows = list[list[str]]


COMPUTE = (("params", "parameters"), ("steps", "global_step"), ("tokens seen", "tokens_seen"))


def _compute_cell(runs: list[RunRecord], key: str) -> str:
    """An arm's parameter count / steps / tokens seen (one value, or min-max when seeds differ)."""
    vals = sorted({int(r.info[key]) for r in runs if isinstance(r.info.get(key), (int, float))})
    if not vals:
        return "?"
    return f"{vals[0]:,}" if len(vals) == 1 else f"{vals[0]:,}-{vals[-1]:,}"


def _cell(runs: list[RunRecord], column: str, question: Question) -> str:
    """One table cell; a step count in whole steps within the steps the arm's runs took."""
    s = _column_stat(runs, column, question)
    if column == "curve/steps_to_target":
        steps = [int(r.info["global_step"]) for r in runs if isinstance(r.info.get("global_step"), (int, float))]
        return count_cell(s, max(steps) if steps else None)
    return s.text(4, bounds=metric_range(column), count=is_count(column))


def _learned_little(question: Question, arms: Mapping[Arm, list[RunRecord]], order: list[Arm]) -> list[str]:
    means = {_arm_label(question, arm): stat([run_value(r, question.metric) for r in arms[arm]
                                              if r.status == "finished"]).mean for arm in order}
    return learned_little(question.metric, question.goal, metric_range(question.metric), means)


def table(question: Question, arms: Mapping[Arm, list[RunRecord]], order: list[Arm]) -> tuple[list[str], Rows]:
    """Header and rows: arm, n (finished/total), ``mean ± std [95% CI]`` per column, params, steps, tokens, notes."""
    all_runs = [r for runs in arms.values() for r in runs]
    cols = _columns(question, all_runs)
    header = ["arm", "n", *[("mean(" + c[:-1] + "*)" if c.endswith("*") else c) for c in cols],
              *[label for label, _ in COMPUTE], "notes"]
    rows = []
    for arm in order:
        runs = arms[arm]
        done = [r for r in runs if r.status == "finished"]
        cells = [_cell(done, c, question) for c in cols]
        compute = [_compute_cell(done or runs, key) for _, key in COMPUTE]
        notes = _notes(runs) if done else f"no finished run ({_notes(runs)})"
        rows.append([_arm_label(question, arm), f"{len(done)}/{len(runs)}", *cells, *compute, notes])
    return header, rows


def environment_warning(runs: list[RunRecord]) -> str | None:
    """A warning when the runs recorded different hardware, library versions, precision or determinism."""
    records = [r.info.get("environment") or {} for r in runs if r.status in ("finished", "diverged")]
    diff = differences([e for e in records if e])
    missing = sum(1 for e in records if not e)
    parts = [f"{k}: {' / '.join(map(str, v))}" for k, v in diff.items()]
    if missing and missing < len(records):
        parts.append(f"{missing} run(s) recorded no environment")
    return ("arms ran in different environments (" + "; ".join(parts) + "); compare with care") if parts else None


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    esc = [[str(c).replace("|", "\\|") for c in r] for r in [header, *rows]]
    return "\n".join(["| " + " | ".join(esc[0]) + " |", "|" + "---|" * len(header),
                      *["| " + " | ".join(r) + " |" for r in esc[1:]]])


# -------------------------------------------------------------------- report
PRESET_HISTORY = Path(__file__).resolve().parents[2] / "docs" / "findings" / "preset_history.md"
"""Each question's quick-preset measurements, one section per question named after it."""


def preset_history_line(question: Question, out: Path) -> list[str]:
    """The report's link to its question's section of :data:`PRESET_HISTORY`, relative to the report's folder
    ``out``; none for an ad-hoc experiment, or where the file is not (an installed package)."""
    if question_for(question.name) is None or not PRESET_HISTORY.is_file():
        return []
    target = Path(os.path.relpath(PRESET_HISTORY, out.resolve())).as_posix()
    return [f"- **Preset history:** [how the quick preset was sized]({target}#{question.name})"]


def write_report(name: str, runs: list[RunRecord], out: Path, question: Question | None = None) -> Report:
    """Write ``out/report.md`` and its PNGs for the runs of one experiment (question looked up by name)."""
    question = question or question_for(name) or adhoc_question(name, runs)
    out.mkdir(parents=True, exist_ok=True)
    arms = group_arms(runs, question.axes, question.baseline_of)
    order = sorted_arms(question, arms)
    stats: ArmStats = arm_stats(arms, question_values(question))
    verdict = question.judge(stats)
    header, rows = table(question, arms, order)
    label = lambda a: _arm_label(question, a)  # noqa: E731
    figures = [p for p in (
        plot_seeds(arms, order, metric=question.metric, label=label, value=run_value, out=out),
        plot_curves(question, arms, order, out, label=label),
        *(plot_by_length(arms, order, label=label, out=out, families=families, name=name)
          for name, families in (("acc_by_len", ACC_FAMILIES), ("bleu_by_len", BLEU_FAMILIES))),
        *(plot_probe(pr, arms, order, out, label=label, value=run_value) for pr in question.probes
          if pr.endswith("/") and "_by_len" not in pr),
        plot_attention(arms, order, label=label, out=out),
    ) if p is not None]
    path = out / "report.md"
    warning = environment_warning(runs)
    domains = domains_section(question, arms, order, label=label)
    flags = _learned_little(question, arms, order)
    path.write_text(_markdown(question, runs, header, rows, verdict, figures, warning, domains=domains, flags=flags,
                              history=preset_history_line(question, out)))
    lengths = length_rows(question.metric, arms, order, label=lambda a: _arm_label(question, a), value=run_value)
    return Report(path=path, table=terminal_text(header, rows, lengths, flags), verdict=verdict, figures=figures,
                  warning=warning)


FIGURE_TITLES = {"seeds": "Headline metric per arm (every seed)",
                 "curves": "Learning curves (mean ± 1 std over finished seeds)", "acc_by_len": "Accuracy by length",
                 "bleu_by_len": "BLEU by source length",
                 "attention": "Attention maps (one seed per arm; arms without attention left out)"}


ALIGN_NOTE = ("Alignment mass: the share of cross-attention on each output token's source position, read at the "
              "decoder step that predicts the token (`val/align_mass/predicted`, the row the token labels in "
              "Bahdanau et al.'s Fig. 3) and at the step fed it, one row later (`val/align_mass/fed`, where some "
              "trained decoders read it instead). `val/align_mass`, the larger of the two, is what the claim "
              "reads: each output token aligned with its source, wherever the decoder reads it. Attention figures "
              "label decoder rows `fed→predicted`.")


def _curve_notes(header: Sequence[str]) -> str:
    """What the table's ``curve/*`` columns are, for those it has (a column it lacks is not described)."""
    notes = []
    if "curve/steps_to_target" in header:
        notes.append("`curve/steps_to_target`: first step at which the metric reached the question's target (runs "
                     "that never did count as their last step + 1, so its interval is one of censored counts, "
                     "clipped to the steps a run took)")
    notes += [f"`{h}`: mean over the run's equally spaced validations, the area under the learning curve (larger = "
              "learned faster)" for h in header if h.startswith("curve/mean/")]
    return "".join(f"; {n}" for n in notes)


def _verdict_lines(verdict: str) -> list[str]:
    """``**Verdict:** <answer>`` and one bullet per check (a verdict joins its checks with `` | ``)."""
    head, _, rest = verdict.partition(": ")
    checks = [c for c in rest.split(" | ") if c] if rest else []
    if len(checks) < 2:
        return [f"- **Verdict:** {verdict}"]
    return [f"- **Verdict:** {head}", *[f"  - {c}" for c in checks]]


def _seed_sets(runs: list[RunRecord]) -> str:
    """Which seed sets the runs hold: an exploratory answer was read while presets were chosen, never a headline."""
    sets = Counter(seed_set(r.seed) for r in runs)
    text = ", ".join(f"{name} ({n} runs)" for name, n in sorted(sets.items()))
    return text + ("; exploratory seeds informed the preset, so only a confirmatory answer (`attnlab findings "
                   "--confirm`) is a headline" if any(k.startswith("exploratory") for k in sets) else "")


def _markdown(question: Question, runs: list[RunRecord], header: list[str], rows: list[list[str]], verdict: str,
              figures: list[Path], warning: str | None = None, domains: Sequence[str] = (),
              flags: Sequence[str] = (), history: Sequence[str] = ()) -> str:
    axes = ", ".join(f"`{a}`" for a in question.axes) or "(none)"
    baselines = "".join(f" · **baseline arm:** `{label}` (`{config}`)" for label, config in question.baselines.items())
    lines = [
        f"# {question.name}", "",
        f"- **Sweep:** `sweeps/{question.sweep}` · **axes:** {axes}{baselines}",
        f"- **Metric:** `{question.metric}` ({question.goal})",
        f"- **Seed set:** {_seed_sets(runs)}",
        f"- **Expected:** {question.expected}",
        *_verdict_lines(verdict),
        *([f"- **Preset changed after its verdict was seen:** {question.preset_changed}"]
          if question.preset_changed else []),
        *history, "",
        *([f"> **Warning:** {warning}", ""] if warning else []),
        "## Results", "",
        "Mean ± std [95% Student-t interval] over finished seeds (n = finished/total); diverged and failed runs "
        "are counted in notes, never averaged. Intervals are clipped to the range the metric can take (e.g. [0, 1] "
        "for exact match, ≥ 0 for a loss or a step count; the verdict's Δ intervals to ± that range's width); "
        "whole-number columns (steps, counts) print without decimals. Final values; `train/` probes averaged over "
        "their logged steps" + _curve_notes(header) + ". Comparisons in the verdict are "
        "paired by seed: Δ with its 95% interval, the exact sign-flip p and the effect size d.", "",
        *[f"> **Learned little:** {line}" for line in flags], *([""] if flags else []),
        *([ALIGN_NOTE, ""] if any(h.startswith("val/align_mass") for h in header) else []),
        markdown_table(header, rows), "",
    ]
    for fig in figures:
        title = FIGURE_TITLES.get(fig.stem, fig.stem.removeprefix("probe_").replace("_", "/") + " (probe)")
        lines += [f"## {title}", "", f"![{fig.stem}]({fig.name})", ""]
    lines += [*domains, "## Runs", "", "Evaluation: the `summary.json` evaluation whose numbers this report read "
              "(`fit`: the "
              "fit's own; ids hash the evaluation's decode/data options and checkpoint).", "",
              "| run | status | seed | evaluation | " + question.metric + " |", "|---|---|---|---|---|"]
    for r in sorted(runs, key=lambda r: r.name):
        value = r.metrics.get(question.metric)
        read = ", ".join(f"{kind} {key}" for kind, key in sorted(r.evaluations.items())) or "fit"
        read += "".join(f"; note: {note}" for note in r.notes)  # a failed evaluation: beside the run, not its status
        lines.append(f"| {r.name} | {r.status} | {r.seed} | {read} | {'—' if value is None else f'{value:.4f}'} |")
    return "\n".join(lines) + "\n"
