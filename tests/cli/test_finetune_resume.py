"""A run with the fine-tune at the extended length (``--data.finetune_steps``) stopped by SIGTERM inside its tail and
resumed with ``--ckpt_path last`` ends with the weights (bit-exact) and steps of the same run uninterrupted: which
batches are the fine-tune's depends on (epoch, index, run length) only, so the resumed epoch skips and draws the
same ones (``attnlab_run.faults.skip_trained_batches``)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import torch

from attnlab_run.cli import main

REPO = Path(__file__).parents[2]
CONFIG = str(REPO / "ablations" / "configs" / "lm_wikitext2.yaml")
FIXTURE = REPO / "tests" / "fixtures" / "lm" / "tiny.txt"
PLANNED = 16  # 2 epochs of 8 batches; the fine-tune is the last 5 (steps 12..16)
TINY = ["--data.source=file", f"--data.path={FIXTURE}", "--data.context=16", "--data.eval_contexts=[16,64]",
        "--data.vocab_size=40", "--data.train_size=32", "--data.val_size=4", "--data.test_size=4",
        "--data.batch_size=4", "--data.finetune_steps=5", "--model.d_model=16", "--model.heads=2", "--model.d_ff=32",
        "--model.layers=1", "--model.positions=rope", "--model.rope_scaling=linear", "--model.rope_factor=4",
        "--model.rope_train_len=16", "--trainer.max_epochs=2", "--trainer.enable_progress_bar=false",
        "--trainer.log_every_n_steps=1", "--run.figure_drawings=1"]


def _args(root: Path, name: str, *extra: str) -> list[str]:
    return ["fit", "--config", CONFIG, f"--run.root={root}", f"--run.name={name}", *TINY, *extra]


def _final(run: Path) -> tuple[int, dict[str, torch.Tensor]]:
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    return ckpt["global_step"], ckpt["state_dict"]


def test_a_stop_inside_the_fine_tune_resumes_to_the_uninterrupted_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    main(_args(tmp_path, "whole"))
    step, whole = _final(tmp_path / "lm_wikitext2" / "whole")
    assert step == PLANNED
    spec = {"class_path": "attnlab_run.fault_injection.SignalAt", "init_args": {"step": 13, "phase": "batch",
                                                                                 "signal": "TERM"}}
    with pytest.raises(SystemExit) as stopped:
        main(_args(tmp_path, "r", f"--trainer.callbacks+={json.dumps(spec)}"))
    assert stopped.value.code == 128 + signal.SIGTERM
    run = tmp_path / "lm_wikitext2" / "r"
    assert 13 <= _final(run)[0] < PLANNED  # stopped inside the fine-tune
    main(_args(tmp_path, "r", "--ckpt_path=last"))
    step, resumed = _final(run)
    assert step == PLANNED and json.loads((run / "summary.json").read_text())["status"] == "finished"
    for key, value in whole.items():
        assert torch.equal(value, resumed[key]), key
