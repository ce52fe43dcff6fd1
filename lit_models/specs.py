"""One frozen spec per architecture: what the builders take (cf. nanoGPT's ``GPTConfig``, litgpt's ``Config``).

A spec holds the architecture's hyper-parameters under their axis names, and derives once, in
``__post_init__``, what the blocks need as numbers: the head size (validated there, the one place
``d_model / heads`` is checked), the logit scale and the norm placement. The LightningModules keep
their flat CLI arguments and build a spec from them; Python users build one directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from lit_models.axes import AttnScale, Norm, Positions
from lit_models.registries import ATTN_SCALES, PRE_NORM
from lit_models.validation import head_size


@dataclass(frozen=True, kw_only=True)
class TransformerSpec:
    """A Transformer (Vaswani et al. 2017): encoder stack, decoder stack, or both.

    Args:
        d_model: model width D. heads: h, which must divide D (d_head = D / h, §3.2.2).
        d_ff: inner width of the position-wise FFN (eq. 2).
        encoder_layers, decoder_layers: stack depths N (0 = that stack is absent: a causal LM is
            decoder-only, a classifier encoder-only).
        dropout: on sublayer outputs and embeddings (§5.4). attn_dropout: on the attention weights.
        norm: residual LayerNorm placement (``axes.Norm``). attn_scale: logit scaling (``axes.AttnScale``).
        positions: position scheme (``axes.Positions``); max_len: its table length (learned positions).
        position_options: the scheme's own keyword options (e.g. RoPE's ``base``); empty = its defaults.

    Derived (not arguments): ``d_head``, ``scale`` (the logit multiplier, eq. 1), ``pre_norm``.
    """

    d_model: int
    heads: int
    d_ff: int
    encoder_layers: int = 0
    decoder_layers: int = 0
    dropout: float
    attn_dropout: float
    norm: Norm
    attn_scale: AttnScale
    positions: Positions
    max_len: int
    position_options: Mapping[str, float | int | bool] = field(default_factory=dict, hash=False)
    d_head: int = field(init=False)
    scale: float = field(init=False, repr=False)
    pre_norm: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        d_head = head_size(d_model=self.d_model, heads=self.heads)
        object.__setattr__(self, "d_head", d_head)
        object.__setattr__(self, "scale", ATTN_SCALES[self.attn_scale](d_head))
        object.__setattr__(self, "pre_norm", PRE_NORM[self.norm])
