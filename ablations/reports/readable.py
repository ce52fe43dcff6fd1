"""The report read by a person at a terminal: tables at most :data:`WIDTH` columns wide, what the ± and the brackets
mean, per-length accuracy printed, step counts as whole steps inside the steps a run can take, and the arms that
learned nothing named (issue #44). Formatting only: the numbers are the report's, the verdict's words are not
touched (``ablations.verdicts``).
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ablations.verdicts.stats import Stat, stat

WIDTH = 100
"""Widest line of a terminal table (a table wider than this is split into column groups, the arm column in each)."""

LEGEND = ("cells: mean ± std over finished seeds [95% Student-t interval of the mean], n = finished/total seeds; "
          "intervals clipped to what the metric can take")
"""What the ± and the brackets of every table cell are: the std is the seeds' spread, the interval the mean's."""

LEARNED_LITTLE = 0.1
"""An arm whose mean headline metric is under this fraction of the best arm's (a higher-is-better metric in [0, 1])
is named as having learned little: the comparisons involving it read a failure to train, not the mechanism."""


def split_table(header: Sequence[str], rows: Sequence[Sequence[str]], *, width: int = WIDTH, keep: int = 2) -> str:
    """``header`` + ``rows`` as aligned text, in column groups of at most ``width`` characters a line; the first
    ``keep`` columns (arm, n) start every group."""
    cols = list(zip(header, *rows, strict=True))
    widths = [max(len(str(x)) for x in col) for col in cols]
    groups: list[list[int]] = []
    fixed = sum(widths[:keep]) + 2 * keep
    for i in range(keep, len(cols)):
        used = fixed + sum(widths[j] + 2 for j in groups[-1]) if groups else math.inf
        if not groups or used + widths[i] > width:
            groups.append([])
        groups[-1].append(i)
    blocks = []
    for group in groups or [[]]:
        idx = [*range(keep), *group]
        lines = [[str(line[i]).ljust(widths[i]) for i in idx] for line in [header, ["-" * w for w in widths], *rows]]
        blocks.append("\n".join("  ".join(cells).rstrip() for cells in lines))
    return "\n\n".join(blocks)


def count_cell(s: Stat, most: int | None) -> str:
    """A step count: ``mean ± std [lo, hi]`` in whole steps, the interval clipped to [0, ``most`` + 1] (``most``: the
    most steps a run of the arm took), said when it was clipped. A seed that never reached its target counts as its
    last step + 1, the largest count there is, so such an interval is one of censored counts, not a prediction."""
    if s.n == 0:
        return "—"
    lo, hi = s.ci95
    text = f"{s.mean:.0f} ± {s.std:.0f}"
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return text
    top = math.inf if most is None else most + 1
    clipped = lo < 0 or hi > top
    lo, hi = max(lo, 0.0), min(hi, top)
    return f"{text} [{lo:.0f}, {hi:.0f}]" + (" (clipped)" if clipped else "")


LEN_KEY = re.compile(r"^(?P<split>\w+)/(?P<family>(?:token_)?acc_by_len|bleu_by_len)/len_(?P<lo>\d+)_(?P<hi>\d+)$")
"""A per-length metric: ``<split>/<family>/len_<lo>_<hi>`` (``lit_models.scoring.metrics`` names the buckets)."""


def length_panels(arms: Mapping[Any, Sequence[Any]]) -> dict[tuple[str, str], set[tuple[int, int]]]:
    """(family, split) -> the (lo, hi) length buckets any run logged."""
    panels: dict[tuple[str, str], set[tuple[int, int]]] = {}
    for runs in arms.values():
        for r in runs:
            for m in filter(None, map(LEN_KEY.match, r.metrics)):
                panels.setdefault((m["family"], m["split"]), set()).add((int(m["lo"]), int(m["hi"])))
    return panels


def bucket_stats(runs: Sequence[Any], prefix: str, buckets: Sequence[tuple[int, int]],
                 value: Callable[[Any, str], float] | None = None) -> list[Stat]:
    """The stat over the finished runs of ``<prefix>/len_<lo>_<hi>`` for each bucket (``value``: how a run's
    number is read; default its logged metric, NaN when absent)."""
    done = [r for r in runs if r.status == "finished"]
    read = value or (lambda r, k: r.metrics.get(k, math.nan))
    return [stat([read(r, f"{prefix}/len_{lo:03d}_{hi:03d}") for r in done]) for lo, hi in buckets]


def length_rows(metric: str, arms: Mapping[Any, Sequence[Any]], order: Sequence[Any],
                label: Callable[[Any], str], value: Callable[[Any, str], float]) -> tuple[list[str], list[list[str]]]:
    """Per-length accuracy of each arm: the ``acc_by_len`` buckets of the metric's split (else of the other one),
    mean over finished seeds."""
    panels = length_panels(arms)
    for split in dict.fromkeys((metric.split("/", 1)[0], "test", "val")):
        if buckets := sorted(panels.get(("acc_by_len", split), ())):
            break
    else:
        return [], []
    header = ["arm", *(f"len {lo}-{hi}" for lo, hi in buckets)]
    rows = [[label(arm), *(f"{m.mean:.3f}" if m.n else "—" for m in bucket_stats(arms[arm], f"{split}/acc_by_len",
                                                                                  buckets, value))] for arm in order]
    return header, rows


def learned_little(metric: str, goal: str, bounds: tuple[float, float], means: Mapping[str, float]) -> list[str]:
    """One line per arm that learned little (:data:`LEARNED_LITTLE`), for a higher-is-better metric in [0, 1]."""
    finite = {arm: m for arm, m in means.items() if math.isfinite(m)}
    if goal != "maximize" or bounds != (0.0, 1.0) or len(finite) < 2:
        return []
    best_arm = max(finite, key=finite.__getitem__)
    best = finite[best_arm]
    return [f"{arm} learned little: {metric} {m:.3f}, under {LEARNED_LITTLE:g} of the best arm's ({best_arm}: "
            f"{best:.3f}); a comparison with it reads a failure to train at this scale, not the mechanism"
            for arm, m in finite.items() if best > 0 and m < LEARNED_LITTLE * best]


def terminal_text(header: Sequence[str], rows: Sequence[Sequence[str]], lengths: tuple[list[str], list[list[str]]],
                  flags: Sequence[str]) -> str:
    """What the terminal shows: the table split to :data:`WIDTH`, its legend, per-length accuracy, the flags."""
    parts = [split_table(header, rows), textwrap.fill(LEGEND, WIDTH)]
    if lengths[0]:
        parts.append("exact match by target length (mean over finished seeds):\n"
                     + split_table(*lengths, keep=1))
    parts += [textwrap.fill(line, WIDTH, initial_indent="! ", subsequent_indent="  ") for line in flags]
    return "\n".join(parts)
