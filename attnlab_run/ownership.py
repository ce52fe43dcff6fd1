"""One live owner per run directory: an OS lock (``flock``) on ``<run>/.owner.lock`` holding the owner's
PID and host, taken before anything is written into the directory and held until the command ends.

- A second command on the same run directory (another ``fit`` with the same ``--run.name``, a ``test``
  while the fit runs) is refused in one line naming the owner (``pid@host``); it writes nothing.
- The lock belongs to the process, not to the file: when the owner dies (``kill -9``, out of memory, the
  machine rebooted) the kernel releases it. A lock file left behind names the dead owner; the next command
  takes the lock over and, when the summary still says ``running``, refuses the crashed run with its two
  ways forward (:func:`refuse_crashed_run`).
- The ranks of one run share the lock: DDP ranks > 0 (``attnlab_run.launch.launch_rank``) neither take nor test
  it; their rank 0 holds it. Those started beside rank 0 (torchrun, srun) wait until rank 0 has claimed it for
  their launch (:func:`await_claim`) and stop in one line when rank 0 was refused.

The file is removed when its owner releases it normally; :func:`acquire` checks that the file it locked
is still the one at the path (an owner may remove it between another process's open and lock).
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from attnlab_core.errors import UsageError
from attnlab_run.launch import await_rank_zero, launch_id, launch_rank

LOCK_NAME = ".owner.lock"
"""The lock file in a run directory (a name no run or experiment can take: names never start with '.')."""
CLAIM_AGE_S = 3600.0
"""A claim older than this (by its own clock) is a previous start's, never this launch's rank 0."""


@dataclass
class Owner:
    """Who holds (or last held) a run directory."""

    pid: int | None
    host: str | None
    started: float | None = None
    launch: str | None = None  # attnlab_run.launch.launch_id of the owner's launch

    def __str__(self) -> str:
        return f"{self.pid}@{self.host}" if self.pid is not None else "an unknown process"

    @classmethod
    def parse(cls, text: str) -> Owner:
        try:
            data = json.loads(text)
        except ValueError:
            return cls(pid=None, host=None)
        if not isinstance(data, dict):
            return cls(pid=None, host=None)
        pid = data.get("pid")
        return cls(pid=pid if isinstance(pid, int) else None, host=str(data.get("host") or "") or None,
                   started=data.get("started") if isinstance(data.get("started"), (int, float)) else None,
                   launch=data.get("launch") if isinstance(data.get("launch"), str) else None)


@dataclass
class RunLock:
    """A held lock on a run directory.

    ``previous`` is the dead owner whose lock file was left behind (None: there was none). The owner's
    PID and host are written only by :meth:`claim`, once the command is accepted: a command refused
    after taking the lock leaves the file as it found it (removed when it created it).
    """

    run_dir: Path
    fd: int | None
    previous: Owner | None = None
    created: bool = False
    claimed: bool = False

    def claim(self) -> None:
        """Write this process's PID, host and start time into the lock file."""
        if self.fd is not None and not self.claimed:
            _write_owner(self.fd)
            self.claimed = True

    @property
    def path(self) -> Path:
        return self.run_dir / LOCK_NAME

    def release(self) -> None:
        """Remove the lock file (while still holding it) unless it names a dead owner this command did
        not replace, then let the lock go. Idempotent."""
        if self.fd is None:
            return
        if self.claimed or self.created:
            try:
                self.path.unlink()
            except OSError:
                pass
        os.close(self.fd)
        self.fd = None
        for key in [k for k, v in _HELD.items() if v is self]:
            del _HELD[key]


_HELD: dict[Path, RunLock] = {}
"""The run directories this process owns (released at exit, or by :func:`release`)."""


def acquire(run_dir: Path) -> RunLock:
    """Own ``run_dir`` (creating it if needed), or a UsageError naming the live owner.

    Call only after the input was checked: this creates the directory (a refused command removes
    it again, ``guards.remove_fresh``)."""
    run_dir = Path(run_dir)
    held = _HELD.get(run_dir)
    if held is not None:
        return held  # this process owns it already (e.g. a test after the fit, in the same process)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK_NAME
    while True:
        created = not path.exists()
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            owner = Owner.parse(_read(fd))
            os.close(fd)
            if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise UsageError(f"{run_dir} is in use by {owner} (started {_when(owner)}); wait for it to end, "
                                 "or choose another --run.name") from None
            raise UsageError(f"{run_dir}: cannot lock {path} ({os.strerror(err.errno)}); "
                             "the run directory must be on a filesystem with file locks") from None
        if _same_file(fd, path):
            break
        os.close(fd)  # its owner removed it between our open and our lock: lock the new one
    text = _read(fd)
    previous = Owner.parse(text) if text else None
    lock = RunLock(run_dir=run_dir, fd=fd, previous=previous, created=created and not text)
    _HELD[run_dir] = lock
    return lock


def release(run_dir: Path) -> None:
    """Release this process's lock on ``run_dir``, if it holds one."""
    lock = _HELD.get(Path(run_dir))
    if lock is not None:
        lock.release()


@atexit.register
def release_all() -> None:
    """Release every run directory this process owns (the end of a command)."""
    for lock in list(_HELD.values()):
        lock.release()


def claim_all() -> None:
    """Write this process's PID and host into the lock of every run directory it owns (the command was
    accepted: from here on it writes into them)."""
    for lock in _HELD.values():
        lock.claim()


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 4096, 0).decode("utf-8", "replace")
    except OSError:
        return ""


def _write_owner(fd: int) -> None:
    data = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": round(time.time(), 1),
                       "launch": launch_id()})
    os.ftruncate(fd, 0)
    os.pwrite(fd, data.encode(), 0)


def _when(owner: Owner) -> str:
    if owner.started is None:
        return "at an unknown time"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(owner.started))


# A crashed run: refused, or moved aside on request.

CRASHED = "crashed"
"""What a run whose summary says ``running`` but whose owner is gone is called (and its set-aside folder)."""


def own_run_dir(run_dir: Path, *, subcommand: str, ckpt_path: str | None, restart: bool) -> None:
    """Take ``run_dir`` for this command (:func:`acquire`); a ``fit`` of a crashed run is refused
    (:func:`refuse_crashed_run`) unless ``restart`` asks to move the old run aside. Nothing is moved here:
    the command moves it (:func:`move_aside`) once every other refusal has passed.

    DDP ranks > 0 take nothing: their rank 0 owns the directory and decided for them; one started beside rank 0
    waits for rank 0's claim (:func:`await_claim`)."""
    if launch_rank() > 0:
        await_claim(run_dir)
        return None
    if restart and ckpt_path:
        raise UsageError(f"--run.restart=true starts the run over, so it cannot also continue from "
                         f"--ckpt_path={ckpt_path}; give one of them")
    lock = acquire(run_dir)
    try:
        if not (restart and subcommand == "fit"):
            refuse_crashed_run(lock, subcommand=subcommand, ckpt_path=ckpt_path)
    except BaseException:
        lock.release()
        raise


def move_aside(run_dir: Path) -> Path | None:
    """``--run.restart=true``, accepted: move the run this process owns in ``run_dir`` aside (:func:`_move_aside`);
    None when there was nothing to move or this process does not own it (a DDP rank > 0)."""
    lock = _HELD.get(Path(run_dir))
    return _move_aside(lock) if lock is not None else None


def await_claim(run_dir: Path) -> None:
    """A rank > 0 of a torchrun / srun launch waits until its rank 0 has claimed ``run_dir`` for this launch
    (the lock file names the same ``launch_id``, claimed recently), or stops in one line
    (``attnlab_run.launch.await_rank_zero``)."""
    mine = launch_id()

    def claimed() -> bool:
        try:
            owner = Owner.parse((Path(run_dir) / LOCK_NAME).read_text())
        except OSError:
            return False
        return owner.launch == mine and owner.started is not None and owner.started >= time.time() - CLAIM_AGE_S

    await_rank_zero(Path(run_dir), claimed)


def refuse_crashed_run(lock: RunLock, *, subcommand: str, ckpt_path: str | None) -> None:
    """A ``fit`` without ``--ckpt_path`` of a run whose summary says ``running`` while nobody holds its
    lock (its owner was killed) is refused, naming both ways forward; it is never silently restarted."""
    from attnlab_run.rundir import RunPaths, Status, read_summary

    summary = read_summary(lock.run_dir)
    if subcommand != "fit" or ckpt_path or summary.status is not Status.RUNNING:
        return
    owner = f"its owner {lock.previous} is gone" if lock.previous else "no process owns it"
    aside = aside_name(lock.run_dir, CRASHED)
    resume = ("continue it with --ckpt_path last, or " if RunPaths(lock.run_dir).checkpoint("last").is_file()
              else "it saved no checkpoint to continue from; ")
    raise UsageError(f"{lock.run_dir} holds a crashed run (summary.json says running, "
                     f"but {owner}); {resume}start over with --run.restart=true (moves it to {aside.name})")


def aside_name(run_dir: Path, why: str) -> Path:
    """``<run>.<why>-<n>`` beside ``run_dir``, with the first ``n`` not taken."""
    n = 1
    while run_dir.with_name(f"{run_dir.name}.{why}-{n}").exists():
        n += 1
    return run_dir.with_name(f"{run_dir.name}.{why}-{n}")


def _move_aside(lock: RunLock) -> Path | None:
    """``--run.restart=true``: rename the run directory to ``<run>.<status>-<n>`` (``crashed`` for a run
    still marked running) and own a fresh, empty one; None when there was nothing to move."""
    from attnlab_run.rundir import Status, read_summary

    run_dir = lock.run_dir
    if not any(p.name != LOCK_NAME for p in run_dir.iterdir()):
        return None
    status = read_summary(run_dir).status
    why = CRASHED if status is Status.RUNNING else status.value if status is not None else "previous"
    aside = aside_name(run_dir, why)
    lock.claim()  # the moved run's lock file names this command, which is removed with it below
    os.rename(run_dir, aside)
    lock.run_dir = aside
    lock.release()
    acquire(run_dir)
    return aside
