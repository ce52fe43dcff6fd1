"""Softmax saturation at initialisation (Vaswani et al. 2017, §3.2.1 fn. 4), computed with the suite's scales."""

from __future__ import annotations

import math

from ablations.verdicts import saturation
from ablations.verdicts.saturation import D_KS, Point


def test_unscaled_saturates_as_dk_grows_and_sqrt_dk_holds():
    pts = saturation.table()
    none, sq, dk = pts["none"], pts["sqrt_dk"], pts["dk"]
    assert all(none[a].entropy > none[b].entropy for a, b in zip(D_KS, D_KS[1:], strict=False)), none
    assert none[D_KS[-1]].grad < 0.5 * none[D_KS[0]].grad, none
    assert max(p.entropy for p in sq.values()) - min(p.entropy for p in sq.values()) < 0.05, sq
    assert min(p.entropy for p in dk.values()) > 0.95, "1/d_k flattens towards uniform"
    assert saturation.check(pts).answer == "supported"


def test_uniform_logits_have_entropy_one():
    """Zero logits (scale 1/d_k at huge d_k tends there): entropy log S, normalised to 1."""
    p = saturation.at_init("dk", 4096)
    assert math.isclose(p.entropy, 1.0, abs_tol=2e-3), p


def test_check_rejects_a_scale_that_does_not_saturate():
    steady = {d: Point(entropy=0.85, grad=1.1) for d in D_KS}
    assert saturation.check({"none": steady, "sqrt_dk": steady, "dk": steady}).answer == "not supported"


def test_plot_writes_a_png(tmp_path):
    path = saturation.plot(tmp_path / "s.png")
    assert path.stat().st_size > 5000
