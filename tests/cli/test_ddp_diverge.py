"""A loss that turns non-finite on one DDP rank ends the fit as ``diverged`` on every rank (issue #43, item 2).

Rank 1 alone gets a NaN loss at step 1 (``attnlab_run.fault_injection.NonFiniteAt``). Every rank must agree
that the run diverged and still take part in the gradient all-reduce: a rank that skips its backward
alone (or raises, as Lightning does when a DDP ``training_step`` returns None) leaves the others waiting
in the all-reduce until gloo's 30-minute timeout. Rank 0's loss stayed finite, so its summary saying
``diverged`` at step 1 shows the decision reached it.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml
from test_ddp import REPO, _attnlab

from attnlab_run.guards import DIVERGED_EXIT
from tests.tiny_fit import tiny_fit

TINY = tiny_fit(seed=3, max_epochs=2, task="copy", vocab_size=8, min_len=1, max_len=5, train_size=16, val_size=4,
                test_size=4, batch_size=4)
INJECT = {"class_path": "attnlab_run.fault_injection.NonFiniteAt", "init_args": {"step": 1, "rank": 1}}


@pytest.mark.ddp
def test_non_finite_loss_on_one_rank_ends_both_ranks_diverged(tmp_path):
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump({**TINY, "trainer": {**TINY["trainer"], "callbacks": [INJECT]}}))
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    env.pop("ATTNLAB_RUN_DIR", None)
    cmd = [*_attnlab(), "fit", "--config", str(config), f"--run.root={tmp_path}", "--run.experiment=ddp",
           "--trainer.devices=2", "--trainer.strategy=ddp"]
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=90)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"the ranks hung after one rank's loss turned non-finite: {(err.stderr or b'')[-2000:]!r}")
    assert proc.returncode == DIVERGED_EXIT, proc.stderr[-3000:]
    (summary,) = tmp_path.glob("ddp/*/summary.json")
    record = json.loads(summary.read_text())
    assert (record["status"], record["diverged_at"]) == ("diverged", 1)
