"""The only place where blocks are wired together. Each builder reads like the paper's figure."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from datamodules.batching import PAD
from lit_models.axes import Attention, AttnScale, Cell, Norm, Positions, Tying
from lit_models.blocks.alignment import HardEval
from lit_models.blocks.encoder_decoder import Decoder, Encoder, EncoderDecoder, TokenEmbedding
from lit_models.blocks.positions import POSITIONS
from lit_models.blocks.recurrent import RecurrentEncoder
from lit_models.blocks.recurrent_decoder import AttentionalDecoder
from lit_models.blocks.recurrent_net import RecurrentEncoderDecoder
from lit_models.blocks.transformer import FINAL_NORM, DecoderLayer, EncoderLayer


def _tie_none(src: TokenEmbedding, tgt: TokenEmbedding, out: nn.Linear) -> TokenEmbedding:
    return src


def _tie_decoder(src: TokenEmbedding, tgt: TokenEmbedding, out: nn.Linear) -> TokenEmbedding:
    out.weight = tgt.table.weight  # Press & Wolf 2017: output projection = decoder input embedding
    return src


def _tie_all(src: TokenEmbedding, tgt: TokenEmbedding, out: nn.Linear) -> TokenEmbedding:
    """Vaswani §3.4: one matrix for both embeddings and the output projection (shared vocabulary)."""
    if src.table.num_embeddings != tgt.table.num_embeddings:
        raise ValueError(
            f"tying='all' needs one shared vocabulary, got src_vocab_size={src.table.num_embeddings} "
            f"and tgt_vocab_size={tgt.table.num_embeddings}"
        )
    _tie_decoder(src, tgt, out)
    return tgt


TYING: dict[Tying, Callable[[TokenEmbedding, TokenEmbedding, nn.Linear], TokenEmbedding]] = {
    "none": _tie_none,
    "decoder": _tie_decoder,
    "all": _tie_all,
}
"""Weight tying; each returns the source embedding to use."""


def build_transformer(
    *,
    src_vocab_size: int,
    tgt_vocab_size: int,
    d_model: int,
    heads: int,
    d_ff: int,
    encoder_layers: int,
    decoder_layers: int,
    dropout: float,
    attn_dropout: float,
    norm: Norm,
    positions: Positions,
    attn_scale: AttnScale,
    max_len: int,
    tying: Tying,
) -> EncoderDecoder:
    """Vaswani et al. 2017, Figure 1: embeddings + positions -> N encoder layers -> N decoder
    layers with cross-attention -> linear -> (softmax in the loss)."""
    if d_model % heads:
        raise ValueError(f"d_model={d_model} is not divisible by heads={heads}")
    layer_kw = dict(d_model=d_model, heads=heads, d_ff=d_ff, dropout=dropout, attn_dropout=attn_dropout,
                    norm=norm, attn_scale=attn_scale)
    pos_kw = dict(d_model=d_model, d_head=d_model // heads, max_len=max_len)

    def final_norm() -> nn.LayerNorm | None:
        return nn.LayerNorm(d_model) if FINAL_NORM[norm] else None

    src_embed = TokenEmbedding(vocab_size=src_vocab_size, d_model=d_model)
    tgt_embed = TokenEmbedding(vocab_size=tgt_vocab_size, d_model=d_model)
    generator = nn.Linear(d_model, tgt_vocab_size)
    src_embed = TYING[tying](src_embed, tgt_embed, generator)
    return EncoderDecoder(
        src_embed=src_embed,
        tgt_embed=tgt_embed,
        src_positions=POSITIONS[positions](**pos_kw),
        tgt_positions=POSITIONS[positions](**pos_kw),
        encoder=Encoder(layers=[EncoderLayer(**layer_kw) for _ in range(encoder_layers)], final_norm=final_norm()),
        decoder=Decoder(layers=[DecoderLayer(**layer_kw) for _ in range(decoder_layers)], final_norm=final_norm()),
        generator=generator,
        dropout=dropout,
    )


def build_recurrent_seq2seq(
    *,
    src_vocab_size: int,
    tgt_vocab_size: int,
    cell: Cell,
    attention: Attention,
    embed_dim: int,
    hidden_size: int,
    num_layers: int,
    bidirectional: bool,
    dropout: float,
    hard_eval: HardEval,
) -> RecurrentEncoderDecoder:
    """Bahdanau et al. 2015, Fig. 1: embeddings -> (bi)recurrent encoder -> attentional decoder.

    With ``attention="none"`` this is the fixed-vector encoder-decoder of Sutskever/Cho.
    """
    src_embed = nn.Embedding(src_vocab_size, embed_dim, padding_idx=PAD)
    encoder = RecurrentEncoder(cell=cell, input_size=embed_dim, hidden_size=hidden_size, num_layers=num_layers,
                               bidirectional=bidirectional, dropout=dropout)
    decoder = AttentionalDecoder(cell=cell, vocab_size=tgt_vocab_size, embed_dim=embed_dim, hidden_size=hidden_size,
                                 memory_size=encoder.output_size, attention=attention, num_layers=num_layers,
                                 dropout=dropout, hard_eval=hard_eval)
    return RecurrentEncoderDecoder(src_embed=src_embed, encoder=encoder, decoder=decoder, dropout=dropout)
