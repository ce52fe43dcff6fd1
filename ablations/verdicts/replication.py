"""Replication of the findings on seeds nobody looked at (``attnlab findings --replicate``).

The quick presets were chosen while looking at the sweep files' seeds (1, 2, 3), so a verdict read on them
may owe something to those seeds. ``--replicate`` trains every selected question again on a second,
disjoint set — seeds ``FIRST_SEED``, ``FIRST_SEED + 1``, ... as many as the sweep has, never used while
choosing a preset — under ``<root>/replication/`` and reports it under ``<out>/replication/``. The findings
README then says per question whether the verdict replicated: the same leading answer (supported /
supported where shown / not supported / inconclusive / not shown at this scale) on both seed sets.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

FIRST_SEED = 1001
SUBDIR = "replication"


def seed_values(sweep: Mapping[str, Any], seeds: int | None, *, replicate: bool) -> list[int] | None:
    """The seeds to run: None keeps the sweep's own; ``seeds`` gives 1..n; ``replicate`` shifts either count
    to FIRST_SEED.. so the two sets never share a seed."""
    if not replicate:
        return list(range(1, seeds + 1)) if seeds is not None else None
    own = ((sweep.get("parameters") or {}).get("seed_everything") or {}).get("values") or [1]
    n = seeds if seeds is not None else len(own)
    return list(range(FIRST_SEED, FIRST_SEED + n))


def folders(root: Path, out: Path, subdir: str | None) -> tuple[Path, Path]:
    """(runs root, reports folder) of a seed set: a set other than the main one (``subdir``: the replication's
    ``SUBDIR``, or ``ablations.reports.power.SUBDIR``) lives one level down in each; None is the main set."""
    return (root / subdir, out / subdir) if subdir else (root, out)


def replicated(first: str | None, second: str | None) -> str:
    """The README's cell: whether the leading answers of the two verdicts agree ("not run" without one)."""
    from ablations.verdicts.rules import verdict_word

    if first is None or second is None:
        return "not run"
    a, b = verdict_word(first), verdict_word(second)
    return f"yes ({b})" if a == b else f"no ({b})"
