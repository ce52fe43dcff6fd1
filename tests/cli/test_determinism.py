"""The same seed on CPU gives identical metrics twice (dropout, shuffling, initialisation included)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import torch

from attnlab_run.cli import main

CONFIG = str(Path(__file__).parents[2] / "ablations" / "configs" / "transformer_reverse.yaml")
TINY = ["--data.init_args.train_size=96", "--data.init_args.val_size=16", "--data.init_args.test_size=8",
        "--data.init_args.batch_size=16", "--model.init_args.d_model=16", "--model.init_args.d_ff=32",
        "--model.init_args.encoder_layers=1", "--model.init_args.decoder_layers=1", "--trainer.max_epochs=2",
        "--trainer.log_every_n_steps=2", "--trainer.enable_progress_bar=false", "--seed_everything=3"]


def _fit(root: Path, name: str) -> Path:
    main(["fit", "--config", CONFIG, f"--run.root={root}", f"--run.name={name}", *TINY])
    return root / "transformer_reverse" / name


def test_same_seed_same_metrics_twice(tmp_path):
    a, b = _fit(tmp_path, "a"), _fit(tmp_path, "b")
    rows_a = list(csv.DictReader((a / "metrics.csv").open()))
    rows_b = list(csv.DictReader((b / "metrics.csv").open()))
    assert rows_a == rows_b and any(r.get("train/loss") for r in rows_a) and any(r.get("val/loss") for r in rows_a)
    metrics_a = json.loads((a / "summary.json").read_text())["metrics"]
    metrics_b = json.loads((b / "summary.json").read_text())["metrics"]
    assert metrics_a == metrics_b
    weights_a = torch.load(a / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    weights_b = torch.load(b / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    assert all(torch.equal(weights_a[k], weights_b[k]) for k in weights_a)
