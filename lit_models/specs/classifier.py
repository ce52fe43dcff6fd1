"""The text classifier's frozen spec (what ``builders.build_classifier`` takes) and its CLI arguments, declared once.

``ClassifierSpec`` holds the encoder family, the pooling and the chosen encoder's own spec
(``RecurrentEncoderSpec`` or ``TransformerSpec``) and derives the pooled width. ``ClassifierArgs`` is
what ``classifier.SentimentClassifier`` shows on the CLI (``--model.pooling``, ``--model.cell``,
``--model.d_model``, ...): both encoders' arguments, flat for sweeps (those of the encoder not chosen are
unused), the Transformer's included from ``TransformerSpec``; it builds the spec as ``args.spec``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from attnlab_core.errors import UsageError
from attnlab_core.options import include, pick
from lit_models.axes import Cell, EncoderFamily, Pooling
from lit_models.registries import PREPENDS_CLS
from lit_models.specs.recurrent import RecurrentEncoderSpec, resolve
from lit_models.specs.transformer import TransformerSpec


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
@include(TransformerSpec, after="bidirectional", omit=("encoder_layers", "decoder_layers", "attn_dropout", "tying"),
         prefix="Transformer encoder: ", d_model=64, d_ff=256, norm="pre", max_positions=512)
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
        attn_size: size of u_t in attention pooling (Yang et al. 2016).
        dropout: on embeddings, between layers, before the head.

    After ``bidirectional`` come the Transformer encoder's fields, included from ``TransformerSpec`` with
    their docs (``attnlab_core.options.include``) and the classifier's defaults; its ``dropout`` is the one
    above, its depth ``num_layers``, and it has no attention dropout and no decoder to tie.

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
    attn_size: int = 64
    dropout: float = 0.1
    spec: ClassifierSpec = field(init=False, repr=False)

    def __post_init__(self) -> None:
        recurrent = RecurrentEncoderSpec.of(self) if self.encoder == "recurrent" else None
        transformer = pick(self, TransformerSpec, encoder_layers=self.num_layers, decoder_layers=0, attn_dropout=0.0,
                           ) if self.encoder == "transformer" else None
        object.__setattr__(self, "spec", ClassifierSpec(
            encoder=self.encoder, pooling=self.pooling, attn_size=self.attn_size, dropout=self.dropout,
            recurrent=recurrent, transformer=transformer,
        ))
