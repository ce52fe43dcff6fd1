"""The shared AdamW builder (issue #17): fused on CPU, the same updates as torch's foreach AdamW, bf16
weights, every family's ``configure_optimizers`` uses it, and Lightning's clipping under mixed precision
still works (it refuses fused optimizers there)."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import lightning as L
import pytest
import torch
from torch import nn

from lit_models.training.optim import adamw, module_adamw
from tests.models.test_protocols import FAMILIES

HP = dict(lr=1e-2, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.1)


def _net(dtype: torch.dtype = torch.float32) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)).to(dtype)


def _train(net: nn.Module, opt: torch.optim.Optimizer, steps: int = 6) -> list[float]:
    """``steps`` AdamW steps on a fixed regression batch; the losses before each step."""
    g = torch.Generator().manual_seed(1)
    dtype = next(net.parameters()).dtype
    x, y = torch.randn(32, 8, generator=g).to(dtype), torch.randn(32, 4, generator=g).to(dtype)
    losses = []
    for _ in range(steps):
        loss = (net(x).float() - y.float()).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


def test_fused_updates_match_torch_foreach_adamw():
    """Six fp32 steps: the fused builder's weights equal torch.optim.AdamW(foreach)'s to float rounding,
    and both moved far further than that tolerance (so the comparison is not vacuous)."""
    ours, ref = _net(), _net()
    start = copy.deepcopy(ref.state_dict())
    opt = adamw(ours.parameters(), **HP)
    assert opt.defaults["fused"] is True
    _train(ours, opt)
    _train(ref, torch.optim.AdamW(ref.parameters(), foreach=True, **HP))
    for (name, a), b in zip(ours.state_dict().items(), ref.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5, msg=name)
        assert (a - start[name]).abs().max() > 1e-2, name


def test_bf16_weights_train_with_the_fused_optimizer():
    """bf16-true: weights and moments stay bf16, the fused step runs, the loss falls like fp32's."""
    net = _net(torch.bfloat16)
    opt = adamw(net.parameters(), **HP)
    assert opt.defaults["fused"] is True
    losses = _train(net, opt, steps=30)
    ref = _net()
    fp32 = _train(ref, adamw(ref.parameters(), **HP), steps=1)
    assert all(p.dtype == torch.bfloat16 for p in net.parameters())
    assert all(s["exp_avg"].dtype == torch.bfloat16 for s in opt.state.values())
    assert losses[0] == pytest.approx(fp32[0], rel=0.02)
    assert losses[-1] < 0.8 * losses[0], losses


def test_unsupported_device_falls_back_to_foreach():
    meta = nn.Linear(4, 4, device="meta")
    opt = adamw(meta.parameters(), lr=1e-3)
    assert not opt.defaults["fused"] and opt.defaults["foreach"] is True
    assert adamw(_net().parameters(), lr=1e-3, fused=False).defaults["foreach"] is True


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_optimizer_is_fused_adamw_on_cpu(family):
    module = FAMILIES[family][0]()
    conf = module.configure_optimizers()
    opt = conf["optimizer"] if isinstance(conf, dict) else conf
    assert isinstance(opt, torch.optim.AdamW) and opt.defaults["fused"] is True, family
    assert len(opt.param_groups[0]["params"]) == len(list(module.parameters()))


@pytest.mark.parametrize(("precision", "clip", "fused"), [
    ("32-true", 1.0, True), ("bf16-true", 1.0, True), ("bf16-mixed", 0.0, True), ("bf16-mixed", 1.0, False),
    ("16-mixed", 5.0, False),
])
def test_clipping_under_mixed_precision_is_unfused(precision, clip, fused):
    module = _net()
    module._trainer = SimpleNamespace(precision=precision, gradient_clip_val=clip)
    assert module_adamw(module, lr=1e-3).defaults["fused"] is fused


class _Tiny(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = _net()

    def training_step(self, batch, batch_idx):
        x, y = batch
        return (self.net(x).float() - y).pow(2).mean()

    def configure_optimizers(self):
        return module_adamw(self, lr=1e-3)


def test_lightning_clips_gradients_under_bf16_mixed(tmp_path):
    """Lightning raises for a fused optimizer with clipping under bf16-mixed; the builder avoids it."""
    data = torch.utils.data.TensorDataset(torch.randn(8, 8), torch.randn(8, 4))
    trainer = L.Trainer(accelerator="cpu", precision="bf16-mixed", gradient_clip_val=1.0, max_steps=2,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=tmp_path)
    model = _Tiny()
    trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=4))
    assert trainer.global_step == 2 and not trainer.optimizers[0].defaults["fused"]
