"""Beam search with the GNMT length penalty over any ``StepDecoder`` (conventions: ``decoding``)."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from lit_models.blocks.step_protocol import (
    BeamReorderable,
    BeamResult,
    State,
    StepDecoder,
    expand_state,
    gnmt_penalty,
    reorder_state,
    state_device,
    step_log_probs,
)


def _add_finished(
    pool: BeamResult, live_tok: Tensor, logp: Tensor, src: Tensor, ends: Tensor, *, step: int, eos: int,
    alpha: float,
) -> BeamResult:
    """Merge candidates that end with EOS at ``step`` into the sorted pool of the K best finished.

    Args:
        pool: tokens (B, K, L), scores (B, K), log_probs (B, K); empty slots score ``-inf``.
        live_tok: (B, K, L) live prefixes; ``logp``, ``src``, ``ends``: (B, C) candidate cumulative
            log-prob, source beam and "is a finishing EOS" flag.
    """
    k, length = live_tok.shape[1], live_tok.shape[2]
    new_tok = live_tok.gather(1, src.unsqueeze(-1).expand(-1, -1, length)).clone()  # (B, C, L)
    new_tok[:, :, step] = eos
    new_logp = logp.masked_fill(~ends, -math.inf)  # (B, C)
    new_score = new_logp / gnmt_penalty(step + 1, alpha)
    scores, pick = torch.cat([pool.scores, new_score], 1).topk(k, dim=1)  # (B, K)
    tokens = torch.cat([pool.tokens, new_tok], 1).gather(1, pick.unsqueeze(-1).expand(-1, -1, length))
    return BeamResult(tokens, scores, torch.cat([pool.log_probs, new_logp], 1).gather(1, pick))


def _select_live(top_logp: Tensor, src: Tensor, tok: Tensor, *, eos: int, k: int) -> tuple[Tensor, ...]:
    """The first ``k`` candidates by rank that do not end with EOS; (B, 2k) -> three (B, k)."""
    rank = torch.arange(tok.shape[1], device=tok.device) + (tok == eos).long() * tok.shape[1]  # (B, 2k)
    pick = rank.topk(k, dim=1, largest=False).indices  # ascending rank
    return top_logp.gather(1, pick), src.gather(1, pick), tok.gather(1, pick)


def _empty_pool(b: int, k: int, length: int, *, eos: int, pad: int, device: torch.device) -> BeamResult:
    """A pool of K placeholder hypotheses ``[EOS, pad, ...]`` scoring ``-inf``."""
    tokens = torch.full((b, k, length), pad, dtype=torch.long, device=device)
    tokens[:, :, 0] = eos
    neg = torch.full((b, k), -math.inf, device=device)
    return BeamResult(tokens, neg, neg.clone())


@torch.no_grad()
def beam_search(
    decoder: StepDecoder,
    state: State,
    *,
    beam_size: int,
    max_len: Tensor,
    bos: int,
    eos: int,
    pad: int,
    length_penalty: float = 0.6,
    n_best: int = 1,
    min_len: int = 0,
) -> BeamResult:
    """Beam search ranking finished hypotheses by ``s(Y) = log P(Y | X) / lp(Y)`` (GNMT, Wu et al. 2016).

    ``lp(Y) = ((5 + |Y|) / 6) ** length_penalty`` with ``|Y|`` counting tokens including EOS;
    ``length_penalty = 0`` ranks by plain log-prob. Deviation from GNMT: no coverage penalty
    (beta = 0) and no score-margin pruning. Each step takes the top ``2 * beam_size``
    candidates (fairseq): those among the first ``beam_size`` that end with EOS join a per-example
    pool of the ``beam_size`` best finished hypotheses (never advanced again), the best
    ``beam_size`` others stay live. The first step expands only copy 0 of each example (the
    other copies start at ``-inf``). The whole state is reordered with the chosen beams every step
    (by ``decoder.reorder_beams`` when the decoder is :class:`BeamReorderable`).

    Stopping (deviates from "stop when the top beam ends", which is wrong under a length penalty):
    an example is done when its pool is full and ``max_live log P / max(lp(t + 2), lp(max_len))``,
    an upper bound on any continuation's score since log-probs only decrease, cannot beat the
    worst pooled score; or when ``max_len`` is reached. Examples never influence one another.
    Hence ``beam_size=1`` equals :func:`greedy` when ``length_penalty=0``; with a penalty it may
    keep searching and return a longer, better-scoring hypothesis.

    Args:
        state: initial decoder state with batch B on dim 0 (expanded to B * beam_size inside).
        max_len: (B,) long per-example maximum lengths; EOS forced at position ``max_len - 1``.
        n_best: hypotheses returned per example, 1 <= n_best <= beam_size.
        min_len: EOS is blocked while the hypothesis would be shorter than ``min_len``.
    Returns:
        :class:`BeamResult` with tokens (B, n_best, L), scores and log_probs (B, n_best), best first.
        Slots that no finite hypothesis filled hold ``[EOS]`` with score ``-inf``.
    """
    if not 1 <= n_best <= beam_size:
        raise ValueError(f"need 1 <= n_best <= beam_size, got n_best={n_best}, beam_size={beam_size}")
    device = state_device(state, max_len)
    max_len, k, n = max_len.to(device), beam_size, max_len.shape[0]
    length = int(max_len.max())
    state, beam_max_len = expand_state(state, k), max_len.repeat_interleave(k)  # (B*K, ...), (B*K,)
    live_logp = torch.full((n, k), -math.inf, device=device)
    live_logp[:, 0] = 0.0
    live_tok = torch.full((n, k, length), pad, dtype=torch.long, device=device)
    pool = _empty_pool(n, k, length, eos=eos, pad=pad, device=device)
    done = torch.zeros(n, dtype=torch.bool, device=device)
    offset = torch.arange(n, device=device).unsqueeze(1) * k  # (B, 1)
    prev = torch.full((n * k,), bos, dtype=torch.long, device=device)
    fast_reorder = isinstance(decoder, BeamReorderable)
    for t in range(length):
        logits, state = decoder.step(prev, state)
        logp = step_log_probs(logits, step=t, max_len=beam_max_len, min_len=min_len, bos=bos, eos=eos,
                               pad=pad)  # (B*K, V)
        vocab = logp.shape[-1]
        cand = (live_logp.unsqueeze(-1) + logp.view(n, k, vocab)).view(n, k * vocab)  # (B, K*V)
        top_logp, top_idx = cand.topk(2 * k, dim=1)  # (B, 2K)
        src, tok = top_idx // vocab, top_idx % vocab
        ends = (tok[:, :k] == eos) & (top_logp[:, :k] > -math.inf) & ~done.unsqueeze(1)
        pool = _add_finished(pool, live_tok, top_logp[:, :k], src[:, :k], ends, step=t, eos=eos,
                             alpha=length_penalty)
        live_logp, src, tok = _select_live(top_logp, src, tok, eos=eos, k=k)
        live_logp = live_logp.masked_fill(done.unsqueeze(1), -math.inf)
        index = (offset + src).view(-1)  # (B*K,) rows stay within their example's group
        state = decoder.reorder_beams(state, index) if fast_reorder else reorder_state(state, index)
        live_tok = live_tok.gather(1, src.unsqueeze(-1).expand(-1, -1, length))
        live_tok[:, :, t] = tok
        prev = tok.view(-1)
        best_possible = live_logp.amax(1) / _bound_penalty(max_len, step=t, alpha=length_penalty)  # (B,)
        done = done | (t >= max_len - 1) | (best_possible <= pool.scores[:, -1])
        if bool(done.all()):
            break
    return _finalize(BeamResult(*(x[:, :n_best] for x in pool)), eos=eos, pad=pad)


def _bound_penalty(max_len: Tensor, *, step: int, alpha: float) -> Tensor:
    """(B,) ``max(lp(step + 2), lp(max_len))``: the largest penalty a live hypothesis can still reach."""
    return torch.clamp(gnmt_penalty(max_len.double(), alpha), min=gnmt_penalty(step + 2.0, alpha)).float()


def _finalize(result: BeamResult, *, eos: int, pad: int) -> BeamResult:
    """Empty (``-inf``) slots become ``[EOS, pad, ...]``; L becomes the longest returned hypothesis."""
    empty = _empty_pool(1, 1, result.tokens.shape[-1], eos=eos, pad=pad, device=result.tokens.device).tokens
    tokens = torch.where((result.scores == -math.inf).unsqueeze(-1), empty, result.tokens)  # (B, n, L)
    return result._replace(tokens=tokens[..., : int((tokens != pad).sum(-1).max())])
