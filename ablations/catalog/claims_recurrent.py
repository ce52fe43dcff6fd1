"""The recurrent and captioning questions' claims, tested on the probes that measure them (see
``ablations.catalog.claims``
for the rules every verdict follows: a learned gate first, "not shown at this scale" rather than "not supported").
"""

from __future__ import annotations

from ablations.catalog.arms import Arms
from ablations.catalog.claims import EXACT, LEN_DROP, NEGLIGIBLE, best_arm
from ablations.verdicts.rules import ArmStats, Check, at_least, at_most, at_scale, better, get, join, learned, name


def bottleneck(stats: ArmStats, arms: Arms | None = None) -> str:
    """Bahdanau et al. 2015 Fig. 2, Cho et al. 2014: accuracy falls with length without attention, stays
    near flat with soft attention over the training lengths; hard attention (REINFORCE) learns more slowly."""
    arms = arms or Arms.of(stats)
    soft, (none, hard) = arms.arms("additive", "dot", "general"), arms.arms("none", "hard")
    gate = learned(stats, soft, metric=EXACT, threshold=0.3, goal="maximize", shows_at=arms.shows_at)
    best = best_arm(stats, soft, EXACT)
    checks = [
        better(
            stats,
            best,
            none,
            metric=EXACT,
            goal="maximize",
            negligible=NEGLIGIBLE,
            claim=f"soft attention ({name(best)}) beats none",
        ),
        at_least(
            stats,
            none,
            metric=LEN_DROP,
            bound=0.2,
            claim="without attention exact match falls with length (shortest minus longest training bucket)",
        ),
        at_most(
            stats, best, metric=LEN_DROP, bound=0.15, claim=f"{name(best)} stays near flat over the training lengths"
        ),
        better(
            stats,
            best,
            none,
            metric=LEN_DROP,
            goal="minimize",
            claim="the fall with length is smaller with attention",
        ),
    ]
    if get(stats, hard, EXACT) is not None:
        checks.append(
            better(
                stats,
                best,
                hard,
                metric=EXACT,
                goal="maximize",
                claim="hard attention learns more slowly than soft",
            )
        )
    return join(checks, gate)


def bottleneck_translation(stats: ArmStats, arms: Arms | None = None) -> str:
    """Cho et al. 2014 Fig. 4, Bahdanau et al. 2015 Fig. 2: BLEU of the fixed-vector encoder-decoder falls
    as source sentences get longer; with additive attention it stays nearly flat (read as the drop from
    the shortest to the longest source-length bucket of test BLEU)."""
    bleu, drop = "test/bleu", "test/len_drop/bleu_by_len"
    arms = arms or Arms.of(stats)
    additive, none_ = arms.arms("additive", "none")
    gate = learned(stats, [additive], metric=bleu, threshold=0.1, goal="maximize", shows_at=arms.shows_at)
    beats = better(stats, additive, none_, metric=bleu, goal="maximize", claim="additive attention beats none")
    none = get(stats, none_, bleu)
    if gate is None and none is not None and none.mean < 0.05:  # no BLEU even on short sources: no fall can show
        gate = Check("the fixed-vector model translates short sentences", "not shown at this scale",
                     f"none reaches {bleu} {none.mean:.3f}, so its fall with source length cannot be read",
                     why=f"expected at {arms.shows_at}")
        return join([], gate) + " | " + beats.text()
    checks = [
        beats,
        at_least(stats, none_, metric=drop, bound=0.1,
                 claim="without attention BLEU falls with source length (shortest minus longest bucket)"),
        better(stats, additive, none_, metric=drop, goal="minimize",
               claim="the fall with length is smaller with attention"),
    ]
    return join(checks, gate)


def cells_adding(stats: ArmStats, arms: Arms | None = None) -> str:
    """Hochreiter & Schmidhuber 1997, exp. 4: gated cells solve T = 100; the Elman RNN stays at the mean
    predictor (MSE ≈ 1/6 for a target X1 + X2 with X uniform in [0, 1])."""
    arms = arms or Arms.of(stats)
    gated, rnn = arms.arms("lstm", "gru", "lstm_peephole"), arms.arm("rnn")
    gate = learned(stats, gated, metric="val/mse", threshold=0.05, goal="minimize", shows_at=arms.shows_at)
    best = best_arm(stats, gated, "val/mse", maximize=False)
    checks = [
        at_most(stats, best, metric="val/mse", bound=0.05, claim=f"{name(best)} solves the task (MSE ≤ 0.05)"),
        better(stats, best, rnn, metric="val/mse", goal="minimize", claim=f"{name(best)} beats the Elman RNN"),
        at_least(stats, rnn, metric="val/mse", bound=0.12, claim="the Elman RNN stays near the mean predictor"),
    ]
    return join(checks, gate)


# Spans an Elman RNN still bridges through the fixed vector: on the quick preset's 3-15 tokens it beat every gated
# cell (docs/findings/preset_history.md), so the long-span claim needs longer sequences.
LONG_SPAN = 30


def cells(stats: ArmStats, arms: Arms | None = None) -> str:
    """Bengio et al. 1994; Chung et al. 2014: gated cells carry a sequence through the fixed vector better.

    The claim is about long spans (vanishing gradients over many steps): runs whose longest training
    sequence is shorter than ``LONG_SPAN`` answer "not shown at this scale" with the measured comparison.
    """
    arms = arms or Arms.of(stats)
    gated, rnn = arms.arms("gru", "lstm", "lstm_peephole"), arms.arm("rnn")
    gate = learned(stats, gated, metric=EXACT, threshold=0.3, goal="maximize", shows_at=arms.shows_at)
    best = best_arm(stats, gated, EXACT)
    check = better(stats, best, rnn, metric=EXACT, goal="maximize", negligible=NEGLIGIBLE,
                   claim=f"{name(best)} beats the Elman RNN")
    return join([check], gate or _short_spans(stats, [*gated, rnn], check, arms.shows_at))


def _short_spans(stats: ArmStats, arms: list[tuple], check: Check, shows_at: str) -> Check | None:
    """A "not shown at this scale" gate when every arm trained on sequences shorter than ``LONG_SPAN``."""
    lens = [s.mean for a in arms if (s := get(stats, a, "run/max_len")) is not None]
    if not lens or max(lens) >= LONG_SPAN:
        return None
    return Check(
        "the sequences are long enough for gradients to vanish",
        "not shown at this scale",
        f"training sequences of at most {int(max(lens))} tokens; measured: {check.text()}",
        why=f"the claim concerns spans of {LONG_SPAN}+ steps; expected to show at {shows_at}",
    )


def caption(stats: ArmStats, arms: Arms | None = None) -> str:
    """Xu et al. 2015: soft and hard attention beat the mean-feature captioner; attention localises the
    named object better than uniform attention would."""
    arms = arms or Arms.of(stats)
    additive, hard, none = arms.arms("additive", "hard", "none")
    checks = [
        better(stats, additive, none, metric="test/bleu4", goal="maximize",
               claim="additive beats none on BLEU-4"),
        at_scale(better(stats, hard, none, metric="test/bleu4", goal="maximize",
                        claim="hard beats none on BLEU-4"),
                 "REINFORCE's gradient variance slows hard attention, which Xu et al. trained to convergence; "
                 "expected at " + arms.shows_at),
    ]
    checks.append(
        better(
            stats,
            additive,
            additive,
            metric="val/localisation",
            metric_b="val/localisation_uniform",
            goal="maximize",
            claim="additive attention localises better than uniform",
        )
    )
    return join(checks)
