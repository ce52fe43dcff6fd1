"""Issue #45: runs that cannot collide, crashes that are never silently restarted, models that cannot
exhaust the machine. Each case runs ``attnlab`` as a subprocess and asserts the exit status, the one
stderr line, no traceback and (where a run existed) a byte-identical file tree.

No case depends on timing: a fit stops itself at an exact step (``attnlab_run.fault_injection.SignalAt``
with ``STOP`` to hold it while it owns its run directory, ``KILL`` to crash it).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnlab_run.launch import launch_rank
from attnlab_run.ownership import LOCK_NAME, Owner, acquire, release
from tests.cli.trees import tree

REPO = Path(__file__).parents[2]
CONFIG = str(REPO / "ablations" / "configs" / "transformer_reverse.yaml")
TINY = ["--data.train_size=32", "--data.val_size=8", "--data.test_size=8", "--data.batch_size=16",
        "--model.d_model=16", "--model.d_ff=32", "--model.encoder_layers=1", "--model.decoder_layers=1",
        "--trainer.enable_progress_bar=false", "--trainer.max_steps=8"]
MEMORY_CAP = 2 * 2**30
"""RLIMIT_DATA of a child that must refuse a memory bomb: importing torch and Lightning takes ~0.9 GiB of
data segment; a regression that allocates fails at the cap instead of swapping the machine."""


def _env() -> dict[str, str]:
    drop = ("ATTNLAB_RUN_DIR", "ATTNLAB_RESUME_CKPT", "WANDB_RUN_ID", "RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return {**env, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}


def _fit(root: Path, name: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "attnlab", "fit", "--config", CONFIG, *TINY, f"--run.root={root}",
            f"--run.name={name}", *extra]


def _signal_at(step: int, sig: str) -> str:
    spec = {"class_path": "attnlab_run.fault_injection.SignalAt", "init_args": {"step": step, "signal": sig}}
    return f"--trainer.callbacks+={json.dumps(spec)}"


def _refused(proc: subprocess.CompletedProcess[str]) -> str:
    """Exit 2, one stderr line ``attnlab: error: ...``, no traceback, nothing on stdout; the line."""
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnlab: error: "), proc.stderr[-3000:]
    assert proc.stdout == ""
    return lines[0]


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600, **kw)


def _wait_stopped(proc: subprocess.Popen, timeout: float = 600) -> None:
    """Wait until ``proc`` stopped itself (SIGSTOP), or fail."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        state = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "T":
            return
        assert proc.poll() is None, f"the first fit ended ({proc.returncode}) before it stopped"
        time.sleep(0.2)
    raise AssertionError("the first fit never stopped")


def _logged(run: Path) -> list[tuple[str, ...]]:
    """Each metrics.csv row as (step, the columns it fills): a second writer would repeat some."""
    rows = (run / "metrics.csv").read_text().splitlines()
    header = rows[0].split(",")
    at = header.index("step")
    return [(r.split(",")[at], *(h for h, v in zip(header, r.split(","), strict=True) if v)) for r in rows[1:]]


# ------------------------------------------------------------------------------------ concurrency
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process state from /proc")
def test_a_different_fit_started_while_the_first_runs_is_refused_and_the_first_is_intact(tmp_path):
    """The first fit stops itself at step 4 holding its run directory; a second fit with the same
    --run.name and another --model.norm is refused naming the owner, and writes nothing; the first then
    finishes with its own config and every step logged once."""
    root = tmp_path / "runs"
    first = subprocess.Popen(_fit(root, "conc", "--model.norm=pre", _signal_at(4, "STOP")), cwd=REPO, env=_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_stopped(first)
        run = root / "transformer_reverse" / "conc"
        owner = Owner.parse((run / LOCK_NAME).read_text())
        assert owner.pid == first.pid
        before = tree(tmp_path)
        line = _refused(_run(_fit(root, "conc", "--model.norm=post")))
        assert f"{run} is in use by {first.pid}@" in line
        assert tree(tmp_path) == before
    finally:
        first.send_signal(signal.SIGCONT)
        out, err = first.communicate(timeout=600)
    assert first.returncode == 0, err[-3000:]
    assert "norm: pre" in (run / "config.yaml").read_text()
    rows = _logged(run)
    assert rows and len(rows) == len(set(rows)), rows
    assert json.loads((run / "summary.json").read_text())["status"] == "finished"
    assert not (run / LOCK_NAME).exists(), "a finished owner removes its lock file"


def test_two_fits_with_one_run_name_started_at_once_one_is_refused(tmp_path):
    root = tmp_path / "runs"
    procs = [subprocess.Popen(_fit(root, "twin"), cwd=REPO, env=_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    done = [(p, *p.communicate(timeout=600)) for p in procs]
    codes = sorted(p.returncode for p, _, _ in done)
    assert codes == [0, 2], [(p.returncode, err[-2000:]) for p, _, err in done]
    loser = next(subprocess.CompletedProcess(p.args, p.returncode, out, err) for p, out, err in done
                 if p.returncode == 2)
    line = _refused(loser)
    run = root / "transformer_reverse" / "twin"
    assert f"{run} is in use by " in line or f"{run} already holds a finished run" in line, line
    rows = _logged(run)
    assert rows and len(rows) == len(set(rows)), rows


# ------------------------------------------------------------------------------------------ crash
def test_a_crashed_run_is_refused_then_restarted_only_on_request(tmp_path):
    """kill -9 at step 6: the same command again is refused (both ways forward named), the tree unchanged;
    --run.restart=true moves the crashed run aside intact and starts over."""
    root = tmp_path / "runs"
    crashed = _run(_fit(root, "c", "--run.checkpoint_every_n_steps=3", _signal_at(6, "KILL")))
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    run = root / "transformer_reverse" / "c"
    assert json.loads((run / "summary.json").read_text())["status"] == "running"
    assert (run / "checkpoints" / "last.ckpt").is_file()
    before = tree(tmp_path)
    line = _refused(_run(_fit(root, "c", "--run.checkpoint_every_n_steps=3")))
    assert f"{run} holds a crashed run" in line and "is gone" in line
    assert "--ckpt_path last" in line and "--run.restart=true" in line and "c.crashed-1" in line
    assert tree(tmp_path) == before

    restarted = _run(_fit(root, "c", "--run.checkpoint_every_n_steps=3", "--run.restart=true"))
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    aside = run.with_name("c.crashed-1")
    moved = {k.replace("c.crashed-1", "c", 1): v for k, v in tree(tmp_path).items() if "c.crashed-1" in k}
    kept = {k: v for k, v in before.items() if k.startswith(str(run.relative_to(tmp_path))) and LOCK_NAME not in k}
    assert moved == kept, "the crashed run is moved aside byte for byte (less its stale lock file)"
    assert json.loads((run / "summary.json").read_text())["status"] == "finished"
    assert aside.is_dir()


@pytest.mark.parametrize("restart", [True, False], ids=["--run.restart", "a retried fit"])
def test_a_fit_refused_after_its_run_directory_was_read_moves_nothing(tmp_path, restart):
    """Every refusal comes before the first move: a --run.restart (moves the old run aside) or a retried fit
    (sets its old metrics.csv aside) refused for a later option (a missing --run.branch_from) leaves the tree
    byte-identical."""
    root = tmp_path / "runs"
    run = root / "transformer_reverse" / "old"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"status": "finished" if restart else "failed"}))
    (run / "metrics.csv").write_text("step,train/loss\n1,2.0\n")
    (run / "config.yaml").write_text("seed_everything: 1\n")
    before = tree(tmp_path)
    extra = ["--run.restart=true"] if restart else []
    line = _refused(_run(_fit(root, "old", *extra, f"--run.branch_from={tmp_path / 'missing'}")))
    assert "--run.branch_from=" in line and "no checkpoint at" in line, line
    assert tree(tmp_path) == before


# ------------------------------------------------------------------------------------- memory bombs
def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_DATA, (MEMORY_CAP, MEMORY_CAP))


@pytest.mark.parametrize(("option", "words"), [("--model.d_model=1073741824", "more than 2^63 bytes"),
                                               ("--model.d_ff=20000000", "parameters: at least")])
def test_a_model_too_large_for_memory_is_refused_before_it_is_built(tmp_path, option, words):
    proc = subprocess.run(_fit(tmp_path / "runs", "big", option), cwd=REPO, env=_env(), capture_output=True,
                          text=True, timeout=600, preexec_fn=_capped)
    line = _refused(proc)
    assert option in line and words in line and "choose smaller --model sizes" in line
    assert not (tmp_path / "runs").exists()


# ------------------------------------------------------------------------------------ the lock itself
def test_a_stale_lock_of_a_dead_process_is_taken_over_and_named(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    run = tmp_path / "r"
    run.mkdir()
    (run / LOCK_NAME).write_text(json.dumps({"pid": int(dead.stdout), "host": "h", "started": 1.0}))
    lock = acquire(run)
    try:
        assert lock.previous is not None and lock.previous.pid == int(dead.stdout)
    finally:
        release(run)
    assert json.loads((run / LOCK_NAME).read_text())["pid"] == int(dead.stdout), "unclaimed: left as found"


def test_a_live_owner_in_another_process_refuses_the_lock(tmp_path):
    from attnlab_core.errors import UsageError

    run = tmp_path / "r"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from attnlab_run.ownership import acquire; "
                               "acquire(sys.argv[1]).claim(); print('held', flush=True); time.sleep(60)", str(run)],
                              cwd=REPO, env=_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(UsageError, match=rf"is in use by {holder.pid}@"):
            acquire(run)
    finally:
        holder.kill()
        holder.wait()
    lock = acquire(run)  # the kernel released the dead holder's lock
    assert lock.previous is not None and lock.previous.pid == holder.pid
    release(run)


@pytest.mark.parametrize(("env", "child"), [({}, False), ({"LOCAL_RANK": "1"}, True), ({"RANK": "3"}, True),
                                            ({"RANK": "0", "LOCAL_RANK": "0"}, False), ({"NODE_RANK": "1"}, True),
                                            ({"SLURM_PROCID": "2", "SLURM_NTASKS": "4"}, True),
                                            ({"SLURM_PROCID": "0", "SLURM_NTASKS": "4"}, False),
                                            ({"SLURM_PROCID": "3", "SLURM_NTASKS": "1"}, False)])
def test_ddp_ranks_above_zero_share_their_rank_zeros_lock(monkeypatch, env, child):
    for name in ("RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert (launch_rank() > 0) is child


# ------------------------------------------------------------------------------- outside the run root
def test_a_command_writes_nothing_outside_its_root_but_the_attnlab_cache(tmp_path):
    """A real 2-step fit started from an empty working directory, with HOME and TMPDIR of its own: the run lies
    in its root; torch's inductor folder and matplotlib's font cache land in the attnlab cache; nothing in the
    working directory, the temp folder or anywhere else."""
    home, tmp, cwd = tmp_path / "home", tmp_path / "tmp", tmp_path / "cwd"
    for folder in (home, tmp, cwd):
        folder.mkdir()
    env = {k: v for k, v in _env().items() if k not in ("MPLCONFIGDIR", "TORCHINDUCTOR_CACHE_DIR", "XDG_CACHE_HOME",
                                                         "ATTNLAB_CACHE_DIR")}
    env.update(HOME=str(home), TMPDIR=str(tmp))
    proc = subprocess.run(_fit(tmp_path / "runs", "two", "--trainer.max_steps=2"), cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600, preexec_fn=_capped)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / "runs" / "transformer_reverse" / "two"
    assert json.loads((run / "summary.json").read_text())["global_step"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd", "home", "runs", "tmp"]
    assert not any(cwd.iterdir()), sorted(cwd.iterdir())
    assert not any(tmp.iterdir()), sorted(tmp.iterdir())
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["transformer_reverse"]
    top = {p.relative_to(home).parts[:3] for p in home.rglob("*")}
    assert top <= {(".cache",), (".cache", "attnlab"), (".cache", "attnlab", "matplotlib"),
                   (".cache", "attnlab", "torchinductor")}, top


# -------------------------------------------------------------------------------------------- full disk
@pytest.fixture()
def small_disk(tmp_path):
    """A 2 MiB tmpfs (its first checkpoint does not fit); skipped where this process cannot mount one."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()[:200]}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_a_full_disk_is_one_line_naming_it_and_the_summary_records_the_cause(small_disk):
    proc = _run([*_fit(small_disk / "runs", "full"), "--model.d_model=128", "--model.d_ff=512"])
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("attnlab: error:")]
    run = small_disk / "runs" / "transformer_reverse" / "full"
    assert errors == [proc.stderr.strip().splitlines()[-1]], proc.stderr[-3000:]
    assert f"No space left on device ({small_disk}, " in errors[0] and f"cannot write {run}/checkpoints/" in errors[0]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["error"].startswith("OSError: [Errno 28] No space left on device")
    assert not [p for p in (run / "checkpoints").iterdir()], "no torn checkpoint is left behind"
