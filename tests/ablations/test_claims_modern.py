"""The verdicts of issue #47's questions on hand-made statistics: each says supported where the claim holds, not
supported where it is reversed, and reads what its docstring says (capped LR sensitivity, exact cache bytes, the
relative rise of perplexity)."""

import math

from ablations.catalog import claims_modern
from ablations.catalog.claims_modern import ROPE_FINETUNE
from ablations.catalog.questions import QK_LRS, QUESTIONS
from ablations.catalog.questions_real import REAL_QUESTIONS
from ablations.verdicts.stats import stat

SEEDS = [1, 2, 3, 4, 5]


def _s(values, seeds=SEEDS):
    return stat(values, seeds)


def _jitter(arm: int, seed: int, size: float) -> float:
    """A per-arm, per-seed offset in [-size, size], a different pattern for each arm, so the paired differences
    between arms have spread and the verdict's interval rule is exercised (not a point compared to a bound)."""
    return size * (((seed * 2 + arm * 3) % 5) - 2) / 2


def _qk_stats(off_high: float, on_high: float, diverge_off: bool):
    stats = {}
    for qk in (False, True):
        for lr in QK_LRS:
            high = (on_high if qk else off_high) if lr >= 0.03 else 0.3
            loss = [high + 0.01 * s + _jitter(2 * qk + int(lr > 0.01), s, 0.02) for s in SEEDS]
            diverged = [1.0 if (diverge_off and not qk and lr == max(QK_LRS)) else 0.0 for _ in SEEDS]
            stats[(qk, lr)] = {"val/loss": _s([v for v, d in zip(loss, diverged, strict=True) if not d],
                                              [s for s, d in zip(SEEDS, diverged, strict=True) if not d]),
                               "status/diverged": _s(diverged),
                               "train/max_logit": _s([30.0 + s if not qk else 4.0 + 0.1 * s for s in SEEDS])}
    return stats


def test_qk_norm_verdict_reads_the_capped_lr_sensitivity():
    q = QUESTIONS["qk_norm_lr"]
    assert q.judge(_qk_stats(off_high=2.0, on_high=0.35, diverge_off=True)).startswith("supported")
    assert q.judge(_qk_stats(off_high=0.35, on_high=2.0, diverge_off=False)).startswith("not supported")


def test_lr_sensitivity_is_the_mean_capped_gap_to_the_best_rate():
    """Wortsman et al.'s E_lr[min(loss, cap)] - min_lr loss, per seed, on hand values: losses 1.0, 0.5, 0.8, 9.0
    (capped at ln 24) and one diverged rate (counted at ln 24)."""
    cap, arms = math.log(24), [(lr,) for lr in range(5)]
    stats = {(i,): {"val/loss": _s([v] * 2, [1, 2]), "status/diverged": _s([0.0] * 2, [1, 2])}
             for i, v in enumerate((1.0, 0.5, 0.8, 9.0))}
    stats[(4,)] = {"status/diverged": _s([1.0] * 2, [1, 2])}
    r = claims_modern.lr_sensitivity(stats, arms)
    assert r is not None and r.n == 2 and math.isclose(r.mean, (1.0 + 0.5 + 0.8 + 2 * cap) / 5 - 0.5, abs_tol=1e-12)


def _kv_stats(mha: float, gqa: float, mqa: float, cache=(64, 128, 512), noise: float = 0.004):
    stats = {}
    for kv, acc, size in ((1, mqa, cache[0]), (2, gqa, cache[1]), (8, mha, cache[2])):
        stats[(kv,)] = {claims_modern.KV_METRIC: _s([acc + 0.002 * s + _jitter(kv, s, noise) for s in SEEDS]),
                        "run/parameters": _s([100_000.0] * 5), "test/kv_cache_bytes_per_token": _s([size] * 5),
                        "test/decode_tokens_per_s": _s([1000.0 / kv] * 5)}
    return stats


def test_kv_heads_verdict():
    q = QUESTIONS["kv_heads"]
    assert q.judge(_kv_stats(mha=0.80, gqa=0.79, mqa=0.6)).startswith("supported")
    assert q.judge(_kv_stats(mha=0.80, gqa=0.50, mqa=0.5)).startswith("not supported")
    assert q.judge(_kv_stats(mha=0.80, gqa=0.79, mqa=0.6, cache=(64, 400, 512))).startswith("not supported")
    assert "not shown at this scale" in q.judge(_kv_stats(mha=0.1, gqa=0.1, mqa=0.1))
    # the same means with seed spread too wide for the ±0.05 equivalence: the interval decides, not the means
    wide = q.judge(_kv_stats(mha=0.80, gqa=0.79, mqa=0.6, noise=0.1))
    assert not wide.startswith("supported"), wide


ROPE_AT = {k: f"test/ppl_by_ctx/ctx_{128 * k:05d}" for k in (1, 2, 4)}


def _rope_stats(rises: dict[str, float], at_l: dict[str, float] | None = None, tuned: float = 0.0, *,
                at=ROPE_AT, finetune=ROPE_FINETUNE, base_ppl=5.0):
    """Zero-fine-tune arms ``(scaling, 0)`` with the given relative rises; fine-tuned arms ``(scaling, finetune)``
    rise by ``tuned``; perplexity keys ``at`` (L, 2L, 4L)."""
    stats = {}
    arms = {(arm, 0): r for arm, r in rises.items()} | {(arm, finetune): tuned for arm in rises}
    for i, (arm, r) in enumerate(arms.items()):
        base = [(at_l or {}).get(arm[0], base_ppl) + 0.01 * s + _jitter(i, s, 0.05) for s in SEEDS]
        stats[arm] = {at[1]: _s(base), at[2]: _s([b * (1 + r / 2) for b in base]),
                      at[4]: _s([b * (1 + r + _jitter(i + 1, s, 0.01)) for b, s in zip(base, SEEDS, strict=True)])}
    return stats


def test_rope_scaling_verdict_judges_the_rise_not_the_perplexity():
    q = REAL_QUESTIONS["rope_scaling"]
    good = q.judge(_rope_stats({"none": 0.8, "linear": 0.05, "ntk": 0.1, "yarn": 0.02}))
    assert good.startswith("supported"), good
    flat = q.judge(_rope_stats({"none": 0.01, "linear": 0.01, "ntk": 0.01, "yarn": 0.01}, tuned=0.01))
    assert flat.startswith("not supported"), flat
    # a scaling that ruins the in-range perplexity rises less but sits past chance at 4L (unigram 17): not supported
    worse = {"linear": 9.5, "ntk": 9.5, "yarn": 9.5}
    line = q.judge(_rope_stats({"none": 1.5, "linear": 0.9, "ntk": 0.9, "yarn": 0.9}, at_l=worse))
    assert line.startswith("not supported") and "not above chance beyond the range" in line, line


def test_rope_scaling_verdict_judges_the_fine_tune_against_both_zero_fine_tune_arms():
    """Chen et al. 2023: the fine-tuned linear arm rises less than plain RoPE and than linear without fine-tune; a
    fine-tune that leaves the rise where zero-fine-tune linear had it is not the paper's finding."""
    q = REAL_QUESTIONS["rope_scaling"]
    rises = {"none": 0.8, "linear": 0.3, "ntk": 0.1, "yarn": 0.02}
    line = q.judge(_rope_stats(rises, tuned=0.0))
    assert line.startswith("supported"), line
    assert "linear fine-tuned 32 steps at 4L rises less than linear without fine-tune: supported" in line, line
    stuck = q.judge(_rope_stats(rises, tuned=0.6))  # worse than zero-fine-tune linear, still below plain RoPE
    assert stuck.startswith("not supported"), stuck
    assert "linear fine-tuned 32 steps at 4L rises less than plain RoPE from L to 4L: supported" in stuck, stuck
    assert "linear/32" in stuck and "yarn/32" in stuck  # the fine-tuned arms are ranked, not judged


def _reverse_stats(rises, at_l=None, tuned=0.0):
    return _rope_stats(rises, at_l, tuned, at=claims_modern.REVERSE_AT, finetune=claims_modern.REVERSE_FINETUNE,
                       base_ppl=1.2)


def test_rope_reverse_verdict_judges_the_answer_perplexity_rise_like_the_real_half():
    """The decoder-only half reads the answer's perplexity by length bucket through the same rules: interpolation
    rising several times less than plain RoPE is supported; equal rises are not; a scaling whose perplexity at 4L is
    past chance (20, uniform over the content ids) is not supported however little it rises; an unlearned task (in
    range above the gate of 2) is not judged on its rises."""
    q = QUESTIONS["rope_reverse"]
    rises = {"none": 12.0, "linear": 2.0, "ntk": 3.0, "yarn": 2.5}
    good = q.judge(_reverse_stats(rises, tuned=0.5))
    assert good.startswith("supported"), good
    assert "linear fine-tuned 100 steps at 4L rises less than linear without fine-tune: supported" in good, good
    assert "token accuracy at 4L" not in good  # no such statistic here: nothing ranked on it
    flat = q.judge(_reverse_stats({"none": 2.0, "linear": 2.0, "ntk": 2.0, "yarn": 2.0}, tuned=2.0))
    assert flat.startswith("not supported"), flat
    # rises of 40% against plain RoPE's 1200%, but from 18 in range: past chance at 4L
    past = q.judge(_reverse_stats(rises | {"linear": 0.4, "ntk": 0.4, "yarn": 0.4}, at_l={"linear": 18.0,
                                  "ntk": 18.0, "yarn": 18.0}))
    assert past.startswith("not supported") and "not above chance beyond the range" in past, past
    unlearned = q.judge(_reverse_stats(rises, at_l={"none": 6.0}, tuned=0.5))
    assert not unlearned.startswith("supported"), unlearned
    # within its SESOI (0.5): a scaling that rises 0.3 less than plain RoPE does not "rise less"
    close = q.judge(_reverse_stats({"none": 2.0, "linear": 1.7, "ntk": 1.7, "yarn": 1.7}, tuned=1.0))
    assert not close.startswith("supported"), close


def test_a_log_rise_is_the_log_ratio_per_seed_on_the_seeds_with_both_values():
    """``rise(change="log")``: ln(beyond / inside) paired by seed (the rise of the NLL per token for a
    perplexity); a seed missing a value is left out."""
    from ablations.verdicts.extrapolation import rise

    stats = {("a",): {"in": _s([1.0, 2.0, 4.0], [1, 2, 3]), "out": _s([1.0, 16.0], [1, 3])}}
    r = rise(stats, ("a",), inside="in", beyond="out", change="log")
    assert r is not None and r.n == 2 and math.isclose(r.mean, (0.0 + math.log(4.0)) / 2, abs_tol=1e-12)
