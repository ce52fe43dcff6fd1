"""Each ablation question: its sweep file, the axis it varies, the metric that answers it, the
probes worth showing, the finding the literature leads us to expect, and a verdict over the arms.

The question's name is the sweep's ``name`` and the runs' experiment name, so
``<root>/<name>/<trial>/`` holds one question's runs and the report finds them by name.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

REPO = Path(__file__).resolve().parents[1]
SWEEPS_DIR = REPO / "sweeps"

Goal = Literal["maximize", "minimize"]
Arm = tuple[Any, ...]
"""One arm: the values of the question's axes, in the order of ``Question.axes``."""


@dataclass(frozen=True)
class Stat:
    """Mean ± std of one metric over an arm's finished seeds (n of them; nan mean when n == 0)."""

    mean: float
    std: float
    n: int


ArmStats = Mapping[Arm, Mapping[str, Stat]]
"""arm -> metric key -> Stat; what a verdict reads."""

Verdict = Callable[[ArmStats], str]

# Extra CLI arguments appended after ${args} for `--scale quick`: a trial takes well under a
# minute on a CPU core. They shrink data and epochs only; never a question's own axis.
QUICK_DATA = ("--trainer.max_epochs=3", "--data.train_size=3200", "--data.val_size=128",
              "--data.test_size=128", "--trainer.log_every_n_steps=5")
QUICK_TRANSFORMER = (*QUICK_DATA, "--model.warmup_steps=30")
# Positions must first learn reversal before extrapolation can be compared: ~560 steps, 2-4 min a trial.
QUICK_POSITIONS = ("--trainer.max_epochs=3", "--data.train_size=12000", "--data.val_size=200", "--data.test_size=400",
                   "--trainer.log_every_n_steps=10", "--model.warmup_steps=150")
# Recurrent decoders step through time on CPU: fewer, shorter sequences (lengths 3-16) and a short
# warm-up so soft attention visibly learns reversal within ~130 steps while the fixed-vector arm does not.
QUICK_RECURRENT = ("--trainer.max_epochs=2", "--data.train_size=4096", "--data.val_size=128", "--data.test_size=128",
                   "--trainer.log_every_n_steps=5", "--trainer.val_check_interval=0.5", "--model.warmup_steps=10",
                   "--data.min_len=3", "--data.max_len=16",
                   "--data.test_min_len=3", "--data.test_max_len=16", "--data.max_tokens=null")


@dataclass(frozen=True)
class Question:
    """One ablation question.

    Args:
        name: sweep name = experiment (run-directory group) name.
        sweep: sweep file name under ``sweeps/``.
        axes: the sweep parameters that define an arm (seeds excluded), as CLI paths.
        metric: the key that answers the question (an exact logged key).
        goal: whether higher (maximize) or lower (minimize) ``metric`` is better.
        probes: metric keys or key prefixes (ending in ``/``) the report adds as columns.
        expected: the finding we expect, with its source, in one or two sentences.
        verdict: reads the per-arm statistics and returns one line starting with
            "supported", "not supported" or "inconclusive".
        quick: CLI overrides for ``--scale quick`` (appended after ``${args}``).
    """

    name: str
    sweep: str
    axes: tuple[str, ...]
    metric: str
    goal: Goal
    probes: tuple[str, ...]
    expected: str
    verdict: Verdict
    quick: tuple[str, ...] = QUICK_TRANSFORMER

    @property
    def sweep_path(self) -> Path:
        return SWEEPS_DIR / self.sweep


def _mean(stats: ArmStats, arm: Arm, metric: str) -> float:
    s = stats.get(arm, {}).get(metric)
    return s.mean if s is not None and s.n > 0 else math.nan


def clearly_better(a: Stat | None, b: Stat | None, *, goal: Goal, floor: float = 0.01) -> bool:
    """a beats b by more than two standard errors of the difference (or ``floor`` with one seed)."""
    if a is None or b is None or a.n == 0 or b.n == 0 or math.isnan(a.mean) or math.isnan(b.mean):
        return False
    diff = a.mean - b.mean if goal == "maximize" else b.mean - a.mean
    se = math.sqrt((a.std**2 / a.n if a.n > 1 else 0.0) + (b.std**2 / b.n if b.n > 1 else 0.0))
    return diff > max(2.0 * se, floor)


def _fmt(stats: ArmStats, metric: str, arms: list[Arm]) -> str:
    return ", ".join(f"{'/'.join(map(str, a))} {_mean(stats, a, metric):.3f}" for a in arms)


def _missing(stats: ArmStats, metric: str, arms: list[Arm]) -> list[Arm]:
    return [a for a in arms if math.isnan(_mean(stats, a, metric))]


def beats_all(winners: list[Arm], losers: list[Arm], *, metric: str, goal: Goal) -> Verdict:
    """Verdict: the best of ``winners`` is clearly better than every arm in ``losers``."""

    def verdict(stats: ArmStats) -> str:
        missing = _missing(stats, metric, winners + losers)
        if missing:
            return f"inconclusive: no finished seed for {', '.join('/'.join(map(str, a)) for a in missing)}"
        sign = 1.0 if goal == "maximize" else -1.0
        best = max(winners, key=lambda a: sign * _mean(stats, a, metric))
        beaten = [a for a in losers if clearly_better(stats[best].get(metric), stats[a].get(metric), goal=goal)]
        detail = f"{metric}: {_fmt(stats, metric, winners + losers)}"
        if len(beaten) == len(losers):
            return f"supported: {'/'.join(map(str, best))} beats {_names(losers)} ({detail})"
        rest = [a for a in losers if a not in beaten]
        return f"not supported: {'/'.join(map(str, best))} does not clearly beat {_names(rest)} ({detail})"

    return verdict


def all_beat(winners: list[Arm], losers: list[Arm], *, metric: str, goal: Goal) -> Verdict:
    """Verdict: *every* arm in ``winners`` is clearly better than every arm in ``losers``."""

    def verdict(stats: ArmStats) -> str:
        lines = [beats_all([w], losers, metric=metric, goal=goal)(stats) for w in winners]
        failed = [ln for ln in lines if not ln.startswith("supported")]
        return failed[0] if failed else f"supported: {_names(winners)} each beat {_names(losers)} " + \
            lines[0][lines[0].index("("):]

    return verdict


def _names(arms: list[Arm]) -> str:
    return ", ".join("/".join(map(str, a)) for a in arms)


def _norm_verdict(stats: ArmStats) -> str:
    """Deep Post-Norm without warm-up is worst of the deep arms; Pre-Norm does not need warm-up."""
    metric = "val/exact_match"
    deep = [("post", 6, 0), ("post", 6, 400), ("pre", 6, 0), ("pre", 6, 400)]
    missing = _missing(stats, metric, deep)
    if missing:
        return f"inconclusive: no finished seed for {_names(missing)} (diverged or failed arms count as missing)"
    post_cold, post_warm, pre_cold, _ = (stats[a].get(metric) for a in deep)
    needs_warmup = clearly_better(post_warm, post_cold, goal="maximize")
    pre_ok = clearly_better(pre_cold, post_cold, goal="maximize")
    detail = f"{metric} at depth 6: {_fmt(stats, metric, deep)}"
    if needs_warmup and pre_ok:
        return f"supported: deep Post-Norm needs warm-up, Pre-Norm trains without it ({detail})"
    return f"not supported: warm-up helps Post-Norm: {needs_warmup}, Pre-Norm beats cold Post-Norm: {pre_ok} ({detail})"


POSITION_ARMS: list[Arm] = [("sinusoidal",), ("rope",), ("learned",), ("none",)]
BEYOND = re.compile(r"^test/token_acc_by_len/len_(\d+)_\d+$")
TRAIN_MAX_LEN = 12  # data.max_len of transformer_reverse.yaml, which positions.yaml trains on


def _positions_verdict(stats: ArmStats) -> str:
    """Positions are needed to reverse; then: which arm extrapolates past the training lengths.

    Extrapolation is read from the free-running token accuracy of test buckets that start beyond
    ``TRAIN_MAX_LEN`` (exact match is ~0 there for every arm at small scale).
    """
    needed = beats_all(POSITION_ARMS[:3], POSITION_ARMS[3:], metric="test/exact_match", goal="maximize")(stats)
    beyond = {}
    for arm in POSITION_ARMS:
        values = [st.mean for key, st in stats.get(arm, {}).items()
                  if (m := BEYOND.match(key)) and int(m.group(1)) > TRAIN_MAX_LEN and st.n > 0]
        if values:
            beyond[arm] = sum(values) / len(values)
    if not beyond:
        return needed
    ranked = sorted(beyond, key=beyond.get, reverse=True)
    detail = ", ".join(f"{a[0]} {beyond[a]:.3f}" for a in ranked)
    return f"{needed}; beyond the training lengths (free-running token accuracy) {ranked[0][0]} leads: {detail}"


QUESTIONS: dict[str, Question] = {
    q.name: q
    for q in [
        Question(
            name="scaling", sweep="scaling.yaml", axes=("model.attn_scale",), metric="val/exact_match",
            goal="maximize", probes=("val/loss", "val/attn_entropy/", "train/grad_norm/"),
            expected="At d_k = 128, unscaled dot products saturate the softmax (near one-hot weights, tiny "
                     "gradients) and 1/d_k flattens it; 1/sqrt(d_k) keeps logits at unit variance and learns "
                     "fastest (Vaswani et al. 2017, §3.2.1 footnote 4).",
            verdict=beats_all([("sqrt_dk",)], [("none",), ("dk",)], metric="val/exact_match", goal="maximize"),
        ),
        Question(
            name="norm", sweep="norm.yaml", axes=("model.norm", "model.encoder_layers", "model.warmup_steps"),
            metric="val/exact_match", goal="maximize", probes=("val/loss", "train/grad_norm/"),
            expected="Post-Norm's gradients near the output are large at initialisation, so without warm-up "
                     "deep Post-Norm trains badly or diverges; Pre-Norm trains without warm-up "
                     "(Xiong et al. 2020, §3).",
            verdict=_norm_verdict,
            quick=tuple(a for a in QUICK_TRANSFORMER if not a.startswith("--model.warmup_steps")),
        ),
        Question(
            name="positions", sweep="positions.yaml", axes=("model.positions",), metric="test/exact_match",
            goal="maximize", probes=("val/exact_match", "test/acc_by_len/", "test/token_acc_by_len/",
                                     "val/attn_entropy/"),
            expected="Without positions a Transformer cannot reverse; sinusoidal and RoPE extrapolate to longer "
                     "test sequences better than a learned table, whose rows beyond the training lengths are "
                     "never trained; RoPE degrades most gracefully (Vaswani et al. 2017, §3.5; Su et al. 2021; "
                     "Press et al. 2022, §2.2).",
            verdict=_positions_verdict,
            quick=QUICK_POSITIONS,
        ),
        Question(
            name="forcing", sweep="forcing.yaml", axes=("model.forcing",), metric="val/exact_match",
            goal="maximize", probes=("val/loss", "val/free_running_loss", "val/exposure_gap"),
            expected="Teacher forcing learns fastest but shows a gap between teacher-forced and free-running "
                     "loss (exposure bias); scheduled sampling narrows the gap (Bengio et al. 2015).",
            verdict=beats_all([("scheduled",), ("teacher",)], [("student",)], metric="val/exact_match",
                              goal="maximize"),
        ),
        Question(
            name="heads", sweep="heads.yaml", axes=("model.heads",), metric="val/exact_match", goal="maximize",
            probes=("val/loss", "val/attn_entropy/"),
            expected="A single head is worse than several at the same width; very narrow heads (d_k = 4) lose "
                     "quality again (Vaswani et al. 2017, Table 3 rows A).",
            verdict=beats_all([(4,), (8,)], [(1,)], metric="val/exact_match", goal="maximize"),
        ),
        Question(
            name="attention_bottleneck", sweep="attention_bottleneck.yaml", axes=("model.attention",),
            metric="val/exact_match", goal="maximize",
            probes=("val/loss", "val/acc_by_len/", "val/attn_entropy/"),
            expected="Without attention accuracy falls with sequence length (the fixed-vector bottleneck, Cho "
                     "et al. 2014); soft attention keeps long sequences right (Bahdanau et al. 2015); hard "
                     "attention learns more slowly (REINFORCE variance, Xu et al. 2015).",
            verdict=beats_all([("additive",), ("dot",), ("general",)], [("none",)], metric="val/exact_match",
                              goal="maximize"),
            quick=QUICK_RECURRENT,
        ),
        Question(
            name="sentiment_pooling", sweep="sentiment_pooling.yaml", axes=("model.pooling",), metric="val/acc",
            goal="maximize", probes=("val/loss", "val/f1"),
            expected="When one phrase decides the label and later words distract, additive attention pooling "
                     "finds the phrase while mean and max pooling blur it (Yang et al. 2016; Lin et al. 2017).",
            verdict=beats_all([("attention",)], [("mean",), ("max",)], metric="val/acc", goal="maximize"),
            quick=("--trainer.max_epochs=2", "--data.train_size=3000", "--data.val_size=256",
                   "--data.test_size=256", "--trainer.log_every_n_steps=5"),
        ),
        Question(
            name="cells_adding", sweep="cells_adding.yaml", axes=("model.cell",), metric="val/mse", goal="minimize",
            probes=("val/loss", "train/grad_norm/"),
            expected="Gated cells carry two values across T steps; the Elman RNN stays near the mean predictor "
                     "(MSE ~ 1/6) at T = 100 (Hochreiter & Schmidhuber 1997, experiment 4).",
            verdict=beats_all([("lstm",), ("gru",), ("lstm_peephole",)], [("rnn",)], metric="val/mse",
                              goal="minimize"),
            quick=("--trainer.max_epochs=2", "--data.train_size=4000", "--data.val_size=256",
                   "--data.test_size=256", "--trainer.log_every_n_steps=5"),
        ),
        Question(
            name="caption_attention", sweep="caption_attention.yaml", axes=("model.attention",),
            metric="test/bleu4", goal="maximize",
            probes=("val/bleu4", "val/cider_d", "val/loss", "val/localisation", "val/localisation_uniform"),
            expected="A captioner that attends over the feature grid names several objects, in order, better "
                     "than one that sees only the mean feature, and its attention sits on the object each word "
                     "names; hard attention trains more noisily (Xu et al. 2015, §4-5 and Fig. 2-3).",
            verdict=all_beat([("additive",), ("hard",)], [("none",)], metric="test/bleu4", goal="maximize"),
            quick=("--trainer.max_epochs=2", "--data.train_size=2000", "--data.val_size=128",
                   "--data.test_size=128", "--trainer.log_every_n_steps=5"),
        ),
        Question(
            name="cells", sweep="cells.yaml", axes=("model.cell",), metric="val/exact_match", goal="maximize",
            probes=("val/loss", "val/acc_by_len/", "train/grad_norm/"),
            expected="Gated cells (GRU, LSTM) carry a sequence through the fixed vector far better than the "
                     "Elman RNN, whose gradients vanish (Bengio et al. 1994; Chung et al. 2014).",
            verdict=beats_all([("gru",), ("lstm",), ("lstm_peephole",)], [("rnn",)], metric="val/exact_match",
                              goal="maximize"),
            quick=QUICK_RECURRENT,
        ),
    ]
}


def question_for(name: str) -> Question | None:
    """The question whose sweep (and experiment) is ``name``; None for an ad-hoc sweep."""
    return QUESTIONS.get(name)
