"""Scaled dot-product and multi-head attention: the worked example, masking invariants, path parity, scale arms."""

import math
from typing import get_args

import pytest
import torch

from lit_models.axes import AttnScale
from lit_models.blocks.attention import (
    AttentionOptions,
    MultiHeadAttention,
    attention_weights,
    causal_mask,
    scaled_dot_product,
)
from lit_models.blocks.transformer import DecoderLayer, LayerOptions
from lit_models.registries import ATTN_SCALES
from lit_models.validation import head_size

SCALES = get_args(AttnScale)

# The seed's "The cat sat" walkthrough (d_model = d_k = 4, one head, W_Q = W_K = W_V = I).
# Its X is not drawn from 0.1..0.5 only: the rows are 0.1..0.4, 0.5..0.8 and 0.2..0.5. No 3x4 X with
# every entry in {0.1, ..., 0.5} gives the seed's numbers to 3 decimals (checked exhaustively, repeats
# allowed, 5^12 choices), so we use the seed's own X: QKᵀ row 1 = [0.30, 0.70, 0.40], / sqrt(4) = [0.15, 0.35, 0.20],
# softmax = [0.306, 0.373, 0.321].
SEED_X = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8], [0.2, 0.3, 0.4, 0.5]])
SEED_ROW1 = torch.tensor([0.306, 0.373, 0.321])


def _identity_mha(d: int, attn_scale: AttnScale = "sqrt_dk") -> MultiHeadAttention:
    """One head, W^Q = W^K = W^V = W^O = I and zero biases."""
    mha = MultiHeadAttention(AttentionOptions(heads=1, kv_heads=1, d_head=d, scale=ATTN_SCALES[attn_scale](d),
                                              attn_dropout=0.0))
    with torch.no_grad():
        mha.in_proj.weight.copy_(torch.eye(d).repeat(3, 1))
        mha.in_proj.bias.zero_()
        mha.out_proj.weight.copy_(torch.eye(d))
        mha.out_proj.bias.zero_()
    return mha


def _padding_mask(lengths: list[int], s: int) -> torch.Tensor:
    """(B, 1, 1, S) True = real key."""
    return (torch.arange(s)[None, :] < torch.tensor(lengths)[:, None])[:, None, None, :]


def test_seed_worked_example_first_row_weights():
    x = SEED_X[None, None]  # (1, 1, 3, 4)
    w = attention_weights(x, x, mask=None, scale=ATTN_SCALES["sqrt_dk"](4))
    torch.testing.assert_close(w[0, 0, 0], SEED_ROW1, atol=5e-4, rtol=0)
    # Step 6: the output of token 1 is 0.306·V1 + 0.373·V2 + 0.321·V3 (V = X).
    mha = _identity_mha(4)
    q, k, v = mha.project_qkv(SEED_X[None])
    for need in (False, True):
        out, weights = mha.attend(q, k, v, mask=None, need_weights=need)
        torch.testing.assert_close(out[0, 0], SEED_ROW1 @ SEED_X, atol=2e-3, rtol=0)
        torch.testing.assert_close(out[0], w[0, 0] @ SEED_X, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(weights, w)


def test_rows_sum_to_one_and_padded_keys_get_exactly_zero():
    torch.manual_seed(0)
    q, k = torch.randn(3, 2, 4, 8), torch.randn(3, 2, 6, 8)
    mask = _padding_mask([6, 3, 1], 6)
    w = attention_weights(q, k, mask=mask, scale=8**-0.5)
    torch.testing.assert_close(w.sum(-1), torch.ones(3, 2, 4))
    assert (w.masked_select(~mask.expand_as(w)) == 0).all()
    assert (w.masked_select(mask.expand_as(w)) > 0).all()


@pytest.mark.parametrize("need_weights", [False, True], ids=["sdpa", "explicit"])
def test_fully_masked_row_gives_zeros_not_nan(need_weights):
    torch.manual_seed(0)
    q = torch.randn(2, 2, 3, 4, requires_grad=True)
    k = torch.randn(2, 2, 5, 4, requires_grad=True)
    v = torch.randn(2, 2, 5, 4, requires_grad=True)
    mask = torch.ones(2, 1, 3, 5, dtype=torch.bool)
    mask[0, :, 1] = False  # query 1 of example 0 may attend to nothing
    mask[1] = False  # an all-padding source
    out, w = scaled_dot_product(q, k, v, mask=mask, scale=0.5, dropout_p=0.0, need_weights=need_weights)
    assert torch.isfinite(out).all()
    assert (out[0, :, 1] == 0).all() and (out[1] == 0).all()
    if need_weights:
        assert (w[0, :, 1] == 0).all() and (w[1] == 0).all()
        torch.testing.assert_close(w[0, :, [0, 2]].sum(-1), torch.ones(2, 2))
    out.square().sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


def _masks(t: int, s: int) -> dict[str, dict]:
    pad = _padding_mask([s, s - 2, 1], s)
    causal = causal_mask(t, s)
    return {
        "none": dict(mask=None),
        "padding": dict(mask=pad),
        "causal_bottom_right": dict(mask=causal),
        "padding_and_causal": dict(mask=pad & causal),
        "is_causal": dict(mask=None, is_causal=True),
    }


@pytest.mark.parametrize("mask_kind", list(_masks(4, 4)))
@pytest.mark.parametrize("attn_scale", SCALES)
def test_sdpa_path_equals_explicit_path(attn_scale, mask_kind):
    torch.manual_seed(0)
    options = AttentionOptions(heads=4, kv_heads=4, d_head=8, scale=ATTN_SCALES[attn_scale](8),
                               attn_dropout=0.5)
    mha = MultiHeadAttention(options).eval()
    t, s = (5, 5) if mask_kind == "is_causal" else (4, 6)
    x, mem = torch.randn(3, t, 32), torch.randn(3, s, 32)
    q = mha.project_q(x)
    k, v = mha.project_kv(mem)
    kw = _masks(t, s)[mask_kind]
    fused, none = mha.attend(q, k, v, need_weights=False, **kw)
    explicit, weights = mha.attend(q, k, v, need_weights=True, **kw)
    assert none is None and weights.shape == (3, 4, t, s)
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)
    if mask_kind == "is_causal":
        assert (weights.masked_select(~causal_mask(t, s)) == 0).all()


def test_causal_mask_is_bottom_right_aligned():
    assert causal_mask(2, 4).tolist() == [[True, True, True, False], [True, True, True, True]]
    assert causal_mask(3, 3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_decoder_self_attention_is_causal(norm):
    torch.manual_seed(0)
    layer = DecoderLayer(LayerOptions(heads=4, d_head=8, d_ff=64, dropout=0.0, attn_dropout=0.0, scale=8**-0.5,
                                      kv_heads=4, pre_norm=norm == "pre")).eval()
    mem = torch.randn(2, 5, 32)
    cache = layer.memory_cache(mem)
    empty = cache["mem_k"][:, :, :0]
    cache = {**cache, "self_k": empty, "self_v": empty}
    mem_mask = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    y = torch.randn(2, 6, 32)
    changed = y.clone()
    changed[:, 3:] = torch.randn(2, 3, 32) * 5
    for need in (False, True):
        a, _, _ = layer(y, cache=cache, mem_mask=mem_mask, incremental=False, need_weights=need)
        b, _, _ = layer(changed, cache=cache, mem_mask=mem_mask, incremental=False,
                        need_weights=need)
        torch.testing.assert_close(a[:, :3], b[:, :3], atol=1e-6, rtol=1e-6)
        assert not torch.allclose(a[:, 3:], b[:, 3:])


def test_each_attn_scale_changes_the_output():
    x = torch.randn(2, 5, 32, generator=torch.Generator().manual_seed(1))
    outs = {}
    for arm in SCALES:
        torch.manual_seed(0)  # identical weights for every arm
        mha = MultiHeadAttention(AttentionOptions(heads=4, kv_heads=4, d_head=8, scale=ATTN_SCALES[arm](8),
                                                  attn_dropout=0.0))
        outs[arm], _ = mha.attend(*mha.project_qkv(x), mask=None)
    for a in SCALES:
        for b in SCALES:
            if a < b:
                assert not torch.allclose(outs[a], outs[b], atol=1e-4), (a, b)


def test_attn_scale_values():
    assert ATTN_SCALES["sqrt_dk"](64) == pytest.approx(1 / 8)
    assert ATTN_SCALES["none"](64) == 1.0
    assert ATTN_SCALES["dk"](64) == pytest.approx(1 / 64)


def _mean_entropy(w: torch.Tensor) -> float:
    return float(-(w * w.clamp_min(1e-30).log()).sum(-1).mean())


def test_attention_entropy_falls_as_scale_grows_at_large_dk():
    torch.manual_seed(0)
    d_k, s = 256, 16
    q, k = torch.randn(4, 2, s, d_k), torch.randn(4, 2, s, d_k)
    ent = {arm: _mean_entropy(attention_weights(q, k, mask=None, scale=ATTN_SCALES[arm](d_k))) for arm in SCALES}
    uniform = math.log(s)
    assert ent["none"] < 0.25 * ent["sqrt_dk"], ent  # logits ~ N(0, d_k): nearly one-hot
    assert ent["sqrt_dk"] < ent["dk"], ent
    assert ent["dk"] > 0.99 * uniform, ent  # logits ~ N(0, 1/d_k): nearly uniform


@pytest.mark.parametrize("heads", [1, 2, 4, 8])
def test_multihead_parameter_count_independent_of_heads(heads):
    d = 64
    mha = MultiHeadAttention(AttentionOptions(heads=heads, d_head=d // heads, scale=(d // heads) ** -0.5,
                                              attn_dropout=0.0, kv_heads=heads))
    assert sum(p.numel() for p in mha.parameters()) == 4 * d * d + 4 * d


def test_d_model_not_divisible_by_heads_raises_naming_both():
    with pytest.raises(ValueError, match=r"d_model=10.*heads=4"):
        head_size(d_model=10, heads=4)
