"""Alignment scorers and soft / hard attention over a memory, for recurrent and captioning decoders.

One query vector per example attends over a memory of S vectors (encoder states or a CNN feature
grid). Scorers follow Bahdanau et al. 2015 (additive) and Luong et al. 2015 (dot, general); the
stochastic "hard" attention follows Xu et al. 2015 §4.1 and uses the additive scorer, so it
samples a location from the same α the soft arm averages with.

Masks are boolean with **True = valid** (may be attended), as everywhere in attnlab. Softmax is
taken in float32; masked positions get exactly zero weight and a row with no valid position gives
zero weights, a zero context and zero log-probability / entropy (never NaN). Padded memory
values are zeroed before use, so NaN or garbage in padding cannot leak (0·NaN = NaN).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

ScoreName = Literal["additive", "dot", "general"]
"""Alignment score e(s, h): additive (Bahdanau), dot and general (Luong)."""

AttendMode = Literal["soft", "sample", "argmax"]
"""How α turns into a context: expectation (soft), a sampled location (hard, training), the argmax."""

HardEval = Literal["argmax", "expectation"]
"""Hard attention at evaluation: the most probable location, or the soft expectation under α."""


class AttentionOut(NamedTuple):
    """Result of attending over a memory.

    Attributes:
        context: (B, D) attended value (Σ_j w_j v_j).
        weights: (B, S) float32 weights w: α for soft attention, one-hot for hard attention.
        log_prob: (B,) log α at the chosen location for hard attention; zeros for soft.
        entropy: (B,) entropy H[α] for hard attention (the entropy term of Xu et al.'s
            learning rule, §4.1); zeros for soft.
    """

    context: Tensor
    weights: Tensor
    log_prob: Tensor
    entropy: Tensor


class AlignmentScore(nn.Module):
    """Base scorer: ``forward(query (B, Dq), keys (B, S, Dk)) -> scores (B, S)``.

    ``precompute(keys)`` holds the query-independent part (done once per sequence) and
    ``score(query, projected)`` the per-step part; ``forward`` chains the two.
    """

    def precompute(self, keys: Tensor) -> Tensor:
        """keys (B, S, Dk) -> projected keys (B, S, P)."""
        raise NotImplementedError

    def score(self, query: Tensor, projected: Tensor) -> Tensor:
        """query (B, Dq), projected keys (B, S, P) -> scores (B, S)."""
        raise NotImplementedError

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        """query (B, Dq), keys (B, S, Dk) -> scores (B, S)."""
        return self.score(query, self.precompute(keys))


class AdditiveScore(AlignmentScore):
    """e_j = vᵀ tanh(W s + U h_j)  (Bahdanau et al. 2015, eq. 6 and appendix A.1.2).

    ``U h_j`` does not depend on the decoder state and is computed once per sequence by
    ``precompute``, as the paper's appendix suggests. No biases, as in the paper.

    Args:
        query_size: Dq, size of the decoder state s.
        key_size: Dk, size of the annotations h_j.
        attn_size: n', the width of the hidden alignment layer.
    """

    def __init__(self, *, query_size: int, key_size: int, attn_size: int) -> None:
        super().__init__()
        self.query_proj = nn.Linear(query_size, attn_size, bias=False)  # W_a
        self.key_proj = nn.Linear(key_size, attn_size, bias=False)  # U_a
        self.v = nn.Linear(attn_size, 1, bias=False)  # v_a

    def precompute(self, keys: Tensor) -> Tensor:
        return self.key_proj(keys)  # (B, S, A)

    def score(self, query: Tensor, projected: Tensor) -> Tensor:
        hidden = torch.tanh(self.query_proj(query).unsqueeze(1) + projected)  # (B, S, A)
        return self.v(hidden).squeeze(-1)  # (B, S)


class DotScore(AlignmentScore):
    """e_j = sᵀ h_j  (Luong et al. 2015, eq. 8 "dot"). Requires Dq == Dk; no parameters."""

    def __init__(self, *, query_size: int, key_size: int) -> None:
        super().__init__()
        if query_size != key_size:
            raise ValueError(
                f"dot attention needs query size == memory size, got {query_size} != {key_size}; "
                "use 'general' or 'additive', or make the decoder hidden size equal the memory size"
            )

    def precompute(self, keys: Tensor) -> Tensor:
        return keys  # (B, S, D)

    def score(self, query: Tensor, projected: Tensor) -> Tensor:
        return torch.einsum("bsd,bd->bs", projected, query)  # (B, S)


class GeneralScore(AlignmentScore):
    """e_j = sᵀ W h_j  (Luong et al. 2015, eq. 8 "general"); ``W h_j`` is precomputed. No bias."""

    def __init__(self, *, query_size: int, key_size: int) -> None:
        super().__init__()
        self.key_proj = nn.Linear(key_size, query_size, bias=False)  # W_a

    def precompute(self, keys: Tensor) -> Tensor:
        return self.key_proj(keys)  # (B, S, Dq)

    def score(self, query: Tensor, projected: Tensor) -> Tensor:
        return torch.einsum("bsd,bd->bs", projected, query)  # (B, S)


ScorerFactory = Callable[..., AlignmentScore]
SCORERS: dict[ScoreName, ScorerFactory] = {
    "additive": lambda *, query_size, key_size, attn_size: AdditiveScore(
        query_size=query_size, key_size=key_size, attn_size=attn_size
    ),
    "dot": lambda *, query_size, key_size, attn_size: DotScore(query_size=query_size, key_size=key_size),
    "general": lambda *, query_size, key_size, attn_size: GeneralScore(
        query_size=query_size, key_size=key_size
    ),
}


def masked_log_alpha(scores: Tensor, mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """log α = log_softmax over valid positions, in float32, safe for rows with no valid position.

    Args:
        scores: (B, S) alignment scores.
        mask: (B, S) bool, True = valid.

    Returns:
        log_alpha (B, S) float32 (-inf at masked positions of valid rows; uniform, finite, in
        rows with no valid position so that nothing downstream sees NaN), ``allowed`` (B, S) bool
        (where log_alpha is finite) and ``row_valid`` (B,) bool.
    """
    row_valid = mask.any(dim=-1)  # (B,)
    allowed = mask | ~row_valid.unsqueeze(-1)  # (B, S)
    log_alpha = scores.float().masked_fill(~allowed, float("-inf")).log_softmax(dim=-1)
    return log_alpha, allowed, row_valid


def _soft(scores: Tensor, mask: Tensor, values: Tensor, generator: torch.Generator | None) -> AttentionOut:
    """Deterministic soft attention: c = Σ_j α_j v_j (Bahdanau eq. 5)."""
    log_alpha, _, row_valid = masked_log_alpha(scores, mask)
    weights = log_alpha.exp() * row_valid.unsqueeze(-1)  # (B, S)
    context = torch.einsum("bs,bsd->bd", weights.to(values.dtype), values)  # (B, D)
    zeros = weights.new_zeros(weights.size(0))
    return AttentionOut(context, weights, zeros, zeros)


def _hard(scores: Tensor, mask: Tensor, values: Tensor, index: Tensor | None) -> AttentionOut:
    """Hard attention at location ``index`` (B,) (or the argmax of α when None), Xu et al. §4.1.

    The context is v at the chosen location; it carries no gradient to the scores, which learn
    only through ``log_prob`` (the REINFORCE term of Xu et al. §4.1).
    """
    log_alpha, allowed, row_valid = masked_log_alpha(scores, mask)
    if index is None:
        index = log_alpha.argmax(dim=-1)  # (B,)
    weights, log_prob, entropy = _hard_terms(log_alpha, allowed, row_valid, index)
    context = torch.einsum("bs,bsd->bd", weights.to(values.dtype), values)  # (B, D)
    return AttentionOut(context, weights, log_prob, entropy)


def _hard_terms(log_alpha: Tensor, allowed: Tensor, row_valid: Tensor, index: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """One-hot weights (..., S), log α at ``index`` (...) and H[α] (...) from ``masked_log_alpha``'s outputs;
    zero in rows with no valid position. Leading dims (...) are (B,) or (B, T)."""
    weights = F.one_hot(index, log_alpha.size(-1)).float() * row_valid.unsqueeze(-1)  # (..., S)
    chosen = log_alpha.gather(-1, index.unsqueeze(-1)).squeeze(-1)  # (...)
    log_prob = torch.where(row_valid, chosen, torch.zeros_like(chosen))
    entropy = -(log_alpha.exp() * log_alpha.masked_fill(~allowed, 0.0)).sum(-1) * row_valid  # (...)
    return weights, log_prob, entropy


def _sample(scores: Tensor, mask: Tensor, values: Tensor, generator: torch.Generator | None) -> AttentionOut:
    """Stochastic hard attention: s ~ Multinoulli(α) (Xu et al. §4.1)."""
    with torch.no_grad():
        alpha = masked_log_alpha(scores, mask)[0].exp()  # (B, S), uniform in empty rows
        index = torch.multinomial(alpha, 1, generator=generator).squeeze(-1)  # (B,)
    return _hard(scores, mask, values, index)


def _argmax(scores: Tensor, mask: Tensor, values: Tensor, generator: torch.Generator | None) -> AttentionOut:
    """Deterministic hard attention at the most probable location (evaluation)."""
    return _hard(scores, mask, values, None)


ATTEND_MODES: dict[AttendMode, Callable[[Tensor, Tensor, Tensor, torch.Generator | None], AttentionOut]] = {
    "soft": _soft,
    "sample": _sample,
    "argmax": _argmax,
}


def attend(
    scores: Tensor, mask: Tensor, values: Tensor, *, mode: AttendMode, generator: torch.Generator | None = None
) -> AttentionOut:
    """Turn alignment scores into a context vector.

    Args:
        scores: (B, S) alignment scores e_j.
        mask: (B, S) bool, True = valid position.
        values: (B, S, D) memory to average / pick from (padded positions are zeroed here).
        mode: ``soft`` (expectation, Bahdanau eq. 5), ``sample`` (a location drawn from α, Xu et al.
            §4.1; uses ``generator`` or the global RNG) or ``argmax``.
        generator: optional RNG for ``sample``.

    Returns:
        :class:`AttentionOut`; weights in float32, context in ``values.dtype``.
    """
    values = values.masked_fill(~mask.unsqueeze(-1), 0.0)  # (B, S, D)
    return ATTEND_MODES[mode](scores, mask, values, generator)


class Alignment(nn.Module):
    """A scorer plus an attend mode per phase: what a decoder calls once per step.

    ``prepare`` runs once per sequence (precomputed keys); ``forward`` scores a query and attends.
    The mode is ``train_mode`` in training and ``eval_mode`` in eval (``.train()`` / ``.eval()``).
    Sampling uses ``self.generator`` when set, else the global RNG: the LightningModule offsets the
    global seed per DDP rank so that ranks draw different locations.

    Args:
        scorer: an :class:`AlignmentScore`.
        memory_size: D, the width of the memory (= the context size).
        train_mode / eval_mode: :data:`AttendMode` used in each phase.
    """

    def __init__(
        self, *, scorer: AlignmentScore, memory_size: int, train_mode: AttendMode, eval_mode: AttendMode
    ) -> None:
        super().__init__()
        self.scorer = scorer
        self.context_size = memory_size
        self.train_mode, self.eval_mode = train_mode, eval_mode
        self.generator: torch.Generator | None = None

    def prepare(self, memory: Tensor, mask: Tensor) -> dict[str, Tensor]:
        """memory (B, S, D), mask (B, S) -> {"memory": (B, S, D) zeroed at padding, "keys": (B, S, P)}.

        Padding is zeroed here, once per sequence, so ``forward`` need not redo it at every step.
        """
        memory = memory.masked_fill(~mask.unsqueeze(-1), 0.0)  # (B, S, D)
        return {"memory": memory, "keys": self.scorer.precompute(memory)}

    def forward(self, query: Tensor, *, keys: Tensor, memory: Tensor, mask: Tensor,
                expect: Tensor | None = None) -> AttentionOut:
        """query (B, Dq), prepared keys (B, S, P) and memory (B, S, D) from ``prepare``, mask (B, S) -> AttentionOut.

        ``expect`` (B,) in {0, 1}, optional: rows with 1 use the soft expectation instead of this
        phase's mode (Xu et al. §4.1: "with probability 0.5 ... set the sampled attention location
        to its expected value"); their log-prob and entropy are 0, so REINFORCE skips them.
        """
        mode = self.train_mode if self.training else self.eval_mode
        scores = self.scorer.score(query, keys)  # (B, S)
        out = ATTEND_MODES[mode](scores, mask, memory, self.generator)  # memory is zeroed at padding
        if expect is None:
            return out
        soft = _soft(scores, mask, memory, None)
        e = expect.to(out.weights.dtype)  # (B,)
        return AttentionOut(
            context=torch.lerp(out.context, soft.context, e.to(out.context.dtype).unsqueeze(-1)),
            weights=torch.lerp(out.weights, soft.weights, e.unsqueeze(-1)),
            log_prob=out.log_prob * (1 - e),
            entropy=out.entropy * (1 - e),
        )


    # ---------------------------------------------------------- teacher-forced loop (fused)
    def open(self, mask: Tensor) -> Tensor:
        """Once per sequence: (B, S) float32 bias, 0 where α may be non-zero and -inf elsewhere (a row with no
        valid position allows every position, as ``masked_log_alpha``)."""
        row_valid = mask.any(dim=-1, keepdim=True)  # (B, 1)
        return torch.zeros(mask.shape, device=mask.device).masked_fill(~(mask | ~row_valid), float("-inf"))

    def teacher_step(self, query: Tensor, *, keys: Tensor, memory: Tensor,
                     bias: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """One step of a loop over gold inputs: what ``forward`` computes, less what can wait for ``teacher_close``.

        Returns the context (B, D) and the step's record for ``teacher_close``: scores (B, S) float32 and the pick
        (soft: α (B, S), not yet zeroed in empty rows, whose context is zero anyway since their memory is;
        sample / argmax: the location (B,)).
        """
        mode = self.train_mode if self.training else self.eval_mode
        scores = self.scorer.score(query, keys).float() + bias  # (B, S), -inf where masked
        if mode == "soft":
            alpha = torch.softmax(scores, dim=-1)
            return torch.bmm(alpha.to(memory.dtype).unsqueeze(1), memory).squeeze(1), scores, alpha
        with torch.no_grad():  # the location carries no gradient (Xu et al. §4.1): REINFORCE's log α does
            log_alpha = scores.log_softmax(dim=-1)
            index = (torch.multinomial(log_alpha.exp(), 1, generator=self.generator).squeeze(-1)
                     if mode == "sample" else log_alpha.argmax(dim=-1))  # (B,)
        picked = memory.gather(1, index.view(-1, 1, 1).expand(-1, 1, memory.size(-1)))  # (B, 1, D)
        return picked.squeeze(1), scores, index

    def teacher_close(self, scores: list[Tensor], picks: list[Tensor], mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The steps' records -> weights (B, T, S) float32, log α at the picks (B, T) and H[α] (B, T), as
        ``forward`` gives them step by step (zeros for soft)."""
        row_valid = mask.any(dim=-1, keepdim=True)  # (B, 1)
        picked = torch.stack(picks, dim=1)  # (B, T, S) α or (B, T) locations
        if picked.dim() == 3:
            weights = picked * row_valid.unsqueeze(-1)
            zeros = weights.new_zeros(weights.shape[:2])
            return weights, zeros, zeros
        log_alpha = torch.stack(scores, dim=1).log_softmax(dim=-1)  # (B, T, S)
        allowed = (mask | ~row_valid).unsqueeze(1)  # (B, 1, S)
        return _hard_terms(log_alpha, allowed, row_valid.expand_as(picked), picked)


class NoAlignment(nn.Module):
    """attention="none": the fixed-vector decoder (Sutskever et al. 2014; Cho et al. 2014).

    It keeps a zero-width memory and keys, so every arm's decoder state has the same keys and the
    memory cannot influence anything after initialisation; the context is (B, 0) and the weights zero.
    """

    context_size = 0
    generator: torch.Generator | None = None

    def prepare(self, memory: Tensor, mask: Tensor) -> dict[str, Tensor]:
        """memory (B, S, D) -> {"memory": (B, S, 0), "keys": (B, S, 0)}."""
        empty = memory[..., :0]  # (B, S, 0)
        return {"memory": empty, "keys": empty}

    def forward(self, query: Tensor, *, keys: Tensor, memory: Tensor, mask: Tensor,
                expect: Tensor | None = None) -> AttentionOut:
        weights = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)  # (B, S)
        zeros = weights.new_zeros(mask.size(0))
        return AttentionOut(memory.new_zeros(mask.size(0), 0), weights, zeros, zeros)

    def open(self, mask: Tensor) -> Tensor:
        return mask[:, :0]

    def teacher_step(self, query: Tensor, *, keys: Tensor, memory: Tensor, bias: Tensor) -> tuple[Tensor, None, None]:
        """No context (B, 0), nothing to record."""
        return memory.new_zeros(memory.size(0), 0), None, None

    def teacher_close(self, scores: list, picks: list, mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Zero weights (B, T, S), log-probabilities and entropies (B, T)."""
        weights = torch.zeros(mask.size(0), len(picks), mask.size(1), device=mask.device)
        zeros = weights.new_zeros(weights.shape[:2])
        return weights, zeros, zeros


class AttentionArm(NamedTuple):
    """What a decoder-attention arm means: its scorer (None: no attention) and attend modes (eval None =
    ``hard_eval``); ``lit_models.registries.ATTENTION_ARMS`` maps each arm to one."""

    scorer: ScoreName | None
    train_mode: AttendMode
    eval_mode: AttendMode | None


HARD_EVAL_MODES: dict[HardEval, AttendMode] = {"argmax": "argmax", "expectation": "soft"}


def build_alignment(
    arm: AttentionArm, *, query_size: int, memory_size: int, attn_size: int, hard_eval: HardEval
) -> Alignment | NoAlignment:
    """Build an attention arm: an :class:`Alignment` or :class:`NoAlignment`.

    Args:
        arm: the resolved arm (its scorer and attend modes).
        query_size: Dq, decoder state size. memory_size: D, memory width.
        attn_size: hidden width of the additive scorer (unused by dot / general).
        hard_eval: what ``hard`` does in eval mode (argmax location or soft expectation).
    """
    if arm.scorer is None:
        return NoAlignment()
    scorer = SCORERS[arm.scorer](query_size=query_size, key_size=memory_size, attn_size=attn_size)
    eval_mode = arm.eval_mode if arm.eval_mode is not None else HARD_EVAL_MODES[hard_eval]
    return Alignment(scorer=scorer, memory_size=memory_size, train_mode=arm.train_mode, eval_mode=eval_mode)
