"""The bad-input catalogue of issue #7, each through the CLI: exit code 2, ONE ``attnlab: error:``
line naming the problem (file and line where relevant), no traceback, nothing overwritten."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

# Lightning is imported now (attnlab_run.cli), so the console handler it adds binds the real stderr,
# not the first test's capture stream (closed later: "--- Logging error ---" tracebacks).
import attnlab_run.cli  # noqa: F401
from attnlab.cli import main  # the `attnlab` command: Lightning subcommands and sweep alike

REPO = Path(__file__).parents[2]
CONFIGS = REPO / "ablations" / "configs"
FIXTURES = REPO / "tests" / "fixtures"
REVERSE = ["--config", str(CONFIGS / "transformer_reverse.yaml")]
TINY = ["--data.init_args.train_size=32", "--data.init_args.val_size=8", "--data.init_args.test_size=8",
        "--data.init_args.batch_size=16", "--model.init_args.d_model=16", "--model.init_args.d_ff=32",
        "--model.init_args.encoder_layers=1", "--model.init_args.decoder_layers=1"]
QUIET = ["--trainer.enable_progress_bar=false", "--trainer.max_epochs=1"]


def _error_line(capsys: pytest.CaptureFixture[str], argv: list[str], prefix: str = "attnlab: error: ") -> str:
    """Run the CLI in-process; assert exit 2 and exactly one ``attnlab: error:`` line; return it."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if "error" in ln.lower()]
    assert len(lines) == 1 and lines[0].startswith(prefix), err
    return lines[0]


def _translation(tmp_path: Path, prefix: Path, *extra: str) -> list[str]:
    """The Multi30k Transformer config on local parallel files ``prefix.{de,en}``, tiny."""
    return ["fit", "--config", str(CONFIGS / "multi30k_transformer.yaml"), "--data.init_args.source=files",
            f"--data.init_args.train_path={prefix}", f"--data.init_args.val_path={FIXTURES / 'multi30k' / 'val'}",
            f"--data.init_args.test_path={FIXTURES / 'multi30k' / 'test'}",
            f"--data.init_args.data_dir={tmp_path}/data",
            "--data.init_args.vocab_size=60", "--model.init_args.d_model=16", "--model.init_args.d_ff=32",
            "--model.init_args.encoder_layers=1", "--model.init_args.decoder_layers=1", "--trainer.accelerator=cpu",
            f"--run.root={tmp_path}/runs", *QUIET, *extra]


def _copy_pair(tmp_path: Path, name: str) -> Path:
    for lang in ("de", "en"):
        shutil.copy(FIXTURES / "multi30k" / f"train.{lang}", tmp_path / f"{name}.{lang}")
    return tmp_path / name


def test_figure_drawings_must_be_positive(tmp_path, capsys):
    line = _error_line(capsys, ["fit", *REVERSE, "--run.figure_drawings=0", f"--run.root={tmp_path}", "--print_config"])
    assert "--run.figure_drawings" in line and "PositiveInt" in line


def test_malformed_yaml_names_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed_everything: 1\ntrainer:\n  max_epochs: 1\n   devices: [1\n")
    line = _error_line(capsys, ["fit", "--config", str(bad), f"--run.root={tmp_path}/runs"])
    assert f"{bad}:4: malformed YAML" in line
    assert not (tmp_path / "runs").exists()


def test_unknown_axis_value(tmp_path, capsys):
    line = _error_line(capsys, ["fit", *REVERSE, "--model.attn_scale=sqrt", f"--run.root={tmp_path}"])
    assert "--model.attn_scale=sqrt is not allowed; choose one of: sqrt_dk, none, dk" in line
    assert not any(tmp_path.iterdir())


def test_d_model_not_divisible_by_heads(tmp_path, capsys):
    line = _error_line(capsys, ["fit", *REVERSE, *TINY, "--model.init_args.heads=3", f"--run.root={tmp_path}"])
    assert line.endswith("d_model=16 is not divisible by heads=3")
    assert not any(tmp_path.iterdir())


def test_learned_positions_shorter_than_data(tmp_path, capsys):
    line = _error_line(capsys, ["fit", *REVERSE, *TINY, *QUIET, "--model.init_args.positions=learned",
                                "--model.init_args.max_positions=4", f"--run.root={tmp_path}"])
    assert "exceeds the learned position table (max_len=4)" in line and "--model.max_positions" in line


def test_parallel_files_with_mismatched_line_counts(tmp_path, capsys):
    prefix = _copy_pair(tmp_path, "short")
    (tmp_path / "short.en").write_text("".join((tmp_path / "short.en").read_text().splitlines(True)[:3]))
    line = _error_line(capsys, _translation(tmp_path, prefix))
    assert f"{prefix}.de has 24 lines, {prefix}.en has 3" in line


def test_empty_dataset(tmp_path, capsys):
    for lang in ("de", "en"):
        (tmp_path / f"empty.{lang}").write_text("")
    line = _error_line(capsys, _translation(tmp_path, tmp_path / "empty"))
    assert "the train split is empty" in line


def test_non_utf8_text_names_file_and_line(tmp_path, capsys):
    prefix = _copy_pair(tmp_path, "latin1")
    with open(f"{prefix}.de", "ab") as f:
        f.write("café\n".encode("latin-1"))
    with open(f"{prefix}.en", "a") as f:
        f.write("cafe\n")
    line = _error_line(capsys, _translation(tmp_path, prefix))
    assert f"{prefix}.de:25: not valid UTF-8 (byte 0xe9)" in line


def test_sentencepiece_vocabulary_larger_than_corpus(tmp_path, capsys):
    line = _error_line(capsys, _translation(tmp_path, FIXTURES / "multi30k" / "train",
                                            "--data.init_args.vocab_size=5000"))
    assert "vocab_size=5000 is too large" in line and "supports at most" in line
    assert not list((tmp_path / "data").rglob("*.model")), "no tokenizer may be cached"


def test_label_outside_declared_set_names_value_and_line(tmp_path, capsys):
    train = tmp_path / "train.tsv"
    train.write_text("text\tlabel\nnice film\tpos\nso so\tneutral\n")
    argv = ["fit", "--config", str(CONFIGS / "sentiment_lstm_attention.yaml"), "--data.init_args.source=files",
            "--data.init_args.labels=[pos,neg]", "--data.init_args.vocab_size=40",
            f"--data.init_args.data_dir={tmp_path}/data", f"--data.init_args.train_path={train}",
            f"--data.init_args.test_path={FIXTURES / 'sentiment' / 'test.jsonl'}", f"--run.root={tmp_path}/runs",
            *QUIET]
    line = _error_line(capsys, argv)
    assert f"{train}:3: label 'neutral' is not one of the declared labels" in line


def _regressor_checkpoint(path: Path) -> Path:
    """A checkpoint of another family (the adding regressor), saved as LightningCLI saves one."""
    from lit_models.families.regressor import AddingRegressor

    model = AddingRegressor(hidden_size=4)
    hparams = {"_class_path": "lit_models.families.regressor.AddingRegressor", **dict(model.hparams)}
    torch.save({"state_dict": model.state_dict(), "hyper_parameters": hparams, "global_step": 0, "epoch": 0,
                "pytorch-lightning_version": "2.6.6"}, path)
    return path


@pytest.mark.parametrize("subcommand", ["test", "fit"])
def test_checkpoint_of_another_family(tmp_path, capsys, subcommand):
    ckpt = _regressor_checkpoint(tmp_path / "adding.ckpt")
    before = ckpt.read_bytes()
    line = _error_line(capsys, [subcommand, *REVERSE, *TINY, f"--ckpt_path={ckpt}", f"--run.root={tmp_path}/runs"])
    assert f"{ckpt} is a checkpoint of lit_models.families.regressor.AddingRegressor" in line
    assert "lit_models.families.seq2seq.TransformerSeq2Seq" in line
    assert ckpt.read_bytes() == before and not (tmp_path / "runs").exists()


def test_sweep_value_none(tmp_path, capsys):
    sweep = tmp_path / "none.yaml"
    text = (REPO / "sweeps" / "heads.yaml").read_text().replace("values: [1, 4, 8, 16]", "values: [1, null]")
    sweep.write_text(text)
    line = _error_line(capsys, ["sweep", str(sweep), "--dry-run", "--root", str(tmp_path / "runs")],
                       prefix="attnlab sweep: error: ")
    assert f"{sweep}: parameter model.heads has the value null" in line
    assert not (tmp_path / "runs").exists()


def test_output_directory_not_writable(tmp_path, capsys):
    blocker = tmp_path / "file.txt"
    blocker.write_text("keep me\n")
    line = _error_line(capsys, ["fit", *REVERSE, *TINY, f"--run.root={blocker}/sub", "--run.name=r"])
    assert f"cannot create the run directory {blocker}/sub/transformer_reverse/r: {blocker} is not a directory" in line
    assert blocker.read_text() == "keep me\n"


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write anywhere")
def test_output_directory_without_write_permission(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        line = _error_line(capsys, ["fit", *REVERSE, *TINY, f"--run.root={locked}", "--run.name=r"])
    finally:
        locked.chmod(0o700)
    assert f"{locked} is not writable" in line


def test_run_directory_holding_a_finished_run(tmp_path, capsys):
    run = tmp_path / "transformer_reverse" / "done"
    (run / "checkpoints").mkdir(parents=True)
    summary = {"status": "finished", "global_step": 7, "metrics": {"val/loss": 1.0}}
    (run / "summary.json").write_text(json.dumps(summary))
    (run / "metrics.csv").write_text("step,val/loss\n7,1.0\n")
    files_before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    line = _error_line(capsys, ["fit", *REVERSE, *TINY, f"--run.root={tmp_path}", "--run.name=done"])
    assert f"{run} already holds a finished run" in line and "--ckpt_path last" in line
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == files_before


def test_console_script_prints_exactly_one_line(tmp_path):
    """The installed entry point, not only main(): stderr is exactly the error line, exit 2."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  class_path: x\n  init_args: {d_model: 16\n")
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "attnlab_run.cli", "fit", "--config", str(bad)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()], proc.stderr
    assert proc.stderr.startswith(f"attnlab: error: {bad}:") and "malformed YAML" in proc.stderr



def test_a_data_error_found_after_seeding_is_still_the_only_line(tmp_path):
    """A problem found when the data is prepared (after the seed is set and the run directory chosen):
    stderr is that one line, no "Seed set to N" before it, exit 2, no run directory."""
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "attnlab_run.cli", "fit", "--config",
                           str(REPO / "ablations" / "configs" / "mr_lstm_attention.yaml"),
                           f"--data.data_dir={tmp_path / 'data'}", f"--run.root={tmp_path / 'runs'}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()], proc.stderr
    assert "vaderSentiment" in proc.stderr and "pip download" in proc.stderr
    assert not (tmp_path / "runs").exists()


def test_a_data_error_found_after_the_trainer_is_built_is_the_only_line(tmp_path):
    """The issue's case through the real console: valid parallel files of ~30 words, word tokenizer,
    the config's vocab_size 8000. Refused while the data is prepared, after the Trainer logged its
    device banner ("GPU available: ...", held until a loop starts): stderr is the one line, exit 2."""
    for lang, text in (("de", "ein hund läuft im park\nzwei kinder spielen\n"),
                       ("en", "a dog runs in the park\ntwo children play\n")):
        (tmp_path / f"c.{lang}").write_text(text)
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "attnlab_run.cli", "fit", "--config",
                           str(CONFIGS / "multi30k_transformer.yaml"), "--data.source=files", "--data.tokenizer=word",
                           *(f"--data.{split}_path={tmp_path / 'c'}" for split in ("train", "val", "test")),
                           "--model.d_model=16", "--model.d_ff=32", "--trainer.accelerator=cpu",
                           f"--data.data_dir={tmp_path / 'data'}", f"--run.root={tmp_path / 'runs'}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()], proc.stderr
    assert proc.stderr.startswith("attnlab: error: --data.vocab_size=8000 is too large for the training files ")
    assert proc.stderr.strip().endswith("= 20 ids; give --data.vocab_size=20 or less") and proc.stdout == ""
    assert not (tmp_path / "runs").exists()

# --------------------------------------------------------------------------- images (captioning)
def _captioning(tmp_path: Path, images: Path, *extra: str) -> list[str]:
    """Show-Attend-Tell on the committed folder fixture (images under ``images``), tiny."""
    fx = FIXTURES / "captioning"
    return ["fit", "--config", str(CONFIGS / "caption_soft.yaml"), "--data.init_args.source=folder",
            f"--data.init_args.train_path={fx / 'train.tsv'}", f"--data.init_args.val_path={fx / 'val.tsv'}",
            f"--data.init_args.test_path={fx / 'test.tsv'}", f"--data.init_args.image_dir={images}",
            "--data.init_args.min_freq=1", "--data.init_args.image_size=16", "--data.init_args.batch_size=4",
            "--model.init_args.cnn_width=8", "--model.init_args.hidden_size=16", "--model.init_args.grid_size=2",
            f"--run.root={tmp_path}/runs", *QUIET, *extra]


def test_missing_image_names_the_file(tmp_path, capsys):
    shutil.copytree(FIXTURES / "captioning" / "images", tmp_path / "images")
    (tmp_path / "images" / "img5.png").unlink()
    line = _error_line(capsys, _captioning(tmp_path, tmp_path / "images"))
    assert f"{tmp_path / 'images' / 'img5.png'}: no such image file" in line


@pytest.mark.parametrize("workers", [0, 1])
def test_corrupt_image_names_the_file(tmp_path, capsys, workers):
    """Also from a DataLoader worker process, whose error torch re-raises with the worker's traceback."""
    shutil.copytree(FIXTURES / "captioning" / "images", tmp_path / "images")
    (tmp_path / "images" / "img4.png").write_bytes(b"\x89PNG\r\n\x1a\n not really a png")
    line = _error_line(capsys, _captioning(tmp_path, tmp_path / "images", f"--data.init_args.num_workers={workers}"))
    assert f"{tmp_path / 'images' / 'img4.png'}: cannot read the image" in line
