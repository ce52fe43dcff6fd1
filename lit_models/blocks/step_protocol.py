"""The step protocol every decoder implements, and the state and log-prob primitives the searches share.

See ``lit_models.blocks.decoding`` for the conventions (lengths, EOS forcing, log-probs before masking).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, Protocol, runtime_checkable

import torch
from torch import Tensor

State = Any
"""A pytree (nested dict/list/tuple) of tensors; every tensor leaf has the batch on dim 0."""


def map_tensors(fn: Callable[[Tensor], Tensor], state: State) -> State:
    """``state`` with ``fn`` applied to every tensor leaf; dicts, lists, tuples and NamedTuples keep their type
    (torch's pytree module is private, so the walk over the containers a :data:`State` may hold lives here)."""
    if isinstance(state, Tensor):
        return fn(state)
    if isinstance(state, dict):
        return type(state)((key, map_tensors(fn, value)) for key, value in state.items())
    if isinstance(state, tuple) and hasattr(state, "_fields"):
        return type(state)(*(map_tensors(fn, value) for value in state))
    if isinstance(state, (list, tuple)):
        return type(state)(map_tensors(fn, value) for value in state)
    return state


def tensor_leaves(state: State) -> Iterator[Tensor]:
    """Every tensor leaf of ``state``, depth first in container order."""
    if isinstance(state, Tensor):
        yield state
    elif isinstance(state, dict):
        for value in state.values():
            yield from tensor_leaves(value)
    elif isinstance(state, (list, tuple)):
        for value in state:
            yield from tensor_leaves(value)


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
    return map_tensors(lambda x: x.index_select(0, index.to(x.device)), state)


def expand_state(state: State, k: int) -> State:
    """Repeat every tensor leaf ``k`` times on dim 0 with layout ``b * k + j`` (repeat_interleave).

    Args:
        state: pytree of (B, ...) tensor leaves.
        k: copies per example (the beam size).
    Returns:
        The same pytree with (B * k, ...) tensor leaves; row ``b * k + j`` is a copy of row ``b``.
    """
    return map_tensors(lambda x: x.repeat_interleave(k, dim=0), state)


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


def state_device(state: State, fallback: Tensor) -> torch.device:
    """Device of the first tensor leaf of ``state`` (the decoder's device), else ``fallback``'s."""
    first = next(tensor_leaves(state), None)
    return first.device if first is not None else fallback.device


def step_log_probs(
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
