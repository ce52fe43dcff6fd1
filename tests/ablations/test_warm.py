"""Warm trials (ablations/engine/warm.py): a trial forked from the preloaded server writes the same run
directory with the same metrics as a cold subprocess, and its exit code and output reach the runner
the same way; only commands running the sweep's own interpreter go warm."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from ablations.engine.warm import WarmProcess, WarmServer, server_for, warm_argv
from ablations.runner import make_plan, run_sweep
from tests.ablations.test_runner_cli import TINY, _sweep

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="warm trials fork (Linux)")

PY = sys.executable


@pytest.mark.parametrize(("command", "expected"), [
    (["/usr/bin/env", PY, "attnlab/cli.py", "fit", "--x=1"], ["attnlab/cli.py", "fit", "--x=1"]),
    ([PY, "-m", "attnlab", "fit"], ["-m", "attnlab", "fit"]),
    (["/usr/bin/env", "python3", "attnlab/cli.py", "fit"], None),  # another interpreter: cold
    ([PY, "-u", "x.py"], None),  # interpreter options: cold
    (["/usr/bin/env", "A=1", PY, "x.py"], None),  # env assignments: cold
    (["bash", "-c", "echo"], None),
])
def test_only_the_sweeps_interpreter_running_a_script_or_module_goes_warm(command, expected):
    assert warm_argv(command, PY) == expected


@pytest.mark.parametrize(("env", "threads", "expected"), [
    ({}, 1, True),  # quick scale, --jobs > 1, --threads 1: warm by default
    ({"ATTNLAB_WARM_TRIALS": "0"}, 1, False),  # turned off
    ({"ATTNLAB_WARM_TRIALS": "no"}, 1, False),
    ({}, 4, False),  # BLAS threads: the server would refuse to fork, so the default stays cold, without a warning
])
def test_trials_are_warm_by_default_where_the_server_can_serve(monkeypatch, tmp_path, env, threads, expected):
    monkeypatch.delenv("ATTNLAB_WARM_TRIALS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    sweep = _sweep(tmp_path / "tiny.yaml", ["pre"])
    assert make_plan(sweep, root=tmp_path, scale="full", threads=threads, interpreter=PY).warm is expected
    assert make_plan(sweep, root=tmp_path, scale="full", threads=threads, interpreter=PY, warm=False).warm is False


def _both(sweep: dict, root: Path, monkeypatch: pytest.MonkeyPatch, jobs: int = 1) -> dict[bool, dict]:
    """The sweep run cold and warm, in two roots: {warm: {trial name: Outcome}}; every warm trial forked."""
    forked: list[int] = []
    launch = WarmServer.launch

    def counted(self: WarmServer, *args: object, **kwargs: object) -> WarmProcess:
        forked.append(1)
        return launch(self, *args, **kwargs)

    monkeypatch.setattr(WarmServer, "launch", counted)
    outcomes = {}
    for warm in (False, True):
        plan = make_plan(sweep, root=root / str(warm), scale="full", threads=1, interpreter=PY, warm=warm)
        outcomes[warm] = {o.trial.name: o for o in run_sweep(plan, jobs=jobs, echo=lambda line: None, timeout_s=600)}
        assert len(forked) == (len(outcomes[warm]) if warm else 0), "warm trials are forked, cold ones not"
    return outcomes


def _files(run: Path) -> set[str]:
    return {str(p.relative_to(run)) for p in run.rglob("*") if p.is_file()}


def test_a_tiny_trial_warm_and_cold_writes_the_same_run_directory_and_metrics(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    outcomes = _both(_sweep(config, ["pre"]), tmp_path, monkeypatch)
    cold, warm = outcomes[False]["norm=pre,seed=3"], outcomes[True]["norm=pre,seed=3"]
    assert cold.status == warm.status == "finished" and cold.returncode == warm.returncode == 0
    runs = [tmp_path / str(w) / "tiny" / "norm=pre,seed=3" for w in (False, True)]
    assert _files(runs[0]) == _files(runs[1])
    assert cold.summary_metrics == warm.summary_metrics and cold.metric == warm.metric is not None
    summaries = [json.loads((r / "summary.json").read_text()) for r in runs]
    assert summaries[0]["global_step"] == summaries[1]["global_step"] > 0


EXITS = textwrap.dedent('''
    import sys
    args = dict(a[2:].split("=", 1) for a in sys.argv[2:] if a.startswith("--"))
    print("to stdout", flush=True)
    x = args["x"]
    if x == "raise":
        raise ValueError("a bad value in the trial")
    if x == "message":
        sys.exit("attnlab: error: stopped with a message")
    print(f"attnlab: error: exit {x}", file=sys.stderr)
    sys.exit(int(x))
''')


def test_exit_codes_and_output_reach_the_runner_the_same_way(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    program = tmp_path / "exits.py"
    program.write_text(EXITS)
    sweep = {"name": "exits", "program": str(program), "method": "grid",
             "parameters": {"x": {"values": [0, 2, 3, "raise", "message"]}},
             "command": ["${env}", "${interpreter}", "${program}", "fit", "${args}"]}
    outcomes = _both(sweep, tmp_path, monkeypatch, jobs=2)
    codes = {name: o.returncode for name, o in outcomes[True].items()}
    assert codes == {"x=0": 0, "x=2": 2, "x=3": 3, "x=raise": 1, "x=message": 1}
    assert codes == {name: o.returncode for name, o in outcomes[False].items()}
    for name in codes:
        logs = [(tmp_path / str(w) / "exits" / name / "trial.log").read_text().splitlines() for w in (False, True)]
        assert logs[0][1] == logs[1][1] == "to stdout", logs  # line 0: the command, as the runner wrote it
        assert logs[0][-1] == logs[1][-1], logs  # the stderr tail: the error line or the exception


def test_a_warm_trial_leads_its_own_session_and_answers_like_popen(tmp_path, monkeypatch):
    """What stop_process and signal_group rely on: killpg(pid) reaches it; poll/wait report -signal."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    plan = make_plan({"name": "s", "method": "grid", "parameters": {"x": {"value": 1}}}, root=tmp_path,
                     scale="full", threads=1, interpreter=PY)  # the environment of the sweeps above: their server
    server = server_for(interpreter=PY, env=plan.env, cwd=plan.cwd)
    assert server is not None
    script = tmp_path / "sleep.py"
    script.write_text("import os, time\nprint(os.getpgid(0) == os.getpid() == os.getsid(0), flush=True)\n"
                      "time.sleep(60)\n")
    log = tmp_path / "log"
    log.touch()
    proc = server.launch([str(script)], command=["sleep.py"], env=plan.env, cwd=tmp_path, log_path=log)
    assert proc.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.1)
    deadline = time.time() + 60
    while not log.read_text() and time.time() < deadline:
        time.sleep(0.05)
    assert log.read_text().strip() == "True"
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM
