"""Which process owns the run directory under launchers (issue #43, item 3), by simulating their environments.

- Multi-node torchrun: every process is started by torchrun (none inherits ``ATTNLAB_RUN_DIR``); each node's
  local rank 0 has ``LOCAL_RANK=0`` and a global ``RANK`` > 0 on the other nodes. All ranks must pick one
  directory, and only global rank 0 may set a stale ``metrics.csv`` aside: on a shared file system a second
  node that did it later would move the fresh log rank 0 had started.
- A requeued SLURM job without ``--run.name``: the job keeps its ``SLURM_JOB_ID`` (and array ids), so the
  requeued process must land in the same directory (and resume there), each array task in its own.
- A process of a multi-process launch that can find no stable name is refused in one line.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from attnlab_core.errors import UsageError
from attnlab_run.launch import RUN_DIR_ENV
from attnlab_run.ownership import claim_all, own_run_dir, release_all
from attnlab_run.recording import RunOptions
from attnlab_run.rundir import resolve_run_dir, set_aside_stale_log

LAUNCHERS = ("RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID", "WANDB_RUN_ID",
             "SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_PROCID", "SLURM_NTASKS",
             "SLURM_STEP_ID", "SLURM_RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT", RUN_DIR_ENV)


@pytest.fixture(autouse=True)
def _no_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in LAUNCHERS:
        monkeypatch.delenv(key, raising=False)


def process(monkeypatch: pytest.MonkeyPatch, root: Path, name: str | None = None, **env: str) -> Path:
    """One process started by its launcher with ``env`` (a fresh environment: nothing inherited)."""
    for key in LAUNCHERS:
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return resolve_run_dir(RunOptions(root=str(root), name=name), default_experiment="x", ckpt_path=None)


TORCHRUN = {"TORCHELASTIC_RUN_ID": "job7", "WORLD_SIZE": "4"}


@pytest.mark.parametrize("name", [None, "given"])
def test_multi_node_torchrun_ranks_share_one_directory(monkeypatch, tmp_path, name) -> None:
    dirs = {process(monkeypatch, tmp_path, name, RANK=str(r), LOCAL_RANK=str(r % 2), GROUP_RANK=str(r // 2),
                    **TORCHRUN) for r in range(4)}
    assert len(dirs) == 1, dirs


def test_only_global_rank_zero_sets_the_stale_log_aside(monkeypatch, tmp_path) -> None:
    run = process(monkeypatch, tmp_path, "given", RANK="0", LOCAL_RANK="0", GROUP_RANK="0", **TORCHRUN)
    run.mkdir(parents=True)
    (run / "metrics.csv").write_text("old\n")
    set_aside_stale_log(run)
    (run / "metrics.csv").write_text("rank 0's fresh log\n")
    assert process(monkeypatch, tmp_path, "given", RANK="2", LOCAL_RANK="0", GROUP_RANK="1", **TORCHRUN) == run
    set_aside_stale_log(run)  # node 1's local rank 0, later, on the shared file system
    assert (run / "metrics.csv").read_text() == "rank 0's fresh log\n"
    assert sorted(p.name for p in run.iterdir()) == ["metrics.csv", "metrics.prev1.csv"]


@pytest.mark.parametrize("name", [None, "given"])
def test_srun_tasks_share_one_directory_and_one_set_aside(monkeypatch, tmp_path, name) -> None:
    """srun starts every task itself and sets no RANK / LOCAL_RANK: SLURM_PROCID is the global rank."""
    slurm = {"SLURM_JOB_ID": "4242", "SLURM_NTASKS": "2"}
    run = process(monkeypatch, tmp_path, name, SLURM_PROCID="0", **slurm)
    run.mkdir(parents=True)
    (run / "metrics.csv").write_text("rank 0's fresh log\n")
    assert process(monkeypatch, tmp_path, name, SLURM_PROCID="1", **slurm) == run
    set_aside_stale_log(run)
    assert (run / "metrics.csv").read_text() == "rank 0's fresh log\n"


def test_requeued_slurm_job_resumes_its_own_directory(monkeypatch, tmp_path) -> None:
    first = process(monkeypatch, tmp_path, SLURM_JOB_ID="4242", SLURM_PROCID="0")
    assert process(monkeypatch, tmp_path, SLURM_JOB_ID="4242", SLURM_PROCID="0") == first, "requeue: same job id"
    tasks = {process(monkeypatch, tmp_path, SLURM_JOB_ID=str(500 + t), SLURM_ARRAY_JOB_ID="500",
                     SLURM_ARRAY_TASK_ID=str(t), SLURM_PROCID="0") for t in (1, 2, 1)}
    assert len(tasks) == 2, tasks


@pytest.mark.parametrize("rdzv", [{}, {"TORCHELASTIC_RUN_ID": "none"}], ids=["no id", "torchrun's default id"])
def test_a_rank_without_a_stable_name_is_refused_in_one_line(monkeypatch, tmp_path, rdzv) -> None:
    with pytest.raises(UsageError) as err:
        process(monkeypatch, tmp_path, RANK="1", LOCAL_RANK="1", WORLD_SIZE="2", **rdzv)
    assert "\n" not in str(err.value) and "--run.name" in str(err.value)
    assert not any(tmp_path.iterdir()), "nothing created"


# A rank > 0 that torchrun or srun started beside rank 0 runs none of the run directory's refusals: it waits for
# rank 0 to accept the command, and stops in one line when rank 0 was refused, instead of hanging in DDP's setup.

SRUN = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "2"}


def _rank_one_owns(monkeypatch: pytest.MonkeyPatch, run: Path, wait_s: str = "0.5") -> float:
    """Seconds ``own_run_dir`` took on srun's task 1 for ``run``."""
    for key, value in {**SRUN, "SLURM_PROCID": "1", "ATTNLAB_RANK_WAIT_S": wait_s}.items():
        monkeypatch.setenv(key, value)
    start = time.monotonic()
    assert own_run_dir(run, subcommand="fit", ckpt_path=None, restart=False) is None
    return time.monotonic() - start


def _rank_zero_claims(monkeypatch: pytest.MonkeyPatch, run: Path, **env: str) -> None:
    for key, value in {**SRUN, "SLURM_PROCID": "0", **env}.items():
        monkeypatch.setenv(key, value)
    own_run_dir(run, subcommand="fit", ckpt_path=None, restart=False)
    claim_all()


def test_a_rank_above_zero_stops_in_one_line_when_rank_zero_was_refused(monkeypatch, tmp_path) -> None:
    run = tmp_path / "x" / "given"
    (run).mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"status": "running"}))  # a crashed run: rank 0 refuses it
    for key, value in {**SRUN, "SLURM_PROCID": "0"}.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(UsageError, match="crashed run"):
        own_run_dir(run, subcommand="fit", ckpt_path=None, restart=False)
    with pytest.raises(UsageError) as err:
        _rank_one_owns(monkeypatch, run)
    assert "\n" not in str(err.value) and "rank 1: rank 0 did not accept" in str(err.value)
    assert sorted(p.name for p in run.iterdir()) == ["summary.json"], "the waiting rank wrote nothing"


def test_a_rank_above_zero_goes_on_once_its_rank_zero_claimed_the_run(monkeypatch, tmp_path) -> None:
    run = tmp_path / "x" / "given"
    _rank_zero_claims(monkeypatch, run)
    try:
        assert _rank_one_owns(monkeypatch, run, wait_s="30") < 5
    finally:
        release_all()


def test_another_launchs_owner_is_not_this_launchs_rank_zero(monkeypatch, tmp_path) -> None:
    """A live owner from another job (same --run.name) refuses rank 0; rank 1 must not take it for its own."""
    run = tmp_path / "x" / "given"
    _rank_zero_claims(monkeypatch, run, SLURM_JOB_ID="9999")
    try:
        with pytest.raises(UsageError, match="rank 0 did not accept"):
            _rank_one_owns(monkeypatch, run)
    finally:
        release_all()


def test_a_child_lightning_started_after_the_checks_does_not_wait(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path / "chosen"))
    monkeypatch.setenv("ATTNLAB_RANK_WAIT_S", "30")
    start = time.monotonic()
    assert own_run_dir(tmp_path / "chosen", subcommand="fit", ckpt_path=None, restart=False) is None
    assert time.monotonic() - start < 5 and not (tmp_path / "chosen").exists()
