"""Each question's claim as the paper states it, tested on the probe that measures it: the Transformer
questions and sentiment pooling here, the recurrent and captioning ones in ``ablations.catalog.claims_recurrent``.

Every verdict first asks whether the arms that should learn the task learned it at all; if not it
answers "not shown at this scale" with the scale at which the finding should show (``arms.shows_at``: the
question's ``Question.shows_at``), never "not supported". Then it joins paired-by-seed checks
(``ablations.verdicts.rules``). Metric names with ``curve/``, ``attn/`` and ``/len_drop/`` are per-run numbers from
``ablations.reports.derived``.

Every verdict takes its question's arms (``ablations.catalog.arms.Arms``, read from the sweep file) and names each arm
it judges through ``arms.arm``; called without them (on hand-made statistics) it reads the arms in ``stats``.
"""

from __future__ import annotations

from pathlib import Path

from ablations.catalog.arms import Arms
from ablations.verdicts.extrapolation import Change, extrapolates
from ablations.verdicts.ranges import metric_range
from ablations.verdicts.rules import (
    ArmStats,
    Check,
    at_least,
    at_scale,
    better,
    get,
    join,
    learned,
    name,
    secondary,
    similar,
)
from ablations.verdicts.stats import Goal, Stat, stat

EXACT = "val/exact_match"
NEGLIGIBLE = 0.05
"""The smallest effect of interest in exact match (the share of sequences right): a difference whose 95% interval
lies inside ±0.05 counts as no effect, and "beats" needs the interval above it."""
ENTROPY_SESOI = 0.1  # nats of attention entropy: a tenth of a nat, about a 10% change in the weights' spread
AREA_SESOI = 0.02  # area under the exact-match curve: 2% of the run's validations at full accuracy
PROBE_SESOI = 0.0
"""For a mechanism probe with no natural unit (gradient norms): any difference of the claimed sign counts,
stated as such in the plan."""
LEN_DROP = "val/len_drop/acc_by_len"
# "Learns faster": the mean exact match over equally spaced validations, i.e. the area under the learning curve
# (steps to a target averaged over every target; ablations.reports.derived). One threshold at half-epoch resolution
# could not separate sqrt_dk from dk (328 ± 47 vs 344 ± 27 steps) or student from teacher (438 ± 109 vs 375).
AREA = "curve/mean/val/exact_match"


STEPS_SESOI = 47  # steps to the target: one validation interval of the quick preset (a quarter epoch)


def scaling(stats: ArmStats, arms: Arms | None = None) -> str:
    """Vaswani et al. 2017 §3.2.1: unscaled dot products saturate the softmax (entropy collapses, small
    gradients through it); 1/d_k over-flattens; 1/sqrt(d_k) learns before none by steps to the target (none never
    reaches it). Secondary, the project's own hypotheses (the paper compares against no scaling only): 1/d_k
    over-flattens, and 1/sqrt(d_k) learns before 1/d_k by the area under the learning curve (``AREA``)."""
    arms = arms or Arms.of(stats)
    sq, none, dk = arms.arms("sqrt_dk", "none", "dk")
    gate = learned(stats, [sq], metric=EXACT, threshold=0.3, goal="maximize", shows_at=arms.shows_at)
    checks = [
        better(stats, sq, none, metric="attn/entropy_first", goal="maximize", sesoi=ENTROPY_SESOI,
               claim="without scaling attention entropy collapses (first validation, mean over maps)"),
        better(stats, sq, none, metric="curve/early/train/grad_qk/total", goal="maximize", sesoi=PROBE_SESOI,
               claim="without scaling early gradients through the softmax (W_q, W_k; first tenth of training) shrink"),
        secondary(better(stats, dk, sq, metric="attn/entropy_first", goal="maximize", sesoi=ENTROPY_SESOI,
                         claim="1/d_k over-flattens the weights")),
        better(stats, sq, none, metric="curve/steps_to_target", goal="minimize", sesoi=STEPS_SESOI,
               claim="sqrt_dk reaches the target before none"),
        secondary(at_scale(better(stats, sq, dk, metric=AREA, goal="maximize", sesoi=AREA_SESOI,
                                  claim="sqrt_dk learns faster than dk (area under the exact-match curve)"),
                           "Vaswani et al. compare against no scaling only; 1/d_k differs from 1/sqrt(d_k) by a "
                           "constant factor that Adam's scale-free steps on W_q, W_k can absorb, so the gap should "
                           "grow with d_k (d_model 512, 1 head: d_k 512)")),
        _saturation_check(),
    ]
    return join(checks, gate)


def _saturation_check() -> Check:
    from ablations.verdicts import saturation  # torch: imported when a verdict is read, never by `attnlab --help`

    return saturation.check()


def saturation_figures(folder: Path) -> list[Path]:
    """The scaling question's computed figure: the softmax at initialisation over d_k
    (``ablations.verdicts.saturation``)."""
    from ablations.verdicts import saturation  # torch: imported when the figure is drawn

    return [saturation.plot(folder / "saturation.png")]


def norm(stats: ArmStats, arms: Arms | None = None, *, warm: int) -> str:
    """Xiong et al. 2020; Liu et al. 2020: deep Post-Norm without warm-up trains worse or diverges, warm-up
    recovers it, Pre-Norm trains without warm-up, and the gap grows with depth."""
    arms = arms or Arms.of(stats)
    deep = [arms.arm("post", 6, 0), arms.arm("post", 6, warm), arms.arm("pre", 6, 0), arms.arm("pre", 6, warm)]
    shallow_warm, shallow_cold = arms.arm("post", 2, warm), arms.arm("post", 2, 0)
    gate = learned(stats, deep, metric=EXACT, threshold=0.3, goal="maximize", shows_at=arms.shows_at)
    post_cold, post_warm, pre_cold, _ = deep
    checks = [
        _worse_or_diverged(stats, post_warm, post_cold, claim="warm-up recovers deep Post-Norm"),
        _worse_or_diverged(
            stats, pre_cold, post_cold, claim="Pre-Norm trains without warm-up where Post-Norm does not"
        ),
        at_least(stats, pre_cold, metric=EXACT, bound=0.3, claim="deep Pre-Norm learns without warm-up"),
    ]
    gains = {
        ("depth 6",): _gain(stats, post_warm, post_cold, EXACT),
        ("depth 2",): _gain(stats, shallow_warm, shallow_cold, EXACT),
    }
    checks.append(
        better({k: {"warm-up gain": v} for k, v in gains.items() if v is not None}, ("depth 6",), ("depth 2",),
               metric="warm-up gain", goal="maximize", sesoi=NEGLIGIBLE,
               claim="Post-Norm's warm-up gain grows with depth (6 vs 2 layers)")
    )
    return join(checks, gate)


def _gain(stats: ArmStats, hi: tuple, lo: tuple, metric: str) -> Stat | None:
    """Per-seed ``hi - lo`` of ``metric`` over the seeds both arms finished."""
    a, b = get(stats, hi, metric), get(stats, lo, metric)
    if a is None or b is None:
        return None
    bv = dict(b.values)
    common = [(k, v - bv[k]) for k, v in a.values if k in bv]
    return stat([v for _, v in common], [k for k, _ in common]) if common else None


def _worse_or_diverged(stats: ArmStats, good: tuple, bad: tuple, *, claim: str, metric: str = EXACT,
                       negligible: float = NEGLIGIBLE) -> Check:
    """``good`` beats ``bad`` on ``metric``, or ``bad`` diverged on every seed while ``good`` did not."""
    div_bad, div_good = get(stats, bad, "status/diverged"), get(stats, good, "status/diverged")
    if div_bad is not None and div_bad.mean == 1.0 and (div_good is None or div_good.mean < 1.0):
        return Check(claim, "supported", f"{name(bad)} diverged on all {div_bad.n} seeds")
    return better(stats, good, bad, metric=metric, goal="maximize", sesoi=negligible, claim=claim)


BEYOND = "test/beyond/token_acc_by_len"
WITHIN = "test/within/token_acc_by_len"  # ablations.reports.derived: mean over the buckets inside training
EQUAL_POSITIONS = 0.02
"""The equivalence margin of "learned ≈ sinusoidal" in exact match: Vaswani et al.'s row E differs by 0.1 of
25.8 BLEU (0.4%); a difference under 0.02 (about 5% of the test exact match of 0.44 at this scale) counts as
equal. The earlier ±0.1 passed a difference these seeds resolve (Δ −0.017 [−0.031, −0.002])."""
LM_CHANCE = 0.05  # token accuracy of a uniform guess over lm_reverse.yaml's 20 content tokens
EXTRAPOLATION_SESOI = 0.02  # in the change of token accuracy from inside to beyond the training lengths
KAZEMNEJAD = "Kazemnejad et al. 2023 rank NoPE ≈ T5 bias > ALiBi > RoPE ≈ absolute"


def positions(stats: ArmStats, arms: Arms | None = None) -> str:
    """Vaswani et al. 2017 Table 3 (E): learned ≈ sinusoidal in range; without positions reversal fails;
    beyond the training lengths the ranking of every swept scheme (Press et al. 2022), reported, not judged."""
    arms = arms or Arms.of(stats)
    none, sinusoidal, learned_ = arms.arms("none", "sinusoidal", "learned")
    with_pos = [a for a in arms.swept if a != none and get(stats, a, EXACT) is not None]
    gate = learned(stats, with_pos, metric=EXACT, threshold=0.3, goal="maximize", shows_at=arms.shows_at)
    # Judged: the schemes Vaswani et al. compared; RoPE and ALiBi (relative, no claim about reversal in an
    # encoder-decoder) appear in the ranking only (the question's ranked_only).
    checks = [
        better(stats, a, none, metric=EXACT, goal="maximize", sesoi=NEGLIGIBLE,
               claim=f"{name(a)} beats none in range")
        for a in (sinusoidal, learned_)
    ]
    checks.append(similar(stats, learned_, sinusoidal, metric=EXACT, margin=EQUAL_POSITIONS,
                          claim=f"learned ≈ sinusoidal in range (±{EQUAL_POSITIONS:g} exact match)"))
    return join(checks, gate) + _ranking(stats, arms.ranking)


def _ranking(stats: ArmStats, arms: list[tuple], *, metric: str = BEYOND, maximize: bool = True,
             label: str = "beyond the training lengths (free-running token accuracy)") -> str:
    """'; <label>: a x ± s, b ...' best first, for the arms that have ``metric``."""
    sign = -1.0 if maximize else 1.0
    ranked = sorted((a for a in arms if get(stats, a, metric) is not None),
                    key=lambda a: sign * get(stats, a, metric).mean)
    if not ranked:
        return ""
    return f"; {label}: " + ", ".join(f"{name(a)} {get(stats, a, metric).text(bounds=metric_range(metric))}"
                                      for a in ranked)


def lm_positions(stats: ArmStats, arms: Arms | None = None, *, within: str = WITHIN, beyond: str = BEYOND,
                 goal: Goal = "maximize", chance: float = LM_CHANCE, sesoi: float = EXTRAPOLATION_SESOI,
                 change: Change = "difference", gate_metric: str = EXACT, gate_threshold: float = 0.5,
                 beyond_label: str = "beyond the training lengths (free-running token accuracy)") -> str:
    """Kazemnejad et al. 2023 (NoPE ≈ T5 bias > ALiBi > RoPE ≈ absolute) and Press et al. 2022: a causal
    decoder infers position from its mask, so NoPE and ALiBi extrapolate past the training lengths better
    than absolute positions. Judged on the change from inside to beyond the training lengths, paired by seed,
    with every arm claimed to extrapolate above ``chance`` beyond them (``ablations.verdicts.extrapolation``);
    read by default on free-running token accuracy; ``within``/``beyond``/``goal``/``change`` read another
    number (e.g. the relative rise of perplexity from L to 4L, minimized), ``gate_metric``/``gate_threshold`` the
    number that says the task was learned. The ranking beyond is shown against Kazemnejad et al.'s."""
    arms = arms or Arms.of(stats)
    relative_arms, absolute = arms.arms("none", "alibi"), arms.arms("sinusoidal", "learned")
    gate = learned(stats, arms.swept, metric=gate_metric, threshold=gate_threshold, goal=goal, shows_at=arms.shows_at)
    checks = [
        extrapolates(stats, good, bad, inside=within, beyond=beyond, goal=goal, chance=chance, sesoi=sesoi,
                     change=change)
        for good in relative_arms for bad in absolute
    ]
    ranking = _ranking(stats, arms.ranking, metric=beyond, maximize=goal == "maximize", label=beyond_label)
    return join(checks, gate) + ranking + (f" (against {KAZEMNEJAD})" if ranking else "")


FORCING_SESOI = 0.02
"""Final exact match: Bengio et al.'s scheduled-sampling gains are 1-2 points of their metrics (Table 1:
BLEU-4 28.8 -> 30.6 on MSCOCO captions; parsing F1 86.54 -> 88.08)."""


def forcing(stats: ArmStats, arms: Arms | None = None) -> str:
    """Bengio et al. 2015 (§4, Tables 1-3): scheduled sampling improves the final metric over teacher forcing,
    and always sampling (student forcing) is worst. The exposure gap (free-running minus teacher-forced loss,
    averaged over training) and the learning speed (``AREA``) are the project's own reading of the mechanism:
    secondary checks, listed beneath."""
    arms = arms or Arms.of(stats)
    teacher, student, sched = arms.arms("teacher", "student", "scheduled")
    gate = learned(stats, [teacher, sched], metric=EXACT, threshold=0.3, goal="maximize", shows_at=arms.shows_at)
    gap = "curve/mean/val/exposure_gap"
    checks = [
        better(stats, sched, teacher, metric=EXACT, goal="maximize", sesoi=FORCING_SESOI,
               claim="scheduled sampling beats teacher forcing on the final exact match"),
        better(stats, teacher, student, metric=EXACT, goal="maximize", sesoi=FORCING_SESOI,
               claim="always sampling (student) is below teacher forcing on the final exact match"),
        *map(secondary, [
            better(stats, teacher, student, metric=gap, goal="maximize", sesoi=PROBE_SESOI,
                   claim="the exposure gap is larger under teacher than student forcing"),
            better(stats, teacher, sched, metric=gap, goal="maximize", sesoi=PROBE_SESOI,
                   claim="scheduled sampling narrows the exposure gap"),
            better(stats, teacher, student, metric=AREA, goal="maximize", sesoi=AREA_SESOI,
                   claim="student forcing learns slowest (vs teacher; area under the exact-match curve)"),
            at_scale(better(stats, sched, student, metric=AREA, goal="maximize", sesoi=AREA_SESOI,
                            claim="student forcing learns slowest (vs scheduled; area under the exact-match curve)"),
                     "the model learns the task within ~300 steps, so a decay that narrows the gap in that window "
                     "also feeds mostly the model's own tokens; expected at " + arms.shows_at),
        ]),
    ]
    return join(checks, gate)


HEADS_SESOI = 0.03  # exact match: Vaswani et al.'s single head loses 0.9 of 25.8 BLEU (3.5%)


def heads(stats: ArmStats, arms: Arms | None = None) -> str:
    """Vaswani et al. 2017 Table 3 (A): equal parameters; one head worse than several; very narrow heads worse.
    "Several" is the head count the plan chose on exploratory seeds (``Arms.chosen``), never the best on these."""
    arms = arms or Arms.of(stats)
    one, sixteen, best = arms.arm(1), arms.arm(16), arms.chosen("several")
    gate = learned(stats, [best], metric=EXACT, threshold=0.3, goal="maximize", shows_at=arms.shows_at)
    checks = [
        _equal_parameters(stats, list(arms.swept)),
        at_scale(
            better(stats, best, one, metric=EXACT, goal="maximize", sesoi=HEADS_SESOI,
                   claim=f"{name(best)} heads beat 1 head"),
            "Vaswani et al.'s single head loses 0.9 of 25.8 BLEU on WMT (3.5%, i.e. about 0.03 at 0.9 exact "
            "match); expected at " + arms.shows_at,
            published=0.03,
        ),
        at_scale(
            better(stats, best, sixteen, metric=EXACT, goal="maximize", sesoi=HEADS_SESOI,
                   claim=f"{name(best)} heads beat 16 heads (d_k 4)"),
            "Vaswani et al.'s drop with too many heads is 0.4 BLEU (h = 32, d_k 16) on WMT and none at h = 16; "
            "expected at " + arms.shows_at,
        ),
    ]
    return join(checks, gate)


def _equal_parameters(stats: ArmStats, arms: list[tuple], tolerance: float = 0.01) -> Check:
    """Check that the arms have the same trainable parameter count (within ``tolerance``, relative)."""
    counts = {name(a): s.mean for a in arms if (s := get(stats, a, "run/parameters")) is not None}
    claim = "the arms have equal parameter counts"
    if len(counts) < 2:
        return Check(claim, "inconclusive", "parameter counts not recorded", why="no summary.json parameters",
                     control=True)
    lo, hi = min(counts.values()), max(counts.values())
    detail = "parameters: " + ", ".join(f"{k} {int(v):,}" for k, v in counts.items())
    return Check(claim, "supported" if hi <= lo * (1 + tolerance) else "not supported", detail, control=True)


POOLING_SESOI = 0.02  # accuracy: Yang et al.'s attention gains over average pooling are 0.5-2 points


def sentiment(stats: ArmStats, arms: Arms | None = None) -> str:
    """Yang et al. 2016; Lin et al. 2017: attention pooling finds the deciding phrase; mean and max blur it."""
    arms = arms or Arms.of(stats)
    attention, *blurred = arms.arms("attention", "mean", "max")
    gate = learned(stats, [attention], metric="val/acc", threshold=0.6, goal="maximize", shows_at=arms.shows_at)
    checks = [
        better(stats, attention, b, metric="val/acc", goal="maximize", sesoi=POOLING_SESOI,
               claim=f"attention pooling beats {name(b)}")
        for b in blurred
    ]
    return join(checks, gate)
