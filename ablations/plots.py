"""Report figures that show every seed: the question's headline metric per arm, one point per seed,
with the arm's mean and 95% Student-t interval (``ablations.stats``), so a reader sees the spread
that the verdict's intervals summarise; and the small helpers every report figure shares (colours,
length limits, the run's attention figure, saving)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ablations.stats import stat  # noqa: E402

Arm = tuple[Any, ...]


def plot_seeds(arms: Mapping[Arm, list[Any]], order: list[Arm], *, metric: str, label: Callable[[Arm], str],
               value: Callable[[Any, str], float], out: Path) -> Path | None:
    """Strip plot of ``metric`` per arm: finished seeds as points (seed number beside each), mean as a bar
    with its 95% interval; diverged runs drawn as red crosses at the bottom of the axis."""
    rows = []
    for arm in order:
        runs = arms[arm]
        done = [(r.seed, value(r, metric)) for r in runs if r.status == "finished"]
        done = [(s, v) for s, v in done if math.isfinite(v)]
        rows.append((arm, done, sum(r.status == "diverged" for r in runs)))
    if not any(done for _, done, _ in rows):
        return None
    fig, ax = plt.subplots(figsize=(max(4.5, 1.1 * len(rows) + 1.5), 3.6), layout="constrained")
    finite = [v for _, done, _ in rows for _, v in done]
    floor = min(finite) if finite else 0.0
    for x, (_arm, done, diverged) in enumerate(rows):
        for j, (seed, v) in enumerate(done):
            dx = (j - (len(done) - 1) / 2) * 0.08
            ax.plot(x + dx, v, "o", color="tab:blue", alpha=0.8)
            ax.annotate(str(seed), (x + dx, v), textcoords="offset points", xytext=(4, 2), fontsize=6)
        s = stat([v for _, v in done])
        if s.n:
            lo, hi = s.ci95
            err = [[s.mean - lo], [hi - s.mean]] if math.isfinite(lo) else None
            ax.errorbar(x + 0.25, s.mean, yerr=err, fmt="s", color="black", capsize=4, markersize=5)
        if diverged:
            ax.plot([x] * diverged, [floor] * diverged, "x", color="tab:red")
    ax.set_xticks(range(len(rows)), [label(a) for a, _, _ in rows], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(metric)
    ax.set_title(f"{metric}: each seed (dot), mean ± 95% CI (square)", fontsize=9)
    ax.grid(alpha=0.3, axis="y")
    path = out / "seeds.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def colors(n: int) -> list[Any]:
    cmap = plt.get_cmap("tab10")
    return [cmap(i % 10) for i in range(n)]


def length_limits(params: Mapping[str, Any], split: str) -> tuple[int | None, int | None]:
    """(longest training length, longest length of ``split``) from a run's data parameters."""
    train_max = params.get("data.max_len")
    split_max = params.get("data.test_max_len") if split == "test" else train_max
    split_max = split_max if isinstance(split_max, int) else train_max
    return (train_max if isinstance(train_max, int) else None), (split_max if isinstance(split_max, int) else None)


def figure_of(run: Any) -> Path | None:
    """The run's most telling attention figure: the last cross-attention layer of example 0."""
    ex0 = [f for f in run.figures if f.stem.endswith("_ex0")] or run.figures
    cross = sorted((f for f in ex0 if f.name.startswith("cross")), key=lambda f: f.name)
    return (cross or ex0 or [None])[-1] if ex0 else None


def save_figure(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
