"""REINFORCE for hard (sampled) attention, shared by every module whose decoder samples locations.

Xu et al. 2015 (§4.1, eq. 12) train stochastic hard attention with the score-function estimator of
Williams 1992: with s_t ~ Multinoulli(α_t) and a reward r of the sampled sequence,

    ∇L ≈ (r − b) ∇ Σ_t log α_t[s_t]  +  λ_H ∇ Σ_t H(α_t)

where b is a baseline (a moving average of the reward, Xu et al. eq. 13 / Weaver & Tao 2001, or a
learned value of the detached encoder memory) and λ_H an entropy bonus. The reward here is the
mean log-likelihood of the gold tokens, r = (1/n) Σ_t log p(y_t | y_<t, s_≤t, a) (Xu et al. use
log p(y | s, a), the sum; the mean keeps the scale independent of the caption length).

The decoder accumulates Σ_t log α_t[s_t] and Σ_t H(α_t) in its state (``attn_log_prob``,
``attn_entropy``); soft arms leave both at zero, so the term is a data-driven no-op for them and
no module branches on the attention kind.

DDP (pitfalls §3.7): the moving average is updated from the all-reduced batch mean, so every rank
keeps the same baseline; it is kept on the device in float64 (the arithmetic of the Python float it was:
no host sync per step) and saved as a float with the module (``get_extra_state``), never a buffer rank 0
would overwrite.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab_core.tokens import PAD
from lit_models.axes import Baseline
from lit_models.registries import LEARNED_VALUE


def sequence_reward(logits: Tensor, labels: Tensor) -> Tensor:
    """Mean gold-token log-likelihood per sequence: logits (B, T, V), labels (B, T) -> (B,)."""
    logp = -F.cross_entropy(logits.float().transpose(1, 2), labels, ignore_index=PAD, reduction="none")  # (B, T)
    return logp.sum(1) / (labels != PAD).sum(1).clamp_min(1)


def _global_mean(x: Tensor) -> Tensor:
    """Mean of x over the batch and every DDP rank."""
    mean = x.mean()
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.all_reduce(mean)
        mean = mean / torch.distributed.get_world_size()
    return mean


class ReinforceOut(NamedTuple):
    """loss: the weighted surrogate (policy + entropy bonus + baseline fit); reward: (B,) r."""

    loss: Tensor
    reward: Tensor


@dataclass(frozen=True, kw_only=True)
class ReinforceOptions:
    """The REINFORCE term of hard attention (Williams 1992; Xu et al. 2015 §4.1), as its families show it.

    Args:
        reinforce_weight: weight of the REINFORCE term (hard attention).
        entropy_weight: weight of the attention-entropy bonus (hard attention).
        baseline: REINFORCE baseline (moving_average | learned).
        baseline_momentum: momentum of the moving-average baseline.
    """

    reinforce_weight: float = 1.0
    entropy_weight: float = 0.01
    baseline: Baseline = "moving_average"
    baseline_momentum: float = 0.9

    def term(self, *, value_size: int) -> ReinforceTerm:
        """The loss term over a memory of width ``value_size``."""
        return ReinforceTerm(baseline=self.baseline, value_size=value_size, momentum=self.baseline_momentum,
                             reinforce_weight=self.reinforce_weight, entropy_weight=self.entropy_weight)


class ReinforceTerm(nn.Module):
    """The REINFORCE surrogate loss of hard attention, with its baseline.

    Args:
        baseline: :data:`Baseline` — ``moving_average`` (b ← m·b + (1−m)·mean r) or ``learned``
            (a linear value of the mean memory, detached, fitted by MSE to r).
        value_size: D, the memory width (input of the learned value).
        momentum: m of the moving average.
        reinforce_weight: weight of the policy term (r − b)·log p.
        entropy_weight: λ_H, weight of the entropy bonus.
    """

    def __init__(
        self, *, baseline: Baseline, value_size: int, momentum: float, reinforce_weight: float, entropy_weight: float
    ) -> None:
        super().__init__()
        self.value = nn.Linear(value_size, 1) if LEARNED_VALUE[baseline] else None
        self.momentum, self.reinforce_weight, self.entropy_weight = momentum, reinforce_weight, entropy_weight
        self.reward_average: Tensor | float | None = None  # a float64 scalar tensor; a float once restored

    def baseline(self, state: dict[str, Tensor], reward: Tensor) -> tuple[Tensor, Tensor]:
        """(b (B,), baseline loss): the learned value of the mean memory, or the moving average."""
        if self.value is not None:
            mask = state["mask"].unsqueeze(-1).float()  # (B, S, 1)
            pooled = (state["memory"].detach() * mask).sum(1) / mask.sum(1).clamp_min(1.0)  # (B, D)
            b = self.value(pooled).squeeze(-1)  # (B,)
            return b, F.mse_loss(b, reward)
        mean = _global_mean(reward.detach()).double()  # on the device: no host sync in the training step
        previous = mean if self.reward_average is None else torch.as_tensor(self.reward_average, dtype=mean.dtype,
                                                                                device=mean.device)
        self.reward_average = self.momentum * previous + (1 - self.momentum) * mean
        return self.reward_average.to(reward.dtype).expand(reward.shape), reward.new_zeros(())

    def forward(self, logits: Tensor, labels: Tensor, state: dict[str, Tensor]) -> ReinforceOut:
        """logits (B, T, V), labels (B, T), the decoder's final state -> surrogate loss and reward (B,).

        The gradient of ``loss`` w.r.t. the attention parameters is the REINFORCE estimate
        −(r − b)·∇ Σ_t log α_t[s_t] − λ_H ∇ Σ_t H(α_t), averaged over the batch.
        """
        reward = sequence_reward(logits.detach(), labels)  # (B,)
        b, baseline_loss = self.baseline(state, reward)
        advantage = (reward - b).detach()  # (B,)
        policy = -(advantage * state["attn_log_prob"]).mean()
        bonus = -state["attn_entropy"].mean()
        loss = self.reinforce_weight * policy + self.entropy_weight * bonus + baseline_loss
        return ReinforceOut(loss, reward)

    def get_extra_state(self) -> dict[str, Any]:
        average = self.reward_average
        return {"reward_average": None if average is None else float(average)}  # checkpoints hold a float

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.reward_average = state.get("reward_average")
