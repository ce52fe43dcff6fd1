"""Position schemes: the sinusoid formula, RoPE's relative-position property, learned table limits."""

import math
from typing import get_args

import pytest
import torch

from lit_models.axes import Positions
from lit_models.blocks.attention import AttentionOptions, MultiHeadAttention, causal_mask
from lit_models.blocks.positions import (
    LearnedPositions,
    RotaryEmbedding,
    SchemeSizes,
    SinusoidalPositions,
    sinusoid_table,
)
from lit_models.builders import build_positions
from lit_models.registries import POSITIONS
from lit_models.specs import TransformerSpec


def _scheme(positions: Positions, *, d_model: int, heads: int, max_len: int):
    """The builder's scheme for a model of these sizes (the other spec fields do not reach a scheme)."""
    spec = TransformerSpec(d_model=d_model, heads=heads, d_ff=1, dropout=0.0, attn_dropout=0.0, norm="post",
                           attn_scale="sqrt_dk", positions=positions, max_positions=max_len)
    return build_positions(spec, causal=False)


def _sizes(d_model: int, max_len: int = 16) -> SchemeSizes:
    return SchemeSizes(d_model=d_model, heads=1, d_head=d_model, max_len=max_len, causal=False)


def test_registry_covers_positions_axis():
    assert set(POSITIONS) == set(get_args(Positions))
    assert len(POSITIONS) == len(get_args(Positions))


def test_sinusoid_worked_example_pos3_d4():
    # PE(3, 0) = sin(3), PE(3, 1) = cos(3), PE(3, 2) = sin(3 / 10000^(2/4)), PE(3, 3) = cos(3 / 100)
    expected = torch.tensor([0.141, -0.990, 0.030, 0.9995])
    torch.testing.assert_close(sinusoid_table(5, 4)[3], expected, atol=1e-3, rtol=0)


@pytest.mark.parametrize("d_model", [16, 5])
def test_sinusoid_table_matches_naive_loop_of_the_paper_equation(d_model):
    expected = torch.zeros(40, d_model)
    for pos in range(40):
        for j in range(d_model):
            angle = pos / 10000 ** ((j - j % 2) / d_model)  # 2i = j - j % 2
            expected[pos, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    torch.testing.assert_close(sinusoid_table(40, d_model), expected, atol=1e-6, rtol=1e-5)


def test_sinusoid_table_grows_on_demand():
    pe = SinusoidalPositions(_sizes(8))
    x = torch.zeros(1, 3, 8)
    far = pe(x, offset=700)  # past the initial 512-row table
    torch.testing.assert_close(far[0], sinusoid_table(703, 8)[700:])
    torch.testing.assert_close(pe(x, offset=2)[0], sinusoid_table(5, 8)[2:])


def _score(rope: RotaryEmbedding, q: torch.Tensor, k: torch.Tensor, m: int, n: int) -> torch.Tensor:
    """q_m^T k_n after rotating q at position m and k at position n; q, k: (d_head,)."""
    return (rope(q[None, None, None], offset=m) * rope(k[None, None, None], offset=n)).sum()


def test_rope_scores_depend_only_on_relative_position():
    torch.manual_seed(0)
    rope = RotaryEmbedding(d_head=16)
    q, k = torch.randn(16), torch.randn(16)
    for m, n in [(0, 0), (3, 1), (1, 3), (7, 2)]:
        base = _score(rope, q, k, m, n)
        for shift in (1, 5, 40):
            torch.testing.assert_close(_score(rope, q, k, m + shift, n + shift), base, atol=1e-4, rtol=1e-4)
    # ... and they do depend on m - n (RoPE is not a no-op).
    assert not torch.isclose(_score(rope, q, k, 3, 1), _score(rope, q, k, 1, 3), atol=1e-3)


def test_rope_keeps_norms_and_offset_matches_a_longer_sequence():
    torch.manual_seed(0)
    rope = RotaryEmbedding(d_head=8)
    x = torch.randn(2, 3, 10, 8)
    out = rope(x)
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(out[..., 0, :], x[..., 0, :])  # position 0 is not rotated
    torch.testing.assert_close(rope(x[..., 4:, :], offset=4), out[..., 4:, :])


def test_rope_rejects_odd_head_size():
    with pytest.raises(ValueError, match="d_head=5"):
        RotaryEmbedding(d_head=5)


def test_learned_positions_raise_naming_max_positions_when_too_long():
    torch.manual_seed(0)
    pe = LearnedPositions(_sizes(8, max_len=5))
    assert pe(torch.zeros(1, 5, 8)).shape == (1, 5, 8)
    with pytest.raises(ValueError, match="max_positions"):
        pe(torch.zeros(1, 6, 8))
    with pytest.raises(ValueError, match="max_positions"):
        pe(torch.zeros(1, 2, 8), offset=4)  # incremental decoding past the table


@pytest.mark.parametrize("positions", get_args(Positions))
def test_every_scheme_keeps_shape_and_only_absolute_schemes_add(positions):
    torch.manual_seed(0)
    pe = _scheme(positions, d_model=8, heads=2, max_len=16)
    x = torch.randn(2, 5, 8)
    assert pe(x).shape == x.shape
    adds = positions in ("sinusoidal", "learned")
    assert (not torch.equal(pe(x), x)) == adds


def _naive_attention(mha: MultiHeadAttention, x: torch.Tensor, allowed: torch.Tensor, offset: int) -> torch.Tensor:
    """Loop over (b, h, i) from Vaswani eq. 1 plus the scheme's hooks: s_ij = rot(q_i)·rot(k_j)·scale + bias_hij.

    x (B, T, D) are tokens at positions offset..offset+T-1 attending over themselves; allowed (B, T, T) bool.
    """
    b, t, d = x.shape
    h, dk = mha.heads, mha.d_k
    q, k, v = (w.view(b, t, h, dk).transpose(1, 2) for w in mha.in_proj(x).chunk(3, dim=-1))
    q, k = mha.positions.rotate(q, offset), mha.positions.rotate(k, offset)
    bias = mha.positions.score_bias(t=t, s=t, offset=0, device=x.device)
    out = torch.zeros(b, h, t, dk)
    for bi in range(b):
        for hi in range(h):
            for i in range(t):
                scores = torch.stack([q[bi, hi, i] @ k[bi, hi, j] * mha.scale for j in range(t)])
                if bias is not None:
                    scores = scores + bias[hi, i]
                scores = scores.masked_fill(~allowed[bi, i], float("-inf"))
                out[bi, hi, i] = torch.softmax(scores, dim=0) @ v[bi, hi]
    return mha.out_proj(out.transpose(1, 2).reshape(b, t, d))


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
@pytest.mark.parametrize("positions", get_args(Positions))
def test_attention_with_every_scheme_matches_a_naive_loop(positions, causal):
    """The scheme's hooks reach attention on the fused and the explicit path, with padding and causal masks."""
    torch.manual_seed(0)
    pe = _scheme(positions, d_model=16, heads=4, max_len=32)
    mha = MultiHeadAttention(AttentionOptions(heads=4, kv_heads=4, d_head=4, scale=4**-0.5, attn_dropout=0.0),
                             positions=pe).eval()
    x = torch.randn(2, 6, 16)
    keep = torch.ones(2, 6, dtype=torch.bool)
    keep[1, 4:] = False  # padded keys
    allowed = keep[:, None, :].expand(2, 6, 6) & (causal_mask(6, 6) if causal else True)
    with torch.no_grad():
        expected = _naive_attention(mha, x, allowed, offset=0)
        q, k, v = mha.project_qkv(x)
        for need in (False, True):
            got, _ = mha.attend(q, k, v, mask=keep[:, None, None, :], is_causal=causal, need_weights=need)
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("positions", get_args(Positions))
def test_last_query_with_offset_equals_full_causal_pass(positions):
    """What the KV cache relies on: the last query alone, at its offset, over all keys = the full pass's last row."""
    torch.manual_seed(0)
    pe = _scheme(positions, d_model=16, heads=4, max_len=32)
    mha = MultiHeadAttention(AttentionOptions(heads=4, kv_heads=4, d_head=4, scale=4**-0.5, attn_dropout=0.0),
                             positions=pe).eval()
    x = torch.randn(2, 7, 16)
    with torch.no_grad():
        q, k, v = mha.project_qkv(x)
        full, _ = mha.attend(q, k, v, mask=None, is_causal=True)
        q_last, _, _ = mha.project_qkv(x[:, -1:], offset=6)
        last, _ = mha.attend(q_last, k, v, mask=None, offset=6)
    torch.testing.assert_close(last[:, 0], full[:, -1], atol=1e-5, rtol=1e-5)


def test_only_attention_acting_schemes_change_what_attention_sees():
    """rope acts through q/k; sinusoidal, learned and none leave attention's hooks as identities."""
    x = torch.randn(1, 2, 5, 4)
    for positions in ("sinusoidal", "learned", "none"):
        pe = _scheme(positions, d_model=8, heads=2, max_len=16)
        assert torch.equal(pe.rotate(x, 3), x)
        assert pe.score_bias(t=5, s=5, offset=0, device=x.device) is None
    assert not torch.allclose(_scheme("rope", d_model=8, heads=2, max_len=16).rotate(x, 3), x)


def test_alibi_slopes_follow_the_paper():
    """Press et al. 2022 §3: 8 heads -> 1/2, 1/4, ..., 1/256; non-powers of two interleave the 2n sequence."""
    from lit_models.blocks.positions import alibi_slopes

    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0 ** -(i + 1) for i in range(8)]))
    torch.testing.assert_close(alibi_slopes(4), torch.tensor([2.0 ** -(2 * (i + 1)) for i in range(4)]))
    six = [2.0 ** -(2 * (i + 1)) for i in range(4)] + [2.0 ** -1, 2.0 ** -3]  # 4 of n=4, then odd ones of n=8
    torch.testing.assert_close(alibi_slopes(6), torch.tensor(six))


def test_alibi_bias_is_minus_slope_times_distance_with_offset():
    pe = _scheme("alibi", d_model=8, heads=2, max_len=16)
    bias = pe.score_bias(t=2, s=5, offset=3, device=torch.device("cpu"))  # queries at 3, 4; keys 0..4
    m = pe.slopes
    expected = torch.stack([-m[h] * torch.tensor([[3.0, 2, 1, 0, 1], [4, 3, 2, 1, 0]]) for h in range(2)])
    torch.testing.assert_close(bias, expected)
