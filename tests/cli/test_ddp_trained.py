"""DDP equality on trained checkpoints: ``validate`` and ``test`` give the same metrics with 1 and 2
CPU processes (gloo) for every model family.

Each family trains briefly (1 process, through the real CLI), so the metric that counts examples
(exact match, accuracy, BLEU) is strictly between its extremes: a duplicated or dropped example
would change it. The checkpoint is then evaluated on odd-sized validation and test splits (21 and
19 examples in batches of 8: ranks get 11/10 and 10/9, with uneven last batches) with 1 and with 2
processes. Every metric must be equal (loss-like means to float tolerance). The Transformer is
evaluated with greedy and with beam decoding. Slow (minutes): ``pytest -m slow tests/cli/test_ddp_trained.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from test_ddp import REPO, _attnlab

from attnlab_run.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.ddp]

CONFIGS = REPO / "ablations" / "configs"
SPLITS = ["--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false",
          "--data.init_args.val_size=21", "--data.init_args.test_size=19", "--data.init_args.batch_size=8"]
SHORT_REVERSE = ["--data.init_args.min_len=2", "--data.init_args.max_len=6", "--data.init_args.train_size=1536",
                 "--model.init_args.warmup_steps=30", "--trainer.max_epochs=3"]
# family: (config, overrides for fit and evaluation, decode variants, the counting metric that must be in (0, 1))
FAMILIES: dict[str, tuple[str, list[str], dict[str, list[str]], str]] = {
    "transformer": ("transformer_reverse", ["--model.init_args.d_model=32", "--model.init_args.d_ff=64",
                                            *SHORT_REVERSE],
                    {"greedy": [], "beam": ["--decode.strategy=beam", "--decode.beam_size=3"]}, "exact_match"),
    "recurrent_hard": ("rnn_reverse", ["--model.init_args.attention=hard", "--model.init_args.hidden_size=32",
                                       "--data.init_args.max_tokens=null", *SHORT_REVERSE],
                       {"greedy": []}, "exact_match"),
    "classifier": ("sentiment_lstm_attention", ["--model.init_args.hidden_size=16", "--data.init_args.train_size=512",
                                                "--trainer.max_epochs=1"], {"": []}, "acc"),
    "regressor": ("adding", ["--data.init_args.seq_len=20", "--data.init_args.train_size=512",
                             "--trainer.max_epochs=1"], {"": []}, ""),
    "captioner_hard": ("caption_hard", ["--model.init_args.cnn_width=16", "--model.init_args.hidden_size=32",
                                        "--data.init_args.train_size=256", "--trainer.max_epochs=2"],
                       {"greedy": []}, "bleu1"),
    "ram": ("ram_translated", ["--model.init_args.hidden_size=64", "--data.init_args.train_size=256",
                               "--trainer.max_epochs=1"], {"": []}, "acc"),
}
FLOAT_TOLERANCE = ("loss", "mse", "cider_d", "localisation", "glimpses_on_digit")  # means of float sums
# The probes (lit_models/callbacks/probes.py) read a fixed batch: the first examples of rank 0's first validation
# batch. The eval sampler deals examples round-robin, so under 2 processes that batch holds examples
# 0, 2, 4, ... instead of 0, 1, 2, ...: these diagnostics depend on the world size by design and are
# not per-example metrics. They are left out here (reported to the lead).
FIXED_BATCH_PROBES = ("val/attn_entropy/", "val/free_running_loss", "val/exposure_gap", "val/align_mass")


def _metrics(root: Path, prefix: str) -> dict[str, float]:
    (summary,) = root.glob("*/*/summary.json")
    metrics = json.loads(summary.read_text())["metrics"].items()
    return {k: v for k, v in metrics if k.startswith(prefix) and not k.startswith(FIXED_BATCH_PROBES)}


def _evaluate(sub: str, args: list[str], root: Path, *, devices: int) -> dict[str, float]:
    cmd = [sub, *args, f"--run.root={root}", "--run.experiment=ddp"]
    os.environ.pop("ATTNLAB_RUN_DIR", None)
    if devices == 1:
        main([*cmd, "--trainer.devices=1"])
    else:
        env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
        proc = subprocess.run([*_attnlab(), *cmd, "--trainer.devices=2", "--trainer.strategy=ddp"], cwd=REPO,
                              env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
    os.environ.pop("ATTNLAB_RUN_DIR", None)
    return _metrics(root, "val/" if sub == "validate" else "test/")


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_trained_checkpoint_evaluates_the_same_on_one_and_two_processes(family: str, tmp_path: Path) -> None:
    config, overrides, variants, counting = FAMILIES[family]
    base = ["--config", str(CONFIGS / f"{config}.yaml"), *SPLITS, *overrides]
    main(["fit", *base, f"--run.root={tmp_path / 'fit'}", "--run.name=trained", "--seed_everything=3"])
    os.environ.pop("ATTNLAB_RUN_DIR", None)
    ckpt = tmp_path / "trained.ckpt"  # outside checkpoints/, so each evaluation gets its own run directory
    shutil.copy(next((tmp_path / "fit").glob("*/trained/checkpoints/last.ckpt")), ckpt)

    for variant, extra in variants.items():
        for sub in ("validate", "test"):
            args = [*base, *extra, f"--ckpt_path={ckpt}"]
            one = _evaluate(sub, args, tmp_path / f"{variant}-{sub}-1", devices=1)
            two = _evaluate(sub, args, tmp_path / f"{variant}-{sub}-2", devices=2)
            where = f"{family} {variant} {sub}"
            assert one and set(one) == set(two), f"{where}: metric names differ: {sorted(one)} vs {sorted(two)}"
            split = "val" if sub == "validate" else "test"
            if counting:
                assert 0.0 < one[f"{split}/{counting}"] < 1.0, f"{where}: {counting} is degenerate: {one}"
            diffs = {k: abs(one[k] - two[k]) for k in one}
            worst = max(diffs, key=diffs.get)
            for key, diff in diffs.items():
                tol = 1e-5 * max(1.0, abs(one[key])) if key.split("/")[-1] in FLOAT_TOLERANCE else 1e-6
                assert diff <= tol, (f"{where}: {key} {one[key]} (1 process) vs {two[key]} (2 processes); "
                                     f"largest difference {worst} {diffs[worst]:.2e}")
