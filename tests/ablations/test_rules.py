"""The verdict rules of issue #42 on constructed seed tables, one test per rule: a wrong sign is never "not shown
at this scale", "beats" needs the smallest effect of interest, "≈" is an equivalence test against its margin,
extrapolation is judged on the change from in range and above chance, the judged arm is the plan's, and the
report says when the interval and the sign-flip p disagree."""

from __future__ import annotations

import pytest

from ablations.catalog import claims, claims_recurrent
from ablations.catalog.arms import Arms
from ablations.catalog.questions import QUESTIONS
from ablations.verdicts.extrapolation import extrapolates
from ablations.verdicts.rules import (
    WRONG_SIGN,
    Check,
    at_scale,
    better,
    head_of,
    join,
    learned,
    secondary,
    similar,
    verdict_word,
)
from ablations.verdicts.stats import Stat, compare, stat


def seeds(*values: float) -> Stat:
    return stat(list(values), list(range(1, len(values) + 1)))


def table(**arms: dict[str, tuple[float, ...]]) -> dict:
    return {(a,): {k.replace("__", "/"): seeds(*v) for k, v in metrics.items()} for a, metrics in arms.items()}


def test_a_wrong_sign_within_noise_is_never_not_shown_at_this_scale():
    stats = table(a={"m": (0.70, 0.80, 0.74)}, b={"m": (0.78, 0.77, 0.76)})
    wrong = at_scale(better(stats, ("a",), ("b",), metric="m", goal="maximize", sesoi=0.0), "expected at scale")
    assert wrong.sign < 0 and wrong.answer == "inconclusive" and wrong.why == WRONG_SIGN
    line = join([better(table(a={"m": (0.9, 0.91, 0.92)}, b={"m": (0.5, 0.5, 0.51)}), ("a",), ("b",), metric="m",
                        goal="maximize", sesoi=0.05), wrong])
    assert verdict_word(line) == "inconclusive" and "supported where shown" not in line and "wrong sign" in line
    right = table(a={"m": (0.82, 0.74, 0.80)}, b={"m": (0.78, 0.77, 0.76)})  # the claimed sign, within noise
    assert at_scale(better(right, ("a",), ("b",), metric="m", goal="maximize"), "x").answer == "not shown at this scale"


def test_a_wrong_sign_clear_of_zero_is_not_supported_and_never_supported_where_shown():
    stats = table(a={"m": (0.60, 0.61, 0.62)}, b={"m": (0.80, 0.81, 0.83)})
    wrong = at_scale(better(stats, ("a",), ("b",), metric="m", goal="maximize", sesoi=0.05), "x")
    assert wrong.answer == "not supported" and "wrong sign" in wrong.detail
    assert verdict_word(join([wrong])) == "not supported"


def test_beats_needs_the_interval_above_the_smallest_effect_of_interest():
    stats = table(a={"m": (0.83, 0.84, 0.85, 0.84, 0.83)}, b={"m": (0.80, 0.80, 0.81, 0.79, 0.80)})  # Δ ≈ 0.04
    assert better(stats, ("a",), ("b",), metric="m", goal="maximize", sesoi=0.0).answer == "supported"
    straddles = better(stats, ("a",), ("b",), metric="m", goal="maximize", sesoi=0.04)
    assert straddles.answer == "inconclusive" and straddles.why.startswith("the interval straddles the smallest")
    small = better(stats, ("a",), ("b",), metric="m", goal="maximize", sesoi=0.1)
    assert small.answer == "not supported" and "below the smallest effect of interest" in small.detail


def test_equivalence_fails_outside_its_margin():
    """Two one-sided tests: the 90% interval must lie inside ±margin; a resolved difference beyond it fails."""
    close = table(a={"m": (0.80, 0.82, 0.81, 0.80, 0.81)}, b={"m": (0.81, 0.81, 0.80, 0.81, 0.80)})
    assert similar(close, ("a",), ("b",), metric="m", margin=0.02).answer == "supported"
    apart = table(a={"m": (0.400, 0.420, 0.410, 0.430, 0.415)}, b={"m": (0.425, 0.435, 0.430, 0.445, 0.430)})
    cmp = compare(apart[("a",)]["m"], apart[("b",)]["m"], goal="maximize")
    assert cmp.hi < 0 and -0.1 < cmp.lo, "a difference the seeds resolve, inside the old ±0.1 margin"
    assert similar(apart, ("a",), ("b",), metric="m", margin=0.1).answer == "supported"
    narrow = similar(apart, ("a",), ("b",), metric="m", margin=0.02)
    assert narrow.answer != "supported" and "leaves ±0.02" in narrow.why
    far = table(a={"m": (0.5, 0.52, 0.51)}, b={"m": (0.8, 0.81, 0.82)})
    assert similar(far, ("a",), ("b",), metric="m", margin=0.02).answer == "not supported"


def test_an_arm_below_chance_cannot_extrapolate_better():
    """none falls less than sinusoidal from in range to beyond (it had less to lose), but sits below chance."""
    stats = table(none={"in": (0.30, 0.32, 0.31), "out": (0.03, 0.04, 0.035)},
                  sinusoidal={"in": (0.90, 0.91, 0.92), "out": (0.02, 0.01, 0.015)})
    check = extrapolates(stats, ("none",), ("sinusoidal",), inside="in", beyond="out", goal="maximize", chance=0.05,
                         sesoi=0.02)
    assert check.answer == "not supported" and "not above chance" in check.why
    above = table(none={"in": (0.30, 0.32, 0.31), "out": (0.25, 0.26, 0.255)},
                  sinusoidal={"in": (0.90, 0.91, 0.92), "out": (0.10, 0.09, 0.11)})
    assert extrapolates(above, ("none",), ("sinusoidal",), inside="in", beyond="out", goal="maximize", chance=0.05,
                        sesoi=0.02).answer == "supported"


def test_extrapolation_reads_the_rise_not_the_raw_value_beyond():
    """Perplexity: alibi is lower at 4L only by its in-range quality; its rise from L equals learned's."""
    stats = table(alibi={"L": (10.0, 10.2, 9.9), "4L": (10.1, 10.3, 10.0)},
                  learned={"L": (12.0, 12.1, 11.9), "4L": (12.12, 12.22, 12.02)})
    raw = better(stats, ("alibi",), ("learned",), metric="4L", goal="minimize", sesoi=0.0)
    assert raw.answer == "supported"
    rise = extrapolates(stats, ("alibi",), ("learned",), inside="L", beyond="4L", goal="minimize", chance=17.0,
                        sesoi=0.02, change="relative")
    assert rise.answer == "not supported"  # the rises (+1.0% each) agree within the 2% smallest effect


def test_the_judged_arm_is_the_plans_whatever_the_seeds_say():
    """heads judges the plan's 8 heads even where 4 heads win; cells_adding judges the LSTM, not the best cell."""
    def h(exact: float) -> dict:
        return {"val/exact_match": seeds(exact, exact + 0.01, exact - 0.01), "run/parameters": seeds(1e3, 1e3, 1e3)}

    heads = QUESTIONS["heads"]
    stats = {(1,): h(0.5), (4,): h(0.95), (8,): h(0.6), (16,): h(0.6)}
    line = heads.judge(stats)
    assert "8 heads beat 1 head" in line and "4 heads beat" not in line
    adding = QUESTIONS["cells_adding"]
    mse = {"lstm": (0.16, 0.001, 0.17), "gru": (0.0, 0.0, 0.0), "lstm_peephole": (0.001, 0.002, 0.001),
           "rnn": (0.18, 0.18, 0.181)}
    line = adding.judge({(k,): {"val/mse": seeds(*v)} for k, v in mse.items()})
    assert "the LSTM solves the task" in line and "gru beats" not in line and verdict_word(line) != "supported"
    with pytest.raises(KeyError, match="chooses no arm"):
        claims.heads(stats, Arms.of(stats))  # no plan, no pick on the seeds


def test_a_secondary_check_never_changes_the_main_answer():
    good = better(table(a={"m": (0.9, 0.91, 0.92)}, b={"m": (0.5, 0.5, 0.51)}), ("a",), ("b",), metric="m",
                  goal="maximize", sesoi=0.05)
    bad = secondary(better(table(a={"m": (0.5, 0.5, 0.51)}, b={"m": (0.9, 0.91, 0.92)}), ("a",), ("b",),
                           metric="m", goal="maximize", sesoi=0.05))
    line = join([good, bad])
    assert line.startswith("supported: ") and "|| secondary (not supported): " in line


def test_the_report_says_when_the_interval_and_the_sign_flip_p_disagree():
    """lm_positions' case: learned below sinusoidal with an interval clear of zero, printed as p=1.000 before."""
    a, b = seeds(0.41, 0.42, 0.43, 0.41, 0.42), seeds(0.43, 0.445, 0.44, 0.435, 0.45)
    cmp = compare(a, b, goal="maximize")
    assert cmp.hi < 0 and cmp.p == pytest.approx(1 / 32)  # p in the observed direction, not 1.000
    assert "the interval clears zero but the sign-flip p=0.031 is above 0.025" in cmp.text()
    assert "smallest value with 5 seeds is 0.031" in cmp.text() and "the interval decides" in cmp.text()
    agree = compare(seeds(*[0.5 + 0.01 * i for i in range(8)]), seeds(*[0.3] * 8), goal="maximize")
    assert agree.lo > 0 and agree.p <= 0.025 and "disagree" not in agree.text() and "decides" not in agree.text()


def test_the_bottleneck_verdict_keeps_hard_attention_secondary():
    """The attention-bottleneck claim reads supported on soft vs none, whatever hard attention does."""
    def arm(exact: tuple[float, ...], drop: tuple[float, ...]) -> dict:
        return {"val/exact_match": seeds(*exact), "val/len_drop/acc_by_len": seeds(*drop)}

    stats = {("additive",): arm((0.95, 0.96, 0.94), (0.05, 0.04, 0.06)),
             ("none",): arm((0.32, 0.31, 0.30), (0.9, 0.95, 0.93)),
             ("hard",): arm((0.99, 0.995, 0.99), (0.02, 0.03, 0.02))}  # hard better than soft: own hypothesis fails
    line = claims_recurrent.bottleneck(stats, QUESTIONS["attention_bottleneck"].arms())
    assert line.startswith("supported: ") and "secondary (not supported)" in line


def test_a_wrong_signed_check_under_a_failed_gate_is_never_headlined_not_shown_at_this_scale():
    """A learned gate that fires cannot hide a check of the wrong sign; every check is still listed after it."""
    stats = table(a={"m": (0.10, 0.11, 0.12)}, b={"m": (0.25, 0.26, 0.27)})
    wrong = better(stats, ("a",), ("b",), metric="m", goal="maximize", sesoi=0.01)
    assert wrong.answer == "not supported"
    gate = learned(stats, [("a",)], metric="m", threshold=0.3, goal="maximize", shows_at="full scale")
    assert gate is not None and gate.answer == "not shown at this scale"
    line = join([wrong], gate)
    assert verdict_word(line) == "not supported" and wrong.text() in line and gate.detail in line, line
    noisy = table(a={"m": (0.10, 0.20, 0.05)}, b={"m": (0.12, 0.13, 0.14)})  # the wrong sign within noise
    within = better(noisy, ("a",), ("b",), metric="m", goal="maximize", sesoi=0.01)
    assert within.answer == "inconclusive" and within.sign < 0
    assert verdict_word(join([within], gate)) == "inconclusive"
    right = table(a={"m": (0.14, 0.15, 0.16)}, b={"m": (0.10, 0.11, 0.12)})  # the claimed sign, nothing learned
    shown = better(right, ("a",), ("b",), metric="m", goal="maximize", sesoi=0.01)
    line = join([shown], gate)
    assert verdict_word(line) == "not shown at this scale" and shown.text() in line, line


def test_the_hand_written_gates_never_hide_a_wrong_sign():
    def tr(bleu: float) -> dict:
        return {"test/bleu": seeds(bleu, bleu + 0.01, bleu - 0.005),
                "test/len_drop/bleu_by_len": seeds(0.01, 0.01, 0.01)}

    line = claims_recurrent.bottleneck_translation({("additive",): tr(0.03), ("none",): tr(0.2)})
    assert verdict_word(line) == "not supported" and "additive attention beats none: not supported" in line, line


def test_at_scale_words_an_interval_that_straddles_the_smallest_effect_as_such():
    """Above zero but straddling the smallest effect of interest is not "within seed noise"."""
    stats = table(a={"m": (0.83, 0.84, 0.85, 0.84, 0.83)}, b={"m": (0.80, 0.80, 0.81, 0.79, 0.80)})  # Δ ≈ 0.04
    straddles = better(stats, ("a",), ("b",), metric="m", goal="maximize", sesoi=0.04)
    assert straddles.answer == "inconclusive" and straddles.reason == "straddles"
    scaled = at_scale(straddles, "expected at scale")
    assert scaled.answer == "not shown at this scale" and "seed noise" not in scaled.why, scaled.why
    assert "straddles the smallest effect of interest (0.04)" in scaled.why
    noisy = table(a={"m": (0.82, 0.74, 0.80)}, b={"m": (0.78, 0.77, 0.76)})
    within = at_scale(better(noisy, ("a",), ("b",), metric="m", goal="maximize"), "x")
    assert within.answer == "not shown at this scale" and within.why.startswith("within seed noise at this scale")
    renamed = Check("c", "inconclusive", "", why="the interval straddles the smallest effect of interest, reworded",
                    sign=1.0)
    assert at_scale(renamed, "x") == renamed, "the reason is structured, not read from the text"


def test_a_failed_control_is_inconclusive_not_a_refuted_claim():
    ok = better(table(a={"m": (0.9, 0.91, 0.92)}, b={"m": (0.5, 0.5, 0.51)}), ("a",), ("b",), metric="m",
                goal="maximize", sesoi=0.05)
    control = Check("the arms have equal parameter counts", "not supported", "parameters: a 1,000, b 2,000",
                    control=True)
    assert head_of([ok, control]) == "inconclusive (control failed: the arms have equal parameter counts)"
    assert verdict_word(join([ok, control])) == "inconclusive"
