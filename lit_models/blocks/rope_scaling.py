"""RoPE scaling beyond the training length: position interpolation, NTK-aware base change, YaRN.

Plain RoPE (Su et al. 2021) rotates the pair i of a head of width d by the angle m·θ_i at position m,
θ_i = b^(-2i/d), i = 0 .. d/2 - 1. Each method here changes the θ_i (and YaRN the logit temperature) for
a scale factor s = L' / L, L being the training length and L' the length to reach:

- **linear** (position interpolation, Chen et al. 2023, eq. 4): f'(x, m) = f(x, m·L/L'), i.e. every
  position divided by s; equivalently every θ_i divided by s (used here: m·(θ_i/s) = (m/s)·θ_i).
- **ntk** ("NTK-aware" interpolation, bloc97 2023, as written in Peng et al. 2023 §3.1 eq. 16):
  the base changes, b' = b·s^(d/(d-2)), so the lowest frequency is interpolated by exactly s and
  the highest is left alone.
- **yarn** (Peng et al. 2023, §3.2-3.4, eqs. 17-22): "NTK-by-parts" plus a temperature. With the
  wavelength λ_i = 2π/θ_i and r_i = L/λ_i (how many turns the pair makes over the training length),
  the ramp γ(r) = 0 for r < α, 1 for r > β, (r - α)/(β - α) between (α = 1, β = 32 for the
  LLaMA family, the paper's recommendation, kept here) gives θ'_i = (1 - γ(r_i))·θ_i/s + γ(r_i)·θ_i:
  pairs that turn many times over L are extrapolated as they are, pairs that turn less than once are
  interpolated like ``linear``. The logits are divided by a temperature t with sqrt(1/t) = 0.1·ln(s) + 1
  (eq. 22); as in the paper's implementation, q and k are each multiplied by sqrt(1/t) after rotation,
  so q·k is multiplied by 1/t.

A factor of 1 leaves every θ_i and the temperature unchanged (each method is then plain RoPE).
:class:`RopeScale` is the resolved object a RoPE scheme holds; ``in_training`` says whether the
scaling acts in training mode too (fine-tuning with it, Chen et al. §3.2) or only in evaluation mode
(the zero-fine-tune case: a model trained with plain RoPE, evaluated with the scaled angles).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor


def rope_frequencies(d_head: int, base: float) -> Tensor:
    """θ_i = base^(-2i/d_head), i = 0 .. d_head/2 - 1 (Su et al. 2021, eq. 15): (d_head/2,) float64."""
    return base ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)


@dataclass(frozen=True)
class RopeScale:
    """The identity scaling (plain RoPE) and the base of every method.

    Args:
        factor: s = L'/L, at least 1.
        train_len: L, the training length (YaRN's ramp reads it; the other methods ignore it).
        in_training: apply the scaling in training mode too (fine-tuning with it); else evaluation mode only.

    The arguments are taken as given: ``specs.transformer.rope_scale`` checks them once (s >= 1, L for yarn).
    """

    factor: float = 1.0
    train_len: int = 0
    in_training: bool = False

    def frequencies(self, d_head: int, base: float) -> Tensor:
        """The scaled θ'_i, (d_head/2,) float64."""
        return rope_frequencies(d_head, base)

    def magnitude(self) -> float:
        """The multiplier of rotated q and k (YaRN's sqrt(1/t)); 1 for every other method."""
        return 1.0


class LinearScale(RopeScale):
    """Position interpolation (Chen et al. 2023, eq. 4): θ'_i = θ_i / s."""

    def frequencies(self, d_head: int, base: float) -> Tensor:
        return rope_frequencies(d_head, base) / self.factor


class NtkScale(RopeScale):
    """NTK-aware base change (Peng et al. 2023, eq. 16): θ'_i = (b·s^(d/(d-2)))^(-2i/d)."""

    def frequencies(self, d_head: int, base: float) -> Tensor:
        return rope_frequencies(d_head, base * self.factor ** (d_head / (d_head - 2)))


class YarnScale(RopeScale):
    """YaRN (Peng et al. 2023, eqs. 17-22): NTK-by-parts ramp between θ_i/s and θ_i, and sqrt(1/t) on q and k.

    ``alpha``/``beta`` are the paper's α = 1, β = 32. Deviation: none in the formulas; the temperature is
    applied through q and k (the paper's implementation note, §3.4) rather than by dividing the logits.
    """

    alpha: float = 1.0
    beta: float = 32.0

    def frequencies(self, d_head: int, base: float) -> Tensor:
        theta = rope_frequencies(d_head, base)
        turns = self.train_len * theta / (2 * math.pi)  # r_i = L / λ_i
        ramp = ((turns - self.alpha) / (self.beta - self.alpha)).clamp(0.0, 1.0)  # γ(r_i)
        return (1 - ramp) * theta / self.factor + ramp * theta

    def magnitude(self) -> float:
        return 0.1 * math.log(self.factor) + 1.0
