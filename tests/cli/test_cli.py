"""The attnlab CLI: one-line errors, the run-directory contract, test on a finished run."""

import json
from pathlib import Path
from typing import get_args

import pytest

from attnlab_run.cli import main
from attnlab_run.evaluations import evaluation_records
from lit_models.axes import Positions

CONFIG = str(Path(__file__).parents[2] / "ablations" / "configs" / "transformer_reverse.yaml")
TINY = [
    "--data.init_args.train_size=64", "--data.init_args.val_size=8", "--data.init_args.test_size=8",
    "--data.init_args.batch_size=16", "--model.init_args.d_model=16", "--model.init_args.d_ff=32",
    "--model.init_args.encoder_layers=1", "--model.init_args.decoder_layers=1",
    "--trainer.enable_progress_bar=false",
]


def _fit(root: Path, *extra: str) -> None:
    main(["fit", "--config", CONFIG, f"--run.root={root}", "--trainer.max_epochs=1", *TINY, *extra])


@pytest.mark.parametrize(
    "override, expected",
    [
        ("--model.norm=middle", "--model.norm=middle is not allowed; choose one of: post, pre"),
        ("--model.positions=absolute", "choose one of: " + ", ".join(get_args(Positions))),
        ("--model.heads=abc", "--model.heads=abc is not a valid int"),
    ],
)
def test_bad_value_is_one_line_exit_2(override, expected, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", CONFIG, override, f"--run.root={tmp_path}"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0], err
    assert not any(tmp_path.iterdir()), "a failed parse must not create a run directory"


def test_run_directory_contract_and_test_on_finished_run(tmp_path, capsys):
    _fit(tmp_path, "--run.name=r1")
    run = tmp_path / "transformer_reverse" / "r1"
    for name in ("config.yaml", "metrics.csv", "summary.json", "checkpoints/best.ckpt", "checkpoints/last.ckpt"):
        assert (run / name).is_file(), name
    assert list((run / "figures").glob("cross_ex0.png")), "cross-attention figure missing"
    assert (run / "figures" / "cross_ex0.json").is_file(), "its weights, for the report's native attention panels"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["parameters"] > 0 and summary["tokens_per_s"] > 0
    assert "val/exact_match" in summary["metrics"]
    config_before = (run / "config.yaml").read_text()
    main(["test", "--config", CONFIG, f"--run.root={tmp_path}", "--run.name=r1", "--ckpt_path=best", *TINY])
    summary = json.loads((run / "summary.json").read_text())
    (evaluation,) = evaluation_records(run).values()  # the test is its own record; the fit's metrics stay the fit's
    assert "evaluations" not in summary, "a test writes its record in its own folder, not in the fit's summary"
    assert "test/exact_match" in evaluation["metrics"] and summary["status"] == "finished"
    assert not any(k.startswith("test/") for k in summary["metrics"])
    assert (run / "config.yaml").read_text() == config_before, "test must not overwrite the training config"
    (log_dir,) = (run / "test").iterdir()
    assert (log_dir / "config.yaml").is_file() and (log_dir / "metrics.csv").is_file()
    assert "val/exact_match" in (run / "metrics.csv").read_text(), "the training log must survive a test run"
    assert str(run) in capsys.readouterr().out


def test_two_runs_never_collide(tmp_path):
    _fit(tmp_path, "--trainer.fast_dev_run=1")
    _fit(tmp_path, "--trainer.fast_dev_run=1")
    assert len(list((tmp_path / "transformer_reverse").iterdir())) == 2


def test_decode_options_are_not_hyperparameters(tmp_path):
    _fit(tmp_path, "--run.name=r2", "--decode.strategy=beam", "--decode.beam_size=3")
    import torch

    ckpt = torch.load(tmp_path / "transformer_reverse" / "r2" / "checkpoints" / "last.ckpt", weights_only=True)
    assert "beam_size" not in ckpt["hyper_parameters"] and "strategy" not in ckpt["hyper_parameters"]


def test_finished_run_is_not_overwritten_and_resume_continues(tmp_path, capsys):
    _fit(tmp_path, "--run.name=r3")
    run = tmp_path / "transformer_reverse" / "r3"
    before = json.loads((run / "summary.json").read_text())
    with pytest.raises(SystemExit) as exit_info:
        _fit(tmp_path, "--run.name=r3")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "already holds a finished run" in err[0]
    assert json.loads((run / "summary.json").read_text()) == before
    main(["fit", "--config", CONFIG, f"--run.root={tmp_path}", "--run.name=r3", "--ckpt_path=last",
          "--trainer.max_epochs=2", *TINY])
    after = json.loads((run / "summary.json").read_text())
    assert after["global_step"] == 2 * before["global_step"], (before["global_step"], after["global_step"])
