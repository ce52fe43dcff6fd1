"""RoPE scaling (blocks.rope_scaling): factor 1 is plain RoPE for every method, the scaled angles match the
papers' formulas computed here independently (in float64 with ``math``), and the scaling acts in evaluation
mode only unless asked to act in training too."""

import math

import pytest
import torch

from lit_models.blocks.positions import RotaryEmbedding
from lit_models.blocks.rope_scaling import LinearScale, NtkScale, RopeScale, YarnScale

D_HEAD, BASE, L = 16, 10000.0, 64
METHODS = {"none": RopeScale, "linear": LinearScale, "ntk": NtkScale, "yarn": YarnScale}


def _scaling(method: str, factor: float, *, in_training: bool = False) -> RopeScale:
    return METHODS[method](factor=factor, train_len=L, in_training=in_training)


def _angles(method: str, factor: float, positions: list[int]) -> list[list[float]]:
    """Angle of pair i at position m, from the formulas of the papers (no torch)."""
    d, out = D_HEAD, []
    for m in positions:
        row = []
        for i in range(d // 2):
            theta = BASE ** (-2 * i / d)
            if method == "linear":  # Chen et al. 2023, eq. 4: positions divided by s
                angle = (m / factor) * theta
            elif method == "ntk":  # b' = b · s^(d / (d - 2))
                angle = m * (BASE * factor ** (d / (d - 2))) ** (-2 * i / d)
            elif method == "yarn":  # Peng et al. 2023, eqs. 17-20, alpha 1, beta 32
                r = L / (2 * math.pi / theta)
                gamma = 0.0 if r < 1 else 1.0 if r > 32 else (r - 1) / 31
                angle = m * ((1 - gamma) * theta / factor + gamma * theta)
            else:
                angle = m * theta
            row.append(angle)
        out.append(row)
    return out


def _measured_angles(rope: RotaryEmbedding, positions: list[int]) -> torch.Tensor:
    """Rotate the unit vector (1, 0) of every pair: the result is (cos, sin) of its angle, interleaved."""
    x = torch.zeros(1, 1, 1, D_HEAD, dtype=torch.float64)
    x[..., 0::2] = 1.0
    rope = rope.double()
    rows = [rope(x, offset=m)[0, 0, 0] for m in positions]
    return torch.stack(rows)  # (P, d): (cos, sin) interleaved, times the magnitude


@pytest.mark.parametrize("method", list(METHODS))
def test_factor_one_is_plain_rope(method):
    plain = RotaryEmbedding(d_head=D_HEAD).eval()
    scaled = RotaryEmbedding(d_head=D_HEAD, scaling=_scaling(method, 1.0)).eval()
    x = torch.randn(2, 3, 40, D_HEAD)
    torch.testing.assert_close(scaled(x, offset=7), plain(x, offset=7), atol=1e-6, rtol=0)
    if method != "yarn":  # θ/1 and b·1^p are exact
        assert torch.equal(scaled(x, offset=7), plain(x, offset=7))


@pytest.mark.parametrize("method", ["linear", "ntk", "yarn"])
@pytest.mark.parametrize("factor", [2.0, 4.0, 8.0])
def test_scaled_angles_match_the_formulas(method, factor):
    positions = [0, 1, 5, 63, 64, 200, 511]
    got = _measured_angles(RotaryEmbedding(d_head=D_HEAD, scaling=_scaling(method, factor)).eval(), positions)
    angles = torch.tensor(_angles(method, factor, positions), dtype=torch.float64)
    magnitude = 0.1 * math.log(factor) + 1.0 if method == "yarn" else 1.0  # YaRN eq. 22: sqrt(1/t)
    # the frequencies are stored in float32: an angle m·θ is off by up to m·θ·2^-24 (3e-5 at m = 511)
    torch.testing.assert_close(got[:, 0::2], magnitude * angles.cos(), atol=1e-4, rtol=0)
    torch.testing.assert_close(got[:, 1::2], magnitude * angles.sin(), atol=1e-4, rtol=0)


def test_methods_differ_where_the_papers_say():
    """Linear interpolates every pair by s; NTK leaves the highest frequency (i = 0) alone and divides the
    lowest by exactly s; YaRN leaves pairs that turn more than 32 times over L alone."""
    theta = torch.tensor([BASE ** (-2 * i / D_HEAD) for i in range(D_HEAD // 2)], dtype=torch.float64)
    s = 4.0
    torch.testing.assert_close(LinearScale(factor=s).frequencies(D_HEAD, BASE), theta / s)
    ntk = NtkScale(factor=s).frequencies(D_HEAD, BASE)
    assert ntk[0] == theta[0]
    torch.testing.assert_close(ntk[-1], theta[-1] / s)
    long = 512  # a training length over which the fastest pairs turn more than 32 times
    yarn = YarnScale(factor=s, train_len=long).frequencies(D_HEAD, BASE)
    fast = long * theta / (2 * math.pi) > 32
    assert fast.any() and torch.equal(yarn[fast], theta[fast])
    slow = long * theta / (2 * math.pi) < 1
    assert slow.any() and torch.allclose(yarn[slow], theta[slow] / s)


@pytest.mark.parametrize("in_training", [False, True])
def test_scaling_acts_in_evaluation_and_in_training_only_when_asked(in_training):
    plain = RotaryEmbedding(d_head=D_HEAD)
    scaled = RotaryEmbedding(d_head=D_HEAD, scaling=_scaling("linear", 4.0, in_training=in_training))
    x = torch.randn(1, 1, 9, D_HEAD)
    assert not torch.allclose(scaled.eval()(x, offset=3), plain.eval()(x, offset=3))
    trained = torch.allclose(scaled.train()(x, offset=3), plain.train()(x, offset=3))
    assert trained != in_training


def test_registry_covers_the_rope_scaling_axis():
    from typing import get_args

    from lit_models.axes import RopeScaling
    from lit_models.registries import ROPE_SCALINGS

    assert list(ROPE_SCALINGS) == list(get_args(RopeScaling))
    assert {name: cls for name, cls in METHODS.items()} == ROPE_SCALINGS
