"""#24: a termination signal to ``attnlab sweep`` is forwarded to its running trials, which save and
stop; the sweep records them as preempted, exits ``128 + signal`` and leaves no process behind; the
next invocation resumes them from ``last.ckpt``. A sweep killed with SIGKILL takes its trials down
too (PR_SET_PDEATHSIG -> SIGTERM). The trials are a stand-in program (milliseconds to start) that
honours the same contract as ``attnlab fit``: a signal -> ``last.ckpt``, status preempted, exit
``128 + signal``; ``--ckpt_path=last`` continues; each trial also starts a child (like a DDP rank)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from ablations.catalog.questions import REPO
from ablations.runner import make_plan, run_sweep
from tests.tiny_fit import tiny_fit

STEPS = 60  # x 0.05 s: a trial lasts 3 s uninterrupted
FAKE_TRIAL = textwrap.dedent('''
    import json, os, signal, subprocess, sys, time
    from pathlib import Path
    args = dict(a[2:].split("=", 1) for a in sys.argv[2:] if a.startswith("--"))
    run = Path(args["run.root"]) / args["run.experiment"] / args["run.name"]
    (run / "checkpoints").mkdir(parents=True, exist_ok=True)
    last = run / "checkpoints" / "last.ckpt"
    step = int(last.read_text()) if args.get("ckpt_path") == "last" else 0
    rank = subprocess.Popen([sys.executable, "-c", "import time\\nwhile True: time.sleep(0.05)"])
    with (run / "pids").open("a") as f:
        f.write(f"{os.getpid()} {rank.pid}\\n")
    with (run / "calls").open("a") as f:
        f.write(f"fit from {step}\\n")
    got = []
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
        signal.signal(sig, lambda signum, frame: got.append(signum))
    def summary(status, **extra):
        (run / "summary.json").write_text(json.dumps({"status": status, "global_step": step, **extra}))
    summary("running")
    while step < STEPS and not got:
        time.sleep(0.05)
        step += 1
        (run / "progress").write_text(str(step))
    last.write_text(str(step))
    rank.terminate()
    rank.wait()
    if got:
        summary("preempted", exit_code=128 + got[0])
        sys.exit(128 + got[0])
    summary("finished", metrics={"val/score": 1.0})
''').replace("STEPS", str(STEPS))


@pytest.fixture()
def sweep_file(tmp_path: Path) -> Path:
    program = tmp_path / "fake_trial.py"
    program.write_text(FAKE_TRIAL)
    sweep = {"name": "sig", "program": str(program), "method": "grid",
             "metric": {"name": "val/score", "goal": "maximize"}, "parameters": {"x": {"values": [1, 2]}},
             "command": ["${env}", "${interpreter}", "${program}", "fit", "${args}"]}
    path = tmp_path / "sig.yaml"
    path.write_text(yaml.safe_dump(sweep))
    return path


def _start_sweep(sweep_file: Path, root: Path) -> subprocess.Popen:
    code = "import sys; from ablations.commands import sweep_main; sys.exit(sweep_main(sys.argv[1:]))"
    return subprocess.Popen([sys.executable, "-c", code, str(sweep_file), f"--root={root}", "--jobs=2", "--quiet"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _trials(root: Path) -> list[Path]:
    return [root / "sig" / "x=1", root / "sig" / "x=2"]


def _wait_until_training(sweep: subprocess.Popen, root: Path) -> None:
    deadline = time.time() + 120
    while not all((t / "progress").is_file() for t in _trials(root)):
        assert sweep.poll() is None and time.time() < deadline, "the trials never started"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _pids(root: Path) -> list[int]:
    return [int(p) for t in _trials(root) for p in (t / "pids").read_text().split()]


def _assert_no_survivor(root: Path) -> None:
    pids = _pids(root)
    deadline = time.time() + 20
    while any(_alive(p) for p in pids) and time.time() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if _alive(p)], "a trial (or its child) outlived the sweep"


def _resume_and_check(sweep_file: Path, root: Path) -> None:
    """The next invocation continues each trial from its checkpoint, not from step 0."""
    sweep = yaml.safe_load(sweep_file.read_text())
    outcomes = run_sweep(make_plan(sweep, root=root, scale="full", threads=1, interpreter=sys.executable), jobs=2,
                         echo=lambda line: None)
    assert sorted(o.status for o in outcomes) == ["finished", "finished"]
    for trial in _trials(root):
        calls = (trial / "calls").read_text().splitlines()
        assert len(calls) == 2 and calls[0] == "fit from 0" and calls[1] != "fit from 0", calls
        summary = json.loads((trial / "summary.json").read_text())
        assert summary["status"] == "finished" and summary["global_step"] == STEPS
        assert json.loads((trial / "trial.json").read_text())["resumed"] is True


@pytest.mark.parametrize("sig", [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.slow),
                                 pytest.param(signal.SIGUSR1, marks=pytest.mark.slow)], ids=lambda s: s.name)
def test_a_signal_to_the_sweep_preempts_its_trials_and_the_next_run_resumes_them(sweep_file, tmp_path, sig):
    root = tmp_path / "runs"
    sweep = _start_sweep(sweep_file, root)
    _wait_until_training(sweep, root)
    sweep.send_signal(sig)
    out, err = sweep.communicate(timeout=120)
    assert sweep.returncode == 128 + sig, err[-2000:]
    assert f"stopped by {sig.name}" in err
    _assert_no_survivor(root)
    for trial in _trials(root):
        assert json.loads((trial / "trial.json").read_text())["status"] == "preempted"
        assert 0 < int((trial / "checkpoints" / "last.ckpt").read_text()) < STEPS
    _resume_and_check(sweep_file, root)


def test_a_sweep_killed_with_sigkill_takes_its_trials_down(sweep_file, tmp_path):
    """No handler runs on SIGKILL: the kernel's parent-death signal (SIGTERM) stops the trials, which
    save as on a preemption; the next invocation resumes them."""
    root = tmp_path / "runs"
    sweep = _start_sweep(sweep_file, root)
    _wait_until_training(sweep, root)
    sweep.kill()
    sweep.communicate(timeout=60)
    _assert_no_survivor(root)
    for trial in _trials(root):
        assert json.loads((trial / "summary.json").read_text())["status"] == "preempted"
    _resume_and_check(sweep_file, root)


# 64 / 16: 4 optimizer steps per epoch, 10 epochs
TINY_FIT = tiny_fit(seed=1, max_epochs=10, task="reverse", vocab_size=12, min_len=2, max_len=5, train_size=64,
                    val_size=8, test_size=8, batch_size=16)


def _process_group(pgid: int) -> list[int]:
    """Live processes in process group ``pgid`` (from /proc)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


@pytest.mark.slow
def test_sigterm_to_a_real_sweep_preempts_its_fit_and_the_next_run_resumes_it(tmp_path):
    """End to end with ``attnlab fit`` trials: SIGTERM to the sweep once the trial has a checkpoint;
    the trial's whole process group is gone afterwards, and the next invocation ends the trial at its
    planned step count."""
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY_FIT))
    sweep = {"name": "sig", "program": str(REPO / "attnlab_run" / "cli.py"), "method": "grid",
             "metric": {"name": "val/exact_match", "goal": "maximize"}, "parameters": {"seed_everything": {"value": 3}},
             "command": ["${env}", "${interpreter}", "${program}", "fit", "--config", str(config), "${args}"]}
    sweep_file = tmp_path / "sig.yaml"
    sweep_file.write_text(yaml.safe_dump(sweep))
    root = tmp_path / "runs"
    proc = _start_sweep(sweep_file, root)
    run = root / "sig" / "default"  # no varied parameter: the trial name
    deadline = time.time() + 300
    while not (run / "checkpoints" / "last.ckpt").is_file():
        assert proc.poll() is None and time.time() < deadline, "the trial never saved a checkpoint"
        time.sleep(0.1)
    groups = _sessions_below(proc.pid)  # the trial's (cold), or the warm server's and the trial's
    assert groups, "the trial runs in no session of its own"
    proc.send_signal(signal.SIGTERM)
    err = proc.communicate(timeout=300)[1]
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert [g for g in groups if _process_group(g)] == [], "a trial's process group outlived the sweep"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "preempted" and 0 < summary["global_step"] < 40
    assert json.loads((run / "trial.json").read_text())["status"] == "preempted"
    plan = make_plan(yaml.safe_load(sweep_file.read_text()), root=root, scale="full", threads=1,
                     interpreter=sys.executable)
    assert [o.status for o in run_sweep(plan, echo=lambda line: None)] == ["finished"]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["global_step"] == 40


def _sessions_below(root: int) -> list[int]:
    """The session leaders among ``root``'s descendants (from /proc): each trial's, and the warm server's."""
    parents: dict[int, int] = {}
    sessions: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        pid = int(stat.parent.name)
        parents[pid], sessions[pid] = int(fields[1]), int(fields[3])
    below, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - below
        below |= frontier
    return sorted(pid for pid in below if sessions[pid] == pid)
