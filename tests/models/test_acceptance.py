"""Slow acceptance trainings through the CLI (run with ``pytest -m slow``; minutes each on 2 cores).

Each asserts the finding the issue promises, in direction: the reverse Transformer solves its task,
attention cures the fixed-vector bottleneck, LSTM solves the adding problem where an RNN does not.
Stochastic arms (here RAM) are judged on the mean over seeds 1, 2, 3,
with mean ± std and every seed's number in the assertion message and printed (``pytest -s``).
"""

import json
import statistics
import time
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


SEEDS = (1, 2, 3)


def _over_seeds(tmp_path: Path, config: str, metric: str, *overrides: str) -> tuple[float, str]:
    """``metric`` of one fit + test per seed: (mean, "mean ± std (sample std) over seeds; per seed; wall time")."""
    t0 = time.time()
    values = [_run(tmp_path, config, f"seed{s}", f"--seed_everything={s}", *overrides)[metric] for s in SEEDS]
    mean, std = statistics.mean(values), statistics.stdev(values)
    per_seed = ", ".join(f"seed {s}: {v:.4f}" for s, v in zip(SEEDS, values, strict=True))
    report = (f"{config} {metric}: {mean:.4f} ± {std:.4f} over seeds {SEEDS} ({per_seed}); "
              f"{time.time() - t0:.0f} s for {len(SEEDS)} seeds")
    print(report)
    return mean, report


def test_recurrent_attention_model_learns_over_seeds(tmp_path):
    """RAM (Mnih et al. 2014) on translated digits: mean test accuracy over 3 seeds far above chance (0.1).

    A shortened run (6,000 images x 4 epochs, ~65 s a seed on 2 busy cores) to fit CI's slow budget:
    measured 0.5062 ± 0.0290 (seeds 1/2/3: 0.5385, 0.4975, 0.4825), so 0.35 (3.5x chance) leaves
    ~5 std of room. The paper's 1-2% error needs the full config and is not asserted here."""
    mean, report = _over_seeds(tmp_path, "ram_translated.yaml", "test/acc", "--data.init_args.train_size=6000",
                               "--data.init_args.val_size=200", "--data.init_args.test_size=500",
                               "--trainer.max_epochs=4")
    assert mean >= 0.35, report

