"""BatchNorm under DDP (issue #43, item 6): the captioner's ``small_cnn`` trains its BatchNorm layers, so under
multi-GPU DDP they become SyncBatchNorm (global-batch statistics); one process, CPU (gloo) DDP (torch's
SyncBatchNorm runs on accelerators only) and a frozen backbone keep plain BatchNorm."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from lit_models.families.captioner import ShowAttendTell


def captioner(**kw) -> ShowAttendTell:
    return ShowAttendTell(tgt_vocab_size=12, encoder="small_cnn", weights=None, **kw)


def configured(model: ShowAttendTell, *, world_size: int, device: str) -> ShowAttendTell:
    trainer = SimpleNamespace(world_size=world_size, strategy=SimpleNamespace(root_device=torch.device(device)))
    model.__dict__["_trainer"] = trainer  # what Trainer.fit attaches, without a process group
    model.configure_model()
    return model


def kinds(model: nn.Module) -> set[type]:
    return {type(m) for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)}


def test_multi_gpu_ddp_synchronises_the_trained_batchnorm() -> None:
    model = configured(captioner(fine_tune=True), world_size=4, device="cuda")
    keys = set(captioner(fine_tune=True).state_dict())
    assert kinds(model) == {nn.SyncBatchNorm} and set(model.state_dict()) == keys
    model.configure_model()
    assert kinds(model) == {nn.SyncBatchNorm}, "converted once"


@pytest.mark.parametrize(("world_size", "device"), [(1, "cuda"), (2, "cpu")])
def test_one_process_and_cpu_ddp_keep_batchnorm(world_size: int, device: str) -> None:
    assert kinds(configured(captioner(fine_tune=True), world_size=world_size, device=device)) == {nn.BatchNorm2d}
