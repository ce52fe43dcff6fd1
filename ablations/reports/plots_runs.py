"""Report figures drawn from every run's logged history: validation curves with a ±1 std band over seeds, and
grouped bars of a probe's keys (per layer or attention map) per arm."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ablations.catalog.questions import Arm, Question  # noqa: E402
from ablations.reports.plots import colors, save_figure  # noqa: E402
from ablations.reports.results import RunRecord, stat  # noqa: E402


def _band(runs: list[RunRecord], key: str) -> tuple[list[int], list[float], list[float]]:
    """Steps, mean and std over seeds of ``key``'s curve (steps logged by at least one seed)."""
    by_step: dict[int, list[float]] = {}
    for r in runs:
        for step, value in r.curve(key):
            by_step.setdefault(step, []).append(value)
    steps = sorted(by_step)
    stats = [stat(by_step[s]) for s in steps]
    return steps, [s.mean for s in stats], [s.std for s in stats]


def curve_keys(question: Question, runs: list[RunRecord]) -> list[str]:
    """The validation curves worth a panel: the metric, every curve a verdict averages (``curve/mean/<key>``
    probes, e.g. forcing's exposure gap), then the first other probe or val/loss; only curves some run logged."""
    averaged = [p.removeprefix("curve/mean/") for p in question.probes if p.startswith("curve/mean/")]
    primary = [question.metric, *averaged]
    rest = [k for k in (*question.probes, "val/loss") if "*" not in k and not k.endswith("/")]
    keys = [k for k in dict.fromkeys([*primary, *rest]) if k.startswith("val/") and any(r.curve(k) for r in runs)]
    return keys[: max(2, len(dict.fromkeys(primary)) + 1)]


def plot_curves(question: Question, arms: Mapping[Arm, list[RunRecord]], order: list[Arm], out: Path, *,
                label: Callable[[Arm], str]) -> Path | None:
    """Validation curves (mean line, ±1 std band over finished seeds) of ``curve_keys``."""
    keys = curve_keys(question, [r for rs in arms.values() for r in rs])
    if not keys:
        return None
    fig, axes = plt.subplots(1, len(keys), figsize=(5.5 * len(keys), 4), squeeze=False)
    for ax, key in zip(axes[0], keys, strict=True):
        for arm, color in zip(order, colors(len(order)), strict=True):
            done = [r for r in arms[arm] if r.status == "finished"]
            steps, mean, std = _band(done, key)
            if not steps:
                continue
            ax.plot(steps, mean, color=color, label=f"{label(arm)} (n={len(done)})")
            lo = [m - s if math.isfinite(s) else m for m, s in zip(mean, std, strict=True)]
            hi = [m + s if math.isfinite(s) else m for m, s in zip(mean, std, strict=True)]
            ax.fill_between(steps, lo, hi, color=color, alpha=0.2)
        ax.set(xlabel="step", ylabel=key, title=key)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return save_figure(fig, out / "curves.png")


PROBE_UNITS = {"attn_entropy": "nats", "grad_norm": "L2 norm", "grad_qk": "L2 norm"}
"""The unit of a probe's values, by a word of its key prefix."""


def plot_probe(prefix: str, arms: Mapping[Arm, list[RunRecord]], order: list[Arm], out: Path, *,
               label: Callable[[Arm], str], value: Callable[[RunRecord, str], float]) -> Path | None:
    """Grouped bars: one group per probe key under ``prefix`` (layer / map), one bar per arm (± std)."""
    keys = sorted({k for rs in arms.values() for r in rs for k in (*r.metrics, *(k for row in r.history for k in row))
                   if k.startswith(prefix)})
    if not keys:
        return None
    shown = [(arm, color) for arm, color in zip(order, colors(len(order)), strict=True)
             if any(math.isfinite(value(r, k)) for r in arms[arm] if r.status == "finished" for k in keys)]
    if not shown:  # an arm with no value under the prefix (no attention: no entropy) gets no legend entry
        return None
    width = 0.8 / len(shown)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(keys) * len(shown) ** 0.5 + 3), 4))
    for i, (arm, color) in enumerate(shown):
        done = [r for r in arms[arm] if r.status == "finished"]
        stats = [stat([value(r, k) for r in done]) for k in keys]
        xs = [j + (i - (len(shown) - 1) / 2) * width for j in range(len(keys))]
        ax.bar(xs, [s.mean if s.n else 0.0 for s in stats], width, yerr=[s.std if s.n > 1 else 0 for s in stats],
               color=color, label=label(arm), capsize=2)
    ax.set_xticks(range(len(keys)), [k[len(prefix):] for k in keys], rotation=45, ha="right", fontsize=7)
    unit = next((u for word, u in PROBE_UNITS.items() if word in prefix), "")
    ax.set(title=prefix.rstrip("/") + (" (mean over logged steps)" if prefix.startswith("train/") else " (final)"),
           xlabel="attention map / layer" if "attn" in prefix else "parameter group / layer",
           ylabel=f"{prefix.rstrip('/')}{f' ({unit})' if unit else ''}, mean ± std over seeds")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7)
    return save_figure(fig, out / f"probe_{prefix.strip('/').replace('/', '_')}.png")
