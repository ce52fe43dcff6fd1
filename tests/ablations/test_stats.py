"""Seed statistics (intervals, paired comparisons, effect sizes) and the claims' verdicts on synthetic
arm statistics: each verdict says supported / not supported / inconclusive / not shown at this scale
for the shape the paper predicts, and never "not supported" when nothing learned."""

from __future__ import annotations

import math

import pytest

from ablations.catalog import claims, claims_recurrent
from ablations.catalog.arms import Arms
from ablations.catalog.questions import QUESTIONS
from ablations.verdicts.ranges import is_count, metric_range
from ablations.verdicts.rules import at_scale, better, join, similar, verdict_word
from ablations.verdicts.stats import Stat, compare, sign_flip_p, stat, t975, t_quantile


def plan_arms(question: str, stats: dict) -> Arms:
    """The arms in ``stats`` with the arms the question's plan chose (``Arms.chosen``)."""
    return Arms.of(stats, chosen=QUESTIONS[question].chosen)


def seeds(*values: float) -> Stat:
    """A Stat over seeds 1..n."""
    return stat(list(values), list(range(1, len(values) + 1)))


@pytest.mark.parametrize(("df", "table"), [(1, 12.7062), (2, 4.3027), (3, 3.1824), (10, 2.2281), (30, 2.0423),
                                         (31, 2.0395), (60, 2.0003), (120, 1.9799), (1000, 1.9623)])
def test_t_quantile_matches_the_table_for_every_df(df: int, table: float):
    """Exact t_{0.975, df} (four-decimal tables), also past df 30, where 1.96 would make intervals too narrow."""
    assert t975(df) == pytest.approx(table, abs=6e-5)


def test_t_quantile_is_the_inverse_of_the_t_distribution():
    assert t_quantile(0.5, 7) == pytest.approx(0.0, abs=1e-12)
    assert t_quantile(0.95, 1) == pytest.approx(math.tan(math.pi * 0.45), rel=1e-10)  # Cauchy: tan(π(p - ½))
    # df 2 in closed form: t² = 2α² / (1 - α²) with α = 2p - 1
    assert t_quantile(0.975, 2) == pytest.approx(math.sqrt(2 * 0.95**2 / (1 - 0.95**2)), rel=1e-10)
    assert t975(1e7) == pytest.approx(1.959964, abs=1e-6)  # the normal quantile in the limit
    assert t975(4.5) == pytest.approx((t975(4) + t975(5)) / 2, abs=0.02) and t975(5) < t975(4.5) < t975(4)
    assert math.isnan(t975(0)) and math.isnan(t_quantile(1.0, 3))


def test_t_interval_of_three_seeds():
    s = seeds(1.0, 2.0, 3.0)  # mean 2, sd 1: half-width t_{0.975,2} / sqrt(3)
    lo, hi = s.ci95
    assert (s.mean, s.std, s.n) == (2.0, 1.0, 3)
    assert lo == pytest.approx(2 - 4.3027 / math.sqrt(3), abs=1e-4) and hi == pytest.approx(2 + 4.3027 / math.sqrt(3),
                                                                                            abs=1e-4)
    assert all(math.isnan(x) for x in seeds(1.0).ci95) and seeds(1.5).text() == "1.500 ± 0.000"


def test_text_prints_whole_numbers_as_integers_and_clips_the_interval():
    assert seeds(1280.0, 1280.0, 1280.0).text(4, count=True) == "1280 ± 0 [1280, 1280]"
    assert seeds(128.0, 170.0, 147.0).text(4, count=True) == "148.3 ± 21.0 [96.1, 200.6]"
    assert seeds(1.0, 1.0, 1.0).text(4) == "1.0000 ± 0.0000 [1.0000, 1.0000]", "a score is not a count"
    assert is_count("curve/steps_to_target") and is_count("run/parameters") and not is_count("val/exact_match")
    assert seeds(0.93, 0.96, 0.99).text(3) == "0.960 ± 0.030 [0.885, 1.035]"
    assert seeds(0.93, 0.96, 0.99).text(3, bounds=(0.0, 1.0)) == "0.960 ± 0.030 [0.885, 1.000]"
    cmp = compare(seeds(0.99, 0.6, 0.99), seeds(0.0, 0.5, 0.0), goal="maximize")
    assert cmp.hi > 1 and "+1.000]" in cmp.text(bounds=(0.0, 1.0)) and f"{cmp.hi:+.3f}]" in cmp.text()


def test_pairing_by_seed_removes_the_shared_seed_noise():
    """Seeds differ a lot, but a beats b by 0.05 on every seed: paired it is clear, unpaired it is not."""
    a, b = seeds(0.2, 0.5, 0.8), seeds(0.15, 0.45, 0.75)
    paired = compare(a, b, goal="maximize")
    assert paired.paired and paired.diff == pytest.approx(0.05) and paired.outcome() == "better"
    assert paired.effect > 100 and paired.p == pytest.approx(1 / 8)  # 3 positive diffs: 1 of 8 sign patterns
    unpaired = compare(Stat(a.mean, a.std, 3), Stat(b.mean, b.std, 3), goal="maximize")
    assert not unpaired.paired and unpaired.outcome() == "within seed noise"
    assert compare(b, a, goal="maximize").outcome() == "worse"
    assert compare(b, a, goal="minimize").outcome() == "better"


def test_seeds_only_one_arm_finished_are_not_paired():
    a = stat([0.9, 0.91, 0.92], [1, 2, 3])
    b = stat([0.1, 0.12], [3, 4])  # one common seed: fall back to the unpaired interval
    cmp = compare(a, b, goal="maximize")
    assert not cmp.paired and cmp.outcome() == "better" and math.isnan(cmp.p)
    assert compare(seeds(0.9), seeds(0.1), goal="maximize").outcome() == "n too small"


def test_sign_flip_p_counts_sign_patterns():
    assert sign_flip_p([1.0, 1.0, 1.0, 1.0]) == pytest.approx(1 / 16)
    assert sign_flip_p([1.0, -1.0]) == pytest.approx(3 / 4)  # observed mean 0: 3 of 4 patterns are >= 0


def test_similar_needs_the_interval_inside_the_margin():
    stats = {("a",): {"m": seeds(0.80, 0.82, 0.81)}, ("b",): {"m": seeds(0.81, 0.80, 0.82)}}
    assert similar(stats, ("a",), ("b",), metric="m", margin=0.1).answer == "supported"
    stats[("b",)] = {"m": seeds(0.5, 0.52, 0.51)}
    assert similar(stats, ("a",), ("b",), metric="m", margin=0.1).answer == "not supported"


def arm(**metrics: tuple[float, ...]) -> dict[str, Stat]:
    return {k.replace("__", "/"): seeds(*v) for k, v in metrics.items()}


def bottleneck_stats(none_drop: tuple[float, ...], soft_acc: float = 0.9) -> dict:
    soft = arm(
        val__exact_match=(soft_acc, soft_acc + 0.02, soft_acc - 0.01), val__len_drop__acc_by_len=(0.05, 0.08, 0.03)
    )
    return {
        ("none",): arm(val__exact_match=(0.2, 0.22, 0.19), val__len_drop__acc_by_len=none_drop),
        ("additive",): soft,
        ("dot",): soft,
        ("general",): soft,
        ("hard",): arm(val__exact_match=(0.4, 0.45, 0.42)),
    }


def test_bottleneck_reads_the_fall_with_length():
    stats = bottleneck_stats(none_drop=(0.7, 0.75, 0.8))
    line = claims_recurrent.bottleneck(stats, plan_arms("attention_bottleneck", stats))
    assert verdict_word(line) == "supported", line
    assert "stays near flat" in line and "falls with length" in line
    stats = bottleneck_stats(none_drop=(0.02, 0.05, 0.04))
    flat_none = claims_recurrent.bottleneck(stats, plan_arms("attention_bottleneck", stats))
    assert verdict_word(flat_none) == "not supported"


def test_nothing_learned_is_not_shown_at_this_scale_not_unsupported():
    stats = bottleneck_stats(none_drop=(0.0, 0.0, 0.0), soft_acc=0.01)
    stats[("none",)] = arm(val__exact_match=(0.0, 0.01, 0.005), val__len_drop__acc_by_len=(0.06, 0.1, 0.05))
    line = claims_recurrent.bottleneck(stats, plan_arms("attention_bottleneck", stats))
    assert verdict_word(line) == "not shown at this scale" and "expected to show at the full preset" in line
    # none clearly above soft: the gate cannot hide the wrong sign (issue: a gate can hide a wrong sign)
    stats = bottleneck_stats(none_drop=(0.0, 0.0, 0.0), soft_acc=0.01)
    line = claims_recurrent.bottleneck(stats, plan_arms("attention_bottleneck", stats))
    assert verdict_word(line) == "not supported" and "the wrong sign, its interval clear of zero" in line, line


def norm_stats(post_cold: dict, warm: int = 100) -> dict:
    good = arm(val__exact_match=(0.8, 0.82, 0.81))
    return {
        ("post", 6, 0): post_cold,
        ("post", 6, warm): good,
        ("pre", 6, 0): good,
        ("pre", 6, warm): good,
        ("post", 2, 0): arm(val__exact_match=(0.79, 0.8, 0.81)),
        ("post", 2, warm): good,
    }


def test_norm_warm_up_recovers_deep_post_norm_and_depth_matters():
    line = claims.norm(norm_stats(arm(val__exact_match=(0.1, 0.15, 0.12))), warm=100)
    assert verdict_word(line) == "supported", line
    assert "gain grows with depth" in line
    fine = claims.norm(norm_stats(arm(val__exact_match=(0.8, 0.81, 0.79))), warm=100)
    assert verdict_word(fine) == "not supported"


def test_norm_counts_divergence_as_the_failure_it_is():
    diverged = {"status/diverged": seeds(1.0, 1.0, 1.0)}  # no exact match: every seed diverged
    line = claims.norm(norm_stats(diverged), warm=100)
    assert "diverged on all 3 seeds" in line and verdict_word(line) == "inconclusive", line  # depth gain unmeasurable


def test_positions_reports_the_ranking_beyond_the_training_lengths():
    def pos(exact: float, beyond: float) -> dict:
        return arm(
            val__exact_match=(exact, exact + 0.01, exact - 0.01),
            test__beyond__token_acc_by_len=(beyond, beyond, beyond + 0.01),
        )

    stats = {
        ("sinusoidal",): pos(0.9, 0.3),
        ("rope",): pos(0.9, 0.5),
        ("learned",): pos(0.895, 0.2),
        ("none",): pos(0.01, 0.1),
    }
    line = claims.positions(stats)
    assert verdict_word(line) == "supported", line
    assert line.index("rope 0.50") < line.index("sinusoidal 0.30") < line.index("learned 0.20")
    stats[("learned",)] = pos(0.5, 0.2)
    assert verdict_word(claims.positions(stats)) == "not supported"


def test_forcing_reads_the_final_metric_and_keeps_the_mechanism_secondary():
    """Bengio et al.'s claim is the final metric (scheduled above teacher, always sampling worst); the exposure gap
    and the speed (``claims.AREA``: larger is faster) are secondary and never change the answer."""

    def f(gap: float, area: float, exact: float) -> dict:
        return arm(
            **{
                "curve__mean__val__exposure_gap": (gap, gap + 0.01, gap - 0.01),
                "curve__mean__val__exact_match": (area, area + 0.01, area - 0.01),
                "val__exact_match": (exact, exact + 0.005, exact - 0.005),
            }
        )

    stats = {("teacher",): f(0.2, 0.7, 0.9), ("student",): f(0.01, 0.5, 0.5), ("scheduled",): f(0.08, 0.68, 0.95)}
    line = claims.forcing(stats)
    assert verdict_word(line) == "supported" and "|| secondary (supported)" in line, line
    stats[("scheduled",)] = f(0.3, 0.68, 0.95)  # the gap widens: a secondary check fails, the answer stands
    line = claims.forcing(stats)
    assert verdict_word(line) == "supported" and "|| secondary (not supported)" in line
    stats[("scheduled",)] = f(0.08, 0.68, 0.8)  # the exploratory seeds' pattern: scheduled below teacher
    assert verdict_word(claims.forcing(stats)) == "not supported"


def test_adding_problem_mean_predictor():
    def cell(*mse: float) -> dict:
        return arm(val__mse=mse)

    stats = {
        ("rnn",): cell(0.165, 0.17, 0.168),
        ("lstm",): cell(0.001, 0.002, 0.0015),
        ("gru",): cell(0.01, 0.02, 0.01),
        ("lstm_peephole",): cell(0.003, 0.002, 0.004),
    }
    assert verdict_word(claims_recurrent.cells_adding(stats)) == "supported"
    stuck = {k: cell(0.17, 0.18, 0.175) for k in stats}
    assert verdict_word(claims_recurrent.cells_adding(stuck)) == "not shown at this scale"


def test_heads_reports_equal_parameter_counts():
    def h(exact: float, params: float) -> dict:
        return arm(val__exact_match=(exact, exact + 0.01, exact - 0.01), run__parameters=(params, params, params))

    stats = {(1,): h(0.5, 1000), (4,): h(0.9, 1000), (8,): h(0.85, 1000), (16,): h(0.6, 1000)}
    line = claims.heads(stats, plan_arms("heads", stats))
    assert verdict_word(line) == "supported" and "equal parameter counts: supported" in line
    stats[(16,)] = h(0.6, 1200)
    assert "equal parameter counts: not supported" in claims.heads(stats, plan_arms("heads", stats))


def test_a_comparison_beyond_the_quick_scale_is_not_shown_only_when_within_noise():
    """``at_scale`` turns "within seed noise" into "not shown at this scale" with its reason, and nothing else."""
    stats = {("a",): arm(m=(0.9, 0.7, 0.8)), ("b",): arm(m=(0.8, 0.8, 0.75)), ("c",): arm(m=(0.5, 0.3, 0.4))}
    noisy = at_scale(better(stats, ("a",), ("b",), metric="m", goal="maximize"), "needs d_k 512")
    assert noisy.answer == "not shown at this scale" and noisy.why.endswith("; needs d_k 512")
    assert noisy.why.startswith("within seed noise at this scale (these seeds resolve about ±0.259)")
    clear = better(stats, ("a",), ("c",), metric="m", goal="maximize")
    wrong = better(stats, ("c",), ("a",), metric="m", goal="maximize")
    assert at_scale(clear, "x") == clear and at_scale(wrong, "x") == wrong
    assert at_scale(better(stats, ("a",), ("zz",), metric="m", goal="maximize"), "x").answer == "inconclusive"
    line = join([clear, noisy])
    assert verdict_word(line) == "supported where shown" and line.startswith("supported where shown (1 of 2 findings")
    assert verdict_word(join([noisy])) == "not shown at this scale"
    assert verdict_word(join([wrong, noisy])) == "not supported"


def test_heads_too_narrow_within_noise_is_supported_where_shown():
    def h(*exact: float) -> dict:
        return arm(val__exact_match=exact, run__parameters=(1000.0,) * len(exact))

    stats = {(1,): h(0.5, 0.52, 0.48), (4,): h(0.8, 0.82, 0.81), (8,): h(0.9, 0.92, 0.91), (16,): h(0.9, 0.6, 0.8)}
    line = claims.heads(stats, plan_arms("heads", stats))
    assert verdict_word(line) == "supported where shown", line
    assert "16 heads (d_k 4): not shown at this scale (within seed noise at this scale (these seeds resolve" in line
    assert "8 heads beat 1 head: supported" in line
    stats[(16,)] = h(0.5, 0.52, 0.55)
    assert verdict_word(claims.heads(stats, plan_arms("heads", stats))) == "supported"
    stats[(1,)] = h(0.95, 0.96, 0.97)  # one head clearly better: the scale note cannot hide it
    assert verdict_word(claims.heads(stats, plan_arms("heads", stats))) == "not supported"
    stats[(1,)], stats[(16,)] = h(0.9, 0.7, 0.85), h(0.9, 0.6, 0.8)  # both within noise: equal parameters
    # (a control, not a finding) cannot make it "supported where shown"
    line = claims.heads(stats, plan_arms("heads", stats))
    assert verdict_word(line) == "not shown at this scale" and "equal parameter counts: supported" in line, line


def test_derived_length_numbers_and_steps_to_target():
    from ablations.reports.derived import derive, length_numbers
    from ablations.reports.results import RunRecord

    metrics = {"val/acc_by_len/len_001_005": 0.9, "val/acc_by_len/len_006_010": 0.5, "val/acc_by_len/len_011_015": 0.1,
               "test/token_acc_by_len/len_011_015": 0.8, "test/token_acc_by_len/len_016_020": 0.4,
               "test/token_acc_by_len/len_021_025": 0.2}
    out = length_numbers(metrics, {"data.max_len": 12})
    assert out["val/len_drop/acc_by_len"] == pytest.approx(0.8)
    assert out["val/len_slope/acc_by_len"] == pytest.approx(-3.4 / 36.5)  # OLS over bucket centres 3, 8, 11.5
    assert out["test/beyond/token_acc_by_len"] == pytest.approx(0.3) and "test/len_drop/token_acc_by_len" not in out
    history = [{"step": 10.0, "val/exact_match": 0.2}, {"step": 20.0, "val/exact_match": 0.6},
               {"step": 5.0, "train/grad_qk/total": 2.0}, {"step": 6.0, "train/grad_qk/total": 4.0}]
    run = RunRecord(experiment="e", name="r", status="finished", params={}, metrics={"val/exact_match": 0.6},
                    history=history, info={"parameters": 1234})
    d = derive(run, metric="val/exact_match", target=0.5)
    assert d["curve/steps_to_target"] == 20.0 and d["curve/reached_target"] == 1.0
    assert d["train/grad_qk/total"] == pytest.approx(3.0) and d["run/parameters"] == 1234.0
    never = derive(run, metric="val/exact_match", target=0.9)
    assert never["curve/steps_to_target"] == 21.0 and never["curve/reached_target"] == 0.0


def test_early_gradients_read_the_first_tenth_of_training():
    """Saturation at initialisation is a claim about the first steps: late values must not dilute it."""
    from ablations.reports.derived import derive
    from ablations.reports.results import RunRecord

    history = [{"step": float(s), "train/grad_qk/total": 0.1 if s <= 10 else 5.0} for s in range(0, 101, 5)]
    run = RunRecord(experiment="e", name="r", status="finished", params={}, metrics={}, history=history)
    d = derive(run)
    assert d["curve/early/train/grad_qk/total"] == pytest.approx(0.1), "steps 0-10 of 100 only"
    assert d["train/grad_qk/total"] > 4.0, "the whole-run mean is dominated by the late steps"
    one = RunRecord(experiment="e", name="r", status="finished", params={}, metrics={},
                    history=[{"step": 50.0, "train/grad_norm/total": 2.5}])
    assert derive(one)["curve/early/train/grad_norm/total"] == 2.5, "a single logged value is its own early mean"


def test_early_gradients_measure_the_tenth_against_the_runs_steps_not_the_probes():
    """The probe logs the first 50 of a run's 564 steps (flushed every 10): the first tenth (56 steps) holds all
    five of its values, not only the first, which a window measured against the probe's own last step kept."""
    from ablations.reports.derived import derive
    from ablations.reports.results import RunRecord

    values = dict(zip(range(9, 50, 10), [6.0, 1, 1, 1, 1], strict=True))
    history = [{"step": float(s), "train/grad_qk/total": v} for s, v in values.items()]
    run = RunRecord(experiment="e", name="r", status="finished", params={}, metrics={}, history=history,
                    info={"global_step": 564})
    assert derive(run)["curve/early/train/grad_qk/total"] == pytest.approx(2.0)
    long_run = RunRecord(experiment="e", name="r", status="finished", params={}, metrics={}, history=history,
                         info={"global_step": 5000})
    assert derive(long_run)["curve/early/train/grad_qk/total"] == pytest.approx(2.0), "the window covers the probe"
    short = RunRecord(experiment="e", name="r", status="finished", params={}, metrics={}, history=history,
                      info={"global_step": 100})
    assert derive(short)["curve/early/train/grad_qk/total"] == pytest.approx(6.0), "only step 9 is in the first 10"


def test_shape_bounds_are_inconclusive_when_the_interval_straddles():
    from ablations.verdicts.rules import at_least, at_most

    stats = {("a",): {"drop": seeds(0.05, 0.12)}}  # mean 0.085; with 2 seeds the interval is wide
    check = at_most(stats, ("a",), metric="drop", bound=0.15, claim="flat")
    assert check.answer == "inconclusive" and "straddles" in check.why
    assert at_least(stats, ("a",), metric="drop", bound=0.15, claim="falls").answer == "inconclusive"
    assert "inconclusive" in join([check]) and not join([check]).startswith("supported")
    tight = {("a",): {"drop": seeds(0.05, 0.06, 0.055)}}
    assert at_most(tight, ("a",), metric="drop", bound=0.15, claim="flat").answer == "supported"
    assert at_least(tight, ("a",), metric="drop", bound=0.15, claim="falls").answer == "not supported"
    assert at_most({("a",): {"drop": seeds(0.05)}}, ("a",), metric="drop", bound=0.15, claim="x").answer == (
        "inconclusive")


def test_metric_ranges():
    assert metric_range("val/exact_match") == (0.0, 1.0) == metric_range("test/beyond/token_acc_by_len")
    assert metric_range("val/len_drop/acc_by_len") == (-1.0, 1.0)
    assert metric_range("val/align_mass/fed/cross/layer1") == (0.0, 1.0) == metric_range("curve/mean/val/exact_match")
    assert metric_range("val/loss") == (0.0, math.inf) == metric_range("val/attn_entropy/*")
    assert metric_range("attn/entropy_first") == (0.0, math.inf) == metric_range("run/parameters")
    assert metric_range("curve/steps_to_target") == (0.0, math.inf) == metric_range("train/grad_qk/*")
    assert metric_range("val/exposure_gap") == (-math.inf, math.inf) == metric_range("val/len_slope/acc_by_len")


def test_verdict_details_clip_intervals_to_the_metric_range():
    from ablations.verdicts.rules import at_least

    stats = {("none",): {"val/exact_match": seeds(0.93, 0.96, 0.99)}}
    check = at_least(stats, ("none",), metric="val/exact_match", bound=0.5, claim="high")
    assert check.answer == "supported" and "[0.885, 1.000]" in check.detail


def test_positions_ranks_alibi_without_judging_it_against_none():
    """ALiBi in an encoder-decoder makes no reversal claim in the literature: ranked, not judged."""
    def pos(exact: float, beyond: float) -> dict:
        return arm(val__exact_match=(exact, exact + 0.01, exact - 0.01),
                   test__beyond__token_acc_by_len=(beyond, beyond, beyond + 0.01))

    stats = {("sinusoidal",): pos(0.9, 0.3), ("learned",): pos(0.89, 0.2), ("alibi",): pos(0.02, 0.05),
             ("none",): pos(0.02, 0.1)}
    line = claims.positions(stats)
    assert verdict_word(line) == "supported" and "alibi beats none" not in line and "alibi 0.05" in line, line


def test_bottleneck_translation_is_not_shown_when_none_translates_nothing():
    def tr(bleu: float, drop: float) -> dict:
        return arm(test__bleu=(bleu, bleu + 0.01, bleu - 0.005), test__len_drop__bleu_by_len=(drop, drop, drop))

    line = claims_recurrent.bottleneck_translation({("additive",): tr(0.2, 0.03), ("none",): tr(0.01, -0.01)})
    assert verdict_word(line) == "not shown at this scale" and "additive attention beats none: supported" in line
    line = claims_recurrent.bottleneck_translation({("additive",): tr(0.3, 0.03), ("none",): tr(0.15, 0.12)})
    assert verdict_word(line) == "supported", line


def test_cells_on_short_sequences_is_not_shown_only_with_the_claimed_sign():
    """The gated-cell claim is about long spans: short training sequences answer "not shown at this scale" with
    the measured comparisons in the line, but only when every one has the claimed sign; a gated cell below the
    Elman RNN is judged as measured (issue #42), and long sequences read the comparisons themselves."""

    def c(exact: float, max_len: int) -> dict:
        return arm(val__exact_match=(exact, exact + 0.01, exact - 0.01), run__max_len=(max_len,) * 3)

    def stats(rnn: float, gru: float, lstm: float, max_len: int) -> dict:
        return {("rnn",): c(rnn, max_len), ("gru",): c(gru, max_len), ("lstm",): c(lstm, max_len),
                ("lstm_peephole",): c(0.3, max_len)}

    short = claims_recurrent.cells(stats(0.4, 0.42, 0.43, 15))
    assert verdict_word(short) == "not shown at this scale", short
    assert "at most 15 tokens" in short and "gru beats the Elman RNN: not supported" in short
    wrong = claims_recurrent.cells(stats(0.4, 0.32, 0.12, 15))
    assert verdict_word(wrong) == "not supported" and "at most 15 tokens" not in wrong
    assert verdict_word(claims_recurrent.cells(stats(0.4, 0.32, 0.3, 50))) == "not supported"
    assert verdict_word(claims_recurrent.cells(stats(0.1, 0.8, 0.8, 50))) == "supported"
