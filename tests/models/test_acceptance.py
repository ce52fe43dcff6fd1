"""Slow acceptance trainings through the CLI (run with ``pytest -m slow``; minutes each on 2 cores).

Each asserts the finding the issue promises, in direction: the reverse Transformer solves its task,
attention cures the fixed-vector bottleneck, LSTM solves the adding problem where an RNN does not.
Stochastic arms (RAM, scheduled sampling, hard-attention captioning) are judged on the mean over seeds 1, 2, 3,
with mean ± std and every seed's number in the assertion message and printed (``pytest -s``).
"""

import json
import statistics
import time
from pathlib import Path

import pytest

from ablations.reports.results import load_run
from attnlab_run.cli import main

CONFIGS = Path(__file__).parents[2] / "ablations" / "configs"
pytestmark = pytest.mark.slow


def _run(tmp_path: Path, config: str, name: str, *overrides: str) -> dict:
    args = ["--config", str(CONFIGS / config), f"--run.root={tmp_path}", f"--run.name={name}",
            "--trainer.enable_progress_bar=false"]
    main(["fit", *args, *overrides])
    main(["test", *args, "--ckpt_path=best"])
    record = load_run(tmp_path / Path(config).stem / name)  # the fit's metrics and its test's
    assert record is not None
    return record.metrics


@pytest.mark.minutes(4)
def test_transformer_reverse_solves_the_task(tmp_path):
    metrics = _run(tmp_path, "transformer_reverse.yaml", "t")
    assert metrics["test/exact_match"] >= 0.99, metrics


def _long_bucket_accuracy(metrics: dict) -> float:
    buckets = {k: v for k, v in metrics.items() if k.startswith("test/acc_by_len/")}
    longest = sorted(buckets)[-2:]
    return sum(buckets[k] for k in longest) / len(longest)


@pytest.mark.minutes(15)
def test_attention_cures_the_bottleneck(tmp_path):
    none = _run(tmp_path, "rnn_reverse.yaml", "none", "--model.attention=none")
    additive = _run(tmp_path, "rnn_reverse.yaml", "additive", "--model.attention=additive")
    assert _long_bucket_accuracy(additive) > _long_bucket_accuracy(none) + 0.3, (none, additive)


@pytest.mark.minutes(7.5)
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


@pytest.mark.minutes(3)
def test_recurrent_attention_model_learns_over_seeds(tmp_path):
    """RAM (Mnih et al. 2014) on translated digits: mean test accuracy over 3 seeds far above chance (0.1).

    A shortened run (6,000 images x 4 epochs, ~65 s a seed on 2 busy cores) to fit CI's slow budget:
    measured 0.5062 ± 0.0290 (seeds 1/2/3: 0.5385, 0.4975, 0.4825), so 0.35 (3.5x chance) leaves
    ~5 std of room. The paper's 1-2% error needs the full config and is not asserted here."""
    mean, report = _over_seeds(tmp_path, "ram_translated.yaml", "test/acc", "--data.init_args.train_size=6000",
                               "--data.init_args.val_size=200", "--data.init_args.test_size=500",
                               "--trainer.max_epochs=4")
    assert mean >= 0.35, report



@pytest.mark.minutes(7.5)
def test_scheduled_sampling_solves_reverse_over_seeds(tmp_path):
    """Scheduled sampling (Bengio et al. 2015, §2.4; inverse-sigmoid decay, two-pass for the Transformer
    as Mihaylova & Liu 2019) on the reverse task: mean test exact match over 3 seeds far above an
    untrained model's 0.0 (measured, seeds 1/2/3), while the run ends feeding mostly its own tokens.

    1,000 steps (16,000 pairs x 4 epochs) with the decay horizon at 1,600 steps, the config's
    1,250 : 2,000 ratio, so p(gold) ends at 0.22. Measured 0.9967 ± 0.0032 (seeds 1/2/3: 0.993,
    0.998, 0.999), 184 s for 3 seeds on 2 busy cores. At 375 steps one seed sat at 0.24 (0.50 ± 0.23):
    the arm learns late, so 0.8 keeps room for one seed as low as 0.4."""
    mean, report = _over_seeds(tmp_path, "transformer_reverse.yaml", "test/exact_match", "--model.forcing=scheduled",
                               "--model.scheduled_steps=1600", "--model.warmup_steps=150", "--trainer.max_epochs=4",
                               "--data.train_size=16000", "--data.val_size=200", "--data.test_size=200")
    runs = tmp_path / "transformer_reverse"
    p_gold = [json.loads((runs / f"seed{s}" / "summary.json").read_text())["metrics"]["train/p_gold"] for s in SEEDS]
    assert max(p_gold) < 0.3, f"the schedule must end mostly on the model's own tokens: p(gold) {p_gold}"
    assert mean >= 0.8, report


@pytest.mark.minutes(11)
def test_hard_attention_captioner_learns_over_seeds(tmp_path):
    """Show, Attend and Tell with stochastic hard attention (Xu et al. 2015, §4.1: REINFORCE with a
    moving-average baseline, entropy bonus, half the captions on the expectation) on drawn shapes:
    mean test BLEU-4 over 3 seeds far above an untrained captioner's 0.0 (measured, seeds 1/2/3).

    188 steps (3,000 images x 4 epochs, batch 64), ~60 s a seed on 2 quiet cores (the full config,
    ~7 min a seed, does not fit the slow budget). Measured 0.2588 ± 0.0677 (seeds 1/2/3: 0.336, 0.232,
    0.208); 0.15 is below every seed. Not asserted: beating the mean-feature arm, which at this budget
    got 0.2200 ± 0.0112 (--model.attention=none: 0.220, 0.231, 0.209), within the hard arm's noise."""
    mean, report = _over_seeds(tmp_path, "caption_hard.yaml", "test/bleu4", "--trainer.max_epochs=4",
                               "--data.init_args.train_size=3000", "--data.init_args.val_size=128",
                               "--data.init_args.test_size=256", "--data.init_args.batch_size=64")
    assert mean >= 0.15, report
