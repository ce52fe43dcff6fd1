"""The runner's trial command is exactly the argument list the installed ``wandb agent`` builds."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

import pytest
from wandb import wandb_agent

from ablations.questions import SWEEPS_DIR
from ablations.runner import load_sweep, render_args, render_command


def agent_command(sweep: dict[str, Any], params: dict[str, Any], monkeypatch, tmp_path) -> list[str]:
    """Run the agent's own ``Agent._command_run`` with a fake process class that records the command."""
    captured: dict[str, Any] = {}

    class FakeProcess:
        def __init__(self, command=None, env=None, **kwargs) -> None:
            captured["command"] = command

    monkeypatch.setattr(wandb_agent, "AgentProcess", FakeProcess)
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SWEEP_ID", "sweep0")
    monkeypatch.setenv("WANDB_RUN_ID", "placeholder")  # the agent sets it; monkeypatch restores it
    monkeypatch.setenv("WANDB_SWEEP_PARAM_PATH", "placeholder")
    agent = SimpleNamespace(_sweep_command=copy.deepcopy(sweep.get("command")), _function=None, _in_jupyter=False,
                            _forward_signals=False, _run_processes={}, _last_report_time=None)
    command = {"run_id": "run0", "program": sweep.get("program"), "args": {k: {"value": v} for k, v in params.items()}}
    wandb_agent.Agent._command_run(agent, command)
    return captured["command"]


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
    sweep = {"program": "lit_models/cli.py", "command": [
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
