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
from typing import Literal, get_args

import torch
from torch import Tensor

from lit_models.blocks.beam import beam_search
from lit_models.blocks.step_protocol import (  # noqa: F401  (re-exported: the decoding API in one place)
    BeamReorderable,
    BeamResult,
    State,
    StepDecoder,
    expand_state,
    gnmt_penalty,
    max_lengths,
    reorder_state,
    state_device,
    step_log_probs,
)

Strategy = Literal["greedy", "beam", "sample"]
"""Decoding strategy: greedy argmax, beam search (GNMT length penalty), ancestral sampling."""


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
    device = state_device(state, max_len)
    max_len = max_len.to(device)
    n = max_len.shape[0]
    prev = torch.full((n,), bos, dtype=torch.long, device=device)
    finished = torch.zeros(n, dtype=torch.bool, device=device)
    total = torch.zeros(n, device=device)
    out: list[Tensor] = []
    for t in range(int(max_len.max())):
        logits, state = decoder.step(prev, state)
        logp = step_log_probs(logits, step=t, max_len=max_len, min_len=0, bos=bos, eos=eos, pad=pad)
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
