"""The range each logged or derived metric can take, so a printed interval never leaves it.

A Student-t interval of a mean is symmetric, so near the edge of a bounded metric (exact match 0.96 ± 0.03
over three seeds) it reaches past the edge ([0.88, 1.05]); values outside the range are impossible, so the
report and the verdicts print the interval clipped to it (``ablations.verdicts.stats.Stat.text``) and say so.

* [0, 1]: shares and scores (exact match, accuracies, F1, BLEU as sacrebleu / torchmetrics return it divided
  by 100, alignment mass, localisation), every per-length bucket and its ``beyond`` mean, the area under a
  [0, 1] learning curve, the share of gold tokens fed (``p_gold``) and ``curve/reached_target``.
* [-1, 1]: ``len_drop`` (a [0, 1] score at the shortest bucket minus at the longest).
* [0, ∞): losses, MSE, entropies, gradient norms, CIDEr-D, counts (steps, parameters, tokens).
* Everything else (the exposure gap, slopes, rewards): unbounded.

``is_count``: the keys that count something (steps to a target, parameters, tokens), which print as integers.
"""

from __future__ import annotations

import math
import re

from ablations.verdicts.stats import UNBOUNDED, Bounds

UNIT: Bounds = (0.0, 1.0)
SIGNED_UNIT: Bounds = (-1.0, 1.0)
NON_NEGATIVE: Bounds = (0.0, math.inf)

_SCORE = r"(?:exact_match|acc|token_acc|f1|bleu\d?|chrf|align_mass|localisation(?:_uniform)?|p_gold)"
RULES: tuple[tuple[re.Pattern[str], Bounds], ...] = (
    (re.compile(r"(?:^|/)len_drop/"), SIGNED_UNIT),
    (re.compile(r"(?:^|/)len_slope/"), UNBOUNDED),
    (re.compile(r"(?:^|/)(?:token_)?acc_by_len/|(?:^|/)bleu_by_len/|(?:^|/)(?:beyond|within)/"), UNIT),
    (re.compile(rf"(?:^|/){_SCORE}(?:/|$)"), UNIT),
    (re.compile(r"(?:^|/)reached_target$"), UNIT),
    (re.compile(r"(?:^|/)(?:loss|ce|mse|baseline_mse|free_running_loss|cider_d|steps_to_target|parameters"
                r"|global_step|tokens_seen|max_len)$"), NON_NEGATIVE),
    (re.compile(r"(?:^|/)(?:attn_)?entropy(?:_\w+)?(?:/|$)|(?:^|/)grad_(?:norm|qk)/"), NON_NEGATIVE),
)


COUNT = re.compile(r"(?:^|/)(?:steps_to_target|parameters|global_step|tokens_seen|max_len)$")


def is_count(key: str) -> bool:
    """Whether ``key`` counts something (steps, parameters, tokens): printed as whole numbers."""
    return bool(COUNT.search(key))


def metric_range(key: str) -> Bounds:
    """(lowest, highest) value ``key`` can take; ``(-inf, inf)`` when unknown. A table column ``prefix*`` (a mean
    over keys under ``prefix``) has the range of those keys."""
    probe = key[:-1] if key.endswith("*") else key
    probe = probe.removeprefix("curve/mean/").removeprefix("curve/early/")
    for pattern, bounds in RULES:
        if pattern.search(probe):
            return bounds
    return UNBOUNDED
