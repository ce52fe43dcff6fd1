"""Recurrent attention model blocks (Mnih, Heess, Graves & Kavukcuoglu 2014, "Recurrent Models of
Visual Attention", §3 and Fig. 1): glimpse sensor ρ, glimpse network f_g, recurrent core f_h,
Gaussian location policy f_l, baseline b_t and the action (classifier) network f_a.

Locations are ``(x, y)`` in ``[-1, 1]²``: ``(-1, -1)`` is the top-left corner of the image,
``(1, 1)`` the bottom-right, ``(0, 0)`` its centre (the paper's coordinate system, §4.1).
Plain torch: these blocks never import lightning.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def patch_corners(locations: Tensor, *, size: int, height: int, width: int) -> Tensor:
    """Integer top-left pixel (row, col) of a size×size patch centred at each location.

    The centre in pixels is ``c = (l + 1) / 2 · (W, H)`` (pixel i covers [i, i+1)); the corner is
    ``round(c − size/2)`` (half rounds up), so patches of every size share the same centre.

    Args:
        locations: (B, 2) as (x, y) in [-1, 1]. size: patch side in pixels. height, width: H, W.

    Returns:
        (B, 2) long: (top row, left col); may be negative or past the border (zero padding there).
    """
    cx = (locations[:, 0] + 1) / 2 * width  # (B,)
    cy = (locations[:, 1] + 1) / 2 * height  # (B,)
    corner = torch.stack([cy, cx], dim=1) - size / 2  # (B, 2)
    return torch.floor(corner + 0.5).long()


class GlimpseSensor(nn.Module):
    """Retina-like glimpse sensor ρ(x_t, l_{t−1}) (Mnih et al. 2014, §3.1, Fig. 1A).

    Extracts ``scales`` square patches centred at l, the k-th of side ``patch_size · scale_factor^k``,
    and shrinks each to ``patch_size × patch_size`` by averaging ``scale_factor^k`` × ``scale_factor^k``
    pixel blocks: a high-resolution centre, lower resolution further away. Pixels outside the image
    read as 0. Implementation: one batched gather per scale (crop), then ``avg_pool2d`` (pool).
    Deviation: the paper does not say how patches are resized; block averaging is our choice (it
    requires an integer ``scale_factor``; the paper uses 2).

    Args:
        patch_size: g, side of every output patch (paper: 8 for MNIST, 12 for 60×60).
        scales: k, number of patches (paper: 1 for MNIST, 3 for 60×60).
        scale_factor: side ratio between consecutive patches (paper: 2).
    """

    def __init__(self, *, patch_size: int, scales: int, scale_factor: int = 2) -> None:
        super().__init__()
        if patch_size < 1 or scales < 1 or scale_factor < 1:
            raise ValueError(f"patch_size, scales, scale_factor must be >= 1: {patch_size}, {scales}, {scale_factor}")
        self.patch_size, self.scales, self.scale_factor = patch_size, scales, scale_factor

    @property
    def sizes(self) -> list[int]:
        """Side in input pixels of each of the k patches, smallest first."""
        return [self.patch_size * self.scale_factor**k for k in range(self.scales)]

    def forward(self, images: Tensor, locations: Tensor) -> Tensor:
        """images (B, C, H, W), locations (B, 2) in [-1, 1] -> patches (B, k, C, g, g)."""
        b, c, h, w = images.shape
        pixels = images.flatten(2)  # (B, C, H·W)
        patches = []
        for size in self.sizes:
            top_left = patch_corners(locations, size=size, height=h, width=w)  # (B, 2)
            offsets = torch.arange(size, device=images.device)  # (S,)
            rows, cols = top_left[:, :1] + offsets, top_left[:, 1:] + offsets  # (B, S) each
            inside = ((rows >= 0) & (rows < h))[:, :, None] & ((cols >= 0) & (cols < w))[:, None, :]  # (B, S, S)
            index = rows.clamp(0, h - 1)[:, :, None] * w + cols.clamp(0, w - 1)[:, None, :]  # (B, S, S)
            crop = pixels.gather(2, index.view(b, 1, -1).expand(b, c, -1)).view(b, c, size, size)  # (B, C, S, S)
            crop = crop * inside.unsqueeze(1).to(crop.dtype)  # zeros outside the image
            patches.append(F.avg_pool2d(crop, kernel_size=size // self.patch_size))  # (B, C, g, g)
        return torch.stack(patches, dim=1)  # (B, k, C, g, g)


class GlimpseNetwork(nn.Module):
    """Glimpse network f_g (Mnih et al. 2014, §4 "Glimpse network"):

        h_g = ReLU(Linear(ρ(x, l)))   h_l = ReLU(Linear(l))   g = ReLU(Linear(h_g) + Linear(h_l))

    Args:
        input_size: k·C·g·g, flattened sensor output. glimpse_hidden: |h_g| (paper: 128).
        location_hidden: |h_l| (paper: 128). output_size: |g| (paper: 256).
    """

    def __init__(self, *, input_size: int, glimpse_hidden: int, location_hidden: int, output_size: int) -> None:
        super().__init__()
        self.what = nn.Linear(input_size, glimpse_hidden)  # θ_g^0
        self.where = nn.Linear(2, location_hidden)  # θ_g^1
        self.what_out = nn.Linear(glimpse_hidden, output_size)  # θ_g^2 (two halves of one linear map)
        self.where_out = nn.Linear(location_hidden, output_size, bias=False)

    def forward(self, patches: Tensor, locations: Tensor) -> Tensor:
        """patches (B, k, C, g, g), locations (B, 2) -> glimpse feature g (B, output_size)."""
        h_g = F.relu(self.what(patches.flatten(1)))  # (B, glimpse_hidden)
        h_l = F.relu(self.where(locations))  # (B, location_hidden)
        return F.relu(self.what_out(h_g) + self.where_out(h_l))


def gaussian_log_prob(x: Tensor, mean: Tensor, std: float) -> Tensor:
    """log N(x; mean, std² I) summed over the last dim: (B, D), (B, D) -> (B,)."""
    z = (x - mean) / std
    return (-0.5 * z.pow(2) - math.log(std) - 0.5 * math.log(2 * math.pi)).sum(-1)


class LocationPolicy(nn.Module):
    """Location network f_l: π(l | h) = N(l; tanh(Linear(h)), σ² I) with fixed σ (Mnih et al. 2014, §4).

    Training samples l and returns log π(l | h) for REINFORCE (eq. 2); evaluation uses the mean.
    The sensor sees the sample clipped to [-1, 1]; the log-probability is that of the unclipped
    sample (clipping is part of the environment). Deviation: the paper does not squash the mean;
    tanh keeps it inside the image.

    Args:
        hidden_size: |h_t|. std: σ, fixed policy standard deviation in [-1, 1] units.
    """

    def __init__(self, *, hidden_size: int, std: float) -> None:
        super().__init__()
        if std <= 0:
            raise ValueError(f"std must be > 0, got {std}")
        self.mean = nn.Linear(hidden_size, 2)
        self.std = std

    def forward(self, h: Tensor, *, sample: bool) -> tuple[Tensor, Tensor]:
        """h (B, H) -> (location (B, 2) in [-1, 1], log π(l | h) (B,)); sampled l carries no gradient.

        Always float32, autocast or not: a bf16 mean is off by up to 2^-8 (a third of a pixel on a 60-pixel
        canvas, enough to move a patch corner), and the log-probability feeds REINFORCE's gradient."""
        with torch.autocast(h.device.type, enabled=False):
            mean = torch.tanh(self.mean(h.float()))  # (B, 2)
        raw = (mean + self.std * torch.randn_like(mean)).detach() if sample else mean.detach()
        return raw.clamp(-1.0, 1.0), gaussian_log_prob(raw, mean, self.std)


class RamOutput(NamedTuple):
    """logits (B, classes) after the last glimpse; locations (B, T, 2) as seen by the sensor;
    log_probs (B, T) log π(l_t | h_t); baselines (B, T) b_t, the value predicted before glimpse t."""

    logits: Tensor
    locations: Tensor
    log_probs: Tensor
    baselines: Tensor


class RecurrentAttention(nn.Module):
    """The recurrent attention model (Mnih et al. 2014, Fig. 1C), unrolled for T glimpses:

        l_t ~ π(· | h_t)         b_t = Linear(h_t)         (h_0 = 0, so l_0 is a learned start)
        g_{t+1} = f_g(ρ(x, l_t), l_t)     h_{t+1} = f_h(h_t, g_{t+1})     logits = f_a(h_T)

    Hybrid training (§3.2): the cross-entropy of f_a reaches f_a, f_h and f_g; the policy f_l and
    the baseline read h_t detached, so f_l is trained by REINFORCE only and b_t by its MSE only.
    Deviation: the core is a cell arm resolved through ``lit_models.registries.CELLS``; the
    paper's core is a rectifier RNN, ``rnn`` here is the tanh Elman cell, LSTM is the usual choice
    of reimplementations (and the paper's for its dynamic environments).

    Wired by ``builders.build_ram``.

    Args:
        sensor: ρ, a :class:`GlimpseSensor`. glimpse: f_g, a :class:`GlimpseNetwork`. core: f_h, a
        cell's step module (``CellSpec.step``): (h, c) -> (h, c). policy: f_l, a :class:`LocationPolicy`.
        baseline: b_t, Linear(|h_t|, 1). classifier: f_a, Linear(|h_t|, classes) (softmax in the loss).
        glimpses: T.
    """

    def __init__(
        self,
        *,
        sensor: GlimpseSensor,
        glimpse: GlimpseNetwork,
        core: nn.Module,
        policy: LocationPolicy,
        baseline: nn.Linear,
        classifier: nn.Linear,
        glimpses: int,
    ) -> None:
        super().__init__()
        if glimpses < 1:
            raise ValueError(f"glimpses must be >= 1, got {glimpses}")
        self.glimpses, self.hidden_size = glimpses, classifier.in_features
        self.sensor, self.glimpse, self.core, self.policy = sensor, glimpse, core, policy
        self.baseline, self.classifier = baseline, classifier

    def forward(self, images: Tensor, *, sample: bool) -> RamOutput:
        """images (B, C, H, W) -> :class:`RamOutput`; ``sample``: draw locations (training) or use the mean."""
        b = images.size(0)
        h = images.new_zeros(b, self.hidden_size)  # (B, H)
        c = images.new_zeros(b, self.core.cell_state_size)  # (B, H) for LSTMs, (B, 0) otherwise
        locations, log_probs, baselines = [], [], []
        for _ in range(self.glimpses):
            loc, log_prob = self.policy(h.detach(), sample=sample)  # (B, 2), (B,)
            baselines.append(self.baseline(h.detach()).squeeze(-1))  # (B,)
            g = self.glimpse(self.sensor(images, loc), loc)  # (B, glimpse_size)
            h, c = self.core(g, h, c)
            locations.append(loc)
            log_probs.append(log_prob)
        return RamOutput(self.classifier(h), torch.stack(locations, 1), torch.stack(log_probs, 1),
                         torch.stack(baselines, 1))
