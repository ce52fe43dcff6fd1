"""The text classifier's frozen spec (what ``builders.build_classifier`` takes) and its CLI arguments, declared once.

``ClassifierSpec`` holds the encoder family, the pooling and the chosen encoder's own spec
(``RecurrentEncoderSpec`` or ``TransformerSpec``) and derives the pooled width once. ``ClassifierArgs`` is
what ``classifier.SentimentClassifier`` shows on the CLI (``--model.pooling``, ``--model.cell``,
``--model.d_model``, ...): both encoders' arguments, flat for sweeps (those of the encoder not chosen are
unused), with their defaults and docs; it builds the spec as ``args.spec``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from attnlab_core.errors import UsageError
from lit_models.axes import AttnScale, Cell, EncoderFamily, Norm, Pooling, Positions, RopeScaling
from lit_models.registries import PREPENDS_CLS
from lit_models.specs.recurrent import RecurrentEncoderSpec, resolve
from lit_models.specs.transformer import TransformerSpec, rope_and_heads


@dataclass(frozen=True, kw_only=True)
class ClassifierSpec:
    """A text classifier: a recurrent (Yang et al. 2016 word level) or Transformer encoder (Vaswani et al.
    2017; Devlin et al. 2019 for ``cls``), a pooling of its states, a linear head.

    Args:
        encoder: recurrent | transformer; its spec (``recurrent`` or ``transformer``) must be given.
        pooling: last | mean | max | attention | cls. attn_size: size of u_t in attention pooling.
        dropout: on embeddings, between layers, before the head.
        recurrent: the recurrent encoder's spec. transformer: the Transformer encoder's spec.

    Derived: ``width`` (the pooled state size), ``directions`` (of a recurrent encoder, else 1),
    ``cls_dim`` (the learned [CLS] state's size, None when the pooling prepends none).
    """

    encoder: EncoderFamily
    pooling: Pooling
    attn_size: int
    dropout: float
    recurrent: RecurrentEncoderSpec | None = None
    transformer: TransformerSpec | None = None
    width: int = field(init=False)
    directions: int = field(init=False)
    cls_dim: int | None = field(init=False)

    def __post_init__(self) -> None:
        if self.encoder == "recurrent":
            if self.recurrent is None:
                raise ValueError("encoder='recurrent' needs its RecurrentEncoderSpec")
            if self.pooling == "cls" and not self.recurrent.bidirectional:
                raise UsageError("pooling=cls with a unidirectional recurrent encoder reads a state that has seen "
                                 "only the [CLS] token; use bidirectional=true or encoder=transformer")
            width, directions, cls_dim = self.recurrent.output_size, self.recurrent.directions, self.recurrent.embed_dim
        else:
            if self.transformer is None:
                raise ValueError("encoder='transformer' needs its TransformerSpec")
            width, directions, cls_dim = self.transformer.d_model, 1, self.transformer.d_model
        resolve(self, width=width, directions=directions, cls_dim=cls_dim if PREPENDS_CLS[self.pooling] else None)


@dataclass(frozen=True, kw_only=True)
class ClassifierArgs:
    """The text classifier's architecture arguments (both encoders' flat, for sweeps).

    Args:
        encoder: recurrent | transformer.
        pooling: last | mean | max | attention | cls.
        cell: recurrent encoder's cell (rnn | gru | lstm | lstm_peephole).
        embed_dim: recurrent encoder's token embedding size.
        hidden_size: recurrent encoder's hidden size H per direction.
        num_layers: recurrent layers or Transformer encoder layers.
        bidirectional: recurrent encoder reads both directions.
        d_model: Transformer encoder's width.
        heads: Transformer encoder's attention heads (must divide d_model).
        d_ff: Transformer encoder's feed-forward inner width.
        norm: Transformer encoder's residual LayerNorm placement (post | pre).
        positions: Transformer encoder's position scheme (``axes.Positions``: the type lists every scheme).
        attn_scale: Transformer encoder's dot-product scaling (sqrt_dk | none | dk).
        max_positions: rows of the learned position table (positions=learned).
        position_options: the Transformer encoder's position-scheme options, e.g. ``{"base": 500}`` for rope
            (``TransformerArgs.position_options``); null = the scheme's defaults.
        qk_norm, kv_heads, ffn_absorbs_kv, rope_scaling, rope_factor, rope_train_len, rope_scaling_train: the
            Transformer encoder's (``TransformerArgs`` documents each).
        attn_size: size of u_t in attention pooling (Yang et al. 2016).
        dropout: on embeddings, between layers, before the head.

    Derived (not an argument): ``spec``, the ``ClassifierSpec`` (with only the chosen encoder's spec, so an
    unused Transformer width is never validated).
    """

    encoder: EncoderFamily = "recurrent"
    pooling: Pooling = "attention"
    cell: Cell = "lstm"
    embed_dim: int = 64
    hidden_size: int = 64
    num_layers: int = 1
    bidirectional: bool = True
    d_model: int = 64
    heads: int = 4
    d_ff: int = 256
    norm: Norm = "pre"
    positions: Positions = "sinusoidal"
    attn_scale: AttnScale = "sqrt_dk"
    max_positions: int = 512
    position_options: dict[str, float | int | bool] | None = None
    qk_norm: bool = False
    kv_heads: int | None = None
    ffn_absorbs_kv: bool = False
    rope_scaling: RopeScaling = "none"
    rope_factor: float = 1.0
    rope_train_len: int = 0
    rope_scaling_train: bool = False
    attn_size: int = 64
    dropout: float = 0.1
    spec: ClassifierSpec = field(init=False, repr=False)

    def __post_init__(self) -> None:
        recurrent = RecurrentEncoderSpec.of(self) if self.encoder == "recurrent" else None
        transformer = TransformerSpec(
            d_model=self.d_model, heads=self.heads, d_ff=self.d_ff, encoder_layers=self.num_layers,
            dropout=self.dropout, attn_dropout=0.0, norm=self.norm, positions=self.positions,
            attn_scale=self.attn_scale, max_len=self.max_positions, position_options=self.position_options or {},
            **rope_and_heads(self),
        ) if self.encoder == "transformer" else None
        object.__setattr__(self, "spec", ClassifierSpec(
            encoder=self.encoder, pooling=self.pooling, attn_size=self.attn_size, dropout=self.dropout,
            recurrent=recurrent, transformer=transformer,
        ))
