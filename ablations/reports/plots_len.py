"""Report figures by length: one panel per metric family and split, one line per arm (mean ± std over
finished seeds) against the length bucket's centre.

Two figures come from the same drawing: ``acc_by_len.png`` (exact match and free-running token accuracy by
target length: the synthetic tasks) and ``bleu_by_len.png`` (corpus BLEU by source length, Cho et al. 2014
Fig. 4 and Bahdanau et al. 2015 Fig. 2: the translation tasks), which also draws how many sentences each
bucket holds (``<split>/count_by_len/...``) as grey bars on a second axis, since a bucket's BLEU rests on them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ablations.reports.plots import colors, length_limits, save_figure  # noqa: E402
from ablations.reports.readable import bucket_stats, length_panels  # noqa: E402

Arm = tuple[Any, ...]
ACC_FAMILIES = {"acc_by_len": "exact match", "token_acc_by_len": "token accuracy (free-running)"}
BLEU_FAMILIES = {"bleu_by_len": "corpus BLEU (0..1)"}
LENGTH_AXIS = {"bleu_by_len": "source length in tokens (bucket centre)"}  # the others: target length


def _counts(arms: Mapping[Arm, list[Any]], split: str, buckets: list[tuple[int, int]]) -> list[float] | None:
    """Sentences per bucket (``<split>/count_by_len``) from the first run that logged them; None if none did."""
    for r in (r for rs in arms.values() for r in rs):
        counts = [r.metrics.get(f"{split}/count_by_len/len_{lo:03d}_{hi:03d}") for lo, hi in buckets]
        if any(c is not None for c in counts):
            return [float(c or 0.0) for c in counts]
    return None


def arm_series(arms: Mapping[Arm, list[Any]], order: list[Arm], prefix: str,
               buckets: list[tuple[int, int]]) -> dict[Arm, list[Any]]:
    """Arm -> the stat over finished seeds of ``<prefix>/len_<lo>_<hi>`` per bucket; arms that logged none left out."""
    series = {arm: bucket_stats(arms[arm], prefix, buckets) for arm in order}
    return {arm: stats for arm, stats in series.items() if any(s.n for s in stats)}


def plot_by_length(arms: Mapping[Arm, list[Any]], order: list[Arm], *, label: Callable[[Arm], str], out: Path,
                   families: Mapping[str, str], name: str) -> Path | None:
    """Draw ``families`` (key family -> axis label) by length into ``out/<name>.png``; None when no run logged them."""
    panels = {k: v for k, v in length_panels(arms).items() if k[0] in families}
    if not panels:
        return None
    params = next(r.params for rs in arms.values() for r in rs)
    rows = [f for f in families if any(k[0] == f for k in panels)]
    splits = sorted({k[1] for k in panels})
    palette = dict(zip(order, colors(len(order)), strict=True))
    fig, axes = plt.subplots(len(rows), len(splits), figsize=(5.5 * len(splits), 4 * len(rows)), squeeze=False)
    for (row, family), (col, split) in itertools.product(enumerate(rows), enumerate(splits)):
        ax, buckets = axes[row, col], sorted(panels.get((family, split), set()))
        train_max, split_max = length_limits(params, split)
        xs = [(lo + min(hi, split_max or hi)) / 2 for lo, hi in buckets]  # centre of the lengths present
        counts = _counts(arms, split, buckets) if family in BLEU_FAMILIES else None
        if counts:
            twin = ax.twinx()
            twin.bar(xs, counts, width=0.8 * (xs[1] - xs[0] if len(xs) > 1 else 1.0), color="grey", alpha=0.15)
            twin.set_ylabel("sentences in bucket (grey bars)", color="grey")
            ax.set_zorder(twin.get_zorder() + 1)
            ax.patch.set_visible(False)
        for arm, stats in arm_series(arms, order, f"{split}/{family}", buckets).items():
            ax.errorbar(xs, [s.mean for s in stats], yerr=[0 if s.n < 2 else s.std for s in stats], color=palette[arm],
                        marker="o", capsize=3, label=f"{label(arm)} (n={max(s.n for s in stats)})")
        if train_max and any(lo > train_max for lo, _ in buckets):  # only where lengths beyond training are shown
            ax.axvline(train_max + 0.5, color="grey", linestyle="--", linewidth=1,
                       label=f"longest training length ({train_max})")
        ax.set(xlabel=LENGTH_AXIS.get(family, "target length (bucket centre)"),
               ylabel=f"{families[family]} (mean ± std over seeds)", title=f"{split}: {families[family]} by length")
        ax.set_ylim(*((0.0, None) if family in BLEU_FAMILIES else (-0.02, 1.02)))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return save_figure(fig, out / f"{name}.png")
