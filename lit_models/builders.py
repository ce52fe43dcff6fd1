"""The only place where blocks are wired together. Each builder reads like the paper's figure.

Builders take an architecture's frozen spec (``lit_models.specs``) or its axis values, resolve every
axis through ``lit_models.registries``, and hand the blocks resolved objects and numbers.
"""

from __future__ import annotations

from dataclasses import fields
from itertools import pairwise
from typing import cast

from torch import nn

from attnlab_core.tokens import PAD
from lit_models.axes import VisionBackbone
from lit_models.blocks.causal import CausalLayer, CausalTransformer
from lit_models.blocks.classifier_net import RecurrentStates, TextClassifierNet, TransformerStates
from lit_models.blocks.encoder_decoder import Decoder, Encoder, EncoderDecoder, TokenEmbedding
from lit_models.blocks.full_view_net import FullViewNet
from lit_models.blocks.glimpse_net import GlimpseNetwork, GlimpseSensor, LocationPolicy, RecurrentAttention
from lit_models.blocks.positions import PositionScheme, SchemeSizes
from lit_models.blocks.recurrent import RecurrentEncoder
from lit_models.blocks.recurrent_decoder import AttentionalDecoder
from lit_models.blocks.recurrent_net import RecurrentEncoderDecoder
from lit_models.blocks.transformer import DecoderLayer, EncoderLayer, LayerOptions
from lit_models.blocks.vision import CaptionNet, GridEncoder
from lit_models.registries import POOLINGS, POSITIONS, TYING, VISION_ENCODERS
from lit_models.specs import (
    CaptionerSpec,
    ClassifierSpec,
    FullViewSpec,
    RamSpec,
    RecurrentEncoderSpec,
    RecurrentSeq2SeqSpec,
    TransformerSpec,
)


def build_positions(spec: TransformerSpec, *, causal: bool) -> PositionScheme:
    """The one way to build a position scheme: the arm's class with the model's sizes, the side's
    causality and the spec's options for the scheme (each defaults in the class)."""
    sizes = SchemeSizes(d_model=spec.d_model, heads=spec.heads, d_head=spec.d_head, max_len=spec.max_positions,
                        causal=causal)
    scaling = {"scaling": spec.rope_scale} if spec.rope_scaling != "none" else {}  # the spec checked: rope only
    return POSITIONS[spec.positions](sizes, **spec.position_options, **scaling)


def layer_options(spec: TransformerSpec, *, attentions: int = 1) -> LayerOptions:
    """What a Transformer layer with ``attentions`` attention modules takes (``LayerOptions``), each read from the
    spec's field or derived value of the same name (a block declares what it needs, the spec declares it once,
    no list is copied), except ``d_ff``: the layer's FFN width, ``spec.ffn_width(attentions)``."""
    named = {f.name: getattr(spec, f.name) for f in fields(LayerOptions) if f.init}
    return LayerOptions(**{**named, "d_ff": spec.ffn_width(attentions)})


def _final_norm(spec: TransformerSpec) -> nn.LayerNorm | None:
    """Pre-Norm's final LayerNorm after a stack (a deviation from Vaswani et al. 2017 that Pre-Norm needs)."""
    return nn.LayerNorm(spec.d_model) if spec.pre_norm else None


def build_encoder(spec: TransformerSpec, *, positions: PositionScheme) -> Encoder:
    """Vaswani §3.1: N = ``spec.encoder_layers`` identical self-attention + FFN layers (+ a final LayerNorm
    for Pre-Norm), every self-attention holding the side's position scheme."""
    made = [EncoderLayer(layer_options(spec), positions=positions) for _ in range(spec.encoder_layers)]
    return Encoder(layers=made, final_norm=_final_norm(spec))


def build_transformer(spec: TransformerSpec, *, src_vocab_size: int, tgt_vocab_size: int) -> EncoderDecoder:
    """Vaswani et al. 2017, Figure 1: embeddings + positions -> N encoder layers -> N decoder
    layers with cross-attention -> linear -> (softmax in the loss).

    One position scheme per side (the source bidirectional, the target causal): the
    network registers it and applies its embedding hook; the side's self-attention modules hold it
    for their q/k and score-bias hooks.
    """
    src_pos = build_positions(spec, causal=False)
    tgt_pos = build_positions(spec, causal=True)
    src_embed = TokenEmbedding(vocab_size=src_vocab_size, d_model=spec.d_model)
    tgt_embed = TokenEmbedding(vocab_size=tgt_vocab_size, d_model=spec.d_model)
    generator = nn.Linear(spec.d_model, tgt_vocab_size)
    src_embed = TYING[spec.tying](src_embed, tgt_embed, generator)
    return EncoderDecoder(
        src_embed=src_embed,
        tgt_embed=tgt_embed,
        src_positions=src_pos,
        tgt_positions=tgt_pos,
        encoder=build_encoder(spec, positions=src_pos),
        decoder=Decoder(layers=[DecoderLayer(layer_options(spec, attentions=2), positions=tgt_pos)
                                for _ in range(spec.decoder_layers)], final_norm=_final_norm(spec)),
        generator=generator,
        dropout=spec.dropout,
    )


def build_recurrent_encoder(spec: RecurrentEncoderSpec) -> RecurrentEncoder:
    """Sutskever et al. 2014 / Bahdanau et al. 2015 §3.2: ``num_layers`` of the cell arm over E-wide embeddings."""
    return RecurrentEncoder(cell=spec.cells, input_size=spec.embed_dim, hidden_size=spec.hidden_size,
                            num_layers=spec.num_layers, bidirectional=spec.bidirectional, dropout=spec.dropout)


def build_recurrent_seq2seq(
    spec: RecurrentSeq2SeqSpec, *, src_vocab_size: int, tgt_vocab_size: int,
) -> RecurrentEncoderDecoder:
    """Bahdanau et al. 2015, Fig. 1: embeddings -> (bi)recurrent encoder -> attentional decoder.

    With ``attention="none"`` this is the fixed-vector encoder-decoder of Sutskever/Cho.
    """
    src_embed = nn.Embedding(src_vocab_size, spec.embed_dim, padding_idx=PAD)
    encoder = build_recurrent_encoder(spec.encoder)
    decoder = AttentionalDecoder(cell=spec.encoder.cells, vocab_size=tgt_vocab_size, embed_dim=spec.embed_dim,
                                 hidden_size=spec.hidden_size, memory_size=spec.encoder.output_size,
                                 attention=spec.arm, num_layers=spec.num_layers,
                                 dropout=spec.dropout, hard_eval=spec.hard_eval)
    return RecurrentEncoderDecoder(src_embed=src_embed, encoder=encoder, decoder=decoder, dropout=spec.dropout)


def build_classifier(spec: ClassifierSpec, *, vocab_size: int, num_classes: int) -> TextClassifierNet:
    """Wire a classifier: recurrent (Yang et al. 2016 word level) or
    Transformer encoder (Vaswani et al. 2017 encoder; Devlin et al. 2019 for ``cls``) + pooling."""
    if spec.encoder == "recurrent":
        recurrent = cast(RecurrentEncoderSpec, spec.recurrent)  # ClassifierSpec checked it is given
        rnn = build_recurrent_encoder(recurrent)
        embed: nn.Module = nn.Embedding(vocab_size, recurrent.embed_dim, padding_idx=PAD)
        states: nn.Module = RecurrentStates(encoder=rnn, dropout=spec.dropout)
    else:
        transformer = cast(TransformerSpec, spec.transformer)  # ClassifierSpec checked it is given
        pos = build_positions(transformer, causal=False)
        stack = build_encoder(transformer, positions=pos)
        embed = TokenEmbedding(vocab_size=vocab_size, d_model=transformer.d_model)
        states = TransformerStates(positions=pos, encoder=stack, dropout=spec.dropout)
    return TextClassifierNet(
        embed=embed, states=states, head=nn.Linear(spec.width, num_classes),
        pooling=POOLINGS[spec.pooling](d_in=spec.width, attn_size=spec.attn_size, directions=spec.directions),
        cls_dim=spec.cls_dim, dropout=spec.dropout,
    )


def build_captioner(spec: CaptionerSpec, *, tgt_vocab_size: int) -> CaptionNet:
    """Xu et al. 2015, Fig. 1: a CNN feature grid (the annotation vectors a_i) -> an attentional LSTM
    decoder whose context ẑ_t is soft (additive), hard (sampled) or absent, with the β gate (§4.2.1)."""
    grid = build_vision_encoder(spec.encoder, grid_size=spec.grid_size, fine_tune=spec.fine_tune,
                                weights=spec.weights, width=spec.cnn_width)
    decoder = AttentionalDecoder(cell=spec.cells, vocab_size=tgt_vocab_size, embed_dim=spec.embed_dim,
                                 hidden_size=spec.hidden_size, memory_size=grid.feature_size, attention=spec.arm,
                                 dropout=spec.dropout, hard_eval=spec.hard_eval, gate=spec.gate,
                                 soft_mix=spec.hard_soft_mix)
    return CaptionNet(encoder=grid, decoder=decoder)


def build_ram(spec: RamSpec, *, num_classes: int) -> RecurrentAttention:
    """Mnih et al. 2014, Fig. 1: glimpse sensor ρ -> glimpse network f_g -> recurrent core f_h, whose
    state feeds the location policy f_l, the baseline b_t and (after the last glimpse) the action network f_a.

    The core is a ``cell`` step from ``recurrent.CELLS`` (the paper: a rectifier RNN; see ``glimpse_net``).
    """
    sensor = GlimpseSensor(patch_size=spec.patch_size, scales=spec.scales, scale_factor=spec.scale_factor)
    glimpse = GlimpseNetwork(input_size=spec.glimpse_input, glimpse_hidden=spec.glimpse_hidden,
                             location_hidden=spec.location_hidden, output_size=spec.glimpse_size)
    core = spec.cells.step(input_size=spec.glimpse_size, hidden_size=spec.hidden_size)
    policy = LocationPolicy(hidden_size=spec.hidden_size, std=spec.std)
    return RecurrentAttention(sensor=sensor, glimpse=glimpse, core=core, policy=policy,
                              baseline=nn.Linear(spec.hidden_size, 1),
                              classifier=nn.Linear(spec.hidden_size, num_classes), glimpses=spec.glimpses)


def build_full_view(spec: FullViewSpec, *, num_classes: int) -> FullViewNet:
    """Mnih et al. 2014, §4.1 and Table 1's "FC" rows: the flattened canvas (C·H·W values) -> ``layers``
    fully connected ReLU layers of ``hidden_size`` units -> a linear read-out of the classes."""
    widths = [spec.pixels] + [spec.hidden_size] * spec.layers
    hidden = [nn.Linear(n_in, n_out) for n_in, n_out in pairwise(widths)]
    return FullViewNet(hidden=hidden, classifier=nn.Linear(spec.hidden_size, num_classes))


def build_causal_lm(spec: TransformerSpec, *, vocab_size: int) -> CausalTransformer:
    """Radford et al. 2018 (GPT), §3.1: token embedding + positions -> N = ``spec.decoder_layers`` masked
    self-attention + FFN layers (Vaswani sublayers, no cross-attention) -> linear -> (softmax in the loss).

    One causal position scheme, held by every layer's self-attention. With one vocabulary
    the input embedding is the only one: ``spec.tying`` "decoder" and "all" both tie it to the output
    projection (Press & Wolf 2017), "none" keeps them apart.
    """
    pos = build_positions(spec, causal=True)
    embed = TokenEmbedding(vocab_size=vocab_size, d_model=spec.d_model)
    generator = nn.Linear(spec.d_model, vocab_size)
    TYING[spec.tying](embed, embed, generator)
    made = [CausalLayer(layer_options(spec), positions=pos) for _ in range(spec.decoder_layers)]
    return CausalTransformer(embed=embed, positions=pos, layers=made, final_norm=_final_norm(spec),
                             generator=generator, dropout=spec.dropout)


def build_vision_encoder(
    backbone: VisionBackbone, *, grid_size: int = 14, fine_tune: bool = False, weights: str | None = None,
    width: int = 128,
) -> GridEncoder:
    """Resolve the captioner's ``encoder`` axis (Xu et al. 2015 §3.1.1: a grid of annotation vectors).

    Args:
        backbone: :data:`VisionBackbone`.
        grid_size: G (Xu et al.: 14).
        fine_tune: train the backbone too.
        weights: a torchvision weights enum member by name (``"DEFAULT"``, ``"IMAGENET1K_V1"``,
            ``"IMAGENET1K_V2"``; downloaded once into the torch hub cache) or None (random init,
            offline). ``small_cnn`` accepts only None.
        width: output channels of ``small_cnn`` (ResNets: 512 or 2048).
    """
    return VISION_ENCODERS[backbone](grid_size=grid_size, fine_tune=fine_tune, weights=weights, width=width)
