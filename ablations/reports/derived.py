"""Per-run numbers derived from a run's logged metrics and curves, for the verdicts and tables.

* ``train/...`` keys: the mean over the steps they were logged (early gradient norms), not the last.
* ``curve/early/train/grad_...``: the mean of a gradient probe over the first ``EARLY`` fraction of training
  (of summary.json's ``global_step``; at least its first logged value): the gradients near initialisation,
  before learning reshapes them (Vaswani et al. 2017, §3.2.1: unscaled logits saturate the softmax *at the start*).
* ``<split>/len_drop/<family>`` (family: acc_by_len, token_acc_by_len, bleu_by_len — BLEU by source
  length): accuracy at the shortest length bucket minus accuracy at the
  longest bucket that lies inside the training lengths (Bahdanau et al. 2015, Fig. 2 read as a
  number: ~0 when accuracy stays flat with length, large when it falls).
* ``<split>/len_slope/<family>``: least-squares slope of accuracy against bucket centre, per token.
* ``<split>/beyond/<family>``: mean accuracy over buckets that start beyond the training lengths, and
  ``<split>/within/<family>`` over those inside them (the in-range level a change beyond is read from).
* ``curve/mean/<key>``: mean of a validation probe over every validation of the run (e.g. the
  exposure gap while the model is still learning, which is 0 once it is perfect). For a metric in [0, 1]
  validated at equal step intervals, ``curve/mean/val/exact_match`` is the area under the learning curve:
  for a rising curve it equals 1 - (steps to reach a target, averaged over every target in [0, 1]) / steps,
  so it measures "learns faster" without the single threshold (and the validation-interval rounding) of
  ``curve/steps_to_target``.
* ``curve/steps_to_target``: the first logged step at which the question's metric reaches its
  target; runs that never reach it get their last step + 1 (a lower bound, so a comparison of
  steps can only understate the winner's lead) and ``curve/reached_target`` = 0.
* ``run/parameters``, ``run/global_step``, ``run/tokens_seen``: summary.json's counts, so a verdict can
  check that arms are compute-matched; ``run/max_len``: the longest training sequence (``data.max_len``).
* ``attn/entropy_mean``: the mean final attention entropy over every logged map; ``attn/entropy_first``
  the same at the first validation (where saturation shows before the model has learned to be sharp).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ablations.reports.readable import LEN_KEY
from ablations.reports.results import RunRecord

CURVE_MEANS = ("val/exposure_gap", "val/free_running_loss", "val/loss", "val/exact_match")
EARLY = 0.1  # the first tenth of the run's steps


def _mean(values: list[float]) -> float:
    vals = [v for v in values if math.isfinite(v)]
    return sum(vals) / len(vals) if vals else math.nan


def _slope(xs: list[float], ys: list[float]) -> float:
    if len(xs) < 2:
        return math.nan
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx > 0 else math.nan


def length_numbers(metrics: Mapping[str, float], params: Mapping[str, Any]) -> dict[str, float]:
    """len_drop / len_slope (inside the training lengths) and beyond (past them) per split and family."""
    train_max = params.get("data.max_len")
    train_max = train_max if isinstance(train_max, int) else None
    buckets: dict[tuple[str, str], list[tuple[int, int, float]]] = {}
    for key, value in metrics.items():
        m = LEN_KEY.match(key)
        if m and math.isfinite(value):
            buckets.setdefault((m["split"], m["family"]), []).append((int(m["lo"]), int(m["hi"]), value))
    out: dict[str, float] = {}
    for (split, family), rows in buckets.items():
        rows.sort()
        inside = [r for r in rows if train_max is None or r[0] <= train_max]
        beyond = [r for r in rows if train_max is not None and r[0] > train_max]
        if len(inside) >= 2:
            out[f"{split}/len_drop/{family}"] = inside[0][2] - inside[-1][2]
            hi_cap = train_max or inside[-1][1]
            out[f"{split}/len_slope/{family}"] = _slope(
                [(lo + min(hi, hi_cap)) / 2 for lo, hi, _ in inside], [v for *_, v in inside]
            )
        if beyond:
            out[f"{split}/beyond/{family}"] = _mean([v for *_, v in beyond])
            out[f"{split}/within/{family}"] = _mean([v for *_, v in inside])
    return out


def steps_to(run: RunRecord, key: str, *, target: float, goal: str) -> tuple[float, float]:
    """(first step at which ``key`` reaches ``target``, 1.0) or (last step + 1, 0.0) when it never does."""
    curve = run.curve(key)
    for step, value in curve:
        if (value >= target) if goal == "maximize" else (value <= target):
            return float(step), 1.0
    last = max([s for s, _ in curve], default=-1)
    return float(last + 1) if last >= 0 else math.nan, 0.0


def early_gradients(run: RunRecord, keys: set[str]) -> dict[str, float]:
    """``curve/early/<key>`` for every ``train/grad_`` key: its mean over the first ``EARLY`` of the run's steps
    (summary.json's ``global_step``; the probe's own last logged step when the run has none). The probe logs only
    the first steps of a run (``grad_probes.GradientNorms``), so its last step is not the run's: measured against it,
    the window shrank to the probe's first value."""
    out: dict[str, float] = {}
    for key in keys:
        if not key.startswith("train/grad_"):
            continue
        curve = run.curve(key)
        if curve:
            steps = run.info.get("global_step")
            last = steps if isinstance(steps, (int, float)) and steps > 0 else max(step for step, _ in curve)
            early = [v for step, v in curve if step <= EARLY * last] or [curve[0][1]]
            out[f"curve/early/{key}"] = sum(early) / len(early)
    return out


def derive(
    run: RunRecord, *, metric: str | None = None, target: float | None = None, goal: str = "maximize"
) -> dict[str, float]:
    """The run's metrics plus the derived numbers listed in the module docstring."""
    out = dict(run.metrics)
    history_keys = {k for row in run.history for k in row}
    for key in history_keys:
        if key.startswith("train/"):
            vals = [v for _, v in run.curve(key)]
            if vals:
                out[key] = sum(vals) / len(vals)
    out.update(early_gradients(run, history_keys))
    out.update(length_numbers(run.metrics, run.params))
    if isinstance(run.params.get("data.max_len"), int):
        out["run/max_len"] = float(run.params["data.max_len"])
    for key in ("parameters", "global_step", "tokens_seen"):
        if isinstance(run.info.get(key), (int, float)):
            out[f"run/{key}"] = float(run.info[key])
    for key in CURVE_MEANS:
        vals = [v for _, v in run.curve(key)]
        if vals:
            out[f"curve/mean/{key}"] = sum(vals) / len(vals)
    entropy = [v for k, v in run.metrics.items() if k.startswith("val/attn_entropy/") and math.isfinite(v)]
    if entropy:
        out["attn/entropy_mean"] = sum(entropy) / len(entropy)
    first = [curve[0][1] for k in history_keys if k.startswith("val/attn_entropy/") and (curve := run.curve(k))]
    if first:
        out["attn/entropy_first"] = sum(first) / len(first)
    if metric is not None and target is not None:
        step, reached = steps_to(run, metric, target=target, goal=goal)
        if math.isfinite(step):
            out["curve/steps_to_target"], out["curve/reached_target"] = step, reached
    return out
