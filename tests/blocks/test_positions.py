"""Position schemes: the sinusoid formula, RoPE's relative-position property, learned table limits."""

import math
from typing import get_args

import pytest
import torch

from lit_models.axes import Positions
from lit_models.blocks.positions import (
    POSITIONS,
    LearnedPositions,
    RotaryEmbedding,
    SinusoidalPositions,
    sinusoid_table,
)


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
    pe = SinusoidalPositions(d_model=8)
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
    pe = LearnedPositions(d_model=8, max_len=5)
    assert pe(torch.zeros(1, 5, 8)).shape == (1, 5, 8)
    with pytest.raises(ValueError, match="max_positions"):
        pe(torch.zeros(1, 6, 8))
    with pytest.raises(ValueError, match="max_positions"):
        pe(torch.zeros(1, 2, 8), offset=4)  # incremental decoding past the table


@pytest.mark.parametrize("positions", get_args(Positions))
def test_every_scheme_keeps_shape_and_only_absolute_schemes_add(positions):
    torch.manual_seed(0)
    pe = POSITIONS[positions](d_model=8, d_head=4, max_len=16)
    x = torch.randn(2, 5, 8)
    assert pe(x).shape == x.shape
    adds = positions in ("sinusoidal", "learned")
    assert (not torch.equal(pe(x), x)) == adds


@pytest.mark.parametrize("positions", get_args(Positions))
def test_only_rope_exposes_a_rotary_embedding(positions):
    pe = POSITIONS[positions](d_model=8, d_head=4, max_len=16)
    assert isinstance(pe.rotary, RotaryEmbedding) == (positions == "rope")
    assert (pe.rotary is None) == (positions != "rope")
