"""RoPE against an independent implementation (lucidrains' ``rotary-embedding-torch``, dev extra).

Su et al. 2021 (RoFormer, eq. 34) fix the rotation angles but not which features form a pair:
interleaved (2i, 2i+1) or split halves (i, i + d/2). The oracle uses interleaved pairs; our
``RotaryEmbedding`` is compared with it in each layout (the other layout by permuting the features
in and out), and must match in one of them, at offset 0 and at the offsets a KV-cached step uses.
"""

from __future__ import annotations

import pytest
import torch

from lit_models.blocks.positions import RotaryEmbedding

rotary_embedding_torch = pytest.importorskip("rotary_embedding_torch")

TOL = 1e-4  # float32 angles up to ~600 rad: cos/sin agree to ~1e-5


def _half_to_interleaved(d: int) -> torch.Tensor:
    """Feature order that turns a split-halves vector (x_0..x_{d/2-1}, y_0..) into (x_0, y_0, x_1, y_1, ...)."""
    return torch.stack((torch.arange(d // 2), torch.arange(d // 2) + d // 2), dim=-1).flatten()


def _oracle(x: torch.Tensor, offset: int, layout: str) -> torch.Tensor:
    """Oracle rotation of (B, H, T, d) in the given pair layout."""
    d = x.size(-1)
    rope = rotary_embedding_torch.RotaryEmbedding(dim=d, cache_if_possible=False)
    if layout == "interleaved":
        return rope.rotate_queries_or_keys(x, seq_dim=-2, offset=offset)
    perm = _half_to_interleaved(d)
    out = rope.rotate_queries_or_keys(x[..., perm], seq_dim=-2, offset=offset)
    return out[..., torch.argsort(perm)]


@pytest.mark.parametrize("d_head", [4, 8, 64])  # the oracle needs d > 2
@pytest.mark.parametrize("offset", [0, 1, 17, 300])
def test_rope_matches_rotary_embedding_torch_up_to_pair_layout(d_head: int, offset: int) -> None:
    g = torch.Generator().manual_seed(d_head * 1000 + offset)
    x = torch.randn(3, 2, 11, d_head, generator=g)
    ours = RotaryEmbedding(d_head=d_head)(x, offset)
    assert ours.shape == x.shape
    diffs = {layout: float((ours - _oracle(x, offset, layout)).abs().max()) for layout in ("interleaved", "halves")}
    best = min(diffs, key=diffs.get)
    assert diffs[best] < TOL, f"largest |ours - oracle| per pair layout: {diffs}"


def test_rope_one_token_steps_equal_the_full_pass() -> None:
    """What a KV-cached decoder does: rotating position t alone with offset t equals slicing the full pass."""
    x = torch.randn(2, 4, 9, 16, generator=torch.Generator().manual_seed(1))
    rope = RotaryEmbedding(d_head=16)
    full = rope(x, 0)
    steps = torch.cat([rope(x[:, :, t : t + 1], t) for t in range(x.size(2))], dim=2)
    diff = float((steps - full).abs().max())
    assert diff < 1e-6, f"largest difference {diff:.2e}"


def test_rope_scores_depend_only_on_relative_position() -> None:
    """q_mᵀ k_n is unchanged when both positions move by the same amount (Su et al. 2021, eq. 16)."""
    g = torch.Generator().manual_seed(2)
    q, k = torch.randn(1, 1, 6, 32, generator=g), torch.randn(1, 1, 6, 32, generator=g)
    rope = RotaryEmbedding(d_head=32)
    scores = [rope(q, s) @ rope(k, s).transpose(-1, -2) for s in (0, 5, 123)]
    diff = max(float((a - scores[0]).abs().max()) for a in scores[1:])
    assert diff < 1e-4, f"largest score change under a common shift {diff:.2e}"
    moved = rope(q, 0) @ rope(k, 3).transpose(-1, -2)  # a relative shift does change them
    assert float((moved - scores[0]).abs().max()) > 1e-2
