"""Recurrent cells and encoders: rnn / gru / lstm (torch) and lstm_peephole (Gers et al. 2002).

Encoders read embedded, right-padded inputs (B, S, E) with a boolean mask (B, S) (True = real
token; a prefix of each row). ``rnn``/``gru``/``lstm`` run ``nn.RNN``/``nn.GRU``/``nn.LSTM`` on a
packed sequence, so padding never reaches the final state; ``lstm_peephole`` runs
:class:`PeepholeLSTM`, a time loop that freezes the state on padded steps, with the same effect.
The attentional decoder lives in ``recurrent_decoder.py``; it uses the step cells of a :class:`CellSpec`
(``lit_models.registries.CELLS`` maps each cell arm to one).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

LayerOut = tuple[Tensor, Tensor, Tensor | None]
"""outputs (B, S, dirs·H) zero at padding, h_n (L·dirs, B, H), c_n (L·dirs, B, H) or None (torch layout)."""


class PeepholeLSTMCell(nn.Module):
    """One step of the LSTM with peephole connections (Gers & Schmidhuber 2000; Gers, Schraudolph &
    Schmidhuber 2002).

        i_t = σ(W_xi x_t + W_hi h_{t-1} + w_ci ⊙ c_{t-1} + b_i)
        f_t = σ(W_xf x_t + W_hf h_{t-1} + w_cf ⊙ c_{t-1} + b_f)
        c_t = f_t ⊙ c_{t-1} + i_t ⊙ tanh(W_xc x_t + W_hc h_{t-1} + b_c)
        o_t = σ(W_xo x_t + W_ho h_{t-1} + w_co ⊙ c_t + b_o)
        h_t = o_t ⊙ tanh(c_t)

    The peephole weights w_c* are diagonal (vectors). Gate rows are laid out i, f, g, o like
    ``nn.LSTMCell``, so with zero peepholes this cell equals an LSTMCell whose ``bias_ih`` is
    ``bias`` and ``bias_hh`` is 0. Deviation: Gers et al. 2002 drop the output squashing (h = o ⊙ c)
    in their timing experiments; we keep tanh (the form of Graves 2013 and most implementations).
    Initialisation as ``nn.LSTM``: U(-1/√H, 1/√H) for every weight, peepholes included.

    Args:
        input_size: I. hidden_size: H.
    """

    def __init__(self, *, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        self.weight_ih = nn.Parameter(torch.empty(4 * hidden_size, input_size))
        self.weight_hh = nn.Parameter(torch.empty(4 * hidden_size, hidden_size))
        self.bias = nn.Parameter(torch.empty(4 * hidden_size))
        self.peephole = nn.Parameter(torch.empty(3, hidden_size))  # rows w_ci, w_cf, w_co
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def forward(self, x: Tensor, state: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        """x (B, I), (h, c) each (B, H) -> (h_t, c_t) each (B, H)."""
        h, c = state
        gates = F.linear(x, self.weight_ih, self.bias) + F.linear(h, self.weight_hh)  # (B, 4H)
        i, f, g, o = gates.chunk(4, dim=-1)
        w_ci, w_cf, w_co = self.peephole
        i = torch.sigmoid(i + w_ci * c)
        f = torch.sigmoid(f + w_cf * c)
        c_t = f * c + i * torch.tanh(g)
        o = torch.sigmoid(o + w_co * c_t)  # the output gate peeks at the *new* cell state
        return o * torch.tanh(c_t), c_t


def _run_direction(
    cell: PeepholeLSTMCell, x: Tensor, mask: Tensor, *, steps: range
) -> tuple[Tensor, Tensor, Tensor]:
    """Loop ``cell`` over ``steps``; padded steps leave (h, c) unchanged and output zeros.

    Args:
        x: (B, S, I) inputs. mask: (B, S) bool. steps: time indices in processing order.

    Returns:
        outputs (B, S, H), h (B, H), c (B, H) after the last real step.
    """
    b, s, _ = x.shape
    h = c = x.new_zeros(b, cell.hidden_size)
    outputs: list[Tensor] = [x.new_zeros(b, cell.hidden_size)] * s
    for t in steps:
        h_t, c_t = cell(x[:, t], (h, c))
        valid = mask[:, t].unsqueeze(-1)  # (B, 1)
        h, c = torch.where(valid, h_t, h), torch.where(valid, c_t, c)
        outputs[t] = h_t * valid
    return torch.stack(outputs, dim=1), h, c  # (B, S, H)


class PeepholeLSTM(nn.Module):
    """Multi-layer, optionally bidirectional peephole LSTM over right-padded sequences.

    Same constructor and layout conventions as ``nn.LSTM(batch_first=True)``: dropout between
    layers (not after the last), backward direction reads each sequence from its last real token.

    Args:
        input_size: I. hidden_size: H. num_layers: L. bidirectional: two directions, outputs
        concatenated [forward; backward]. dropout: on the outputs of every layer but the last.
    """

    def __init__(
        self, *, input_size: int, hidden_size: int, num_layers: int, bidirectional: bool, dropout: float
    ) -> None:
        super().__init__()
        dirs = 2 if bidirectional else 1
        self.layers = nn.ModuleList(
            nn.ModuleList(
                PeepholeLSTMCell(input_size=input_size if l == 0 else dirs * hidden_size, hidden_size=hidden_size)
                for _ in range(dirs)
            )
            for l in range(num_layers)
        )
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor) -> LayerOut:
        """x (B, S, I), mask (B, S) -> outputs (B, S, dirs·H), h_n and c_n (L·dirs, B, H)."""
        s = x.size(1)
        orders = [range(s), range(s - 1, -1, -1)]
        h_n: list[Tensor] = []
        c_n: list[Tensor] = []
        for l, directions in enumerate(self.layers):
            if l > 0:
                x = self.dropout(x)
            outs = []
            for cell, steps in zip(directions, orders[: len(directions)], strict=True):
                out, h, c = _run_direction(cell, x, mask, steps=steps)
                outs.append(out)
                h_n.append(h)
                c_n.append(c)
            x = torch.cat(outs, dim=-1)  # (B, S, dirs·H)
        return x, torch.stack(h_n), torch.stack(c_n)


class PackedRecurrent(nn.Module):
    """``nn.RNN`` / ``nn.GRU`` / ``nn.LSTM`` (batch_first) run on a packed sequence.

    Args:
        rnn_type: the torch class. Other arguments as :class:`PeepholeLSTM` (dropout is passed to
        torch only for L > 1, where it applies).
    """

    def __init__(
        self,
        *,
        rnn_type: type[nn.RNNBase],
        input_size: int,
        hidden_size: int,
        num_layers: int,
        bidirectional: bool,
        dropout: float,
    ) -> None:
        super().__init__()
        self.rnn = rnn_type(
            input_size=input_size,
            hidden_size=hidden_size,
            num_layers=num_layers,
            batch_first=True,
            bidirectional=bidirectional,
            dropout=dropout if num_layers > 1 else 0.0,
        )

    def forward(self, x: Tensor, mask: Tensor) -> LayerOut:
        """x (B, S, I), mask (B, S) -> outputs (B, S, dirs·H), h_n (L·dirs, B, H), c_n or None.

        Empty rows (no valid token) are run on one step for packing, then zeroed.
        """
        lengths = mask.sum(dim=1)  # (B,)
        packed = pack_padded_sequence(x, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False)
        out, final = self.rnn(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.size(1))  # (B, S, dirs·H)
        h_n, c_n = final if isinstance(final, tuple) else (final, None)
        nonempty = (lengths > 0).to(out.dtype).view(1, -1, 1)  # (1, B, 1)
        out = out * mask.unsqueeze(-1)
        return out, h_n * nonempty, None if c_n is None else c_n * nonempty


class HiddenStep(nn.Module):
    """Uniform step interface for cells without a memory cell (``nn.RNNCell``, ``nn.GRUCell``).

    ``forward(x, h, c) -> (h_t, c)``: c is a zero-width (B, 0) tensor, passed through, so every
    decoder state has the same keys whatever the cell.
    """

    cell_state_size = 0

    def __init__(self, *, cell_type: type[nn.RNNCellBase], input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.cell = cell_type(input_size=input_size, hidden_size=hidden_size)

    def forward(self, x: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        """x (B, I), h (B, H), c (B, 0) -> (h_t (B, H), c)."""
        return self.cell(x, h), c


class CellStateStep(nn.Module):
    """Uniform step interface for LSTM cells (``nn.LSTMCell``, :class:`PeepholeLSTMCell`)."""

    def __init__(self, *, cell_type: Callable[..., nn.Module], input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.cell = cell_type(input_size=input_size, hidden_size=hidden_size)
        self.cell_state_size = hidden_size

    def forward(self, x: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        """x (B, I), h (B, H), c (B, H) -> (h_t, c_t)."""
        return self.cell(x, (h, c))


class CellSpec(NamedTuple):
    """What one cell arm builds: a sequence layer (encoders) and a step cell (decoders)."""

    layer: Callable[..., nn.Module]  # (*, input_size, hidden_size, num_layers, bidirectional, dropout)
    step: Callable[..., nn.Module]  # (*, input_size, hidden_size) -> HiddenStep | CellStateStep


class RecurrentState(NamedTuple):
    """Final encoder state, batch first, both directions concatenated [forward; backward].

    Attributes:
        h: (B, L, dirs·H) last hidden state of each layer (forward: after the last real token;
            backward: after reading back to the first token).
        c: (B, L, dirs·H) memory cells for lstm / lstm_peephole, else None.
    """

    h: Tensor
    c: Tensor | None


class EncoderOutput(NamedTuple):
    """outputs (B, S, dirs·H) zero at padding; final :class:`RecurrentState`."""

    outputs: Tensor
    final: RecurrentState

    @property
    def summary(self) -> Tensor:
        """(B, dirs·H) top-layer final state: what initialises a decoder (``encoder_final``)."""
        return self.final.h[:, -1]


class RecurrentEncoder(nn.Module):
    """Recurrent encoder over embedded tokens (Sutskever 2014; Cho 2014; Bahdanau 2015 §3.2).

    Bidirectional final states are **concatenated** (no projection): the decoder's bridge maps
    them to its own size. Inputs are embedded by the caller.

    Args:
        cell: the resolved :class:`CellSpec` (``lit_models.registries.CELLS[arm]``).
        input_size: E, embedding size. hidden_size: H per direction. num_layers: L.
        bidirectional: run a backward RNN too; ``output_size`` = dirs·H.
        dropout: between stacked layers.
    """

    def __init__(
        self, *, cell: CellSpec, input_size: int, hidden_size: int, num_layers: int, bidirectional: bool,
        dropout: float,
    ) -> None:
        super().__init__()
        self.num_layers = num_layers
        self.output_size = hidden_size * (2 if bidirectional else 1)
        self.layer = cell.layer(
            input_size=input_size,
            hidden_size=hidden_size,
            num_layers=num_layers,
            bidirectional=bidirectional,
            dropout=dropout,
        )

    def _batch_first(self, state: Tensor) -> Tensor:
        """(L·dirs, B, H) -> (B, L, dirs·H), directions concatenated per layer."""
        ld, b, h = state.shape
        state = state.view(self.num_layers, ld // self.num_layers, b, h)  # (L, dirs, B, H)
        return state.permute(2, 0, 1, 3).reshape(b, self.num_layers, -1)  # (B, L, dirs·H)

    def forward(self, x: Tensor, mask: Tensor) -> EncoderOutput:
        """x (B, S, E) embedded, mask (B, S) bool (right padding) -> :class:`EncoderOutput`."""
        outputs, h_n, c_n = self.layer(x, mask)
        c = None if c_n is None else self._batch_first(c_n)
        return EncoderOutput(outputs, RecurrentState(self._batch_first(h_n), c))


class SequenceRegressor(nn.Module):
    """Recurrent net mapping a real-valued sequence to one scalar (the adding problem).

    Hochreiter & Schmidhuber 1997 (experiment 4); Le et al. 2015: a unidirectional encoder, then a
    linear read-out of the last layer's hidden state after the last step.

    Args:
        cell: a resolved :class:`CellSpec`. input_size: C channels. hidden_size: H. num_layers: L.
    """

    def __init__(self, *, cell: CellSpec, input_size: int, hidden_size: int, num_layers: int) -> None:
        super().__init__()
        self.encoder = RecurrentEncoder(
            cell=cell,
            input_size=input_size,
            hidden_size=hidden_size,
            num_layers=num_layers,
            bidirectional=False,
            dropout=0.0,
        )
        self.head = nn.Linear(hidden_size, 1)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """x (B, T, C) float, optional mask (B, T) (default: all valid) -> predictions (B,)."""
        if mask is None:
            mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
        return self.head(self.encoder(x, mask).summary).squeeze(-1)  # (B,)
