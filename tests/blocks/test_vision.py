"""Feature-grid encoders: grid shapes per backbone (random weights, never downloaded), freezing,
the registry, and the captioning network's decoder protocol."""

from __future__ import annotations

from typing import get_args

import pytest
import torch

from lit_models.axes import VisionBackbone
from lit_models.blocks.recurrent_decoder import AttentionalDecoder
from lit_models.blocks.vision import CaptionNet
from lit_models.builders import build_vision_encoder
from lit_models.registries import ATTENTION_ARMS, CELLS, VISION_ENCODERS

WIDTHS = {"small_cnn": 16, "resnet18": 512, "resnet34": 512, "resnet50": 2048, "resnet101": 2048}


def test_registry_covers_the_literal() -> None:
    assert set(VISION_ENCODERS) == set(get_args(VisionBackbone)) == set(WIDTHS)


@pytest.mark.parametrize("backbone", get_args(VisionBackbone))
@pytest.mark.parametrize("grid", [14, 3])
def test_grid_shape(backbone: str, grid: int) -> None:
    torch.manual_seed(0)
    enc = build_vision_encoder(backbone, grid_size=grid, weights=None, width=16).eval()
    with torch.no_grad():
        out = enc(torch.randn(2, 3, 64, 64))
    assert out.shape == (2, grid * grid, WIDTHS[backbone]) and enc.feature_size == WIDTHS[backbone]
    assert torch.isfinite(out).all()


def test_cells_are_row_major() -> None:
    """A feature map whose value is its row index lands in cells i with i // G == row."""
    enc = build_vision_encoder("small_cnn", grid_size=4, width=8)
    enc.backbone = torch.nn.Identity()
    fmap = torch.arange(4.0).view(1, 1, 4, 1).expand(1, 1, 4, 4)  # (B, D=1, G, G): value = row
    out = enc(fmap)  # (1, 16, 1)
    assert torch.equal(out[0, :, 0], torch.arange(16.0) // 4)


def test_frozen_backbone_has_no_gradients_and_stays_in_eval() -> None:
    enc = build_vision_encoder("resnet18", grid_size=2, fine_tune=False)
    enc.train()
    assert not enc.backbone.training and all(not p.requires_grad for p in enc.parameters())
    tuned = build_vision_encoder("resnet18", grid_size=2, fine_tune=True).train()
    assert tuned.backbone.training and all(p.requires_grad for p in tuned.parameters())


def test_small_cnn_refuses_pretrained_weights() -> None:
    with pytest.raises(ValueError, match="small_cnn"):
        build_vision_encoder("small_cnn", weights="DEFAULT")


def test_small_cnn_features_know_where_they_are() -> None:
    """CoordConv: a blank image still gives different features in different cells."""
    enc = build_vision_encoder("small_cnn", grid_size=8, width=16).eval()
    with torch.no_grad():
        out = enc(torch.zeros(1, 3, 64, 64))[0]  # (64, 16)
    assert (out[0] - out[-1]).abs().max() > 1e-3


def test_caption_net_protocol() -> None:
    torch.manual_seed(0)
    enc = build_vision_encoder("small_cnn", grid_size=4, width=16)
    dec = AttentionalDecoder(cell=CELLS["lstm"], vocab_size=11, embed_dim=8, hidden_size=12, memory_size=16,
                             attention=ATTENTION_ARMS["additive"], gate=True)
    net = CaptionNet(encoder=enc, decoder=dec).eval()
    images, tgt_in = torch.randn(2, 3, 32, 32), torch.tensor([[1, 5, 6], [1, 7, 0]])
    state = net.encode(images)
    assert state["memory"].shape == (2, 16, 16) and state["mask"].all()
    logits, _ = net.teacher_forward(state, tgt_in)
    maps = net.attention_maps(images, tgt_in)["cross/layer1"]
    assert logits.shape == (2, 3, 11) and maps.shape == (2, 1, 3, 16)
    torch.testing.assert_close(maps.sum(-1), torch.ones(2, 1, 3))
