"""RAM blocks: the glimpse sensor against a naive crop loop, the policy's log-probability against
torch.distributions, the REINFORCE estimator against the exact gradient, and gradient routing."""

import math
import typing

import pytest
import torch

from lit_models.axes import Cell
from lit_models.blocks.glimpse_net import GlimpseSensor, LocationPolicy, RamOutput, RecurrentAttention
from lit_models.builders import build_ram
from lit_models.families.glimpse import hybrid_loss
from lit_models.specs import RamSpec


def naive_glimpse(image: torch.Tensor, x: float, y: float, *, patch: int, scales: int, factor: int) -> torch.Tensor:
    """The sensor written as loops from the paper's description: for each scale a square of side
    patch·factor^k centred at (x, y), zero outside the image, shrunk by averaging factor^k blocks."""
    c, h, w = image.shape
    out = []
    for k in range(scales):
        size = patch * factor**k
        top = math.floor((y + 1) / 2 * h - size / 2 + 0.5)
        left = math.floor((x + 1) / 2 * w - size / 2 + 0.5)
        crop = torch.zeros(c, size, size, dtype=torch.float64)
        for i in range(size):
            for j in range(size):
                if 0 <= top + i < h and 0 <= left + j < w:
                    crop[:, i, j] = image[:, top + i, left + j]
        block = factor**k
        small = torch.zeros(c, patch, patch, dtype=torch.float64)
        for i in range(patch):
            for j in range(patch):
                small[:, i, j] = crop[:, i * block:(i + 1) * block, j * block:(j + 1) * block].mean(dim=(1, 2))
        out.append(small)
    return torch.stack(out)  # (k, C, g, g)


@pytest.mark.parametrize(("patch", "scales", "factor"), [(4, 3, 2), (3, 2, 3), (5, 1, 2)])
def test_sensor_matches_naive_crop(patch, scales, factor):
    gen = torch.Generator().manual_seed(0)
    images = torch.rand(5, 2, 17, 23, generator=gen, dtype=torch.float64)
    locations = torch.rand(5, 2, generator=gen, dtype=torch.float64) * 2 - 1
    locations[0] = torch.tensor([-1.0, -1.0])  # corner: three quarters of every patch off the image
    locations[1] = torch.tensor([1.0, 0.3])
    got = GlimpseSensor(patch_size=patch, scales=scales, scale_factor=factor)(images, locations)
    assert got.shape == (5, scales, 2, patch, patch)
    for b in range(5):
        want = naive_glimpse(images[b], float(locations[b, 0]), float(locations[b, 1]), patch=patch, scales=scales,
                             factor=factor)
        torch.testing.assert_close(got[b], want)


def test_sensor_coordinates_are_x_then_y():
    image = torch.zeros(1, 1, 20, 40)
    image[0, 0, 2, 35] = 1.0  # top right: x near +1, y near -1
    sensor = GlimpseSensor(patch_size=4, scales=1)
    hit = sensor(image, torch.tensor([[35.5 / 20 - 1, 2.5 / 10 - 1]]))
    miss = sensor(image, torch.tensor([[2.5 / 10 - 1, 35.5 / 20 - 1]]))
    assert hit.sum() == 1.0 and miss.sum() == 0.0


def test_policy_log_prob_matches_torch_normal():
    policy = LocationPolicy(hidden_size=8, std=0.2)
    h = torch.randn(64, 8)
    torch.manual_seed(1)
    locations, log_prob = policy(h, sample=True)
    torch.manual_seed(1)
    noise = torch.randn(64, 2)  # the policy's only draw
    mean = torch.tanh(policy.mean(h))
    raw = mean + 0.2 * noise
    want = torch.distributions.Normal(mean, 0.2).log_prob(raw).sum(-1)  # of the unclipped sample
    torch.testing.assert_close(log_prob, want)
    torch.testing.assert_close(locations, raw.clamp(-1, 1).detach())
    assert log_prob.requires_grad and not locations.requires_grad


def test_policy_evaluation_uses_the_mean():
    policy = LocationPolicy(hidden_size=4, std=0.3)
    h = torch.randn(8, 4)
    a, _ = policy(h, sample=False)
    b, _ = policy(h, sample=False)
    torch.testing.assert_close(a, torch.tanh(policy.mean(h)).detach())
    torch.testing.assert_close(a, b)


def test_reinforce_estimate_matches_exact_gradient():
    """1-D Gaussian policy a ~ N(μ, σ²), reward R = 1[a > 0] (correct iff a > 0, as in RAM).

    E[R] = Φ(μ/σ), so dE[R]/dμ = φ(μ/σ)/σ; the surrogate's gradient must average to its negative."""
    torch.manual_seed(0)
    n, mu0, sigma = 200_000, 0.3, 0.5
    mu = torch.tensor([mu0], requires_grad=True)
    a = (mu + sigma * torch.randn(n)).detach()  # (N,)
    log_prob = torch.distributions.Normal(mu, sigma).log_prob(a)  # (N,)
    logits = torch.stack([-a, a], dim=1)  # class 1 wins iff a > 0
    out = RamOutput(logits, a[:, None, None].expand(n, 1, 2), log_prob[:, None], torch.full((n, 1), 0.5))
    loss = hybrid_loss(out, torch.ones(n, dtype=torch.long), reinforce_weight=1.0)
    loss.policy.backward()
    z = mu0 / sigma
    exact = math.exp(-z * z / 2) / math.sqrt(2 * math.pi) / sigma  # 0.666
    assert abs(-float(mu.grad) - exact) < 0.02  # ~9 standard errors
    assert abs(float(loss.reward.mean()) - 0.5 * (1 + math.erf(z / math.sqrt(2)))) < 0.01


def _net(cell: Cell = "lstm", glimpses: int = 3) -> RecurrentAttention:
    return build_ram(RamSpec(in_channels=1, glimpses=glimpses, patch_size=4, scales=2, scale_factor=2,
                             glimpse_hidden=16, location_hidden=8, glimpse_size=16, hidden_size=12, cell=cell, std=0.2),
                     num_classes=10)


@pytest.mark.parametrize("cell", typing.get_args(Cell))
def test_every_core_cell_runs(cell):
    out = _net(cell)(torch.rand(2, 1, 20, 20), sample=True)
    assert out.logits.shape == (2, 10)
    assert out.locations.shape == (2, 3, 2) and out.log_probs.shape == (2, 3) and out.baselines.shape == (2, 3)


def test_gradient_routing_of_the_hybrid_loss():
    """CE never reaches the policy or the baseline (they read h detached); REINFORCE reaches only the policy."""
    torch.manual_seed(0)
    net = _net()
    out = net(torch.rand(4, 1, 20, 20), sample=True)
    out.logits.logsumexp(-1).sum().backward(retain_graph=True)
    assert net.policy.mean.weight.grad is None and net.baseline.weight.grad is None
    assert net.glimpse.what.weight.grad.abs().sum() > 0
    net.zero_grad(set_to_none=True)
    out.log_probs.sum().backward()
    assert net.policy.mean.weight.grad.abs().sum() > 0
    assert net.classifier.weight.grad is None and net.glimpse.what.weight.grad is None


def test_sampling_only_in_training_mode_calls():
    net = _net()
    images = torch.rand(3, 1, 20, 20)
    a, b = net(images, sample=False), net(images, sample=False)
    torch.testing.assert_close(a.logits, b.logits)
    torch.testing.assert_close(a.locations, b.locations)
    assert not torch.equal(net(images, sample=True).locations, net(images, sample=True).locations)
