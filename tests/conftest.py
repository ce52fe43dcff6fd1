"""Test-wide settings: no network, no W&B server, quiet Lightning, CPU only."""

import os

os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("JSONARGPARSE_DEPRECATION_WARNINGS", "off")
os.environ["CUDA_VISIBLE_DEVICES"] = ""

import torch  # noqa: E402

# Two cores shared by everything: one intra-op thread keeps small-tensor tests fast and predictable.
torch.set_num_threads(1)
