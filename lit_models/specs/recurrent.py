"""Frozen specs of the recurrent architectures: the encoder, seq2seq, the image captioner.

As ``TransformerSpec``: a spec holds the hyper-parameters under their axis names and resolves, in
``__post_init__``, what the builder needs (the cell arm's layer and step, the attention arm, the
encoder's directions and output width), validating the combinations there. ``RecurrentSeq2SeqSpec``
and ``CaptionerSpec`` are also their family's CLI arguments (defaults and docs declared here, the
family naming only what it changes); the text classifier's spec is in ``specs.classifier``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from lit_models.axes import Attention, Cell, VisionBackbone
from lit_models.blocks.alignment import AttentionArm, HardEval
from lit_models.blocks.recurrent import CellSpec
from lit_models.registries import ATTENTION_ARMS, CELLS


def resolve(spec: object, **values: object) -> None:
    for name, value in values.items():
        object.__setattr__(spec, name, value)


@dataclass(frozen=True, kw_only=True)
class RecurrentEncoderSpec:
    """A (bi)recurrent encoder over embedded tokens (Sutskever et al. 2014; Bahdanau et al. 2015 §3.2).

    Args:
        cell: the cell arm (``axes.Cell``). embed_dim: token embedding size E (the encoder's input).
        hidden_size: H per direction. num_layers: stacked layers. bidirectional: a backward pass too.
        dropout: on embeddings and between layers.

    Derived: ``cells`` (the arm's layer and step), ``directions`` (1 or 2), ``output_size`` = directions·H.
    """

    cell: Cell
    embed_dim: int
    hidden_size: int
    num_layers: int
    bidirectional: bool
    dropout: float
    cells: CellSpec = field(init=False, repr=False)
    directions: int = field(init=False)
    output_size: int = field(init=False)

    def __post_init__(self) -> None:
        directions = 2 if self.bidirectional else 1
        resolve(self, cells=CELLS[self.cell], directions=directions, output_size=directions * self.hidden_size)

    @classmethod
    def of(cls, args: object) -> RecurrentEncoderSpec:
        """The encoder of a family's flat arguments: its fields read from ``args``'s attributes of the same names."""
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls) if f.init})


@dataclass(frozen=True, kw_only=True)
class RecurrentSeq2SeqSpec:
    """Recurrent encoder-decoder with optional attention (Sutskever 2014; Cho 2014; Bahdanau 2015; Luong 2015).

    Args:
        cell: recurrent cell (rnn | gru | lstm | lstm_peephole).
        attention: decoder attention (none | additive | dot | general | hard).
        embed_dim: token embedding size.
        hidden_size: hidden size per direction (decoder: hidden_size).
        num_layers: stacked layers in encoder and decoder.
        bidirectional: bidirectional encoder (Bahdanau) or not (Sutskever/Cho).
        dropout: dropout on embeddings, between layers and before the output layer.
        hard_eval: hard attention at evaluation: argmax position, or the expectation (soft).

    Derived: ``encoder`` (its ``RecurrentEncoderSpec``; the decoder attends over its ``output_size``),
    ``arm`` (the attention arm's scorer and modes).
    """

    cell: Cell = "gru"
    attention: Attention = "additive"
    embed_dim: int = 64
    hidden_size: int = 128
    num_layers: int = 1
    bidirectional: bool = True
    dropout: float = 0.1
    hard_eval: HardEval = "argmax"
    encoder: RecurrentEncoderSpec = field(init=False, repr=False)
    arm: AttentionArm = field(init=False, repr=False)

    def __post_init__(self) -> None:
        resolve(self, encoder=RecurrentEncoderSpec.of(self), arm=ATTENTION_ARMS[self.attention])


@dataclass(frozen=True, kw_only=True)
class CaptionerSpec:
    """Show, Attend and Tell (Xu et al. 2015): a CNN feature grid and an attentional LSTM decoder.

    Args:
        encoder: :data:`VisionBackbone` (small_cnn | resnet18 | resnet34 | resnet50 | resnet101).
        weights: torchvision weights name for ResNets (``DEFAULT``, ``IMAGENET1K_V1``...; downloaded
            once) or null (random init, offline).
        fine_tune: train the encoder (a frozen pretrained ResNet is Xu et al.'s setup).
        grid_size: G; the decoder attends over G² cells (Xu et al.: 14 × 14).
        cnn_width: feature width D of the small CNN (ResNets: 512 / 2048).
        attention: additive (soft) | hard | none (dot / general also work when sizes allow).
        cell: the decoder cell (Xu et al.: lstm).
        embed_dim: word embedding size.
        hidden_size: decoder state size.
        dropout: on embeddings and before the output layer.
        gate: the gating scalar β on the context (§4.2.1).
        doubly_stochastic: λ of the doubly stochastic penalty (eq. 14; paper: 1); a term of the loss,
            not of the network.
        hard_eval: hard attention at evaluation: argmax cell, or the soft expectation.
        hard_soft_mix: probability that a training caption of the hard arm attends by expectation
            instead of sampling (Xu et al. §4.1 use 0.5); those captions add no REINFORCE term.

    Derived: ``cells`` (the decoder cell arm), ``arm`` (the attention arm).
    """

    encoder: VisionBackbone = "small_cnn"
    weights: str | None = None
    fine_tune: bool = True
    grid_size: int = 14
    cnn_width: int = 128
    attention: Attention = "additive"
    cell: Cell = "lstm"
    embed_dim: int = 64
    hidden_size: int = 256
    dropout: float = 0.0
    gate: bool = True
    doubly_stochastic: float = 1.0
    hard_eval: HardEval = "argmax"
    hard_soft_mix: float = 0.0
    cells: CellSpec = field(init=False, repr=False)
    arm: AttentionArm = field(init=False, repr=False)

    def __post_init__(self) -> None:
        resolve(self, cells=CELLS[self.cell], arm=ATTENTION_ARMS[self.attention])
