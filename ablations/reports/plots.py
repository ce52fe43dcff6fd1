"""Report figures that show every seed: the question's headline metric per arm, one point per seed,
with the arm's mean and 95% Student-t interval (``ablations.verdicts.stats``, clipped to the metric's range), so a
reader sees the spread that the verdict's intervals summarise; the arms' attention maps side by side, drawn
from the weights a run saved; and the small helpers every report figure shares (colours, length limits,
the run's attention figure, saving)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ablations.verdicts.ranges import metric_range  # noqa: E402
from ablations.verdicts.stats import stat  # noqa: E402

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
            (lo, hi), (bottom, top) = s.ci95, metric_range(metric)
            lo, hi = max(lo, bottom), min(hi, top)  # nan stays nan: max(nan, x) is nan
            err = [[s.mean - lo], [hi - s.mean]] if math.isfinite(lo) else None
            ax.errorbar(x + 0.25, s.mean, yerr=err, fmt="s", color="black", capsize=4, markersize=5)
        if diverged:
            ax.plot([x] * diverged, [floor] * diverged, "x", color="tab:red")
    ax.set_xticks(range(len(rows)), [label(a) for a, _, _ in rows], rotation=20, ha="right", fontsize=8)
    ax.set(xlabel="arm", ylabel=metric)
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


ATTENTION_COLS = 3  # arms per row of the side-by-side attention figure (more would shrink the maps)


def attention_record(run: Any) -> dict | None:
    """The weights behind the run's most telling attention figure (``plots.figure_of``): the JSON record that
    ``lit_models.callbacks.figures`` saves beside the PNG (labels and per-layer head-mean maps); None when there
    is none."""
    path = figure_of(run)
    try:
        record = json.loads(path.with_suffix(".json").read_text()) if path is not None else None
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("layers") else None


def _is_attention(weights: list[list[float]]) -> bool:
    """Whether some row of the map is a distribution (an arm without attention draws all-zero maps)."""
    return any(abs(sum(row) - 1.0) < 0.01 for row in weights)


def _attention_picks(arms: Mapping[Arm, list[Any]], order: list[Arm],
                     label: Callable[[Arm], str]) -> tuple[list[tuple[str, Any, dict]], list[str]]:
    """(arm label, run, record) of the lowest-seed finished run of each arm with a map; the arms left out, why."""
    picks, left_out = [], []
    for arm in order:
        done = sorted((r for r in arms[arm] if r.status == "finished" and r.figures), key=lambda r: str(r.seed))
        if not done:
            continue
        name, record = label(arm), attention_record(done[0])
        if record is None:
            left_out.append(f"{name} (no attention weights saved)")
        elif not _is_attention(record["layers"][-1]):
            left_out.append(f"{name} (no attention)")
        else:
            picks.append((name, done[0], record))
    return picks, left_out


def _tick_size(n: int) -> float:
    return max(4.0, min(8.0, 160 / max(n, 1)))


def plot_attention(arms: Mapping[Arm, list[Any]], order: list[Arm], *, label: Callable[[Arm], str],
                   out: Path) -> Path | None:
    """One panel per arm: the head-mean weights of the last layer of its most telling map (the last cross-attention
    layer, example 0) in the lowest-seed finished run, drawn with imshow on one colour scale [0, 1] with the tokens
    as tick labels (decoder rows ``fed→predicted``, ``lit_models.callbacks.figures.decoder_row_labels``). Arms without
    attention or without saved weights are left out, named in a note under the panels."""
    picks, left_out = _attention_picks(arms, order, label)
    if not picks:
        return None
    cols = min(ATTENTION_COLS, len(picks))
    rows = -(-len(picks) // cols)
    size = max(3.5, 0.22 * max(max(len(r["x_labels"]), len(r["y_labels"])) for _, _, r in picks))
    fig, axes = plt.subplots(rows, cols, figsize=(size * cols + 1.5, size * rows + 1.2), squeeze=False,
                             layout="constrained")
    image = None
    for ax, (name, run, record) in zip(axes.flat, picks, strict=False):
        weights, xs, ys = record["layers"][-1], record["x_labels"], record["y_labels"]
        image = ax.imshow(weights, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
        ax.set_xticks(range(len(weights[0])), _fit_labels(xs, len(weights[0])), rotation=90,
                      fontsize=_tick_size(len(weights[0])))
        ax.set_yticks(range(len(weights)), _fit_labels(ys, len(weights)), fontsize=_tick_size(len(weights)))
        ax.set(title=f"{name} · seed {run.seed}", xlabel=record.get("x_title", "key"),
               ylabel=record.get("y_title", "query"))
        ax.title.set_fontsize(9)
    for ax in list(axes.flat)[len(picks):]:
        ax.axis("off")
    kind = picks[0][2].get("kind", "attention")
    fig.suptitle(f"{kind} attention · last layer, mean over heads · example 0", fontsize=10)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.6, label="attention weight")
    if left_out:
        fig.supxlabel("left out: " + "; ".join(left_out), fontsize=8)  # constrained layout keeps room for it
    path = out / "attention.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _fit_labels(labels: list[str], n: int) -> list[str]:
    return (list(labels) + [""] * n)[:n]
