"""CNN feature-grid encoders for captioning: images -> a grid of annotation vectors.

Show, Attend and Tell (Xu et al. 2015, §3.1.1) attends over L = 14 × 14 annotation vectors a_i,
the conv5_4 feature map of VGG before max pooling. Here the grid comes from a torchvision ResNet
(He et al. 2016) cut before its global average pooling, or from a small CNN for CPU runs, and is
adaptively average-pooled to ``grid_size`` × ``grid_size`` cells:

    images (B, 3, H, W) -> features (B, D, h, w) -> pool (B, D, G, G) -> annotations (B, S = G·G, D)

Cells are flattened row-major: cell ``i`` is row ``i // G``, column ``i % G``.

Deviations: ResNet instead of VGG (as most re-implementations); pooling to the grid is an
adaptive average (a 224² input to a ResNet gives 7 × 7, which is up-sampled to 14 × 14 by the
adaptive pooling when ``grid_size=14`` — each coarse cell is repeated).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torchvision
from torch import Tensor, nn


class GridEncoder(nn.Module):
    """A backbone producing a (B, D, h, w) map, pooled to a G × G grid of D-vectors.

    With ``fine_tune=False`` the backbone is frozen: no gradients and kept in eval mode (its
    BatchNorm statistics never move), as Xu et al. who use a fixed pre-trained VGG.

    Args:
        backbone: images (B, 3, H, W) -> feature map (B, D, h, w).
        feature_size: D.
        grid_size: G; the output has S = G² positions.
        fine_tune: train the backbone (True) or freeze it (False).
    """

    def __init__(self, *, backbone: nn.Module, feature_size: int, grid_size: int, fine_tune: bool) -> None:
        super().__init__()
        if grid_size < 1:
            raise ValueError(f"grid_size must be >= 1, got {grid_size}")
        self.backbone = backbone
        self.pool = nn.AdaptiveAvgPool2d(grid_size)
        self.feature_size, self.grid_size, self.fine_tune = feature_size, grid_size, fine_tune
        self.backbone.requires_grad_(fine_tune)

    def train(self, mode: bool = True) -> GridEncoder:
        super().train(mode)
        if not self.fine_tune:
            self.backbone.eval()
        return self

    def forward(self, images: Tensor) -> Tensor:
        """images (B, 3, H, W) -> annotations (B, S = G·G, D), row-major cells."""
        fmap = self.pool(self.backbone(images))  # (B, D, G, G)
        return fmap.flatten(2).transpose(1, 2)  # (B, G·G, D)


class CoordCNN(nn.Module):
    """Small CNN for CPU runs: CoordConv input (Liu et al. 2018) and four 3 × 3 conv / BN / ReLU layers.

    Two coordinate channels (x, y in [-1, 1]) are appended to the image so the features of an
    object can say *where* it is — a VGG / ResNet on 224² images gets that from its depth and
    zero padding; a 4-layer net on 64² images would not. Three stride-2 layers: H × W -> H/8 × W/8
    (64² -> 8²), receptive field 31 pixels.

    Args:
        width: D, the output channels.
    """

    def __init__(self, *, width: int) -> None:
        super().__init__()
        chans = [5, 32, 64, width, width]
        strides = [2, 2, 2, 1]
        layers: list[nn.Module] = []
        for c_in, c_out, s in zip(chans[:-1], chans[1:], strides, strict=True):
            layers += [nn.Conv2d(c_in, c_out, 3, stride=s, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()]
        self.net = nn.Sequential(*layers)

    def forward(self, images: Tensor) -> Tensor:
        """images (B, 3, H, W) -> (B, width, H/8, W/8)."""
        b, _, h, w = images.shape
        ys = torch.linspace(-1.0, 1.0, h, device=images.device, dtype=images.dtype)
        xs = torch.linspace(-1.0, 1.0, w, device=images.device, dtype=images.dtype)
        grid_y, grid_x = torch.meshgrid(ys, xs, indexing="ij")  # (H, W) each
        coords = torch.stack([grid_x, grid_y]).expand(b, 2, h, w)  # (B, 2, H, W)
        return self.net(torch.cat([images, coords], dim=1))


def resnet_grid(name: str, feature_size: int) -> Callable[..., GridEncoder]:
    """A torchvision ResNet without ``avgpool`` and ``fc`` (its conv5_x output), as a GridEncoder factory."""

    def build(*, grid_size: int, fine_tune: bool, weights: str | None, width: int) -> GridEncoder:
        enum = torchvision.models.get_model_weights(name)[weights] if weights else None
        net = torchvision.models.get_model(name, weights=enum)
        body = nn.Sequential(*list(net.children())[:-2])  # conv1 .. layer4: (B, D, H/32, W/32)
        return GridEncoder(backbone=body, feature_size=feature_size, grid_size=grid_size, fine_tune=fine_tune)

    return build


def small_cnn_grid(*, grid_size: int, fine_tune: bool, weights: str | None, width: int) -> GridEncoder:
    if weights:
        raise ValueError(f"small_cnn has no pre-trained weights (got weights={weights!r}); use weights=null")
    return GridEncoder(backbone=CoordCNN(width=width), feature_size=width, grid_size=grid_size, fine_tune=fine_tune)


class CaptionNet(nn.Module):
    """Show, Attend and Tell's network (Xu et al. 2015, §3): grid encoder + attentional LSTM decoder.

    Implements the seq2seq decoder protocol with images as the source: ``encode(images) -> state``,
    ``step``, ``teacher_forward -> (logits, state)`` and ``attention_maps``. The annotation vectors
    are the grid cells (B, S, D); the decoder state is initialised from their mean (Xu et al.
    eq. 5, through ``AttentionalDecoder``'s tanh bridge; deviation: the memory cell starts at zero).

    Args:
        encoder: a :class:`GridEncoder`. decoder: an ``AttentionalDecoder`` with memory_size = D.
    """

    def __init__(self, *, encoder: GridEncoder, decoder: nn.Module) -> None:
        super().__init__()
        self.encoder, self.decoder = encoder, decoder

    def encode(self, images: Tensor) -> dict[str, Tensor]:
        """images (B, 3, H, W) -> the decoder's initial state over the (B, S, D) annotations."""
        feats = self.encoder(images)  # (B, S, D)
        mask = torch.ones(feats.shape[:2], dtype=torch.bool, device=feats.device)  # (B, S)
        return self.decoder.init_state(feats, mask, feats.mean(1))

    def step(self, prev_tokens: Tensor, state: dict[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        return self.decoder.step(prev_tokens, state)

    def teacher_forward(self, state: dict[str, Tensor], tgt_in: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """tgt_in (B, T) -> logits (B, T, V) and the final state (REINFORCE sums, Σ_t α_t)."""
        out = self.decoder.teacher_forward(state, tgt_in)
        return out.logits, out.state

    def attention_maps(self, images: Tensor, tgt_in: Tensor) -> dict[str, Tensor]:
        """The per-word weights over grid cells as one 'cross' layer with one head: (B, 1, T, S)."""
        return {"cross/layer1": self.decoder.teacher_forward(self.encode(images), tgt_in).weights[:, None]}
