"""What the Transformer spec resolves once for every block (``specs.TransformerSpec``): the key/value head count G
(null = h), the FFN width that absorbs what grouped keys/values save (per layer kind, through the builders), and
the RoPE-scaling arguments (checked there only, a one-line UsageError naming the field)."""

import pytest
from torch import nn

from attnlab_core.errors import UsageError
from lit_models.blocks.attention import MultiHeadAttention
from lit_models.builders import build_causal_lm, build_transformer
from lit_models.specs import TransformerSpec

D, H, DH, FF, V = 32, 4, 8, 48, 19


def _spec(**kw) -> TransformerSpec:
    return TransformerSpec(d_model=D, heads=H, d_ff=FF, encoder_layers=1, decoder_layers=2, dropout=0.0,
                           positions="rope", tying="none", **kw)


def _causal(**kw) -> nn.Module:
    return build_causal_lm(_spec(**kw), vocab_size=V)


def _seq2seq(**kw) -> nn.Module:
    return build_transformer(_spec(**kw), src_vocab_size=V, tgt_vocab_size=V)


def _count(net: nn.Module) -> int:
    return sum(p.numel() for p in net.parameters())


@pytest.mark.parametrize(("kv_heads", "groups"), [(None, H), (H, H), (2, 2), (1, 1)])
def test_the_spec_resolves_kv_heads_and_every_attention_gets_it(kv_heads, groups):
    spec = _spec(kv_heads=kv_heads)
    assert spec.kv_heads == groups
    attentions = [m for m in _seq2seq(kv_heads=kv_heads).modules() if isinstance(m, MultiHeadAttention)]
    assert len(attentions) == 1 + 2 * 2 and all(m.kv_heads == groups for m in attentions)
    assert all(m.in_proj.out_features == D + 2 * groups * DH for m in attentions)


@pytest.mark.parametrize("build", [_causal, _seq2seq], ids=["causal", "seq2seq"])
@pytest.mark.parametrize("kv_heads", [1, 2])
def test_ffn_absorbs_what_grouped_keys_save(build, kv_heads):
    """Equal budget: with ffn_absorbs_kv, a GQA/MQA network has the MHA network's parameters within D + 1 per
    layer (one FFN unit's rounding); without it, fewer by 2·(h − G)·d_k·(D + 1) per attention module."""
    mha, gqa = _count(build()), _count(build(kv_heads=kv_heads))
    modules = 2 if build is _causal else 1 + 2 * 2  # causal: 2 layers x 1; seq2seq: 1 encoder + 2 decoders x 2
    assert mha - gqa == modules * 2 * (H - kv_heads) * DH * (D + 1)
    layers = 2 if build is _causal else 3
    assert abs(_count(build(kv_heads=kv_heads, ffn_absorbs_kv=True)) - mha) <= layers * (D + 1)
    assert _spec(ffn_absorbs_kv=True).ffn_width(2) == _spec(kv_heads=kv_heads).ffn_width(2) == FF
    assert _spec(kv_heads=kv_heads, ffn_absorbs_kv=True).ffn_width(2) > _spec(kv_heads=kv_heads,
                                                                              ffn_absorbs_kv=True).ffn_width(1) > FF


@pytest.mark.parametrize(("arm", "message"), [
    (dict(rope_scaling="linear", rope_factor=0.5), "rope_factor=0.5 is not allowed: it must be >= 1"),
    (dict(rope_scaling="yarn", rope_factor=2.0), "rope_scaling=yarn needs rope_train_len"),
    (dict(positions="sinusoidal", rope_scaling="ntk", rope_factor=2.0), "rope_scaling=ntk needs positions=rope"),
])
def test_bad_rope_scalings_are_refused_in_one_line_by_the_spec(arm, message):
    base = dict(d_model=D, heads=H, positions="rope") | arm
    with pytest.raises(UsageError, match=message) as refused:
        TransformerSpec(**base)
    assert "\n" not in str(refused.value)
