"""Every path on the command line is checked before anything is created: a missing or unreadable
file, or a file that is not a checkpoint, is one line naming it, exit 2, and no run directory or
W&B run is left behind (W&B is offline here, so a W&B run would leave files under the root)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from attnlab_run.cli import main

REPO = Path(__file__).parents[2]
REVERSE = ["--config", str(REPO / "ablations" / "configs" / "transformer_reverse.yaml")]
SENTIMENT = ["--config", str(REPO / "ablations" / "configs" / "sentiment_lstm_attention.yaml")]


@pytest.fixture(autouse=True)
def _wandb_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb_dir"))
    monkeypatch.chdir(tmp_path)


def _refused(capsys, argv: list[str], root: Path) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, f"--run.root={root}"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("attnlab: error: "), err
    assert not root.exists(), f"a run directory was created: {list(root.rglob('*'))}"
    assert not (root.parent / "wandb_dir").exists() and not (root.parent / "wandb").exists(), "a W&B run was created"
    return lines[0]


@pytest.mark.parametrize("subcommand", ["test", "validate", "fit"])
def test_missing_checkpoint(tmp_path, capsys, subcommand):
    ckpt = tmp_path / "nowhere" / "checkpoints" / "best.ckpt"
    line = _refused(capsys, [subcommand, *REVERSE, f"--ckpt_path={ckpt}"], tmp_path / "runs")
    assert f"{ckpt}: no such checkpoint file" in line


@pytest.mark.parametrize("content", [b"not a checkpoint\n", b"", b"PK\x03\x04 truncated zip"])
def test_file_that_is_not_a_checkpoint(tmp_path, capsys, content):
    ckpt = tmp_path / "junk.ckpt"
    ckpt.write_bytes(content)
    line = _refused(capsys, ["test", *REVERSE, f"--ckpt_path={ckpt}"], tmp_path / "runs")
    assert f"{ckpt}: not a checkpoint" in line
    assert ckpt.read_bytes() == content


def test_torch_file_without_a_model_is_not_a_checkpoint(tmp_path, capsys):
    import torch

    ckpt = tmp_path / "tensor.ckpt"
    torch.save({"weights": torch.zeros(2)}, ckpt)
    line = _refused(capsys, ["test", *REVERSE, f"--ckpt_path={ckpt}"], tmp_path / "runs")
    assert f"{ckpt}: not a checkpoint" in line and "state_dict" in line


def test_checkpoint_path_is_a_directory(tmp_path, capsys):
    line = _refused(capsys, ["test", *REVERSE, f"--ckpt_path={tmp_path}"], tmp_path / "runs")
    assert f"{tmp_path}: is a directory, not a checkpoint file" in line


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads anything")
def test_unreadable_checkpoint(tmp_path, capsys):
    ckpt = tmp_path / "locked.ckpt"
    ckpt.write_bytes(b"x")
    ckpt.chmod(0)
    try:
        line = _refused(capsys, ["test", *REVERSE, f"--ckpt_path={ckpt}"], tmp_path / "runs")
    finally:
        ckpt.chmod(0o600)
    assert f"{ckpt}: not readable" in line


def test_missing_config_file(tmp_path, capsys):
    config = tmp_path / "nope.yaml"
    line = _refused(capsys, ["fit", "--config", str(config)], tmp_path / "runs")
    assert str(config) in line and "does not exist" in line


@pytest.mark.parametrize("key", ["train_path", "test_path"])
def test_missing_data_file(tmp_path, capsys, key):
    missing = tmp_path / "no_such.tsv"
    line = _refused(capsys, ["fit", *SENTIMENT, "--data.init_args.source=files", f"--data.init_args.{key}={missing}",
                             f"--data.init_args.data_dir={tmp_path}/data"], tmp_path / "runs")
    assert f"--data.{key}={missing}: no such file" in line
    assert not (tmp_path / "data").exists()


def test_data_folder_that_is_a_file(tmp_path, capsys):
    blocker = tmp_path / "blocker"
    blocker.write_text("keep me\n")
    line = _refused(capsys, ["fit", *SENTIMENT, f"--data.init_args.data_dir={blocker}/data"], tmp_path / "runs")
    assert f"--data.data_dir={blocker}/data: cannot create it, {blocker} is not a directory" in line
    assert blocker.read_text() == "keep me\n"
