"""Slow acceptance trainings through the CLI (run with ``pytest -m slow``; minutes each on 2 cores).

Each asserts the finding the issue promises, in direction: the reverse Transformer solves its task,
attention cures the fixed-vector bottleneck, LSTM solves the adding problem where an RNN does not.
"""

import json
from pathlib import Path

import pytest

from lit_models.cli import main

CONFIGS = Path(__file__).parents[2] / "ablations" / "configs"
pytestmark = pytest.mark.slow


def _run(tmp_path: Path, config: str, name: str, *overrides: str) -> dict:
    args = ["--config", str(CONFIGS / config), f"--run.root={tmp_path}", f"--run.name={name}",
            "--trainer.enable_progress_bar=false"]
    main(["fit", *args, *overrides])
    main(["test", *args, "--ckpt_path=best"])
    return json.loads((tmp_path / Path(config).stem / name / "summary.json").read_text())["metrics"]


def test_transformer_reverse_solves_the_task(tmp_path):
    metrics = _run(tmp_path, "transformer_reverse.yaml", "t")
    assert metrics["test/exact_match"] >= 0.99, metrics


def _long_bucket_accuracy(metrics: dict) -> float:
    buckets = {k: v for k, v in metrics.items() if k.startswith("test/acc_by_len/")}
    longest = sorted(buckets)[-2:]
    return sum(buckets[k] for k in longest) / len(longest)


def test_attention_cures_the_bottleneck(tmp_path):
    none = _run(tmp_path, "rnn_reverse.yaml", "none", "--model.attention=none")
    additive = _run(tmp_path, "rnn_reverse.yaml", "additive", "--model.attention=additive")
    assert _long_bucket_accuracy(additive) > _long_bucket_accuracy(none) + 0.3, (none, additive)


def test_lstm_solves_adding_where_rnn_does_not(tmp_path):
    lstm = _run(tmp_path, "adding.yaml", "lstm", "--model.cell=lstm")
    rnn = _run(tmp_path, "adding.yaml", "rnn", "--model.cell=rnn")
    assert lstm["test/mse"] < 0.01, lstm
    assert rnn["test/mse"] > 0.1, rnn
