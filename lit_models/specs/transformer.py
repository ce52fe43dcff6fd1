"""The Transformer's frozen spec: each field declared once, with its doc and the encoder-decoder's default.

``TransformerSpec`` holds the architecture's hyper-parameters under their axis names, and derives in
``__post_init__`` what the blocks need as numbers: the head size (validated there, the one place
``d_model / heads`` is checked), the logit scale and the norm placement. Python users build one directly;
the Transformer families show its fields on the CLI (``--model.d_model``, ...) through the constructors
declared below, which name only a family's renames and the defaults it changes
(``attnlab_core.options.with_defaults``); the classifier includes them beside its own
(``specs.classifier``). The blocks take ``LayerOptions`` read from the spec by field name
(``builders.layer_options``), so a new knob is a field here, its use in a block, and a test.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field

from attnlab_core.errors import UsageError
from attnlab_core.options import with_defaults
from lit_models.axes import AttnScale, Norm, Positions, RopeScaling, Tying
from lit_models.blocks.rope_scaling import RopeScale
from lit_models.registries import ATTN_SCALES, POSITIONS, PRE_NORM, ROPE_SCALINGS
from lit_models.validation import head_size, kv_head_count


@dataclass(frozen=True, kw_only=True)
class TransformerSpec:
    """A Transformer (Vaswani et al. 2017): encoder stack, decoder stack, or both.

    Args:
        d_model: model width (paper base: 512).
        heads: attention heads h; d_k = d_model / h.
        d_ff: feed-forward inner width (paper: 4·d_model).
        encoder_layers: N encoder layers.
        decoder_layers: N decoder layers (a decoder-only model's ``layers``).
        dropout: dropout on sublayer outputs and embeddings (P_drop).
        attn_dropout: dropout on attention weights.
        norm: residual LayerNorm placement (post | pre).
        positions: position scheme (``axes.Positions``: the type lists every scheme; its options: position_options).
        attn_scale: dot-product scaling (sqrt_dk | none | dk).
        max_positions: rows of the learned position table (only used by positions=learned); a longer
            sequence is an error, not a silent wrap.
        position_options: the scheme's own options, e.g. ``{"base": 500}`` for rope (each scheme class's
            keyword arguments, ``blocks.positions``); null = its defaults. An option the scheme does not
            take is an error.
        tying: weight tying of embeddings and output projection (none | decoder | all; with one
            vocabulary, decoder and all are the same).
        qk_norm: LayerNorm on each head's queries and keys before the score (Dehghani et al. 2023).
        kv_heads: key/value heads G dividing heads: 1 = multi-query (Shazeer 2019), between = grouped-query
            (Ainslie et al. 2023); null = heads (multi-head), resolved here: after construction it is G. The KV
            cache holds G heads.
        ffn_absorbs_kv: widen each FFN by the parameters grouped keys/values save (equal-parameter arms;
            :meth:`ffn_width`).
        rope_scaling: RoPE beyond the training length (none | linear | ntk | yarn; positions=rope only),
            applied in evaluation; see rope_scaling_train.
        rope_factor: its scale s = L'/L (>= 1; 1 = plain RoPE).
        rope_train_len: the training length L (yarn only: its ramp compares L with each wavelength).
        rope_scaling_train: apply the scaling in training too (fine-tuning with it); false = evaluation only.

    A stack of 0 layers is absent (a causal LM is decoder-only, a classifier encoder-only).
    Derived (not arguments): ``d_head`` (§3.2.2), ``scale`` (the logit multiplier, eq. 1), ``pre_norm``,
    ``rope_scale`` (the resolved ``blocks.rope_scaling.RopeScale``).
    """

    d_model: int = 128
    heads: int = 4
    d_ff: int = 512
    encoder_layers: int = 2
    decoder_layers: int = 2
    dropout: float = 0.1
    attn_dropout: float = 0.0
    norm: Norm = "post"
    positions: Positions = "sinusoidal"
    attn_scale: AttnScale = "sqrt_dk"
    max_positions: int = 256
    position_options: dict[str, float | int | bool] | None = field(default=None, hash=False)
    tying: Tying = "decoder"
    qk_norm: bool = False
    kv_heads: int | None = None
    ffn_absorbs_kv: bool = False
    rope_scaling: RopeScaling = "none"
    rope_factor: float = 1.0
    rope_train_len: int = 0
    rope_scaling_train: bool = False
    d_head: int = field(init=False)
    scale: float = field(init=False, repr=False)
    pre_norm: bool = field(init=False, repr=False)
    rope_scale: RopeScale = field(init=False, repr=False)

    def __post_init__(self) -> None:
        d_head = head_size(d_model=self.d_model, heads=self.heads)
        object.__setattr__(self, "kv_heads", kv_head_count(heads=self.heads, kv_heads=self.kv_heads))
        object.__setattr__(self, "position_options", dict(self.position_options or {}))
        object.__setattr__(self, "d_head", d_head)
        object.__setattr__(self, "scale", ATTN_SCALES[self.attn_scale](d_head))
        object.__setattr__(self, "pre_norm", PRE_NORM[self.norm])
        check_position_options(self.positions, self.position_options)
        object.__setattr__(self, "rope_scale", rope_scale(self))

    def ffn_width(self, attentions: int) -> int:
        """The FFN's inner width in a layer with ``attentions`` attention modules: ``d_ff``, plus, with
        ``ffn_absorbs_kv``, round(saved / (2D + 1)). Each module with G < h key/value heads saves
        2·(h − G)·d_k·(D + 1) parameters (W^K, W^V rows and biases); each FFN unit costs 2D + 1 (a row of
        W1, its bias, a column of W2). The layer then has the MHA layer's parameters within D + 1."""
        if not self.ffn_absorbs_kv:
            return self.d_ff
        saved = attentions * 2 * (self.heads - self.kv_heads) * self.d_head * (self.d_model + 1)
        return self.d_ff + round(saved / (2 * self.d_model + 1))


ENCODER_DECODER_OPTIONS = with_defaults(TransformerSpec)
"""The encoder-decoder's CLI arguments (``seq2seq.TransformerSeq2Seq``): the spec's fields and defaults."""

CAUSAL_LM_OPTIONS = with_defaults(TransformerSpec, rename={"decoder_layers": "layers"}, fixed={"encoder_layers": 0},
                                  norm="pre", max_positions=512)
"""The causal LM's (``causal_lm.CausalLM``): ``layers`` causal layers, no encoder, Pre-Norm, 512 positions."""


def rope_scale(spec: TransformerSpec) -> RopeScale:
    """The spec's RoPE scaling resolved (``registries.ROPE_SCALINGS``), or a one-line UsageError: a scaling
    needs positions=rope, a factor >= 1, and for yarn the training length L (``rope_train_len``). The one check
    of these arguments: ``blocks.rope_scaling`` takes them as given."""
    if spec.rope_scaling != "none" and spec.positions != "rope":
        raise UsageError(f"rope_scaling={spec.rope_scaling} needs positions=rope, got positions={spec.positions}")
    if spec.rope_factor < 1:
        raise UsageError(f"rope_factor={spec.rope_factor} is not allowed: it must be >= 1 (L'/L)")
    if spec.rope_scaling == "yarn" and spec.rope_train_len < 1:
        raise UsageError("rope_scaling=yarn needs rope_train_len, the training length L its ramp compares "
                         "each wavelength with")
    return ROPE_SCALINGS[spec.rope_scaling](factor=spec.rope_factor, train_len=spec.rope_train_len,
                                            in_training=spec.rope_scaling_train)


def check_position_options(positions: Positions, options: Mapping[str, object]) -> None:
    """Refuse, in one line, an option the scheme's class does not take (its keyword-only ``__init__``
    arguments with a number or flag default, ``registries.POSITIONS``: RoPE's resolved ``scaling`` comes from
    ``rope_scaling``, not from here) or a value not of its default's type (an int is a float)."""
    accepted = {name: p.default for name, p in inspect.signature(POSITIONS[positions]).parameters.items()
                if p.kind is p.KEYWORD_ONLY and isinstance(p.default, (float, int, bool))}  # not a resolved object
    for name, value in options.items():
        if name not in accepted:
            takes = ", ".join(sorted(accepted)) or "none"
            raise UsageError(f"position_options: positions={positions} has no option {name!r} (its options: {takes})")
        kind = type(accepted[name])
        fits = isinstance(value, (int, float) if kind is float else kind) and isinstance(value, bool) == (kind is bool)
        if not fits:
            raise UsageError(f"position_options: {name}={value!r} is not allowed: positions={positions} takes a "
                             f"{kind.__name__}")
