"""The runner's trial command is exactly the argument list the installed ``wandb agent`` builds, and
that command, run with the environment the agent sets, is a complete trial: the question's run
directory and metric (``test/*`` included), and an offline W&B run grouped, typed and tagged for
the dashboard, with every setting once under its CLI path and the attention images."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from wandb import wandb_agent

from ablations.catalog.questions import QUESTIONS, REPO, SWEEPS_DIR
from ablations.runner import load_sweep, render_args, render_command


def agent_command(sweep: dict[str, Any], params: dict[str, Any], monkeypatch, tmp_path,
                  run_id: str = "run0") -> list[str]:
    """Run the agent's own ``Agent._command_run`` with a fake process class that records the command."""
    return agent_launch(sweep, params, monkeypatch, tmp_path, run_id=run_id)[0]


def agent_launch(sweep: dict[str, Any], params: dict[str, Any], monkeypatch, tmp_path,
                 run_id: str = "run0") -> tuple[list[str], dict[str, str]]:
    """The command and environment ``wandb agent`` would start the trial with."""
    captured: dict[str, Any] = {}

    class FakeProcess:
        def __init__(self, command=None, env=None, **kwargs) -> None:
            captured["command"] = command
            captured["env"] = dict(env or {})

    monkeypatch.setattr(wandb_agent, "AgentProcess", FakeProcess)
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SWEEP_ID", "sweep0")
    monkeypatch.setenv("WANDB_RUN_ID", "placeholder")  # the agent sets it; monkeypatch restores it
    monkeypatch.setenv("WANDB_SWEEP_PARAM_PATH", "placeholder")
    agent = SimpleNamespace(_sweep_command=copy.deepcopy(sweep.get("command")), _function=None, _in_jupyter=False,
                            _forward_signals=False, _run_processes={}, _last_report_time=None)
    command = {"run_id": run_id, "program": sweep.get("program"), "args": {k: {"value": v} for k, v in params.items()}}
    wandb_agent.Agent._command_run(agent, command)
    return captured["command"], captured["env"]


SWEEPS = sorted(SWEEPS_DIR.glob("*.yaml"))


@pytest.mark.parametrize("path", SWEEPS, ids=[p.stem for p in SWEEPS])
def test_sweep_command_equals_agent(path, monkeypatch, tmp_path):
    sweep = load_sweep(path)
    params = {k: (spec["values"][-1] if "values" in spec else spec["value"]) for k, spec in
              sorted(sweep["parameters"].items())}
    assert render_command(sweep, params) == agent_command(sweep, params, monkeypatch, tmp_path)


def test_tricky_values_and_macros_equal_agent(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNLAB_TEST_VAR", "from-env")
    monkeypatch.delenv("ATTNLAB_UNSET_VAR", raising=False)
    sweep = {"program": "attnlab_run/cli.py", "command": [
        "${env}", "${interpreter}", "${program}", "fit", "--tag=${envvar:ATTNLAB_TEST_VAR}",
        "${envvar:ATTNLAB_UNSET_VAR}", "${args}", "${args_no_hyphens}", "${args_json}", "${args_no_equals}",
        "${args_no_boolean_flags}", "${args_append_hydra}", "${args_override_hydra}"]}
    params = {"model.lr": 3e-05, "model.tied": True, "model.flag": False, "model.heads": 8, "model.name": "a b",
              "model.big": 1e16, "model.ratio": 0.1}
    ours = render_command(sweep, params)
    assert ours == agent_command(sweep, params, monkeypatch, tmp_path)
    assert "--model.lr=3e-05" in ours and "--model.tied=True" in ours and "--tag=from-env" in ours


def test_render_args_is_str_of_value():
    assert render_args({"a.b": 1.0, "c": "x", "d": True}) == ["--a.b=1.0", "--c=x", "--d=True"]


def test_sweep_files_name_project_experiment_and_test_after_fit():
    """Everything a trial needs is in its own command: the question's name as the experiment, and a
    test of the best checkpoint exactly where the question reads a ``test/`` metric or probe."""
    for name, question in QUESTIONS.items():
        sweep = load_sweep(question.sweep_path)
        command = [str(c) for c in sweep["command"]]
        assert sweep.get("project") == "attnlab", name
        assert f"--run.experiment={name}" in command, name
        reads_test = any(k.startswith("test/") for k in (question.metric, *question.probes))
        assert ("--run.test_after_fit=true" in command) == reads_test, name
        assert command[-1] == "${args}", f"{name}: sweep values must come last to override the config"


# Tiny values for the questions whose metric is a test/* key (they run fit, then test, in one trial).
TINY: dict[str, dict[str, Any]] = {
    "positions": {"model.positions": "rope", "model.d_model": 16, "model.d_ff": 32, "model.encoder_layers": 1,
                  "model.decoder_layers": 1, "data.train_size": 64, "data.val_size": 8, "data.test_size": 8,
                  "data.batch_size": 16, "data.test_max_len": 14},
    "caption_attention": {"model.attention": "additive", "model.cnn_width": 8, "model.hidden_size": 16,
                          "model.embed_dim": 8, "model.grid_size": 2, "data.train_size": 32, "data.val_size": 8,
                          "data.test_size": 8, "data.batch_size": 16},
}


def _run_agent_trial(question: str, run_id: str, root: Path, monkeypatch, tmp_path, *extra: tuple[str, Any]) -> Path:
    sweep = load_sweep(QUESTIONS[question].sweep_path)
    params = {**TINY[question], "seed_everything": 2, "trainer.max_epochs": 1, "trainer.enable_progress_bar": False,
              "run.root": str(root), **dict(extra)}
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_PROJECT", "attnlab-test")
    command, env = agent_launch(sweep, params, monkeypatch, tmp_path, run_id=run_id)
    assert command[:3] == ["/usr/bin/env", "python", "attnlab/cli.py"]
    assert env["WANDB_RUN_ID"] == run_id and env["WANDB_SWEEP_ID"] == "sweep0" and env["WANDB_SWEEP_PARAM_PATH"]
    # the agent's shell has the project's environment active: its `python` on PATH
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", OMP_NUM_THREADS="1",
               PYTHONPATH=f"{REPO}{os.pathsep}{env.get('PYTHONPATH', '')}")
    proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    noisy = ("anonymous", "Tip:", "git root")
    noise = [ln for ln in (proc.stdout + proc.stderr).splitlines() if any(w in ln for w in noisy)]
    assert not noise, noise
    return root / question / run_id


def test_agent_trials_of_two_questions_end_to_end(monkeypatch, tmp_path):
    from ablations.reports.results import experiment_dirs, load_experiment
    from attnlab_run.rundir import Status, read_summary
    from tests.cli.wandb_records import offline_run

    root = tmp_path / "runs"
    for question, axis, value in (("positions", "model.positions", "rope"),
                                  ("caption_attention", "model.attention", "additive")):
        run = _run_agent_trial(question, f"{question}-t1", root, monkeypatch, tmp_path)
        summary = read_summary(run)
        metric = QUESTIONS[question].metric
        assert summary.status is Status.FINISHED and metric in summary.metrics, (question, summary.metrics.keys())
        wb = offline_run(run)
        assert [(r["id"], r["group"], r["job_type"], r["sweep_id"], r["project"]) for r in wb["runs"]] == [
            (f"{question}-t1", question, "fit", "sweep0", "attnlab-test")]
        short = axis.split(".")[-1]
        assert wb["runs"][0]["tags"] == [f"{short}={value}", "seed=2"]
        assert wb["runs"][0]["name"] == f"{short}={value},seed=2"
        assert {axis, "seed_everything", "trainer.max_epochs", "run.experiment"} <= set(wb["config"])
        assert short not in wb["config"], "each setting once, under its CLI path"
        assert metric in wb["history"] and any(k.startswith("val/") for k in wb["history"])
        images = list(run.glob("wandb/offline-run-*/files/media/images/**/*.png"))
        assert images, "attention images reach W&B"
    found = {name: load_experiment(d) for name, d in experiment_dirs(root).items()}
    assert {name: [r.name for r in runs] for name, runs in found.items()} == {
        "positions": ["positions-t1"], "caption_attention": ["caption_attention-t1"]}


@pytest.mark.slow
@pytest.mark.ddp
def test_agent_trial_under_two_process_ddp_is_one_run(monkeypatch, tmp_path):
    from tests.cli.wandb_records import offline_run

    root = tmp_path / "runs"
    run = _run_agent_trial("positions", "ddp-t1", root, monkeypatch, tmp_path, ("trainer.devices", 2),
                           ("trainer.accelerator", "cpu"), ("trainer.strategy", "ddp"))
    assert [p.name for p in (root / "positions").iterdir()] == ["ddp-t1"], "one run directory"
    assert len(offline_run(run)["runs"]) == 1 and len(offline_run(run)["files"]) == 1, "one W&B run"
