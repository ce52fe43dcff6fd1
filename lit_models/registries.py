"""Every axis word -> the object it means, each resolved in this one place.

Each registry is keyed by exactly ``typing.get_args`` of its axis in :mod:`lit_models.axes`, and
``BY_AXIS`` names every axis's registries (a test checks both); the builders read them, so the blocks
receive resolved objects and numbers (a scale factor, a Pre-Norm flag, a scheme class, a cell, an
attention arm, a pooling, a backbone) and never an axis string. The training policies' registries sit
beside the functions they name (``forcing``, ``schedules``: those modules resolve them) and are
re-exported here, so this module is the one place to look an axis word up.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from torch import nn

from lit_models.axes import (
    Attention,
    AttnScale,
    Baseline,
    Cell,
    Forcing,
    LRSchedule,
    Norm,
    Pooling,
    Positions,
    RopeScaling,
    ScheduledDecay,
    ScheduledMode,
    Tying,
    VisionBackbone,
)
from lit_models.blocks.alignment import AttentionArm
from lit_models.blocks.encoder_decoder import TokenEmbedding, tie_all, tie_decoder, tie_none
from lit_models.blocks.pooling import AttentionPooling, ClsPooling, LastPooling, MaxPooling, MeanPooling
from lit_models.blocks.positions import (
    ALiBiPositions,
    LearnedPositions,
    PositionScheme,
    RotaryPositions,
    SinusoidalPositions,
)
from lit_models.blocks.recurrent import (
    CellSpec,
    CellStateStep,
    HiddenStep,
    PackedRecurrent,
    PeepholeLSTM,
    PeepholeLSTMCell,
)
from lit_models.blocks.rope_scaling import LinearScale, NtkScale, RopeScale, YarnScale
from lit_models.blocks.vision import GridEncoder, resnet_grid, small_cnn_grid
from lit_models.policies.forcing import DECAYS, FEEDS, GOLD_SCHEDULES, SCHEDULED_MODES
from lit_models.policies.schedules import LR_SCHEDULES

ATTN_SCALES: dict[AttnScale, Callable[[int], float]] = {
    "sqrt_dk": lambda d_k: d_k**-0.5,  # Vaswani eq. 1
    "none": lambda d_k: 1.0,  # plain dot product: logits grow with d_k, softmax saturates
    "dk": lambda d_k: 1.0 / d_k,  # over-scaled: logits shrink with d_k, attention goes uniform
}
"""Attention scale arm -> (d_k -> the multiplier of the logits q·k)."""

PRE_NORM: dict[Norm, bool] = {"post": False, "pre": True}
"""Norm arm -> LayerNorm on the sublayer's input (and a final LayerNorm after the stack), or after the sum."""

POSITIONS: dict[Positions, type[PositionScheme]] = {
    "sinusoidal": SinusoidalPositions,
    "learned": LearnedPositions,
    "rope": RotaryPositions,
    "alibi": ALiBiPositions,
    "none": PositionScheme,
}
"""Positions arm -> scheme class, built as ``cls(SchemeSizes(...), **options)`` (``builders.build_positions``)."""

ROPE_SCALINGS: dict[RopeScaling, type[RopeScale]] = {
    "none": RopeScale,
    "linear": LinearScale,
    "ntk": NtkScale,
    "yarn": YarnScale,
}
"""RoPE scaling arm -> its class, built as ``cls(factor=, train_len=, in_training=)`` and handed to the rope scheme."""

TYING: dict[Tying, Callable[[TokenEmbedding, TokenEmbedding, nn.Linear], TokenEmbedding]] = {
    "none": tie_none,
    "decoder": tie_decoder,
    "all": tie_all,
}
"""Tying arm -> ``(src_embed, tgt_embed, generator) -> the source embedding to use``, tying in place."""

CELLS: dict[Cell, CellSpec] = {
    "rnn": CellSpec(
        layer=functools.partial(PackedRecurrent, rnn_type=nn.RNN),
        step=functools.partial(HiddenStep, cell_type=nn.RNNCell),
    ),
    "gru": CellSpec(
        layer=functools.partial(PackedRecurrent, rnn_type=nn.GRU),
        step=functools.partial(HiddenStep, cell_type=nn.GRUCell),
    ),
    "lstm": CellSpec(
        layer=functools.partial(PackedRecurrent, rnn_type=nn.LSTM),
        step=functools.partial(CellStateStep, cell_type=nn.LSTMCell),
    ),
    "lstm_peephole": CellSpec(
        layer=PeepholeLSTM,
        step=functools.partial(CellStateStep, cell_type=PeepholeLSTMCell),
    ),
}
"""Cell arm -> its sequence layer (encoders) and step cell (decoders)."""

ATTENTION_ARMS: dict[Attention, AttentionArm] = {
    "none": AttentionArm(scorer=None, train_mode="soft", eval_mode="soft"),
    "additive": AttentionArm(scorer="additive", train_mode="soft", eval_mode="soft"),
    "dot": AttentionArm(scorer="dot", train_mode="soft", eval_mode="soft"),
    "general": AttentionArm(scorer="general", train_mode="soft", eval_mode="soft"),
    "hard": AttentionArm(scorer="additive", train_mode="sample", eval_mode=None),  # Xu et al. §4.1
}
"""Decoder attention arm -> its scorer and attend modes."""

POOLINGS: dict[Pooling, Callable[..., nn.Module]] = {
    "last": lambda *, d_in, attn_size, directions: LastPooling(directions=directions),
    "mean": lambda *, d_in, attn_size, directions: MeanPooling(),
    "max": lambda *, d_in, attn_size, directions: MaxPooling(),
    "attention": lambda *, d_in, attn_size, directions: AttentionPooling(d_in=d_in, attn_size=attn_size),
    "cls": lambda *, d_in, attn_size, directions: ClsPooling(),
}
"""Pooling arm -> factory(*, d_in, attn_size, directions) -> the pooling module."""

PREPENDS_CLS: dict[Pooling, bool] = {p: p == "cls" for p in POOLINGS}
"""Whether the classifier prepends a learned [CLS] state to the embedded input for this pooling."""

VISION_ENCODERS: dict[VisionBackbone, Callable[..., GridEncoder]] = {
    "small_cnn": small_cnn_grid,
    "resnet18": resnet_grid("resnet18", 512),
    "resnet34": resnet_grid("resnet34", 512),
    "resnet50": resnet_grid("resnet50", 2048),
    "resnet101": resnet_grid("resnet101", 2048),
}
"""Backbone arm -> ``(*, grid_size, fine_tune, weights, width) -> GridEncoder``."""

LEARNED_VALUE: dict[Baseline, bool] = {"moving_average": False, "learned": True}
"""REINFORCE baseline arm -> whether it is a learned value of the memory (else a moving average of the reward)."""

BY_AXIS: dict[object, tuple[dict, ...]] = {
    AttnScale: (ATTN_SCALES,),
    Norm: (PRE_NORM,),
    Positions: (POSITIONS,),
    RopeScaling: (ROPE_SCALINGS,),
    Tying: (TYING,),
    Cell: (CELLS,),
    Attention: (ATTENTION_ARMS,),
    Pooling: (POOLINGS, PREPENDS_CLS),
    VisionBackbone: (VISION_ENCODERS,),
    Baseline: (LEARNED_VALUE,),
    Forcing: (FEEDS, GOLD_SCHEDULES),
    ScheduledMode: (SCHEDULED_MODES,),
    ScheduledDecay: (DECAYS,),
    LRSchedule: (LR_SCHEDULES,),
}
"""Axis (its ``Literal``) -> the registries that resolve its words, each keyed by exactly its values."""

__all__ = ["ATTENTION_ARMS", "ATTN_SCALES", "BY_AXIS", "CELLS", "DECAYS", "FEEDS", "GOLD_SCHEDULES", "LEARNED_VALUE",
           "LR_SCHEDULES", "POOLINGS", "POSITIONS", "PREPENDS_CLS", "PRE_NORM", "SCHEDULED_MODES", "TYING",
           "VISION_ENCODERS"]
