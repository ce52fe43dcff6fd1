"""Faults cost minutes, not runs: atomic checkpoint writes, RNG states, preemption (SIGTERM / SIGUSR1)
and exact resume. The SIGKILL acceptance and the subprocess preemption checks are in
``test_faults_slow.py`` (``pytest -m slow``)."""

from __future__ import annotations

import csv
import json
import os
import random
import signal
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import pytest
import torch

import attnlab_run.command as command
from attnlab_run.cli import main
from attnlab_run.faults import AtomicCheckpointIO, RngState

CONFIG = str(Path(__file__).parents[2] / "ablations" / "configs" / "transformer_reverse.yaml")
TINY = ["--data.init_args.train_size=128", "--data.init_args.val_size=8", "--data.init_args.test_size=8",
        "--data.init_args.batch_size=16", "--model.init_args.d_model=16", "--model.init_args.d_ff=32",
        "--model.init_args.encoder_layers=1", "--model.init_args.decoder_layers=1",
        "--trainer.enable_progress_bar=false", "--trainer.max_epochs=2"]  # 8 steps per epoch, 16 planned


def _fit(root: Path, name: str, *extra: str) -> Path:
    main(["fit", "--config", CONFIG, f"--run.root={root}", f"--run.name={name}", *TINY, *extra])
    return root / "transformer_reverse" / name


def _logged_steps(run: Path) -> list[int]:
    with (run / "metrics.csv").open(newline="") as f:
        return [int(row["step"]) for row in csv.DictReader(f)]


def test_atomic_save_keeps_the_previous_checkpoint_when_a_save_fails(tmp_path, monkeypatch):
    path = tmp_path / "last.ckpt"
    io = AtomicCheckpointIO()
    io.save_checkpoint({"global_step": 1, "w": torch.ones(3)}, path)

    def crash_midway(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        f.write(b"PK\x03\x04 half a zip")  # a partial file, then the process "dies"
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", crash_midway)
    with pytest.raises(OSError, match="disk full"):
        io.save_checkpoint({"global_step": 2, "w": torch.zeros(3)}, path)
    monkeypatch.undo()
    ckpt = torch.load(path, weights_only=True)
    assert ckpt["global_step"] == 1 and torch.equal(ckpt["w"], torch.ones(3))
    assert [p.name for p in tmp_path.iterdir()] == ["last.ckpt"], "no temporary file may be left behind"


def test_rng_state_round_trips_through_a_weights_only_checkpoint(tmp_path):
    callback = RngState()
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    torch.save({"rng": callback.state_dict()}, tmp_path / "rng.pt")
    expected = (random.random(), float(np.random.rand()), torch.rand(3))
    random.seed(2), np.random.seed(2), torch.manual_seed(2)
    callback.apply(torch.load(tmp_path / "rng.pt", weights_only=True)["rng"])
    got = (random.random(), float(np.random.rand()), torch.rand(3))
    assert got[:2] == expected[:2] and torch.equal(got[2], expected[2])


class _SignalAt(L.Callback):
    """Sends ``sig`` to this very process after optimizer step ``step`` (a real signal delivery)."""

    def __init__(self, step: int, sig: int) -> None:
        self.step, self.sig = step, sig

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if trainer.global_step == self.step:
            os.kill(os.getpid(), self.sig)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGUSR1], ids=["SIGTERM", "SIGUSR1"])
def test_preemption_saves_last_marks_summary_exits_nonzero_and_resumes(tmp_path, monkeypatch, capsys, sig):
    original = command._fault_callbacks
    monkeypatch.setattr(command, "_fault_callbacks",
                        lambda run_dir, opts: [*original(run_dir, opts), _SignalAt(5, sig)])
    found = signal.getsignal(sig)  # what the fit must put back (another test may have left its own)
    with pytest.raises(SystemExit) as exit_info:
        _fit(tmp_path, "p", "--trainer.log_every_n_steps=2")
    assert exit_info.value.code == 128 + sig
    assert "attnlab: preempted" in capsys.readouterr().err
    run = tmp_path / "transformer_reverse" / "p"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "preempted" and summary["exit_code"] == 128 + sig
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["global_step"] in (5, 6), "stops at the end of the step that got the signal, or the next one"
    assert "RngState" in ckpt["callbacks"] and ckpt["optimizer_states"] and ckpt["lr_schedulers"]
    assert signal.getsignal(sig) == found, "handlers must be restored"
    steps_before = _logged_steps(run)
    assert steps_before, "train/loss rows were logged before the signal"

    monkeypatch.setattr(command, "_fault_callbacks", original)
    if sig == signal.SIGTERM:
        _fit(tmp_path, "p", "--ckpt_path=last")
    else:  # a W&B agent requeues the trial with the same WANDB_RUN_ID and the same command
        monkeypatch.setenv("WANDB_RUN_ID", "p")
        main(["fit", "--config", CONFIG, f"--run.root={tmp_path}", *TINY])
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["global_step"] == 16, summary
    assert "exit_code" not in summary
    steps_after = _logged_steps(run)
    assert steps_after[: len(steps_before)] == steps_before, "a resumed run appends to the log, never replaces it"
    assert max(steps_after) > max(steps_before)


def test_resume_at_an_epoch_boundary_is_exact(tmp_path):
    """Model, optimizer, scheduler step and RNG states (dropout!) continue exactly: 1 + 1 epochs
    with a restart in between end with the same weights as 2 epochs in one go."""
    whole = _fit(tmp_path, "whole")
    parts = _fit(tmp_path, "parts", "--trainer.max_epochs=1")
    saved = torch.load(parts / "checkpoints" / "last.ckpt", weights_only=True)
    assert saved["attnlab_progress"]["wall_time_s"] > 0
    saved["attnlab_progress"]["wall_time_s"] = 1e6  # marks the first segment's wall time in the summary's total
    torch.save(saved, parts / "checkpoints" / "last.ckpt")
    _fit(tmp_path, "parts", "--ckpt_path=last")
    a = torch.load(whole / "checkpoints" / "last.ckpt", weights_only=True)
    b = torch.load(parts / "checkpoints" / "last.ckpt", weights_only=True)
    assert a["global_step"] == b["global_step"] == 16
    for key, value in a["state_dict"].items():
        assert torch.equal(value, b["state_dict"][key]), key
    assert a["lr_schedulers"][0]["last_epoch"] == b["lr_schedulers"][0]["last_epoch"]
    whole_s, parts_s = (json.loads((run / "summary.json").read_text()) for run in (whole, parts))
    assert parts_s["tokens_seen"] == whole_s["tokens_seen"] > 0, "tokens seen before the restart carry over"
    assert 1e6 < parts_s["wall_time_s"] < 1e6 + 600, "so does the wall time: the summary holds the whole fit's"


def test_last_is_found_from_the_run_directory(tmp_path, capsys):
    """``--ckpt_path last`` reads ``<run>/checkpoints/last.ckpt`` (not a logger-versioned path), and
    without ``--run.name`` it is refused instead of silently starting a fresh run."""
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", CONFIG, f"--run.root={tmp_path}", "--ckpt_path=last", *TINY])
    assert exit_info.value.code == 2
    assert "--ckpt_path=last needs --run.name" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_checkpoints_go_through_the_atomic_writer(tmp_path, monkeypatch):
    seen: list[str] = []
    original = AtomicCheckpointIO.save_checkpoint

    def spy(self: AtomicCheckpointIO, checkpoint: dict, path: Any, storage_options: Any = None) -> None:
        seen.append(Path(path).name)
        original(self, checkpoint, path, storage_options)

    monkeypatch.setattr(AtomicCheckpointIO, "save_checkpoint", spy)
    _fit(tmp_path, "io", "--trainer.max_epochs=1", "--run.checkpoint_every_n_steps=4")
    assert "last.ckpt" in seen and "best.ckpt" in seen
    assert len([s for s in seen if s == "last.ckpt"]) >= 2, "every_n_steps refreshes last.ckpt during the epoch"


def test_slurm_sigusr1_requeues_through_lightning_and_saves_last(tmp_path, monkeypatch):
    """Under SLURM (auto-requeue on) SIGUSR1 still reaches Lightning's handler — it writes
    ``hpc_ckpt_1.ckpt`` and runs ``scontrol requeue <job>`` — and ours then stops the run with
    ``last.ckpt`` and exit 138; the requeued job (same command) continues from there."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scontrol = bin_dir / "scontrol"
    scontrol.write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path / 'scontrol.log'}\n")
    scontrol.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    slurm = {"SLURM_NTASKS": "1", "SLURM_NTASKS_PER_NODE": "1", "SLURM_JOB_NAME": "attnlab", "SLURM_JOB_ID": "4242",
             "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_NODELIST": "localhost"}
    for key, value in slurm.items():
        monkeypatch.setenv(key, value)
    original = command._fault_callbacks
    monkeypatch.setattr(command, "_fault_callbacks",
                        lambda run_dir, opts: [*original(run_dir, opts), _SignalAt(3, signal.SIGUSR1)])
    with pytest.raises(SystemExit) as exit_info:
        _fit(tmp_path, "slurm")
    assert exit_info.value.code == 128 + signal.SIGUSR1
    run = tmp_path / "transformer_reverse" / "slurm"
    assert (tmp_path / "scontrol.log").read_text().split() == ["requeue", "4242"]
    assert (run / "hpc_ckpt_1.ckpt").is_file() and (run / "checkpoints" / "last.ckpt").is_file()
    monkeypatch.setattr(command, "_fault_callbacks", original)
    _fit(tmp_path, "slurm")  # the requeued job runs the same command
    assert json.loads((run / "summary.json").read_text())["global_step"] == 16


def test_wandb_run_is_marked_preempting():
    from types import SimpleNamespace

    from lightning.pytorch.loggers import WandbLogger

    from attnlab_run.preemption import mark_wandb_preempting

    calls: list[str] = []
    logger = WandbLogger.__new__(WandbLogger)
    logger._experiment = SimpleNamespace(mark_preempting=lambda: calls.append("marked"))
    mark_wandb_preempting(SimpleNamespace(loggers=[logger]))
    assert calls == ["marked"]


def test_a_fresh_fit_sets_an_old_log_aside_instead_of_appending(tmp_path):
    from attnlab_run.rundir import set_aside_stale_log

    (tmp_path / "metrics.csv").write_text("step,train/loss\n1,9.0\n")
    (tmp_path / "metrics.prev1.csv").write_text("older\n")
    set_aside_stale_log(tmp_path)
    assert not (tmp_path / "metrics.csv").exists()
    assert (tmp_path / "metrics.prev2.csv").read_text() == "step,train/loss\n1,9.0\n"
    assert (tmp_path / "metrics.prev1.csv").read_text() == "older\n"


def _three_epoch_weights(run: Path) -> dict[str, Any]:
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    return {"step": ckpt["global_step"], "sched": ckpt["lr_schedulers"][0]["last_epoch"], "weights": ckpt["state_dict"]}


def _with_signal_at(original: Any, step: int) -> Any:
    return lambda run_dir, opts: [*original(run_dir, opts), _SignalAt(step, signal.SIGUSR1)]


@pytest.mark.parametrize("stop", ["every_n_steps", "preempted"])
def test_resuming_twice_from_epoch_end_checkpoints_never_replays_an_epoch(tmp_path, monkeypatch, stop):
    """Regression (#14: the SIGKILL acceptance run took 128 steps instead of 96). A ``last.ckpt``
    written at the end of an epoch's last batch (every-N-steps save with N dividing the epoch, or a
    preemption signal during that batch) resumed the epoch count wrong, so the *second* resume replayed
    an epoch. Epochs 1 | 2 | 3 in three processes must end where 3 epochs in one go end: 24 steps,
    same scheduler step and the same weights (bit-exact: dropout draws continue where they stopped)."""
    every = ["--run.checkpoint_every_n_steps=8"]  # 8 steps per epoch: every epoch end is an N-step save
    whole = _three_epoch_weights(_fit(tmp_path, "whole", "--trainer.max_epochs=3", *every))
    original = command._fault_callbacks
    for epoch in (1, 2):
        resume = ["--ckpt_path=last"] if epoch > 1 else []
        if stop == "every_n_steps":
            _fit(tmp_path, "parts", f"--trainer.max_epochs={epoch}", *every, *resume)
            continue
        monkeypatch.setattr(command, "_fault_callbacks", _with_signal_at(original, 8 * epoch))  # the epoch's last batch
        with pytest.raises(SystemExit):
            _fit(tmp_path, "parts", "--trainer.max_epochs=3", *every, *resume)
        monkeypatch.setattr(command, "_fault_callbacks", original)
    parts = _three_epoch_weights(_fit(tmp_path, "parts", "--trainer.max_epochs=3", *every, "--ckpt_path=last"))
    assert (parts["step"], parts["sched"]) == (whole["step"], whole["sched"]) == (24, 24)
    for key, value in whole["weights"].items():
        assert torch.equal(value, parts["weights"][key]), key


def _train_losses(run: Path) -> dict[int, str]:
    with (run / "metrics.csv").open(newline="") as f:
        return {int(r["step"]): r["train/loss"] for r in csv.DictReader(f) if r.get("train/loss")}


def test_a_preemption_at_an_epoch_end_resumes_a_globally_seeded_shuffle_bit_exactly(tmp_path, monkeypatch):
    """#14: a loader shuffled by a ``RandomSampler`` without its own generator draws each epoch's
    permutation from torch's global generator when that epoch's iterator starts. Stopped by SIGUSR1
    in epoch 1's last batch and resumed, epoch 2 must see the batches, dropout masks, losses and final
    weights of 2 epochs in one go — before the fix its iterator was built before the RNG restore."""
    from torch.utils.data import DataLoader

    from datamodules.batching import collate_pairs
    from datamodules.synthetic import SyntheticSeq2Seq

    def shuffled(self: SyntheticSeq2Seq) -> DataLoader:
        return DataLoader(self.split("train"), batch_size=self.batch_size, shuffle=True, collate_fn=collate_pairs)

    monkeypatch.setattr(SyntheticSeq2Seq, "train_dataloader", shuffled)
    log = ["--trainer.log_every_n_steps=1"]
    whole = _fit(tmp_path, "whole", *log)
    original = command._fault_callbacks
    monkeypatch.setattr(command, "_fault_callbacks", _with_signal_at(original, 8))  # epoch 1's last batch
    with pytest.raises(SystemExit):
        _fit(tmp_path, "parts", *log)
    monkeypatch.setattr(command, "_fault_callbacks", original)
    parts = _fit(tmp_path, "parts", *log, "--ckpt_path=last")
    a, b = _three_epoch_weights(whole), _three_epoch_weights(parts)
    assert a["step"] == b["step"] == 16
    losses = _train_losses(whole)
    assert sorted(losses) == list(range(16)), "one train/loss row per step"
    assert _train_losses(parts) == losses, "every step's logged train/loss, epoch 2 included"
    for key, value in a["weights"].items():
        assert torch.equal(value, b["weights"][key]), key


def test_a_saved_but_not_yet_restored_rng_state_is_what_the_next_checkpoint_holds():
    """A checkpoint written after a resume but before the restore point (Lightning finishing the
    loaded epoch re-runs its end-of-epoch saves) must carry the loaded state, not the resumed
    process's unrelated stream."""
    loaded = RngState()
    torch.manual_seed(3)
    saved = loaded.state_dict()
    loaded.load_state_dict(saved)
    torch.manual_seed(4)
    assert torch.equal(loaded.state_dict()["torch"], saved["torch"])
