"""Every model family trains under 2-process CPU DDP (gloo) through the real CLI.

One config per family, shrunk by overrides: the run must finish (status ``finished``), create one
run directory with one ``last.ckpt``, and log finite validation metrics. The recurrent family runs
with hard attention, the case where a branch may leave parameters without gradients and where
REINFORCE sampling must differ per rank (pitfalls §3.6–3.7); so do the hard-attention captioner
and RAM, whose location policy is trained by REINFORCE. The Transformer runs with W&B offline
to check that only rank 0 creates a W&B run.
"""

from __future__ import annotations

import json
import math
import os
import subprocess

import pytest
from test_ddp import REPO, _attnlab

CONFIGS = REPO / "ablations" / "configs"
SMALL = ["--trainer.max_epochs=1", "--trainer.enable_progress_bar=false", "--trainer.log_every_n_steps=1",
         "--data.init_args.train_size=48", "--data.init_args.val_size=7", "--data.init_args.test_size=7",
         "--data.init_args.batch_size=8"]
FAMILIES = {
    "transformer": ("transformer_reverse", ["--model.init_args.d_model=16", "--model.init_args.d_ff=32"]),
    "recurrent_hard": ("rnn_reverse", ["--model.init_args.attention=hard", "--data.init_args.max_tokens=null",
                                       "--data.init_args.max_len=8"]),
    "regressor": ("adding", ["--data.init_args.seq_len=20"]),
    "classifier": ("sentiment_lstm_attention", ["--model.init_args.hidden_size=16"]),
    "captioner_hard": ("caption_hard", []),
    "ram": ("ram_translated", []),
}


@pytest.mark.ddp
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_trains_under_two_process_ddp(family, tmp_path):
    config, extra = FAMILIES[family]
    wandb = "offline" if family == "transformer" else "disabled"
    env = {**os.environ, "WANDB_MODE": wandb, "OMP_NUM_THREADS": "1", "WANDB_SILENT": "true"}
    env.pop("ATTNLAB_RUN_DIR", None)
    cmd = [*_attnlab(), "fit", "--config", str(CONFIGS / f"{config}.yaml"), f"--run.root={tmp_path}",
           "--run.experiment=ddp", "--trainer.devices=2", "--trainer.strategy=ddp", *SMALL, *extra]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]

    runs = sorted(p.parent for p in tmp_path.glob("ddp/*/summary.json"))
    assert len(runs) == 1, f"expected one run directory, got {[p.name for p in (tmp_path / 'ddp').iterdir()]}"
    summary = json.loads((runs[0] / "summary.json").read_text())
    assert summary["status"] == "finished"
    val = {k: v for k, v in summary["metrics"].items() if k.startswith("val/")}
    assert val and all(math.isfinite(v) for v in val.values()), val
    assert (runs[0] / "checkpoints" / "last.ckpt").is_file()
    if wandb == "offline":
        wandb_runs = list(runs[0].glob("wandb/offline-run-*"))
        assert len(wandb_runs) == 1, f"W&B must log from rank 0 only: {wandb_runs}"
