"""Every config in ablations/configs runs one training step and one validation step through the CLI."""

from pathlib import Path

import pytest

from attnlab_run.cli import main
from tests.datamodules.real_data import real_data_args, require_package

CONFIGS = sorted((Path(__file__).parents[2] / "ablations" / "configs").glob("*.yaml"))
FIXTURES = Path(__file__).parents[1] / "fixtures"
SMALL_DATA = ["--data.init_args.train_size=64", "--data.init_args.val_size=8", "--data.init_args.test_size=8"]


def _overrides(config: Path, tmp_path: Path) -> list[str]:
    """Extra args from tests/fixtures/config_overrides/<stem>.args (configs that name a downloaded corpus or
    installed data)."""
    path = FIXTURES / "config_overrides" / f"{config.stem}.args"
    if not path.is_file():
        return []
    lines = [ln.strip() for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    sword = None
    if any("{sword}" in ln for ln in lines):  # a tiny SWORD library (Bible configs); the reader needs pysword
        require_package("pysword")  # the config reads SWORD modules with pysword
        from tests.datamodules.sword_fixture import tiny_library

        sword = tiny_library(tmp_path / "sword")
    return [ln.format(fixtures=FIXTURES, tmp_path=tmp_path, sword=sword) for ln in lines]


def test_configs_exist():
    assert CONFIGS, "ablations/configs is empty"


@pytest.mark.parametrize("config", CONFIGS, ids=[c.stem for c in CONFIGS])
def test_config_fast_dev_run(config, tmp_path):
    main(["fit", "--config", str(config), "--trainer.fast_dev_run=1", "--trainer.accelerator=cpu",
          "--trainer.devices=1", f"--run.root={tmp_path}", "--data.init_args.batch_size=8", *SMALL_DATA,
          *_overrides(config, tmp_path), *real_data_args(config.stem, tmp_path)])
    runs = list(tmp_path.glob("*/*/summary.json"))
    assert len(runs) == 1
    assert '"status": "smoke"' in runs[0].read_text(), "a fast_dev_run is a smoke check, not a finished run"
