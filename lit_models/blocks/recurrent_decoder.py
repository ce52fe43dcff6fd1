"""The recurrent attentional decoder (Bahdanau et al. 2015; Luong et al. 2015; Xu et al. 2015).

With ``attention="none"`` it is the fixed-vector decoder of Sutskever et al. 2014 / Cho et al.
2014: the encoder summary only initialises the state. Every step with attention:

    α_t = align(s_{t-1}, h_1..h_S)                  (scored with the previous top hidden state)
    c_t = Σ_j α_tj h_j                               (soft) or h_{j~α_t} (hard, Xu et al. §4.1)
    c_t ← σ(w_β · s_{t-1} + b_β) · c_t               (optional gating scalar β, Xu et al. §4.2.1)
    s_t = cell([E y_{t-1}; c_t], s_{t-1})           (stacked; dropout between layers)
    logits_t = W_o dropout(tanh(W_d [s_t; c_t; E y_{t-1}]))

The decoder state is a flat dict of batch-first tensors (beam search reorders it along dim 0)::

    "h":             (B, L, H)  hidden state of each layer
    "c":             (B, L, H)  memory cells (lstm / lstm_peephole); (B, L, 0) for rnn / gru
    "memory":        (B, S, D)  encoder outputs; (B, S, 0) for attention="none"
    "keys":          (B, S, P)  precomputed scorer keys (U h_j, W h_j or h_j); (B, S, 0) for "none"
    "mask":          (B, S)     bool, True = valid memory position
    "attn":          (B, S)     float32 attention weights of the last step (zeros for "none")
    "attn_log_prob": (B,)       Σ_t log α_t[chosen] over scored steps (hard); zeros for soft
    "attn_entropy":  (B,)       Σ_t H(α_t) over scored steps (hard); zeros for soft
    "attn_total":    (B, S)     Σ_t w_t over scored steps (Xu et al. eq. 14's Σ_t α_ti for soft attention)
    "attn_expect":   (B,)       1 where this sequence attends by expectation instead of sampling (``soft_mix``)
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from attnlab_core.tokens import EOS, PAD
from lit_models.blocks.alignment import AttentionArm, HardEval, build_alignment
from lit_models.blocks.recurrent import CellSpec

DecoderState = dict[str, Tensor]
"""See the module docstring for the keys; every tensor has the batch on dim 0."""


class ContextGate(nn.Module):
    """β_t = σ(w_β · s_{t-1} + b_β), context ← β_t · context (Xu et al. 2015, §4.2.1).

    Args:
        query_size: size of the previous decoder state s_{t-1}.
    """

    def __init__(self, *, query_size: int) -> None:
        super().__init__()
        self.proj = nn.Linear(query_size, 1)

    def forward(self, query: Tensor, context: Tensor) -> Tensor:
        """query (B, H), context (B, D) -> gated context (B, D)."""
        return torch.sigmoid(self.proj(query)).to(context.dtype) * context


class NoGate(nn.Module):
    """The ungated context (Bahdanau et al. 2015): context passes unchanged."""

    def forward(self, query: Tensor, context: Tensor) -> Tensor:
        return context


class TeacherOut(NamedTuple):
    """logits (B, T, V), attention weights (B, T, S) float32, the state after the last step."""

    logits: Tensor
    weights: Tensor
    state: DecoderState


class AttentionalDecoder(nn.Module):
    """Recurrent decoder with optional soft / hard attention over a memory, driven by ``step``.

    Choices and deviations, stated once:

    * Alignment uses s_{t-1}, the previous *top-layer* state, for every scorer (Bahdanau eq. 6).
      Luong et al. score the new state h_t and feed an attentional vector h̃_t back (input
      feeding); here dot / general only change the score function, the data flow is Bahdanau's.
    * Initial state: s_0 = tanh(W_b · encoder_final) for every layer, as Bahdanau (s_0 =
      tanh(W_s ←h_1)) and Cho (h' = tanh(V' c)); Sutskever copies the encoder state directly.
      Memory cells start at zero.
    * Output: one tanh hidden layer over [s_t; c_t; E y_{t-1}] (Bahdanau's deep output uses a
      maxout over s_{t-1}, y_{t-1}, c_t); for "none" c_t is empty.
    * The additive scorer's hidden width is ``hidden_size`` (Bahdanau: n' = n).
    * Hard attention samples in training and uses ``hard_eval`` in eval: the argmax location, or
      the soft expectation of the context (which is what soft attention computes, Xu et al. §4.2).
    * Attention log-probabilities / entropies are accumulated only on steps whose input token is
      not PAD or EOS: steps after the end of a target produce no scored token.
    * Sampling uses ``self.alignment.generator`` if set, else the global RNG; the LightningModule
      offsets the global seed per DDP rank so ranks do not sample identical locations.

    Args:
        cell: the resolved :class:`~lit_models.blocks.recurrent.CellSpec` (its step cell).
        vocab_size: V. embed_dim: E. hidden_size: H. memory_size: D (encoder output width, also
            the width of ``encoder_final``). attention: the resolved :class:`AttentionArm`.
        num_layers: L stacked cells. dropout: on embeddings, between layers and before the output.
        hard_eval: :data:`HardEval`, only used by ``attention="hard"``.
        gate: multiply the context by the gating scalar β (Xu et al. §4.2.1); only built when the
            attention has a context (not for ``"none"``, whose gate would be an unused parameter).
        soft_mix: in training, the probability that a whole sequence uses the soft expectation
            instead of sampled locations (Xu et al. §4.1's variance reduction, 0.5 there); only
            changes sampling (``hard``) attention.
    """

    def __init__(
        self,
        *,
        cell: CellSpec,
        vocab_size: int,
        embed_dim: int,
        hidden_size: int,
        memory_size: int,
        attention: AttentionArm,
        num_layers: int = 1,
        dropout: float = 0.0,
        hard_eval: HardEval = "argmax",
        gate: bool = False,
        soft_mix: float = 0.0,
    ) -> None:
        super().__init__()
        self.num_layers, self.hidden_size, self.soft_mix = num_layers, hidden_size, soft_mix
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD)
        self.bridge = nn.Linear(memory_size, num_layers * hidden_size)
        self.alignment = build_alignment(
            attention, query_size=hidden_size, memory_size=memory_size, attn_size=hidden_size, hard_eval=hard_eval
        )
        ctx = self.alignment.context_size
        self.gate: nn.Module = ContextGate(query_size=hidden_size) if gate and ctx > 0 else NoGate()
        self.cells = nn.ModuleList(
            cell.step(input_size=embed_dim + ctx if l == 0 else hidden_size, hidden_size=hidden_size)
            for l in range(num_layers)
        )
        self.cell_state_size: int = self.cells[0].cell_state_size
        self.deep_out = nn.Linear(hidden_size + ctx + embed_dim, hidden_size)
        self.out = nn.Linear(hidden_size, vocab_size)
        self.dropout = nn.Dropout(dropout)

    def init_state(self, memory: Tensor, memory_mask: Tensor, encoder_final: Tensor) -> DecoderState:
        """Initial decoder state.

        Args:
            memory: (B, S, D) encoder outputs / annotation vectors.
            memory_mask: (B, S) bool, True = valid.
            encoder_final: (B, D) summary vector, e.g. ``RecurrentEncoder(...).summary`` (top-layer
                final state, both directions) or the mean annotation vector of a captioner.

        Returns:
            the state dict described in the module docstring.
        """
        b, s = memory_mask.shape
        h = torch.tanh(self.bridge(encoder_final)).view(b, self.num_layers, self.hidden_size)  # (B, L, H)
        zeros = torch.zeros(b, device=memory.device)
        return {
            "h": h,
            "c": h.new_zeros(b, self.num_layers, self.cell_state_size),  # (B, L, H) or (B, L, 0)
            **self.alignment.prepare(memory, memory_mask),
            "mask": memory_mask,
            "attn": torch.zeros(b, s, device=memory.device),
            "attn_log_prob": zeros,
            "attn_entropy": zeros,
            "attn_total": torch.zeros(b, s, device=memory.device),
            "attn_expect": self._expect_coins(b, memory.device),
        }

    def _expect_coins(self, b: int, device: torch.device) -> Tensor:
        """(B,) 1.0 with probability ``soft_mix`` in training (the alignment's RNG), else 0."""
        if not (self.training and self.soft_mix > 0):
            return torch.zeros(b, device=device)
        u = torch.rand(b, generator=self.alignment.generator, device=device)
        return (u < self.soft_mix).float()

    def step(self, prev_tokens: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        """One decoding step: prev_tokens (B,) long -> logits (B, V), new state."""
        top, state = self._recur(prev_tokens, self.dropout(self.embedding(prev_tokens)), state)
        return self._readout(top), state

    def _readout(self, top: Tensor) -> Tensor:
        """[s_t; c_t; E y_{t-1}] (..., H + D + E) -> logits (..., V): the deep output layer."""
        return self.out(self.dropout(torch.tanh(self.deep_out(top))))

    def _recur(self, prev_tokens: Tensor, emb: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        """The recurrent part of a step: prev_tokens (B,), their embeddings (B, E) -> [s_t; c_t; E y_{t-1}], state."""
        query = state["h"][:, -1]  # (B, H)
        expect = state["attn_expect"] if self.training and self.soft_mix > 0 else None
        att = self.alignment(query, keys=state["keys"], memory=state["memory"], mask=state["mask"], expect=expect)
        context = self.gate(query, att.context.to(emb.dtype))  # (B, D)
        x = torch.cat([emb, context], dim=-1)  # (B, E + D)
        hs, cs = [], []
        for l, cell in enumerate(self.cells):
            h_l, c_l = cell(x, state["h"][:, l], state["c"][:, l])
            hs.append(h_l)
            cs.append(c_l)
            x = self.dropout(h_l)
        scored = ((prev_tokens != PAD) & (prev_tokens != EOS)).to(att.log_prob.dtype)  # (B,)
        new_state = {
            **state,
            "h": torch.stack(hs, dim=1),  # (B, L, H)
            "c": torch.stack(cs, dim=1),  # (B, L, H) or (B, L, 0)
            "attn": att.weights,
            "attn_log_prob": state["attn_log_prob"] + att.log_prob * scored,
            "attn_entropy": state["attn_entropy"] + att.entropy * scored,
            "attn_total": state["attn_total"] + att.weights * scored.unsqueeze(-1),
        }
        return torch.cat([hs[-1], context, emb], dim=-1), new_state  # (B, H + D + E)

    def teacher_forward(self, state: DecoderState, tgt_in: Tensor) -> TeacherOut:
        """Feed gold tokens tgt_in (B, T): logits (B, T, V), weights (B, T, S), state.

        The same arithmetic as ``step`` over T steps (``tests/blocks/test_recurrent.py`` holds them equal), less
        per-step work: gold inputs do not depend on the outputs, so the embedding and the deep output layer run
        once over all T steps; the mask's bias is built once (``Alignment.open``); the REINFORCE sums, the
        weights' total and the hard arm's log α and entropy are taken once over the stacked steps
        (``Alignment.teacher_close``). Only the recurrence and the alignment loop over time. With ``soft_mix``
        in training (a per-sequence lerp of two attend modes) it steps ``_recur`` as decoding does.
        """
        embs = self.dropout(self.embedding(tgt_in))  # (B, T, E)
        if self.training and self.soft_mix > 0:
            return self._stepwise(state, tgt_in, embs)
        bias = self.alignment.open(state["mask"])
        hs, cs = list(state["h"].unbind(1)), list(state["c"].unbind(1))
        tops, contexts, scores, picks = [], [], [], []
        for emb in embs.unbind(1):  # unbind, not embs[:, t]: one backward node, not T full-size zero-filled grads
            query = hs[-1]
            context, score, pick = self.alignment.teacher_step(query, keys=state["keys"], memory=state["memory"],
                                                               bias=bias)
            context = self.gate(query, context.to(emb.dtype))  # (B, D)
            x = torch.cat([emb, context], dim=-1) if context.size(-1) else emb  # (B, E + D)
            for l, cell in enumerate(self.cells):
                hs[l], cs[l] = cell(x, hs[l], cs[l])
                x = self.dropout(hs[l])
            tops.append(hs[-1])
            contexts.append(context)
            scores.append(score)
            picks.append(pick)
        weights, log_prob, entropy = self.alignment.teacher_close(scores, picks, state["mask"])
        top = torch.cat([torch.stack(tops, dim=1), torch.stack(contexts, dim=1), embs], dim=-1)  # (B, T, H + D + E)
        scored = ((tgt_in != PAD) & (tgt_in != EOS)).to(log_prob.dtype)  # (B, T)
        final = {
            **state,
            "h": torch.stack(hs, dim=1),  # (B, L, H)
            "c": torch.stack(cs, dim=1),  # (B, L, H) or (B, L, 0)
            "attn": weights[:, -1],
            "attn_log_prob": state["attn_log_prob"] + (log_prob * scored).sum(1),
            "attn_entropy": state["attn_entropy"] + (entropy * scored).sum(1),
            "attn_total": state["attn_total"] + (weights * scored.unsqueeze(-1)).sum(1),
        }
        return TeacherOut(self._readout(top), weights, final)

    def _stepwise(self, state: DecoderState, tgt_in: Tensor, embs: Tensor) -> TeacherOut:
        """``teacher_forward`` as T calls of ``_recur`` (decoding's step), the deep output once over all steps."""
        tops, weights = [], []
        for prev, emb in zip(tgt_in.unbind(1), embs.unbind(1), strict=True):
            top, state = self._recur(prev, emb, state)
            tops.append(top)
            weights.append(state["attn"])
        return TeacherOut(self._readout(torch.stack(tops, dim=1)), torch.stack(weights, dim=1), state)
