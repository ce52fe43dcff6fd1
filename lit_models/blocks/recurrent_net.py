"""The recurrent encoder-decoder network behind the seq2seq ``step()`` protocol.

Sutskever et al. 2014 / Cho et al. 2014 (attention "none") and Bahdanau et al. 2015 (with
attention): embed -> recurrent encoder -> attentional decoder. Assembled by ``builders``.
"""

from __future__ import annotations

from torch import Tensor, nn

from attnlab_core.tokens import PAD
from lit_models.blocks.decoding import State
from lit_models.blocks.recurrent import RecurrentEncoder
from lit_models.blocks.recurrent_decoder import AttentionalDecoder


class RecurrentEncoderDecoder(nn.Module):
    """``encode(src) -> state``, ``step``, ``teacher_forward -> (logits, state)``, ``attention_maps``."""

    def __init__(
        self, *, src_embed: nn.Embedding, encoder: RecurrentEncoder, decoder: AttentionalDecoder, dropout: float
    ) -> None:
        super().__init__()
        self.src_embed, self.encoder, self.decoder = src_embed, encoder, decoder
        self.drop = nn.Dropout(dropout)

    def encode(self, src: Tensor) -> State:
        """src (B, S) ids -> the decoder's initial state (memory, mask, s_0 from the encoder summary)."""
        mask = src != PAD  # (B, S)
        enc = self.encoder(self.drop(self.src_embed(src)), mask)
        return self.decoder.init_state(enc.outputs, mask, enc.summary)

    def step(self, prev_tokens: Tensor, state: State) -> tuple[Tensor, State]:
        return self.decoder.step(prev_tokens, state)

    def teacher_forward(self, state: State, tgt_in: Tensor) -> tuple[Tensor, State]:
        """tgt_in (B, T) -> logits (B, T, V) and the state after the last step (REINFORCE sums)."""
        out = self.decoder.teacher_forward(state, tgt_in)
        return out.logits, out.state

    def attention_maps(self, src: Tensor, tgt_in: Tensor) -> dict[str, Tensor]:
        """The decoder's alignments as one 'cross' layer with one head: (B, 1, T, S)."""
        out = self.decoder.teacher_forward(self.encode(src), tgt_in)
        return {"cross/layer1": out.weights[:, None]}
