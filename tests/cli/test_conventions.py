"""The ``attnlab`` command as a Lightning user expects it: every subcommand in ``--help``, ``--version``,
a misspelt option named with its closest valid one, short class names, ``--trainer.default_root_dir``
as the run root, a user's own logger kept, accelerator ``auto`` in every config, and ``predict``
writing ``<run>/predict/predictions.jsonl``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from attnlab.cli import LIGHTNING, main

REPO = Path(__file__).parents[2]
CONFIG = str(REPO / "ablations" / "configs" / "transformer_reverse.yaml")
TINY = ["--model.d_model=16", "--model.d_ff=32", "--model.encoder_layers=1", "--model.decoder_layers=1",
        "--data.train_size=48", "--data.val_size=8", "--data.test_size=8", "--data.batch_size=16",
        "--trainer.max_epochs=1", "--trainer.enable_progress_bar=false"]


def _exit(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    return exit_info.value.code


def test_help_lists_every_subcommand_with_one_line(capsys):
    from ablations.commands import COMMANDS

    assert _exit(["--help"]) == 0
    out = capsys.readouterr().out
    for name in [*LIGHTNING, *COMMANDS, "dashboard"]:
        lines = [ln for ln in out.splitlines() if ln.split()[:1] == [name]]
        assert len(lines) == 1 and len(lines[0].split()) > 3, (name, out)


def test_help_and_version_answer_without_importing_lightning():
    code = ("import sys, time; t = time.time(); from attnlab.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print('lightning' in sys.modules, 'torch' in sys.modules, time.time() - t)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": ""})
    lightning, torch, seconds = proc.stdout.strip().splitlines()[-1].split()
    assert (lightning, torch) == ("False", "False"), proc.stdout
    t0 = time.time()
    version = subprocess.run([sys.executable, "-m", "attnlab", "--version"], cwd=REPO, capture_output=True, text=True,
                             timeout=120, env={"PYTHONPATH": str(REPO), "PATH": ""})
    assert version.returncode == 0 and version.stdout.startswith("attnlab "), version.stderr
    assert time.time() - t0 < 10  # generous: the point is that nothing heavy is imported (asserted above)


def test_unknown_command_suggests_the_closest(capsys):
    assert _exit(["fir"]) == 2
    assert capsys.readouterr().err.strip() == "attnlab: error: no command 'fir'; did you mean fit?"


@pytest.mark.parametrize("option, message", [
    ("--model.nrom=pre", "no option model.nrom; did you mean model.norm?"),
    ("--trainer.max_epohcs=2", "no option trainer.max_epohcs; did you mean trainer.max_epochs?"),
    ("--data.trian_size=3", "no option data.trian_size; did you mean data.train_size?"),
])
def test_misspelt_option_names_the_closest_valid_one(option, message, capsys, tmp_path):
    assert _exit(["fit", "--config", CONFIG, option, f"--run.root={tmp_path}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"attnlab: error: {message}"]
    assert not any(tmp_path.iterdir())


def _printed_config(capsys, *argv: str) -> dict:
    assert _exit(["fit", *argv, "--print_config"]) == 0
    return yaml.safe_load(capsys.readouterr().out)


def test_short_class_names(capsys):
    cfg = _printed_config(capsys, "--model", "TransformerSeq2Seq", "--data", "SyntheticSeq2Seq")
    assert cfg["model"]["class_path"] == "lit_models.families.seq2seq.TransformerSeq2Seq"
    assert cfg["data"]["class_path"] == "datamodules.synthetic.SyntheticSeq2Seq"


@pytest.mark.parametrize(("model", "data", "path"), [
    ("CausalLM", "PromptAnswerTasks", "lit_models.families.causal_lm.CausalLM"),
    ("CausalLM", "TextLM", "lit_models.families.causal_lm.CausalLM"),
])
def test_short_class_names_of_the_decoder_only_family(model, data, path, capsys):
    cfg = _printed_config(capsys, "--model", model, "--data", data)
    assert cfg["model"]["class_path"] == path and cfg["data"]["class_path"].endswith(f".{data}")


def test_short_names_cover_every_family_and_datamodule():
    """Every module of lit_models/families and every datamodules module that defines a LightningDataModule is
    imported for a short name (found by walking the packages, so a new family cannot be left out)."""
    import importlib
    import inspect
    import pkgutil

    import lightning as L

    import datamodules
    import lit_models.families as families
    from attnlab_run.conventions import DATA_MODULES, MODEL_MODULES

    assert set(MODEL_MODULES) == {f"{families.__name__}.{m.name}" for m in pkgutil.iter_modules(families.__path__)}
    found = {c for m in pkgutil.iter_modules(datamodules.__path__)
             for _, c in inspect.getmembers(importlib.import_module(f"datamodules.{m.name}"), inspect.isclass)
             if issubclass(c, L.LightningDataModule) and c.__module__.startswith("datamodules.")}
    leaves = {c for c in found if not any(o is not c and issubclass(o, c) for o in found)}  # bases are not named
    defining = {c.__module__ for c in leaves}
    assert defining <= set(DATA_MODULES), defining - set(DATA_MODULES)


def test_every_config_runs_on_whatever_the_node_has(capsys):
    cfg = _printed_config(capsys, "--config", CONFIG, "--trainer.devices=2")
    assert cfg["trainer"]["accelerator"] == "auto" and str(cfg["trainer"]["devices"]) == "2"
    for path in sorted((REPO / "ablations" / "configs").glob("*.yaml")):
        trainer = yaml.safe_load(path.read_text()).get("trainer", {})
        assert trainer.get("accelerator", "auto") == "auto", path.name


def test_default_root_dir_is_the_run_root(tmp_path, capsys):
    main(["fit", "--config", CONFIG, f"--trainer.default_root_dir={tmp_path / 'lightning_root'}", "--run.name=r",
          *TINY])
    assert (tmp_path / "lightning_root" / "transformer_reverse" / "r" / "summary.json").is_file()
    assert _exit(["fit", "--config", CONFIG, f"--trainer.default_root_dir={tmp_path / 'a'}",
                  f"--run.root={tmp_path / 'b'}", *TINY]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("attnlab: error:")]
    assert len(err) == 1 and "--trainer.default_root_dir" in err[0] and "disagree" in err[0]
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_user_logger_is_kept_beside_ours(tmp_path):
    main(["fit", "--config", CONFIG, f"--run.root={tmp_path / 'runs'}", "--run.name=r", *TINY,
          "--trainer.logger=lightning.pytorch.loggers.CSVLogger", f"--trainer.logger.save_dir={tmp_path / 'mine'}"])
    assert list((tmp_path / "mine").rglob("metrics.csv")), "the user's logger wrote its log"
    assert (tmp_path / "runs" / "transformer_reverse" / "r" / "metrics.csv").is_file()


def test_predict_writes_predictions_jsonl(tmp_path, capsys):
    main(["fit", "--config", CONFIG, f"--run.root={tmp_path}", "--run.name=r", *TINY])
    main(["predict", "--config", CONFIG, f"--run.root={tmp_path}", "--run.name=r", "--ckpt_path=best", *TINY])
    path = tmp_path / "transformer_reverse" / "r" / "predict" / "predictions.jsonl"
    assert f"predictions: {path}" in capsys.readouterr().out
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 8, "one row per test example"
    for row in rows:
        assert set(row) == {"source", "hypothesis", "reference", "score"}
        assert row["source"] and row["reference"] and 0.0 <= row["score"] <= 1.0
        assert row["reference"] == " ".join(reversed(row["source"].split())), "the reverse task's reference"


def test_quiet_silences_progress_bars_and_lines(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ATTNLAB_QUIET", raising=False)
    loud = [a for a in TINY if a != "--trainer.enable_progress_bar=false"]
    main(["fit", "--config", CONFIG, f"--run.root={tmp_path}", "--run.name=loud", *loud])
    out = capsys.readouterr()
    assert "Epoch 0" in out.out + out.err, "the progress bar shows without --quiet"
    main(["fit", "--quiet", "--config", CONFIG, f"--run.root={tmp_path}", "--run.name=quiet", *loud])
    out = capsys.readouterr()
    assert "Epoch 0" not in out.out + out.err and "Sanity Checking" not in out.out + out.err
    import os

    assert os.environ.get("ATTNLAB_QUIET") == "1"
    assert (tmp_path / "transformer_reverse" / "quiet" / "summary.json").is_file()


def test_printed_config_names_the_experiment_the_command_uses(capsys, tmp_path):
    """``--print_config`` printed ``run.experiment: null`` (issue #44), so the printed file, run again, landed in
    ``runs/<its own stem>/``: it names the config's stem, or the experiment the command or a config file gives."""
    assert _printed_config(capsys, "--config", CONFIG)["run"]["experiment"] == Path(CONFIG).stem
    given = _printed_config(capsys, "--config", CONFIG, "--run.experiment=mine")
    assert given["run"]["experiment"] == "mine"
    own = tmp_path / "own.yaml"
    own.write_text("run:\n  experiment: from_file\n")
    assert _printed_config(capsys, "--config", CONFIG, "--config", str(own))["run"]["experiment"] == "from_file"
