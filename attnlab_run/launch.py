"""Which process of a launch this is, as its launcher said: the one place that reads a launcher's rank variables.

- Lightning's own launcher starts rank 0 by hand and re-executes the command for the other local ranks with
  ``LOCAL_RANK`` (and ``NODE_RANK`` on the other nodes); those children inherit the run directory rank 0 chose
  (:data:`RUN_DIR_ENV`), after rank 0 accepted the command.
- torchrun starts every process itself with ``RANK`` / ``LOCAL_RANK`` / ``GROUP_RANK`` (multi-node: ``LOCAL_RANK=0``
  with ``RANK`` > 0 on the other nodes); srun starts every task with ``SLURM_PROCID`` and sets no ``RANK``.
  Those ranks > 0 start beside rank 0, not after its checks: they wait for rank 0 to accept the command
  (:func:`await_rank_zero`) and stop in one line when it does not, instead of hanging in the process group
  rank 0 never joins.

Nothing here imports Lightning or torch.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from attnlab_core.errors import UsageError

RUN_DIR_ENV = "ATTNLAB_RUN_DIR"
"""The run directory the launching process chose (DDP ranks > 0 and the sweep runner read it)."""
RESUME_ENV = "ATTNLAB_RESUME_CKPT"
"""The checkpoint the launching process decided to resume from (empty: none)."""
RANK_WAIT_ENV = "ATTNLAB_RANK_WAIT_S"
"""How long a rank > 0 started by torchrun or srun waits for rank 0 to accept the command (seconds)."""
RANK_WAIT_S = 600.0


def launch_rank() -> int:
    """This process's global rank as its launcher set it: ``RANK`` (torchrun, Lightning's own launcher), else
    ``SLURM_PROCID`` where the job step runs several tasks (``SLURM_NTASKS`` > 1; a single ``attnlab fit`` in an
    ``sbatch`` script is task 0 of 1), else 1 for a process Lightning re-executed (``LOCAL_RANK`` / ``NODE_RANK``
    > 0: its exact rank does not matter here) and 0 for one started alone."""
    env = os.environ
    if env.get("RANK", "").isdigit():
        return int(env["RANK"])
    if env.get("SLURM_PROCID", "").isdigit() and env.get("SLURM_NTASKS", "1") not in ("", "1"):
        return int(env["SLURM_PROCID"])
    return int(any(env.get(k, "0") not in ("", "0") for k in ("LOCAL_RANK", "NODE_RANK")))


def inherited_run_dir() -> Path | None:
    """The run directory a rank > 0 inherits from the process that chose it (:data:`RUN_DIR_ENV`), else None."""
    inherited = os.environ.get(RUN_DIR_ENV)
    return Path(inherited) if launch_rank() > 0 and inherited else None


def launcher_run_name() -> tuple[str, str] | None:
    """A name every process of one launch shares, kept by a requeued job, and where it came from: a SLURM
    array task (``slurm-<array job>_<task>``), a SLURM job (``slurm-<job id>``: a requeued job keeps its id),
    a torchrun launch (``torchrun-<rdzv id>``: the same on every node); None outside those launchers."""
    env = os.environ
    if env.get("SLURM_ARRAY_JOB_ID") and env.get("SLURM_ARRAY_TASK_ID"):
        return f"slurm-{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}", "SLURM_ARRAY_JOB_ID"
    if env.get("SLURM_JOB_ID"):
        return f"slurm-{env['SLURM_JOB_ID']}", "SLURM_JOB_ID"
    if env.get("TORCHELASTIC_RUN_ID", "none") != "none":  # torchrun's default --rdzv-id is "none": no id
        return f"torchrun-{env['TORCHELASTIC_RUN_ID']}", "TORCHELASTIC_RUN_ID"
    return None


def launch_id() -> str | None:
    """What the processes of one start of one launch share, and a requeued or restarted start does not: the
    SLURM job, step and restart count, else torchrun's rendezvous id and restart count; None for neither."""
    env = os.environ
    if env.get("SLURM_JOB_ID"):
        return f"slurm-{env['SLURM_JOB_ID']}.{env.get('SLURM_STEP_ID', '')}.{env.get('SLURM_RESTART_COUNT', '0')}"
    if env.get("TORCHELASTIC_RUN_ID", "none") != "none":
        return f"torchrun-{env['TORCHELASTIC_RUN_ID']}.{env.get('TORCHELASTIC_RESTART_COUNT', '0')}"
    return None


def await_rank_zero(run_dir: Path, accepted, *, poll_s: float = 0.2) -> None:
    """Block a rank > 0 until ``accepted()`` says its rank 0 accepted the command (it claimed ``run_dir`` for
    this launch); a UsageError after :data:`RANK_WAIT_ENV` seconds (default :data:`RANK_WAIT_S`): rank 0 was
    refused (its line says why) or never started. A rank that inherited its run directory returns at once:
    its rank 0 started it after accepting the command."""
    if launch_rank() == 0 or inherited_run_dir() is not None:
        return
    try:
        wait_s = float(os.environ.get(RANK_WAIT_ENV, RANK_WAIT_S))
    except ValueError:
        raise UsageError(f"{RANK_WAIT_ENV}={os.environ[RANK_WAIT_ENV]!r} is not a number of seconds") from None
    deadline = time.monotonic() + wait_s
    while not accepted():
        if time.monotonic() >= deadline:
            raise UsageError(f"rank {launch_rank()}: rank 0 did not accept the command on {run_dir} within "
                             f"{wait_s:g} s (its own line says why it stopped); this rank stops too")
        time.sleep(poll_s)
