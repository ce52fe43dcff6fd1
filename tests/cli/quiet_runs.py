"""A fixture for in-process CLI tests: W&B off, no inherited run id, and no run directory or resume decision left
exported for the next test (the CLI exports ``ATTNLAB_RUN_DIR`` and ``ATTNLAB_RESUME_CKPT`` for its DDP children)."""

import os

import pytest


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.delenv("WANDB_RUN_ID", raising=False)
    yield
    os.environ.pop("ATTNLAB_RUN_DIR", None)
    os.environ.pop("ATTNLAB_RESUME_CKPT", None)
