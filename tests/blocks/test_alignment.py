"""Alignment scorers and soft / hard attention: naive-loop parity, masking, REINFORCE unbiasedness."""

from __future__ import annotations

from typing import get_args

import pytest
import torch

from lit_models.axes import Attention
from lit_models.blocks.alignment import (
    ATTEND_MODES,
    HARD_EVAL_MODES,
    SCORERS,
    AdditiveScore,
    Alignment,
    AttendMode,
    DotScore,
    GeneralScore,
    HardEval,
    NoAlignment,
    ScoreName,
    attend,
    build_alignment,
)
from lit_models.registries import ATTENTION_ARMS

B, S, DQ, DK = 3, 5, 4, 6


@pytest.fixture
def qk() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(B, DQ, generator=g), torch.randn(B, S, DK, generator=g)


def test_registries_cover_axes() -> None:
    assert set(SCORERS) == set(get_args(ScoreName))
    assert set(ATTENTION_ARMS) == set(get_args(Attention))
    assert set(ATTEND_MODES) == set(get_args(AttendMode))
    assert set(HARD_EVAL_MODES) == set(get_args(HardEval))


def test_additive_matches_naive_loop(qk: tuple[torch.Tensor, torch.Tensor]) -> None:
    q, k = qk
    scorer = AdditiveScore(query_size=DQ, key_size=DK, attn_size=7)
    w, u, v = scorer.query_proj.weight, scorer.key_proj.weight, scorer.v.weight[0]
    expected = torch.empty(B, S)
    for b in range(B):
        for j in range(S):
            expected[b, j] = v @ torch.tanh(w @ q[b] + u @ k[b, j])  # Bahdanau eq. 6
    torch.testing.assert_close(scorer(q, k), expected)
    torch.testing.assert_close(scorer.score(q, scorer.precompute(k)), expected)


def test_general_matches_naive_loop(qk: tuple[torch.Tensor, torch.Tensor]) -> None:
    q, k = qk
    scorer = GeneralScore(query_size=DQ, key_size=DK)
    w = scorer.key_proj.weight.detach()  # (DQ, DK)
    expected = torch.tensor([[float(q[b] @ w @ k[b, j]) for j in range(S)] for b in range(B)])
    torch.testing.assert_close(scorer(q, k), expected)


def test_dot_matches_naive_loop_and_checks_sizes() -> None:
    q, k = torch.randn(B, DK), torch.randn(B, S, DK)
    expected = torch.tensor([[float(q[b] @ k[b, j]) for j in range(S)] for b in range(B)])
    torch.testing.assert_close(DotScore(query_size=DK, key_size=DK)(q, k), expected)
    with pytest.raises(ValueError, match="dot attention"):
        DotScore(query_size=DQ, key_size=DK)


def _mask() -> torch.Tensor:
    lengths = torch.tensor([5, 2, 0])
    return torch.arange(S).unsqueeze(0) < lengths.unsqueeze(1)  # (3, S); last row fully masked


@pytest.mark.parametrize("mode", get_args(AttendMode))
def test_masking_and_empty_rows(mode: AttendMode) -> None:
    mask = _mask()
    scores = torch.randn(B, S, requires_grad=True)
    values = torch.randn(B, S, 4)
    values[~mask] = float("nan")  # garbage in padding must not leak
    out = attend(scores, mask, values, mode=mode, generator=torch.Generator().manual_seed(1))
    assert out.weights.dtype == torch.float32
    assert (out.weights[~mask] == 0).all()
    torch.testing.assert_close(out.weights[:2].sum(-1), torch.ones(2))
    assert (out.weights[2] == 0).all() and (out.context[2] == 0).all()
    for t in out:
        assert torch.isfinite(t).all()
    (out.context.sum() + out.log_prob.sum() + out.entropy.sum()).backward()
    assert scores.grad is not None and torch.isfinite(scores.grad).all()
    assert (scores.grad[~mask] == 0).all()


def test_soft_is_expectation_and_hard_is_one_hot() -> None:
    mask = _mask()
    scores, values = torch.randn(B, S), torch.randn(B, S, 4)
    soft = attend(scores, mask, values, mode="soft")
    alpha = torch.softmax(scores[:2].masked_fill(~mask[:2], float("-inf")), -1)
    torch.testing.assert_close(soft.weights[:2], alpha)
    torch.testing.assert_close(soft.context[:2], torch.einsum("bs,bsd->bd", alpha, values[:2]))
    assert (soft.log_prob == 0).all() and (soft.entropy == 0).all()
    for mode in ("sample", "argmax"):
        hard = attend(scores, mask, values, mode=mode, generator=torch.Generator().manual_seed(2))
        idx = hard.weights[:2].argmax(-1)
        assert ((hard.weights[:2] == 0) | (hard.weights[:2] == 1)).all()
        torch.testing.assert_close(hard.weights[:2].sum(-1), torch.ones(2))
        torch.testing.assert_close(hard.log_prob[:2], alpha.log().gather(1, idx[:, None]).squeeze(1))
        torch.testing.assert_close(hard.context[:2], values[torch.arange(2), idx])
        entropy = -(alpha * alpha.log().nan_to_num(0.0, neginf=0.0)).sum(-1)
        torch.testing.assert_close(hard.entropy[:2], entropy)
    argmax = attend(scores, mask, values, mode="argmax")
    assert (argmax.weights[:2].argmax(-1) == alpha.argmax(-1)).all()


def test_sampling_follows_alpha_and_generator() -> None:
    scores = torch.tensor([[0.0, 1.0, -1.0, 2.0]]).expand(20000, 4)
    mask = torch.ones(20000, 4, dtype=torch.bool)
    values = torch.zeros(20000, 4, 1)
    a = attend(scores, mask, values, mode="sample", generator=torch.Generator().manual_seed(3))
    b = attend(scores, mask, values, mode="sample", generator=torch.Generator().manual_seed(3))
    assert torch.equal(a.weights, b.weights)
    torch.testing.assert_close(a.weights.mean(0), torch.softmax(scores[0], -1), atol=0.015, rtol=0)


@pytest.mark.parametrize("baseline", [False, True])
def test_reinforce_gradient_matches_exact_gradient(baseline: bool) -> None:
    """E[∇ log α_s · (r(s) − b)] over samples s ~ α equals ∇ Σ_s α_s r(s) computed by enumeration."""
    theta = torch.tensor([0.3, -0.5, 1.0, 0.0, -1.2], requires_grad=True)
    reward = torch.tensor([1.0, 3.0, -2.0, 0.5, 2.0])
    mask = torch.tensor([True, True, True, True, False])  # last position never chosen
    alpha = torch.softmax(theta.masked_fill(~mask, float("-inf")), -1)
    (exact,) = torch.autograd.grad((alpha * reward).sum(), theta)

    n = 40000
    out = attend(theta.expand(n, 5), mask.expand(n, 5), torch.zeros(n, 5, 1), mode="sample",
                 generator=torch.Generator().manual_seed(4))
    r = reward[out.weights.argmax(-1)]  # (n,)
    b = (alpha.detach() * reward).sum() if baseline else torch.zeros(())
    (estimate,) = torch.autograd.grad((out.log_prob * (r - b)).mean(), theta)
    torch.testing.assert_close(estimate, exact, atol=0.05, rtol=0)
    assert estimate[4] == 0
    assert exact.abs().max() > 0.3  # not vacuous


def test_hard_context_has_no_gradient_to_scores() -> None:
    scores, values = torch.randn(B, S, requires_grad=True), torch.randn(B, S, 4, requires_grad=True)
    out = attend(scores, torch.ones(B, S, dtype=torch.bool), values, mode="sample")
    (grad,) = torch.autograd.grad(out.context.sum(), scores, allow_unused=True)
    assert grad is None or (grad == 0).all()


def test_build_alignment_arms() -> None:
    assert isinstance(build_alignment(ATTENTION_ARMS["none"], query_size=4, memory_size=6, attn_size=4,
                                      hard_eval="argmax"), NoAlignment)
    hard = build_alignment(ATTENTION_ARMS["hard"], query_size=4, memory_size=6, attn_size=4, hard_eval="expectation")
    assert isinstance(hard, Alignment) and isinstance(hard.scorer, AdditiveScore)
    assert (hard.train_mode, hard.eval_mode) == ("sample", "soft")
    general = build_alignment(ATTENTION_ARMS["general"], query_size=4, memory_size=6, attn_size=4, hard_eval="argmax")
    assert isinstance(general, Alignment) and (general.train_mode, general.eval_mode) == ("soft", "soft")
    with pytest.raises(ValueError):
        build_alignment(ATTENTION_ARMS["dot"], query_size=4, memory_size=6, attn_size=4, hard_eval="argmax")


def test_alignment_modes_follow_train_eval() -> None:
    torch.manual_seed(0)
    align = build_alignment(ATTENTION_ARMS["hard"], query_size=DQ, memory_size=DK, attn_size=5, hard_eval="argmax")
    memory, mask, q = torch.randn(B, S, DK), torch.ones(B, S, dtype=torch.bool), torch.randn(B, DQ)
    prepared = align.prepare(memory, mask)
    align.eval()
    out = align(q, keys=prepared["keys"], memory=prepared["memory"], mask=mask)
    torch.testing.assert_close(out.weights.argmax(-1), align.scorer(q, memory).argmax(-1))
    align.train()
    align.generator = torch.Generator().manual_seed(5)
    first = align(q, keys=prepared["keys"], memory=prepared["memory"], mask=mask).weights
    align.generator = torch.Generator().manual_seed(5)
    assert torch.equal(first, align(q, keys=prepared["keys"], memory=prepared["memory"], mask=mask).weights)
