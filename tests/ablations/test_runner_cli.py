"""The offline runner through the real CLI: a tiny grid in seconds per trial, one arm with a
value the CLI rejects; the rest finishes, a re-run launches nothing, the report reads it all."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from ablations.catalog.questions import REPO
from ablations.reports.report import write_report
from ablations.reports.results import load_experiment
from ablations.runner import make_plan, run_sweep

TINY = {
    "seed_everything": 1,
    "trainer": {"max_epochs": 1, "accelerator": "cpu", "devices": 1, "log_every_n_steps": 1,
                "enable_model_summary": False, "enable_progress_bar": False},
    "model": {"class_path": "lit_models.families.seq2seq.TransformerSeq2Seq",
              "init_args": {"d_model": 16, "heads": 2, "d_ff": 32, "encoder_layers": 1, "decoder_layers": 1,
                            "warmup_steps": 2}},
    "data": {"class_path": "datamodules.synthetic.SyntheticSeq2Seq",
             "init_args": {"task": "reverse", "vocab_size": 12, "min_len": 2, "max_len": 5, "train_size": 64,
                           "val_size": 8, "test_size": 8, "batch_size": 16}},
    "run": {"monitor": "val/exact_match", "mode": "max"},
}


def _sweep(config: Path, norms: list[str]) -> dict:
    return {"name": "tiny", "program": str(REPO / "attnlab_run" / "cli.py"), "method": "grid",
            "metric": {"name": "val/exact_match", "goal": "maximize"},
            "parameters": {"model.norm": {"values": norms}, "seed_everything": {"values": [3]}},
            "command": ["${env}", "${interpreter}", "${program}", "fit", "--config", str(config), "${args}"]}


def test_tiny_grid_through_the_cli(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    root = tmp_path / "runs"
    plan = make_plan(_sweep(config, ["post", "pre", "Pre"]), root=root, scale="full", threads=1,
                     interpreter=sys.executable)
    outcomes = {o.trial.name: o for o in run_sweep(plan, jobs=2, timeout_s=300)}
    assert {n: o.status for n, o in outcomes.items()} == {
        "norm=post,seed=3": "finished", "norm=pre,seed=3": "finished", "norm=Pre,seed=3": "failed"}
    run = root / "tiny" / "norm=pre,seed=3"
    for part in ("config.yaml", "metrics.csv", "summary.json", "checkpoints/best.ckpt"):
        assert (run / part).exists(), part
    config_text = (run / "config.yaml").read_text()
    assert "norm: pre" in config_text and "seed_everything: 3" in config_text
    assert "is not allowed" in (root / "tiny" / "norm=Pre,seed=3" / "trial.log").read_text()

    again = run_sweep(make_plan(_sweep(config, ["post", "pre"]), root=root, scale="full", threads=1,
                                interpreter=sys.executable))
    assert [o.skipped for o in again] == [True, True]

    runs = load_experiment(root / "tiny")
    report = write_report("tiny", runs, root / "tiny")
    assert {r.params["model.norm"] for r in runs} == {"post", "pre", "Pre"}
    assert "norm=Pre" in report.table and "no finished run (1 failed)" in report.table
    assert (root / "tiny" / "curves.png").is_file() and report.path.is_file()
