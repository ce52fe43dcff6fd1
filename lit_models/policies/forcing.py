"""Training-time forcing policies: what a decoder is fed as its previous token.

``teacher``: gold previous tokens, one parallel pass (Williams & Zipser 1989).
``student``: the model's own greedy predictions are fed back, step by step; the loss is still
against gold (the "always sample" end of Bengio et al. 2015).
``scheduled``: each previous token is gold with probability p_i, decaying with the training
step i (Bengio et al. 2015, §2.4). With ``mode="two_pass"`` (Mihaylova & Liu 2019, for the
Transformer) a first teacher-forced pass without gradient gives the predictions that are mixed
in; with ``mode="per_step"`` (Bengio's original, for recurrent decoders) the coin is tossed at
each step of a sequential loop.

Validation and test never use these: they always decode free-running (``decoding.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import torch
from torch import Tensor

from lit_models.axes import Forcing, ScheduledDecay, ScheduledMode


class ForcedDecoder(Protocol):
    """The decoder surface forcing needs (``EncoderDecoder`` and the recurrent nets implement it)."""

    def step(self, prev_tokens: Tensor, state: object) -> tuple[Tensor, object]: ...

    def teacher_forward(self, state: object, tgt_in: Tensor) -> tuple[Tensor, object]: ...


def _inverse_sigmoid_k(steps: int) -> float:
    """Solve k·ln k = steps/2 (Newton) so that k/(k + exp(i/k)) crosses 1/2 at i = steps/2."""
    k = max(2.0, steps / 10)
    for _ in range(50):
        k -= (k * math.log(k) - steps / 2) / (math.log(k) + 1)
        k = max(k, 1.0 + 1e-6)
    return k


def _inverse_sigmoid(steps: int) -> Callable[[int], float]:
    k = _inverse_sigmoid_k(steps)
    return lambda i: k / (k + math.exp(min(i / k, 700.0)))


Decay = Callable[[int], float]
"""p(gold) before the floor, as a function of the training step i (its constants resolved when it is built)."""

DECAYS: dict[ScheduledDecay, Callable[[int], Decay]] = {
    "linear": lambda steps: lambda i: 1.0 - i / steps,
    "exponential": lambda steps: lambda i: 0.01 ** (i / steps),
    "inverse_sigmoid": _inverse_sigmoid,
}
"""Decay -> its p(gold) curve over ``steps``, built per policy."""


def gold_schedule(decay: ScheduledDecay, *, steps: int, floor: float) -> Callable[[int], float]:
    """p_i, the probability of feeding the gold token at training step i (Bengio et al. 2015, §2.4).

    linear: p = max(floor, 1 - i/steps). exponential: p = max(floor, k^i) with k = 0.01^(1/steps)
    (1 % at ``steps``). inverse_sigmoid: p = max(floor, k / (k + exp(i/k))) with k chosen so that
    p = 1/2 at ``steps``/2. Deviation: the paper leaves k free; we derive it from one horizon.
    """
    curve = DECAYS[decay](steps)
    return lambda step: max(floor, curve(max(step, 0)))


def gold_probability(decay: ScheduledDecay, *, step: int, steps: int, floor: float) -> float:
    """p_i at one step (``gold_schedule``, built for this one call)."""
    return gold_schedule(decay, steps=steps, floor=floor)(step)


def teacher(net: ForcedDecoder, state: object, tgt_in: Tensor, *, p_gold: float) -> tuple[Tensor, object]:
    """Gold previous tokens: logits (B, T, V) from one causal pass, and the final decoder state."""
    return net.teacher_forward(state, tgt_in)


def _mixed_loop(net: ForcedDecoder, state: object, tgt_in: Tensor, *, p_gold: float) -> tuple[Tensor, object]:
    """Sequential decoding; the token fed at step t > 0 is gold with probability p_gold, else argmax."""
    prev, outputs = tgt_in[:, 0], []
    for t in range(tgt_in.size(1)):
        logits, state = net.step(prev, state)
        outputs.append(logits)
        if t + 1 < tgt_in.size(1):
            own = logits.argmax(-1).detach()
            coin = torch.rand(own.shape, device=own.device) < p_gold
            prev = torch.where(coin, tgt_in[:, t + 1], own)
    return torch.stack(outputs, dim=1), state  # (B, T, V)


def student(net: ForcedDecoder, state: object, tgt_in: Tensor, *, p_gold: float) -> tuple[Tensor, object]:
    """The model's own previous predictions are fed back (p_gold ignored: always 0)."""
    return _mixed_loop(net, state, tgt_in, p_gold=0.0)


def two_pass(net: ForcedDecoder, state: object, tgt_in: Tensor, *, p_gold: float) -> tuple[Tensor, object]:
    """Scheduled sampling for parallel decoders: pass 1 (no grad) predicts, pass 2 sees a mix."""
    with torch.no_grad():
        own = net.teacher_forward(state, tgt_in)[0].argmax(-1)  # (B, T): prediction for position t + 1
    coin = torch.rand(tgt_in[:, 1:].shape, device=tgt_in.device) < p_gold
    mixed = torch.cat([tgt_in[:, :1], torch.where(coin, tgt_in[:, 1:], own[:, :-1])], dim=1)  # out of place: vmap
    return net.teacher_forward(state, mixed)


PolicyFn = Callable[..., tuple[Tensor, object]]
SCHEDULED_MODES: dict[ScheduledMode, PolicyFn] = {"two_pass": two_pass, "per_step": _mixed_loop}
"""Scheduled mode -> how the gold/own mix is fed: two passes (parallel decoders) or a per-step loop."""

FEEDS: dict[Forcing, Callable[[ScheduledMode], PolicyFn]] = {
    "teacher": lambda mode: teacher,
    "student": lambda mode: student,
    "scheduled": lambda mode: SCHEDULED_MODES[mode],
}
"""Forcing arm -> (scheduled_mode -> what is fed back); only ``scheduled`` reads its mode."""


def build_forcing(forcing: Forcing, *, scheduled_mode: ScheduledMode) -> PolicyFn:
    """Resolve the forcing axis at construction."""
    return FEEDS[forcing](scheduled_mode)


def _constant(p: float) -> Callable[..., Callable[[int], float]]:
    return lambda decay, *, steps, floor: lambda step: p


GOLD_SCHEDULES: dict[Forcing, Callable[..., Callable[[int], float]]] = {
    "teacher": _constant(1.0),
    "student": _constant(0.0),
    "scheduled": gold_schedule,
}
"""Forcing arm -> ``(decay, *, steps, floor) -> p(gold) per step`` (what ``train/p_gold`` logs): a constant
for teacher and student, which ignore the schedule's knobs; ``gold_schedule`` for scheduled."""


@dataclass(frozen=True)
class ForcingPolicy:
    """One forcing arm, resolved at construction: what is fed back (``feed``) and p(gold) per step.

    Args:
        forcing: the arm (teacher | student | scheduled).
        scheduled_mode: how scheduled sampling runs (two_pass | per_step).
        decay, steps, floor: the p(gold) schedule of ``scheduled`` (``gold_schedule``).
    """

    forcing: Forcing
    scheduled_mode: ScheduledMode
    decay: ScheduledDecay
    steps: int
    floor: float
    feed: PolicyFn = field(init=False, repr=False, compare=False)
    p_gold: Callable[[int], float] = field(init=False, repr=False, compare=False)
    """p(gold) at a training step."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "feed", build_forcing(self.forcing, scheduled_mode=self.scheduled_mode))
        gold = GOLD_SCHEDULES[self.forcing](self.decay, steps=self.steps, floor=self.floor)
        object.__setattr__(self, "p_gold", gold)

    def __call__(self, net: ForcedDecoder, state: object, tgt_in: Tensor, *, step: int) -> tuple[Tensor, object, float]:
        """Training-time logits (B, T, V), the final state and the p(gold) used at this step."""
        p = self.p_gold(step)
        logits, state = self.feed(net, state, tgt_in, p_gold=p)
        return logits, state, p
