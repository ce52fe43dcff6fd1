"""#50: a run's record is written only by the run that made it. An evaluation (``test`` / ``validate`` /
``predict``) of a fitted run, however it ends -- exit 0, an exception, SIGTERM, SIGINT, SIGKILL, refused
input -- leaves every file of the fit byte-identical; its own status lives in its own record
(``<run>/<subcommand>/<id>/evaluation.json``); the report still counts the run as finished and shows
the evaluation as a note; the sweep still skips the trial (it neither retrains nor resumes it).

The fit runs once per module; each case evaluates a copy of it. Signals need a child process; the
signal is sent by the child itself after its first evaluation batch (``fault_injection.SignalAt``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ablations.engine.trialstate import Trial, resumable
from ablations.reports.results import load_run
from ablations.runner import _done_outcome
from attnlab_run.cli import main
from attnlab_run.evaluations import EVALUATION_FOLDERS, evaluation_records
from attnlab_run.rundir import Status, read_summary
from tests.cli.quiet_runs import _quiet  # noqa: F401 - autouse fixture
from tests.cli.trees import tree

REPO = Path(__file__).parents[2]
CONFIG = str(REPO / "ablations" / "configs" / "transformer_reverse.yaml")
TINY = ["--trainer.max_steps=4", "--trainer.enable_progress_bar=false", "--trainer.log_every_n_steps=1",
        "--model.d_model=16", "--model.d_ff=32", "--model.encoder_layers=1", "--model.decoder_layers=1",
        "--data.train_size=32", "--data.val_size=8", "--data.test_size=8", "--data.batch_size=8",
        "--run.figure_drawings=1"]


def _common(root: Path) -> list[str]:
    return ["--config", CONFIG, f"--run.root={root}", "--run.name=P", *TINY]


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> Path:
    """The root of one finished tiny fit (``<root>/transformer_reverse/P``), recorded as a sweep trial."""
    root = tmp_path_factory.mktemp("fit")
    saved = {k: os.environ.get(k) for k in ("WANDB_MODE", "ATTNLAB_RUN_DIR", "WANDB_RUN_ID")}
    os.environ["WANDB_MODE"] = "disabled"
    os.environ.pop("WANDB_RUN_ID", None)
    try:
        main(["fit", *_common(root)])
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
    run = root / "transformer_reverse" / "P"
    (run / "trial.json").write_text(json.dumps({"status": "finished", "command": ["attnlab", "fit"]}))
    return root




def fit_hashes(run: Path) -> dict[str, str]:
    """sha256 of every file of the fit: the run directory less its evaluations' folders and the owner's lock file
    (which a killed evaluation leaves behind, and the next command takes over as stale)."""
    return tree(run, skip=lambda rel: rel.parts[0] in EVALUATION_FOLDERS or rel.name == ".owner.lock")


def broken_checkpoint(run: Path, dest: Path) -> Path:
    """``last.ckpt`` with one ``state_dict`` key deleted (the issue's reproduction)."""
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    del ckpt["state_dict"][next(iter(ckpt["state_dict"]))]
    torch.save(ckpt, dest)
    return dest


def _signal_arg(sig: str, fault: str = "SignalAt") -> str:
    spec = {"class_path": f"attnlab_run.fault_injection.{fault}",
            "init_args": {"step": 0, "phase": "evaluation", "signal": sig}}
    return f"--trainer.callbacks+={json.dumps(spec)}"


RAISE = _signal_arg("TERM", fault="RaiseAt")  # an exception in the evaluation's first batch


def _in_process(argv: list[str]) -> int:
    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    except Exception:  # noqa: BLE001 - the crash case: a traceback, exit 1 from the console script
        return 1
    return 0


# ``python -m attnlab_run.cli`` with Ctrl+C's default, KeyboardInterrupt, whatever this process inherited: a shell
# without job control starts a background command (``bash .ci/run &``) with SIGINT ignored, its children inherit
# that, and Python then leaves SIGINT ignored, so the SIGINT ending would exit 0.
CLI_WITH_CTRL_C = ("import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
                   "runpy.run_module('attnlab_run.cli', run_name='__main__', alter_sys=True)")


def _child(argv: list[str]) -> int:
    env = {**os.environ, "PYTHONPATH": str(REPO), "WANDB_MODE": "disabled"}
    env.pop("ATTNLAB_RUN_DIR", None)
    return subprocess.run([sys.executable, "-c", CLI_WITH_CTRL_C, *argv], cwd=REPO, env=env,
                          capture_output=True, timeout=300).returncode


# how an evaluation ends: the argv tail, whether it needs a child process, and its exit status. SIGTERM: Lightning
# 2.6's evaluation loop stops only before a batch that is not the last; the tiny test set is one batch, so the test
# ends as usual (0). SIGINT: Lightning's KeyboardInterrupt handler marks the run interrupted and exits 1.
ENDINGS = {
    "exit0": (["--ckpt_path=best"], False, 0),
    "exception": (["--ckpt_path=best", RAISE], False, 1),
    "refused": (["--ckpt_path=JUNK"], False, 2),
    "refused-checkpoint": (["--ckpt_path=BROKEN"], False, 2),
    "SIGTERM": (["--ckpt_path=best", _signal_arg("TERM")], True, 0),
    "SIGINT": (["--ckpt_path=best", _signal_arg("INT")], True, 1),
    "SIGKILL": (["--ckpt_path=best", _signal_arg("KILL")], True, -9),
}
CASES = [("test", e) for e in ENDINGS] + [(s, e) for s in ("validate", "predict") for e in ("exit0", "exception")]


@pytest.mark.parametrize(("subcommand", "ending"), CASES)
def test_an_evaluation_however_it_ends_leaves_the_fit_byte_identical(fitted, tmp_path, subcommand, ending):
    root = tmp_path / "root"
    shutil.copytree(fitted, root)
    run = root / "transformer_reverse" / "P"
    before = fit_hashes(run)
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(b"not a checkpoint")
    tail, child, expected = ENDINGS[ending]
    broken = broken_checkpoint(run, tmp_path / "broken.ckpt")
    tail = [a.replace("BROKEN", str(broken)).replace("JUNK", str(junk)) for a in tail]
    argv = [subcommand, *_common(root), *tail]
    code = _child(argv) if child else _in_process(argv)
    assert code == expected, f"{subcommand} ending by {ending} exits {code}, not {expected}"

    assert fit_hashes(run) == before, f"{subcommand} ending by {ending} rewrote the fit's record"
    assert read_summary(run).status is Status.FINISHED
    assert _done_outcome(Trial("P", {}, run, []), None) is not None, "the next sweep would run the trial again"
    assert not resumable(run), "the next sweep would resume a finished trial"
    record = load_run(run)
    assert record is not None and record.status == "finished", "the report must count the run as finished"
    if subcommand != "predict" and ending not in ("exit0", "refused", "refused-checkpoint") and code != 0:
        assert record.notes, "a stopped or failed evaluation shows as a note on its run"
        assert all("\n" not in note and "|" not in note for note in record.notes), "a note fits a table cell"


def test_a_failed_evaluation_is_recorded_in_its_own_record(fitted, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(fitted, root)
    run = root / "transformer_reverse" / "P"
    assert _in_process(["test", *_common(root), "--ckpt_path=best", RAISE]) == 1
    assert _in_process(["test", *_common(root), "--ckpt_path=best", "--decode.strategy=beam"]) == 0
    by_status = {r["status"]: (key, r) for key, r in evaluation_records(run).items()}
    assert set(by_status) == {"failed", "finished"}
    key, failed = by_status["failed"]
    assert "injected fault" in failed["error"] and not failed["metrics"]
    assert (run / "test" / key / "evaluation.json").is_file()
    assert by_status["finished"][1]["metrics"]["test/loss"] > 0
    assert load_run(run).evaluations == {"test": by_status["finished"][0]}, "a failed evaluation is never read"


def test_a_test_without_ckpt_path_scores_the_fits_checkpoint_under_the_fits_arm(tmp_path, monkeypatch, capsys):
    """#44: ``test`` of a fitted run without ``--ckpt_path`` evaluates its best checkpoint (not an untrained
    model), and its W&B run is tagged with the fit's arm (rope), not the --config file's (sinusoidal)."""
    from attnlab_run.cli import run_cli
    from tests.cli.wandb_records import offline_runs

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_PROJECT", "attnlab-test")
    axes = lambda experiment: ("model.positions",)  # noqa: E731 - as a question names its arm
    run_cli(["fit", *_common(tmp_path), "--model.positions=rope"], arm_axes=axes)
    os.environ.pop("ATTNLAB_RUN_DIR", None)
    run = tmp_path / "transformer_reverse" / "P"
    before = fit_hashes(run)
    capsys.readouterr()
    run_cli(["test", *_common(tmp_path)], arm_axes=axes)
    assert "its checkpoints/best.ckpt" in capsys.readouterr().err
    (record,) = evaluation_records(run).values()
    assert record["checkpoint"] == "checkpoints/best.ckpt" and record["status"] == "finished"
    (evaluation,) = [r for r in offline_runs(run) if r["job_type"] == "eval"]
    (fit,) = [r for r in offline_runs(run) if r["job_type"] == "fit"]
    assert evaluation["tags"] == fit["tags"] == ["positions=rope", "seed=1"]
    # the fit's W&B record is held byte for byte by test_evaluations.py::test_two_tests_leave_the_fit_as_it_was...
    # W&B's own folders are left out: in one process the fit's wandb-core service keeps writing its debug log
    fit_only = lambda hashes: {k: v for k, v in hashes.items()  # noqa: E731
                               if not k.startswith(("wandb/", "wandb_cache/", "wandb_data/"))}
    assert fit_only(fit_hashes(run)) == fit_only(before), "the fit's files are unchanged"
