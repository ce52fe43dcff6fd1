"""What reaches W&B, read back from the offline run directory, for each family: the run config
(every setting once, under its CLI path), the metric names, and the attention/overlay images the
run also writes to ``figures/``. Evaluations open W&B runs of their own: ``test_evaluations.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnlab_run.cli import main
from attnlab_run.rundir import read_summary
from tests.cli.wandb_records import offline_run

CONFIGS = Path(__file__).parents[2] / "ablations" / "configs"
QUIET = ["--trainer.max_epochs=1", "--trainer.enable_progress_bar=false", "--trainer.log_every_n_steps=1"]
TRANSFORMER = ["--model.d_model=16", "--model.d_ff=32", "--model.encoder_layers=1", "--model.decoder_layers=1",
               "--data.train_size=48", "--data.val_size=8", "--data.test_size=8", "--data.batch_size=16"]
FAMILIES = {
    "transformer": ("transformer_reverse.yaml", TRANSFORMER, ("val/loss", "val/exact_match", "val/bleu")),
    "recurrent": ("rnn_reverse.yaml", ["--model.embed_dim=8", "--model.hidden_size=16", "--data.train_size=48",
                                       "--data.val_size=8", "--data.test_size=8", "--data.batch_size=16",
                                       "--data.max_len=8", "--data.max_tokens=null"],
                  ("val/loss", "val/exact_match", "val/acc_by_len/len_006_010")),
    "classifier": ("sentiment_lstm_attention.yaml", ["--model.embed_dim=8", "--model.hidden_size=8",
                                                     "--model.attn_size=8", "--data.train_size=48",
                                                     "--data.val_size=16", "--data.test_size=16",
                                                     "--data.batch_size=16"], ("val/loss", "val/acc", "val/f1")),
    "regressor": ("adding.yaml", ["--model.hidden_size=8", "--data.seq_len=10", "--data.train_size=48",
                                  "--data.val_size=16", "--data.test_size=16", "--data.batch_size=16"],
                  ("val/loss", "val/mse")),
    "captioner": ("caption_soft.yaml", ["--model.cnn_width=8", "--model.hidden_size=16", "--model.embed_dim=8",
                                        "--model.grid_size=2", "--data.train_size=32", "--data.val_size=8",
                                        "--data.test_size=8", "--data.batch_size=16"],
                  ("val/loss", "val/bleu4", "val/cider_d")),
    "ram": ("ram_translated.yaml", ["--model.glimpses=2", "--model.hidden_size=16", "--data.train_size=48",
                                    "--data.val_size=16", "--data.test_size=16", "--data.batch_size=16"],
            ("val/loss", "val/acc")),
}


@pytest.fixture(autouse=True)
def _wandb_offline(monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.delenv("WANDB_RUN_ID", raising=False)
    monkeypatch.setenv("WANDB_PROJECT", "attnlab-test")


@pytest.mark.parametrize("family", list(FAMILIES))
def test_what_reaches_wandb(family, tmp_path):
    config, tiny, metrics = FAMILIES[family]
    main(["fit", "--config", str(CONFIGS / config), f"--run.root={tmp_path}", "--run.name=r", *QUIET, *tiny])
    run = tmp_path / Path(config).stem / "r"
    wb = offline_run(run)
    assert [(r["group"], r["job_type"], r["name"], r["project"]) for r in wb["runs"]] == [
        (Path(config).stem, "fit", "r", "attnlab-test")]
    hparams = __import__("torch").load(run / "checkpoints" / "last.ckpt", weights_only=True)["hyper_parameters"]
    model_keys = {f"model.{k}" for k in hparams if not k.startswith("_") and not k.endswith("vocab_size")}
    assert model_keys <= set(wb["config"]), model_keys - set(wb["config"])
    assert {"model.class_path", "data.class_path", "trainer.max_epochs", "seed_everything"} <= set(wb["config"])
    bare = {k.split(".", 1)[1] for k in model_keys} & set(wb["config"])
    assert not bare, f"settings logged twice (bare and under their CLI path): {bare}"
    assert set(metrics) <= wb["history"], set(metrics) - wb["history"]
    assert wb["summary"] >= set(metrics)
    figures = sorted(p.stem for p in (run / "figures").glob("*.png"))
    images = sorted(run.glob("wandb/offline-run-*/files/media/images/**/*.png"))
    assert len(images) >= len(figures), (figures, images)
    if family != "regressor":
        assert figures and images, "attention maps / overlays / glimpses reach figures/ and W&B"
    assert read_summary(run).wandb_run_id == wb["runs"][0]["id"]


def test_one_drawing_is_one_row_at_its_validations_step(tmp_path):
    """Every map of one drawing reaches W&B in one row (one slider position, not one per map), and that row's
    ``trainer/global_step`` is the one its validation's metrics were logged at (not one past it)."""
    from tests.cli.wandb_records import offline_runs

    main(["fit", "--config", str(CONFIGS / "transformer_reverse.yaml"), f"--run.root={tmp_path}", "--run.name=r",
          "--trainer.max_steps=6", "--trainer.val_check_interval=3", "--trainer.enable_progress_bar=false",
          "--trainer.num_sanity_val_steps=0", "--run.figure_drawings=2", *TRANSFORMER])
    (fit,) = offline_runs(tmp_path / "transformer_reverse" / "r")
    drawings = [r for r in fit["history"] if any(k.startswith("attention/") for k in r)]
    maps = [{k.rsplit("/", 1)[0] for k in row if k.startswith("attention/") and k.endswith("/_type")}
            for row in drawings]
    assert len(drawings) == 2 and len(maps[0]) > 1 and maps[0] == maps[1], maps
    validations = sorted(r["trainer/global_step"] for r in fit["history"] if "val/loss" in r)
    assert [r["trainer/global_step"] for r in drawings] == validations, (drawings, validations)
