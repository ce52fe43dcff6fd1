"""Seeds stacked in the offline runner (issue #26): the runner trains a grid's K = 2 seeds of an arm as one
process (``ablations.stacked``) and each run directory holds what the seed's alone run writes.

The reference is the same sweep run with ``stack=False`` (each seed its own ``attnlab fit`` process).
With dropout off nothing else draws randomness, so the logged train losses, the final validation and
test metrics (decoding included) and the counters must agree up to float rounding: vmap batches each
matmul with another reduction order. Measured: 1e-7 relative over two epochs; the tolerance is 1e-4
relative (a margin of 1000x), while the two seeds differ by > 1e-3 (asserted, so the comparison cannot
pass by mixing them up).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ablations.runner import make_plan, run_sweep
from attnlab_run.rundir import read_summary

SEEDS = (1, 2)
DATA = {"vocab_size": 12, "min_len": 2, "max_len": 6, "train_size": 48, "val_size": 16, "test_size": 16,
        "batch_size": 16}
FAMILIES: dict[str, dict[str, Any]] = {
    "encoder-decoder": {
        "model": {"class_path": "lit_models.families.seq2seq.TransformerSeq2Seq",
                  "init_args": {"d_model": 16, "heads": 2, "d_ff": 32, "encoder_layers": 1, "decoder_layers": 1,
                                "dropout": 0.0, "warmup_steps": 2}},
        "data": {"class_path": "datamodules.synthetic.SyntheticSeq2Seq", "init_args": {"task": "reverse", **DATA}},
    },
    "packed GRU": {
        "model": {"class_path": "lit_models.families.recurrent_seq2seq.RecurrentSeq2Seq",
                  "init_args": {"cell": "gru", "hidden_size": 8, "embed_dim": 8}},
        "data": {"class_path": "datamodules.synthetic.SyntheticSeq2Seq", "init_args": {"task": "reverse", **DATA}},
    },
}


def sweep(tmp_path: Path, family: str, *, epochs: int) -> dict[str, Any]:
    """A two-seed grid over one arm of ``family``, with the project's CLI as its program."""
    config = {"trainer": {"max_epochs": epochs, "accelerator": "cpu", "devices": 1, "gradient_clip_val": 0.5,
                          "log_every_n_steps": 1, "enable_model_summary": False, "enable_progress_bar": False},
              **FAMILIES[family], "run": {"monitor": "val/exact_match", "mode": "max", "test_after_fit": True}}
    path = tmp_path / f"{family.replace(' ', '_')}.yaml"
    path.write_text(yaml.safe_dump(config))
    return {"name": "stacktiny", "method": "grid", "program": "attnlab/cli.py",
            "metric": {"name": "val/exact_match", "goal": "maximize"},
            "parameters": {"seed_everything": {"values": list(SEEDS)}},
            "command": ["${env}", "${interpreter}", "${program}", "fit", "--config", str(path), "${args}"]}


def run(spec: dict[str, Any], root: Path, *, stack: bool) -> dict[str, Path]:
    plan = make_plan(spec, root=root, scale="full", threads=1, stack=stack)
    lines: list[str] = []
    outcomes = run_sweep(plan, echo=lines.append)
    assert [o.status for o in outcomes] == ["finished", "finished"], lines
    return {o.trial.name: o.trial.run_dir for o in outcomes}


def trial_record(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "trial.json").read_text())


def train_losses(run_dir: Path) -> list[float]:
    with (run_dir / "metrics.csv").open() as f:
        return [float(row["train/loss"]) for row in csv.DictReader(f) if row.get("train/loss")]


@pytest.mark.minutes(1.5)
def test_stacked_seeds_write_the_run_directories_of_the_seeds_run_alone(tmp_path: Path) -> None:
    spec = sweep(tmp_path, "encoder-decoder", epochs=2)
    stacked, alone = run(spec, tmp_path / "stacked", stack=True), run(spec, tmp_path / "alone", stack=False)
    assert stacked.keys() == alone.keys() and len(stacked) == 2
    for name, run_dir in stacked.items():
        assert trial_record(run_dir)["stacking"].startswith("stacked: "), trial_record(run_dir)
        assert trial_record(alone[name])["stacking"].startswith("alone: stacking turned off (--no-stack")
        files = {p.name for p in run_dir.iterdir()} - {"trial.log"}
        assert files == {p.name for p in alone[name].iterdir()} - {"trial.log"}
        curve, reference = train_losses(run_dir), train_losses(alone[name])
        assert len(curve) == len(reference) == 6
        assert curve == pytest.approx(reference, rel=1e-4, abs=1e-6)
        own, ref = read_summary(run_dir), read_summary(alone[name])
        assert (own.global_step, own.tokens_seen) == (ref.global_step, ref.tokens_seen)
        final = {k: v for k, v in ref.metrics.items() if k.startswith(("val/", "test/")) and isinstance(v, float)}
        assert "test/exact_match" in final and "val/loss" in final
        for key, value in final.items():
            assert own.metrics[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
        assert (run_dir / "checkpoints" / "best.ckpt").is_file() and (run_dir / "checkpoints" / "last.ckpt").is_file()
    one, two = (train_losses(d) for d in stacked.values())
    assert max(abs(a - b) for a, b in zip(one, two, strict=True)) > 1e-3  # the seeds are not the same run


@pytest.mark.minutes(1)
def test_an_unstackable_family_runs_alone_and_says_why(tmp_path: Path) -> None:
    """A packed-RNN family: the stacked process refuses the group before training; its seeds run alone."""
    outcomes = run(sweep(tmp_path, "packed GRU", epochs=1), tmp_path / "runs", stack=True)
    for run_dir in outcomes.values():
        why = trial_record(run_dir)["stacking"]
        assert why.startswith("alone: not stacked: RecurrentSeq2Seq") and "packed sequences" in why, why
        assert "stacked_command" not in trial_record(run_dir)
        assert read_summary(run_dir).metrics.get("test/exact_match") is not None


@pytest.mark.slow
def test_sigterm_to_a_stacked_group_preempts_every_seed_and_each_resumes_alone(tmp_path: Path) -> None:
    """A stacked group stopped by SIGTERM: every seed saves its own ``last.ckpt`` and is recorded preempted;
    the next invocation continues each seed alone from its checkpoint (``stacked.why_not``: a resumed seed
    is never stacked), and each ends at its planned step count with the metrics of its uninterrupted alone run."""
    import signal
    import subprocess
    import sys
    import time

    from ablations.catalog.arms import REPO

    epochs = 12  # 3 steps an epoch: 36 steps
    spec = sweep(tmp_path, "encoder-decoder", epochs=epochs)
    spec_file = tmp_path / "stacked.yaml"
    spec_file.write_text(yaml.safe_dump(spec))
    root = tmp_path / "stacked"
    code = "import sys; from ablations.commands import sweep_main; sys.exit(sweep_main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", code, str(spec_file), f"--root={root}", "--stack", "--quiet",
                             "--threads=1"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    runs = [root / "stacktiny" / f"seed={s}" for s in SEEDS]
    deadline = time.time() + 300
    while not all((r / "checkpoints" / "last.ckpt").is_file() for r in runs):
        assert proc.poll() is None and time.time() < deadline, proc.communicate()[1][-2000:]
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    err = proc.communicate(timeout=300)[1]
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    for run_dir in runs:
        assert trial_record(run_dir)["stacking"].startswith("stacked: ")
        assert trial_record(run_dir)["status"] == "preempted"
        stopped = read_summary(run_dir)
        assert stopped.status == "preempted" and 0 < stopped.global_step < 3 * epochs, stopped
    resumed = run(spec, root, stack=True)
    alone = run(spec, tmp_path / "alone", stack=False)
    for name, run_dir in resumed.items():
        record = trial_record(run_dir)
        assert record["resumed"] is True and record["stacking"].startswith("alone: "), record
        own, ref = read_summary(run_dir), read_summary(alone[name])
        assert own.status == "finished" and own.global_step == ref.global_step == 3 * epochs
        for key in ("val/loss", "test/exact_match", "test/loss"):
            assert own.metrics[key] == pytest.approx(ref.metrics[key], rel=1e-4, abs=1e-6), key


def test_a_stacked_run_puts_back_the_signal_handlers_it_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ablations.stacked.run`` forwards SIGTERM/SIGINT/SIGUSR1 to its seeds while they train, then puts back
    the handlers it found: a process that goes on after it (a test worker) keeps its own."""
    import signal

    from ablations import stacked

    def mine(signum: int, frame: object) -> None:
        """A handler the process had before the stacked run."""

    monkeypatch.setattr(stacked, "build", lambda groups: [])
    monkeypatch.setattr(stacked, "why_not", lambda clis: None)
    monkeypatch.setattr(stacked, "Lockstep", lambda models: None)
    seen: list[object] = []
    monkeypatch.setattr(stacked, "_fit", lambda *args: None)
    found = {sig: signal.signal(sig, mine) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)}
    try:
        real_forward = stacked._forward_signals

        def forward(clis: list[object]) -> dict[int, object]:
            previous = real_forward(clis)
            seen.append(signal.getsignal(signal.SIGINT))
            return previous

        monkeypatch.setattr(stacked, "_forward_signals", forward)
        assert stacked.run([["fit"], ["fit"]]) == 0
        assert seen and seen[0] is not mine  # it did install its own while the seeds trained
        assert all(signal.getsignal(sig) is mine for sig in found)
    finally:
        for sig, handler in found.items():
            signal.signal(sig, handler)
