"""Greedy search, beam search and ancestral sampling: one implementation for every decoder.

Every decoder in attnlab (Transformer, recurrent, captioning) exposes
``step(prev_tokens, state) -> (logits, state)`` (see :class:`StepDecoder`); the functions here
drive that step and never look inside the state beyond its tensor leaves.

Conventions shared by all strategies:

* Output tokens exclude BOS; every row ends with EOS and is right-padded with ``pad``.
* A length counts generated tokens *including* the final EOS (BOS excluded). ``max_len`` is a
  per-example tensor; EOS is forced at position ``max_len - 1`` and blocked at positions
  ``t < min_len - 1`` (the forced EOS wins when the two conflict).
* Log-probabilities are the model's own, ``log_softmax(logits)`` over the full vocabulary,
  taken *before* masking (as fairseq's ``sequence_generator`` does): masking PAD/BOS, blocking or
  forcing EOS only removes candidates, it never renormalises. NaN logits and log-probs count
  as ``-inf``; a row left with no finite candidate emits EOS.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol, get_args, runtime_checkable

import torch
from torch import Tensor
from torch.utils._pytree import tree_leaves, tree_map

State = Any
"""A pytree (nested dict/list/tuple) of tensors; every tensor leaf has the batch on dim 0."""

Strategy = Literal["greedy", "beam", "sample"]
"""Decoding strategy: greedy argmax, beam search (GNMT length penalty), ancestral sampling."""


@runtime_checkable
class StepDecoder(Protocol):
    """Anything that can advance one decoding step."""

    def step(self, prev_tokens: Tensor, state: State) -> tuple[Tensor, State]:
        """prev_tokens (B,) long -> logits (B, V) float (unnormalised), new state."""
        ...


@runtime_checkable
class BeamReorderable(Protocol):
    """A decoder that reorders its own state between beam-search steps (optional fast path).

    ``reorder_beams(state, index)`` must equal :func:`reorder_state` for an ``index`` that only
    moves rows within each example's group of ``beam_size`` rows of a state built by
    :func:`expand_state`; it may skip leaves that are identical across a group (e.g. the
    projected encoder memory), which :func:`reorder_state` would copy every step.
    """

    def reorder_beams(self, state: State, index: Tensor) -> State:
        """state with (N, ...) leaves, index (N,) long within groups -> reordered state."""
        ...


class BeamResult(NamedTuple):
    """n-best list per example, best first; ``log_probs`` are the un-normalised sums."""

    tokens: Tensor  # (B, n_best, L) long, each row ends with EOS then pad
    scores: Tensor  # (B, n_best) float, log_probs / lp(|Y|)
    log_probs: Tensor  # (B, n_best) float, sum_t log p(y_t | y_<t, x)


def reorder_state(state: State, index: Tensor) -> State:
    """Select batch rows of every tensor leaf: ``leaf.index_select(0, index)``.

    Args:
        state: pytree whose tensor leaves are (N, ...); leaves may have any dtype and any trailing
            shape (a KV cache growing along time is fine). Non-tensor leaves are returned as is.
        index: (M,) long, rows to keep, in order.
    Returns:
        The same pytree with (M, ...) tensor leaves.
    """
    return tree_map(lambda x: x.index_select(0, index.to(x.device)) if isinstance(x, Tensor) else x, state)


def expand_state(state: State, k: int) -> State:
    """Repeat every tensor leaf ``k`` times on dim 0 with layout ``b * k + j`` (repeat_interleave).

    Args:
        state: pytree of (B, ...) tensor leaves.
        k: copies per example (the beam size).
    Returns:
        The same pytree with (B * k, ...) tensor leaves; row ``b * k + j`` is a copy of row ``b``.
    """
    return tree_map(lambda x: x.repeat_interleave(k, dim=0) if isinstance(x, Tensor) else x, state)


def max_lengths(src_lengths: Tensor, *, a: float, b: int) -> Tensor:
    """Per-example maximum output length ``max(1, floor(a * src_len + b))`` (fairseq max_len_a/b).

    Args:
        src_lengths: (B,) source lengths (int or float).
        a: multiplier of the source length.
        b: additive constant.
    Returns:
        (B,) long; lengths count generated tokens including the final EOS, excluding BOS.
    """
    return torch.floor(src_lengths.double() * a + b).clamp(min=1).long()


def gnmt_penalty(length: Tensor | float, alpha: float) -> Tensor | float:
    """GNMT length penalty ``lp(Y) = ((5 + |Y|) / 6) ** alpha`` (Wu et al. 2016, eq. 14).

    ``|Y|`` counts generated tokens including EOS; ``alpha = 0`` gives ``lp = 1``.
    """
    return ((5.0 + length) / 6.0) ** alpha


def _device(state: State, fallback: Tensor) -> torch.device:
    """Device of the first tensor leaf of ``state`` (the decoder's device), else ``fallback``'s."""
    leaves = [x for x in tree_leaves(state) if isinstance(x, Tensor)]
    return leaves[0].device if leaves else fallback.device


def _step_log_probs(
    logits: Tensor, *, step: int, max_len: Tensor, min_len: int, bos: int, eos: int, pad: int
) -> Tensor:
    """Model log-probs with PAD/BOS removed, EOS blocked before ``min_len`` and forced at ``max_len``.

    Args:
        logits: (N, V) unnormalised scores for output position ``step`` (0-based).
        max_len: (N,) long, per-row maximum length (EOS forced when ``step == max_len - 1``).
    Returns:
        (N, V) float log-probs; removed entries are ``-inf``, never NaN.
    """
    logits = logits.float()
    if bool(torch.isnan(logits).any()):  # a read-only check; the rewrite pass only when needed
        logits = logits.nan_to_num(nan=-math.inf)
    logp = torch.log_softmax(logits, dim=-1)  # (N, V)
    if bool(torch.isnan(logp).any()):  # rows with no finite logit (or a +inf one)
        logp = logp.nan_to_num(nan=-math.inf)
    raw_eos = logp[:, eos].clone()  # (N,)
    banned = [pad, bos, eos] if step + 1 < min_len else [pad, bos]
    logp[:, banned] = -math.inf  # a few columns, not an (N, V) pass
    force = step >= max_len - 1  # (N,)
    if bool(force.any()):
        logp = logp.masked_fill(force.unsqueeze(-1), -math.inf)
        logp[:, eos] = torch.where(force, raw_eos, logp[:, eos])
    return logp


def _autoregress(
    decoder: StepDecoder,
    state: State,
    choose: Callable[[Tensor], Tensor],
    *,
    max_len: Tensor,
    bos: int,
    eos: int,
    pad: int,
) -> tuple[Tensor, Tensor]:
    """Feed back one chosen token per row until every row has emitted EOS.

    Args:
        choose: (B, V) masked log-probs -> (B,) chosen tokens (rows with a finite entry only).
        max_len: (B,) long per-example maximum lengths.
    Returns:
        tokens (B, L) long (EOS then pad; L = longest row) and (B,) summed model log-probs.
    """
    device = _device(state, max_len)
    max_len = max_len.to(device)
    n = max_len.shape[0]
    prev = torch.full((n,), bos, dtype=torch.long, device=device)
    finished = torch.zeros(n, dtype=torch.bool, device=device)
    total = torch.zeros(n, device=device)
    out: list[Tensor] = []
    for t in range(int(max_len.max())):
        logits, state = decoder.step(prev, state)
        logp = _step_log_probs(logits, step=t, max_len=max_len, min_len=0, bos=bos, eos=eos, pad=pad)
        dead = logp.amax(-1) == -math.inf  # (B,) nothing finite left: emit EOS
        tok = torch.where(dead, eos, choose(logp.masked_fill(dead.unsqueeze(-1), 0.0)))
        tok = tok.masked_fill(finished, pad)  # (B,)
        total = total + logp.gather(1, tok.unsqueeze(1)).squeeze(1).masked_fill(finished, 0.0)
        out.append(tok)
        finished = finished | (tok == eos)
        if bool(finished.all()):
            break
        prev = tok
    return torch.stack(out, dim=1), total


@torch.no_grad()
def greedy(decoder: StepDecoder, state: State, *, max_len: Tensor, bos: int, eos: int, pad: int) -> Tensor:
    """Greedy search: ``y_t = argmax_v log p(v | y_<t, x)`` over v not in {PAD, BOS}.

    Args:
        decoder: the step function; ``state`` is its initial state with batch B on dim 0.
        max_len: (B,) long; EOS is forced at position ``max_len - 1``.
    Returns:
        (B, L) long generated tokens without BOS; each row ends with EOS then pad, L = longest row.
    """
    tokens, _ = _autoregress(
        decoder, state, lambda logp: logp.argmax(-1), max_len=max_len, bos=bos, eos=eos, pad=pad
    )
    return tokens


@torch.no_grad()
def sample(
    decoder: StepDecoder,
    state: State,
    *,
    max_len: Tensor,
    bos: int,
    eos: int,
    pad: int,
    temperature: float = 1.0,
    top_k: int = 0,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """Ancestral sampling ``y_t ~ softmax(logits_t / T)`` restricted to the ``top_k`` most likely tokens.

    Args:
        max_len: (B,) long; EOS is forced at position ``max_len - 1``.
        temperature: T > 0; 1 samples from the model, T -> 0 approaches greedy.
        top_k: keep only the k most likely tokens before sampling (Fan et al. 2018); 0 = no truncation.
        generator: torch.Generator on the decoder's device, for reproducible draws.
    Returns:
        tokens (B, L) long (EOS then pad) and (B,) summed *model* log-probs ``sum_t log p(y_t)``
        (T = 1, no truncation), comparable with :class:`BeamResult` ``log_probs``.
    """

    def choose(logp: Tensor) -> Tensor:
        scaled = logp / temperature  # (B, V)
        if top_k > 0:
            kth = scaled.topk(min(top_k, scaled.shape[-1]), dim=-1).values[:, -1:]  # (B, 1)
            scaled = scaled.masked_fill(scaled < kth, -math.inf)
        probs = torch.softmax(scaled, dim=-1)
        return torch.multinomial(probs, 1, generator=generator).squeeze(1)

    return _autoregress(decoder, state, choose, max_len=max_len, bos=bos, eos=eos, pad=pad)


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
    device = _device(state, max_len)
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
        logp = _step_log_probs(logits, step=t, max_len=beam_max_len, min_len=min_len, bos=bos, eos=eos,
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


@dataclass(frozen=True)
class DecodeConfig:
    """Decode-time knobs (not model hyper-parameters: checkpoints never override them).

    Args:
        strategy: greedy, beam or sample.
        beam_size: beams per example (beam only).
        length_penalty: GNMT alpha in ``((5 + |Y|) / 6) ** alpha`` (beam only); 0 = plain log-prob.
        max_len_a, max_len_b: maximum output length ``floor(a * src_len + b)``, at least 1.
        n_best: hypotheses kept by beam search (``decode`` returns the best).
        temperature, top_k: sampling temperature (> 0) and top-k truncation (0 = none).
    """

    strategy: Strategy = "greedy"
    beam_size: int = 4
    length_penalty: float = 0.6
    max_len_a: float = 1.0
    max_len_b: int = 10
    n_best: int = 1
    temperature: float = 1.0
    top_k: int = 0

    def __post_init__(self) -> None:
        checks = {
            f"strategy must be one of {get_args(Strategy)}": self.strategy in get_args(Strategy),
            "beam_size must be >= 1": self.beam_size >= 1,
            "n_best must satisfy 1 <= n_best <= beam_size": 1 <= self.n_best <= self.beam_size,
            "length_penalty must be finite and >= 0": math.isfinite(self.length_penalty)
            and self.length_penalty >= 0,
            "max_len_a must be finite and >= 0": math.isfinite(self.max_len_a) and self.max_len_a >= 0,
            "max_len_b must be >= 0": self.max_len_b >= 0,
            "temperature must be finite and > 0": math.isfinite(self.temperature) and self.temperature > 0,
            "top_k must be >= 0 (0 = no truncation)": self.top_k >= 0,
        }
        for message, ok in checks.items():
            if not ok:
                raise ValueError(f"DecodeConfig: {message}; got {self}")


_Run = Callable[[StepDecoder, State, Tensor, DecodeConfig, int, int, int, torch.Generator | None], Tensor]


def _run_greedy(dec: StepDecoder, st: State, ml: Tensor, cfg: DecodeConfig, bos: int, eos: int, pad: int,
                gen: torch.Generator | None) -> Tensor:
    return greedy(dec, st, max_len=ml, bos=bos, eos=eos, pad=pad)


def _run_beam(dec: StepDecoder, st: State, ml: Tensor, cfg: DecodeConfig, bos: int, eos: int, pad: int,
              gen: torch.Generator | None) -> Tensor:
    result = beam_search(dec, st, beam_size=cfg.beam_size, max_len=ml, bos=bos, eos=eos, pad=pad,
                         length_penalty=cfg.length_penalty, n_best=cfg.n_best)
    return result.tokens[:, 0]


def _run_sample(dec: StepDecoder, st: State, ml: Tensor, cfg: DecodeConfig, bos: int, eos: int, pad: int,
                gen: torch.Generator | None) -> Tensor:
    return sample(dec, st, max_len=ml, bos=bos, eos=eos, pad=pad, temperature=cfg.temperature,
                  top_k=cfg.top_k, generator=gen)[0]


STRATEGIES: dict[Strategy, _Run] = {"greedy": _run_greedy, "beam": _run_beam, "sample": _run_sample}
"""Strategy -> ``(decoder, state, max_len, config, bos, eos, pad, generator) -> tokens (B, L)``."""


def decode(
    decoder: StepDecoder,
    state: State,
    *,
    src_lengths: Tensor,
    config: DecodeConfig,
    bos: int,
    eos: int,
    pad: int,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Decode the best hypothesis per example with ``config.strategy``.

    Args:
        state: initial decoder state (e.g. ``net.encode(src)``), batch B on dim 0.
        src_lengths: (B,) source lengths; the output length limit is
            ``max_lengths(src_lengths, a=config.max_len_a, b=config.max_len_b)``.
    Returns:
        (B, L) long tokens without BOS, each row EOS-terminated then padded.
    """
    max_len = max_lengths(src_lengths, a=config.max_len_a, b=config.max_len_b)
    return STRATEGIES[config.strategy](decoder, state, max_len, config, bos, eos, pad, generator)
