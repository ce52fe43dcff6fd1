"""The real-data questions' claims (``ablations.catalog.questions_real``), tested on the probes that measure them.

The rules are those of ``ablations.catalog.claims``: a learned gate first, "not shown at this scale" (with the reason
and the measured numbers) rather than "not supported" when the arms that should learn did not, paired-by-seed
checks joined by ``ablations.verdicts.rules.join``. BLEU is SacreBLEU on the 0..1 scale the models log (BLEU 5 = 0.05).
"""

from __future__ import annotations

import re
from dataclasses import replace

from ablations.catalog.arms import Arms
from ablations.catalog.claims import _ranking, _worse_or_diverged, lm_positions, sentiment
from ablations.catalog.claims_recurrent import BLEU_SESOI
from ablations.verdicts.extrapolation import extrapolates
from ablations.verdicts.rules import ArmStats, Check, at_least, at_scale, better, get, join, learned, name, similar
from ablations.verdicts.stats import Stat, stat

BLEU_BUCKET = re.compile(r"^test/bleu_by_len/len_(?P<lo>\d+)_(?P<hi>\d+)$")
COUNT_PREFIX = "test/count_by_len/"
"""``test/count_by_len/len_<lo>_<hi>``: sentences in a source-length bucket, read when a model logs them."""
MIN_VERSES = 50  # a bucket read for the fall with length holds at least this many test verses
SHORT_BLEU = 0.05  # BLEU 5: the fixed-vector model translates its shortest verses at all
FALL = "len_fall/bleu"  # per seed: 1 - BLEU(longest readable bucket) / BLEU(shortest readable bucket)

def buckets(stats: ArmStats, arm: tuple) -> list[tuple[int, int, str]]:
    """(lo, hi, key) of the arm's ``test/bleu_by_len`` buckets, shortest first."""
    rows = [(int(m["lo"]), int(m["hi"]), k) for k in stats.get(arm, {}) if (m := BLEU_BUCKET.match(k))]
    return sorted(r for r in rows if get(stats, arm, r[2]) is not None)


def readable(stats: ArmStats, arm: tuple) -> tuple[list[tuple[int, int, str]], str]:
    """The arm's buckets holding at least ``MIN_VERSES`` test verses, and how they were chosen.

    Bucket sizes come from ``test/count_by_len/*`` when the model logs them; otherwise every bucket is read
    and the note says so (the last bucket also holds every longer source and may be small).
    """
    rows = buckets(stats, arm)
    counts = {k: s.mean for _, _, k in rows
              if (s := get(stats, arm, COUNT_PREFIX + k.rsplit("/", 1)[1])) is not None}
    if not counts:
        return rows, "verses per bucket not logged: every bucket read"
    return [r for r in rows if counts.get(r[2], 0.0) >= MIN_VERSES], f"buckets of ≥ {MIN_VERSES} verses"


def _bucket_label(row: tuple[int, int, str]) -> str:
    return f"{row[0]}-{row[1]} tokens"


def _fall(stats: ArmStats, arm: tuple) -> Stat | None:
    """Per seed, 1 - BLEU(longest readable bucket) / BLEU(shortest readable bucket)."""
    rows, _ = readable(stats, arm)
    if len(rows) < 2:
        return None
    short, long_ = dict(get(stats, arm, rows[0][2]).values), dict(get(stats, arm, rows[-1][2]).values)
    pairs = [(k, 1.0 - long_[k] / v) for k, v in short.items() if k in long_ and v > 0]
    return stat([v for _, v in pairs], [k for k, _ in pairs]) if pairs else None


def _short_bleu(stats: ArmStats, arm: tuple) -> tuple[Stat | None, str]:
    rows, note = readable(stats, arm)
    if not rows:
        return None, note
    return get(stats, arm, rows[0][2]), f"{_bucket_label(rows[0])}, {note}"


def _noted(check: Check, note: str) -> Check:
    """``check`` with ``note`` (which buckets were read) after its numbers."""
    return replace(check, detail=f"{check.detail} ({note})")


def bottleneck_bible(stats: ArmStats, arms: Arms | None = None) -> str:
    """Cho et al. 2014 Fig. 4; Bahdanau et al. 2015 Fig. 2 on held-out Bible books: the fixed-vector GRU
    encoder-decoder's BLEU falls as verses get longer, with additive attention it stays near flat.

    The fall can only be read where the model without attention translates short verses: when its BLEU in
    its shortest bucket of ≥ ``MIN_VERSES`` verses is below ``SHORT_BLEU`` the verdict is "not shown at this
    scale", with the measured numbers. The fall is relative (``FALL``), so it compares models of different BLEU.
    """
    bleu = "test/bleu"
    arms = arms or Arms.of(stats)
    additive, none = arms.arms("additive", "none")
    beats = better(stats, additive, none, metric=bleu, goal="maximize", sesoi=BLEU_SESOI,
                   claim="additive attention beats none")
    none_short, where = _short_bleu(stats, none)
    falls = {a: {FALL: f} for a in (none, additive) if (f := _fall(stats, a)) is not None}
    checks = [
        beats,
        _noted(at_least(falls, none, metric=FALL, bound=0.3,
                        claim="without attention BLEU falls with verse length (≥ 30% from the shortest to the "
                              "longest readable bucket)"), where),
        better(falls, additive, none, metric=FALL, goal="minimize", sesoi=0.1,
               claim="the fall with length is smaller with attention (by at least 10% of the shortest bucket's BLEU)"),
    ]
    if none_short is None:
        return join([beats], Check("the fixed-vector model translates short verses", "inconclusive",
                                   f"none: no length bucket of BLEU ({where})", why="n too small"))
    if none_short.mean < SHORT_BLEU:
        add_short, _ = _short_bleu(stats, additive)
        add = f"; additive there {add_short.text()}" if add_short is not None else ""
        gate = Check("the fixed-vector model translates short verses", "not shown at this scale",
                     f"none reaches BLEU {none_short.text()} in its shortest bucket ({where}), short of "
                     f"{SHORT_BLEU:g} (BLEU {100 * SHORT_BLEU:g}){add}, so its fall with verse length cannot be read",
                     why=f"expected at {arms.shows_at}")
        return join([beats], gate)
    return join(checks)


BLEU_VAL = "val/bleu"


def norm_bible(stats: ArmStats, arms: Arms | None = None, *, warm: int) -> str:
    """Xiong et al. 2020 §3; Liu et al. 2020 on Bible verses: a deep (6+6) Post-Norm Transformer without
    warm-up trains worse or diverges, warm-up recovers it, Pre-Norm trains without warm-up."""
    arms = arms or Arms.of(stats)
    post_cold, post_warm = arms.arm("post", 0), arms.arm("post", warm)
    pre_cold, pre_warm = arms.arm("pre", 0), arms.arm("pre", warm)
    gate = learned(stats, [post_cold, post_warm, pre_cold, pre_warm], metric=BLEU_VAL, threshold=SHORT_BLEU,
                   goal="maximize", shows_at=arms.shows_at)
    checks = [
        _worse_or_diverged(stats, post_warm, post_cold, metric=BLEU_VAL, negligible=0.01,
                           claim="warm-up recovers deep Post-Norm"),
        _worse_or_diverged(stats, pre_cold, post_cold, metric=BLEU_VAL, negligible=0.01,
                           claim="Pre-Norm trains without warm-up where Post-Norm does not"),
        at_least(stats, pre_cold, metric=BLEU_VAL, bound=SHORT_BLEU, claim="deep Pre-Norm learns without warm-up"),
    ]
    return join(checks, gate)


IN_RANGE = "in_range/bleu_by_len"  # per seed: mean BLEU of the buckets that lie inside the training lengths
BEYOND_BLEU = "test/beyond/bleu_by_len"  # ablations.reports.derived: mean BLEU of the buckets past data.max_len


def in_range(stats: ArmStats, arm: tuple) -> Stat | None:
    """Per seed, the mean BLEU over the arm's source-length buckets that end within ``run/max_len``."""
    cap = get(stats, arm, "run/max_len")
    rows = [r for r in buckets(stats, arm) if cap is not None and r[1] <= cap.mean]
    if cap is None or not rows:
        return None
    per_seed: dict[object, list[float]] = {}
    for _, _, key in rows:
        for seed, value in get(stats, arm, key).values:
            per_seed.setdefault(seed, []).append(value)
    means = [(k, sum(v) / len(v)) for k, v in per_seed.items() if len(v) == len(rows)]
    return stat([v for _, v in means], [k for k, _ in means]) if means else None


def positions_bible(stats: ArmStats, arms: Arms | None = None) -> str:
    """Vaswani et al. 2017 Table 3 (E): learned ≈ sinusoidal in range; Press et al. 2022: ALiBi extrapolates
    to inputs longer than any seen in training, sinusoidal and learned positions do not. Training pairs are
    capped at ``data.max_len`` tokens (``TranslationData``: val/test never are), so test buckets past the cap
    hold verses longer than any seen in training; the ranking of every swept scheme beyond reported. The ALiBi
    claim is the project's own hypothesis: Press et al. report language modelling only. "Above chance" beyond
    the training lengths is read as BLEU above one point (``BLEU_SESOI``)."""
    arms = arms or Arms.of(stats)
    sinusoidal, learned_, alibi = arms.arms("sinusoidal", "learned", "alibi")
    derived = {a: {**stats.get(a, {}), **({IN_RANGE: s} if (s := in_range(stats, a)) is not None else {})}
               for a in arms.swept}
    present = [a for a in arms.swept if get(derived, a, IN_RANGE) is not None]
    gate = learned(derived, present or list(arms.swept), metric=IN_RANGE, threshold=SHORT_BLEU, goal="maximize",
                   shows_at=arms.shows_at)
    checks = [
        similar(derived, learned_, sinusoidal, metric=IN_RANGE, margin=0.02,
                claim="learned ≈ sinusoidal in range (±2 BLEU, mean over the buckets inside the training lengths)"),
        *(extrapolates(derived, alibi, b, inside=IN_RANGE, beyond=BEYOND_BLEU, goal="maximize", chance=BLEU_SESOI,
                       sesoi=BLEU_SESOI, claim=f"alibi extrapolates better than {name(b)} (the change of BLEU from "
                                               "inside to past the training lengths; own hypothesis)")
          for b in (sinusoidal, learned_)),
    ]
    return join(checks, gate) + _ranking(derived, arms.ranking, metric=BEYOND_BLEU,
                                         label="BLEU on verses longer than any in training")


def sentiment_mr(stats: ArmStats, arms: Arms | None = None) -> str:
    """Yang et al. 2016; Lin et al. 2017 on real movie-review snippets: attention pooling beats mean and max
    (``ablations.catalog.claims.sentiment``); the in-domain test accuracy of every swept pooling is ranked after it."""
    arms = arms or Arms.of(stats)
    verdict = sentiment(stats, arms)
    return verdict + _ranking(stats, arms.ranking, metric="test/acc", label="held-out movie-review snippets (test/acc)")


CHANCE = 0.1  # ten digit classes
RAM_SESOI = 0.01  # accuracy: Mnih et al.'s Table 1 rows differ by 1-4 points of error
FULL_VIEW = "full_view"  # ram_mnist's baseline arm (Question.baselines): the same-budget fully connected network


def ram_mnist(stats: ArmStats, arms: Arms | None = None) -> str:
    """Mnih et al. 2014 (§4.1, Table 1, 60×60 translated MNIST): RAM classifies from a few glimpses far above
    chance, more glimpses help, and RAM beats a fully connected network that sees the whole canvas: in Table 1
    RAM's test error on 60×60 translated MNIST is below that of both "FC, 2 layers" rows (64 and 256 hiddens).

    The fewest and the most swept glimpses are judged (the others are ranked-only), on ``val/acc``. The baseline
    arm ``FULL_VIEW`` (``lit_models.families.full_view``,
    ``ram_mnist_fc.yaml``: 650,858 parameters against RAM's 651,277,
    between the paper's two FC rows) is compared with RAM at the most glimpses on ``test/acc`` (the best
    checkpoint on the held-out digits; Table 1 reports test error), paired by seed. The paper's convolutional row
    is not built."""
    arms = arms or Arms.of(stats)
    counts = sorted(a[0] for a in arms.swept if a != (FULL_VIEW,))
    if not counts:
        return join([], learned(stats, [], metric="val/acc", threshold=2 * CHANCE, goal="maximize", shows_at=""))
    few, many = arms.arm(counts[0])[0], arms.arm(counts[-1])[0]
    full_view = arms.arm(FULL_VIEW)
    gate = learned(stats, [(many,)], metric="val/acc", threshold=2 * CHANCE, goal="maximize",
                   shows_at=arms.shows_at)
    checks = [
        at_least(stats, (many,), metric="val/acc", bound=0.5,
                 claim=f"RAM with {many} glimpses classifies far above chance (≥ 0.5; chance {CHANCE:g})"),
        better(stats, (many,), (few,), metric="val/acc", goal="maximize", sesoi=RAM_SESOI,
               claim=f"{many} glimpses beat {few}"),
        better(stats, (many,), full_view, metric="test/acc", goal="maximize", sesoi=RAM_SESOI,
               claim=f"RAM with {many} glimpses beats the same-budget full-view network ({FULL_VIEW}, "
                     "ram_mnist_fc.yaml; test/acc, as Table 1 reports test error)"),
    ]
    on_digit = _ranking(stats, [(few,), (many,)], metric="val/glimpses_on_digit",
                        label="glimpse centres on the digit (uniform ≈ 0.22)")
    return join(checks, gate) + on_digit


LM_LEARNED = 10.0  # character perplexity at L; English's unigram character perplexity is about 17 (4.1 bits)
LM_UNIGRAM = 17.0
"""The chance level of character perplexity here: a model that ignores context (English unigram, 4.1 bits); an
arm claimed to extrapolate must stay below it at 4L."""
RISE_SESOI = 0.02  # the relative rise of perplexity from L to 4L: two percent


def lm_positions_web(stats: ArmStats, arms: Arms | None = None, *, context: int) -> str:
    """Press et al. 2022 (§4, Fig. 1): trained with context L, perplexity at 2L and 4L stays near its value at
    L with ALiBi (and NoPE, Kazemnejad et al. 2023) and explodes with sinusoidal or learned positions. Judged on
    the per-seed relative rise of perplexity from L to 4L (``ablations.catalog.claims.lm_positions``, minimized),
    never the raw perplexity at 4L, which mostly measures in-range quality; gate: perplexity at L."""
    at = {k: f"test/ppl_by_ctx/ctx_{k * context:05d}" for k in (1, 2, 4)}
    arms = arms or Arms.of(stats)
    verdict = lm_positions(stats, arms, within=at[1], beyond=at[4], goal="minimize", chance=LM_UNIGRAM,
                           sesoi=RISE_SESOI, change="relative", gate_metric=at[1], gate_threshold=LM_LEARNED,
                           beyond_label=f"perplexity at 4L = {4 * context} characters")
    return verdict + _ranking(stats, arms.ranking, metric=at[2], maximize=False,
                              label=f"at 2L = {2 * context}") + _ranking(
        stats, arms.ranking, metric=at[1], maximize=False, label=f"at L = {context}")


CLIPART_LEARNED = 0.1  # test CIDEr-D: a captioner that names no stamp ("a ." for every image) scores about 0.01


def caption_clipart(stats: ArmStats, arms: Arms | None = None) -> str:
    """Xu et al. 2015 (§4-5) on real clip art (Tux Paint's stamps, one caption per image): soft and hard
    attention beat the mean-feature captioner on test BLEU-4. Gate: the best arm's test CIDEr-D reaches
    ``CLIPART_LEARNED`` (it names stamps at all). A difference within seed noise is "not shown at this scale"
    (``at_scale``): 639 training stamps with one short caption each may not resolve it at any size of this
    model. Test CIDEr-D is ranked after; attention localisation is not measured (the stamps have no boxes)."""
    arms = arms or Arms.of(stats)
    additive, hard, none = arms.arms("additive", "hard", "none")
    gate = learned(stats, [additive, hard, none], metric="test/cider_d", threshold=CLIPART_LEARNED,
                   goal="maximize", shows_at=arms.shows_at)
    why = f"639 training stamps, one caption each; expected, if at all, at {arms.shows_at}"
    checks = [at_scale(better(stats, a, none, metric="test/bleu4", goal="maximize", sesoi=BLEU_SESOI,
                              claim=f"{name(a)} beats none on BLEU-4 (held-out stamps)"), why)
              for a in (additive, hard)]
    return (join(checks, gate) + _ranking(stats, arms.ranking, metric="test/cider_d", label="test CIDEr-D")
            + "; not measured: attention localisation (the stamps have no object boxes)")
