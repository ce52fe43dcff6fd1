"""Device-agnostic code (issue #43, item 8): every config trains, decodes, probes and scores with the default
device set to ``meta`` (``tests/models/meta_device.py``); a tensor factory without ``device=`` in any of them
would make a meta tensor beside the CPU ones and fail (on a GPU it would be a CPU tensor beside CUDA ones)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attnlab_run.cli import main
from tests.configs.test_configs import CONFIGS, SMALL_DATA, _overrides
from tests.datamodules.real_data import real_data_args

META = '{"class_path": "tests.models.meta_device.MetaDefault"}'


@pytest.mark.parametrize("config", CONFIGS, ids=[c.stem for c in CONFIGS])
def test_config_runs_with_the_default_device_meta(config: Path, tmp_path: Path) -> None:
    try:
        main(["fit", "--config", str(config), "--trainer.fast_dev_run=1", "--trainer.accelerator=cpu",
              "--trainer.devices=1", f"--run.root={tmp_path}", "--data.init_args.batch_size=4", *SMALL_DATA,
              f"--trainer.callbacks+={META}", *_overrides(config, tmp_path), *real_data_args(config.stem, tmp_path)])
    finally:
        torch.set_default_device(None)
    (summary,) = tmp_path.glob("*/*/summary.json")
    assert '"status": "smoke"' in summary.read_text()
