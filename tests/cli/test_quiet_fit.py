"""A fit prints nothing from its libraries unless something is wrong (issue #44).

The newcomer's case: no ``WANDB_MODE`` and no W&B credentials, so wandb itself decides the run is offline. Each
line below was printed by every such fit: wandb's "changes to your wandb environment variables will be ignored"
(Lightning set ``WANDB_MODE`` after wandb had read its settings), torch's ``LeafSpec`` deprecation (from
Lightning's own pytree copy), Lightning's "``weights_only`` was not set" (our own ``trainer.save_checkpoint``
calls), and W&B's end-of-run history and summary block. A fit too short to validate says so in one line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).parents[2]
TINY = ["--config", str(REPO / "ablations/configs/transformer_reverse.yaml"), "--trainer.enable_progress_bar=false",
        "--model.d_model=16", "--model.heads=2", "--model.d_ff=32", "--model.encoder_layers=1",
        "--model.decoder_layers=1", "--data.train_size=64", "--data.val_size=16", "--data.batch_size=16"]
NOISE = ("Changes to your `wandb` environment variables", "LeafSpec", "weights_only", "Run history:",
         "Run summary:", "never logged", "could not find the monitored key", "Traceback")


def _fit(tmp_path: Path, name: str, *args: str) -> str:
    """stdout + stderr of a fit in ``tmp_path`` with wandb deciding its mode and finding no credentials."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(HOME=str(tmp_path), NETRC=str(tmp_path / "no-netrc"), OMP_NUM_THREADS="1",
               PYTHONPATH=f"{REPO}{os.pathsep}{env.get('PYTHONPATH', '')}")
    proc = subprocess.run([sys.executable, "-m", "attnlab", "fit", *TINY, f"--run.name={name}", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def test_a_fit_prints_no_library_noise_and_keeps_its_model_artifact_offline(tmp_path):
    from tests.cli.wandb_records import complete_records

    out = _fit(tmp_path, "quiet", "--trainer.max_steps=4", "--trainer.val_check_interval=2", "--run.log_model=true")
    assert [line for line in out.splitlines() if any(n in line for n in NOISE)] == [], out
    assert "offline-run-" in out, "where the offline run lies is still said"
    (log,) = (tmp_path / "runs/transformer_reverse/quiet/wandb").glob("offline-run-*/run-*.wandb")
    artifacts = [r.artifact for r in complete_records(log) if r.WhichOneof("record_type") == "artifact"]
    assert [a.type for a in artifacts] == ["model"], "--run.log_model offline: `wandb sync` uploads the checkpoint"


def test_a_fit_too_short_to_validate_says_so(tmp_path):
    out = _fit(tmp_path, "short", "--trainer.max_epochs=1", "--data.train_size=16", "--trainer.log_every_n_steps=1",
               "--trainer.check_val_every_n_epoch=2")
    assert [line for line in out.splitlines() if any(n in line for n in NOISE)] == [], out
    assert "no validation ran: the fit stopped at step 1" in out
