"""Processes of a sweep's trials: each in its own process group, taken down with the sweep, stopped
by signals to the whole group (its DDP ranks included), and the sweep's own signal handlers.

Termination signals to the sweep (SIGTERM, SIGINT, SIGUSR1: a cluster's preemption, Ctrl+C, SLURM's
``--signal``) are forwarded to every running trial's group (:func:`signal_group`); a trial then
finishes its optimizer step, saves ``last.ckpt`` and exits ``128 + signal`` (``attnlab_run/preemption.py``).
A sweep killed with SIGKILL runs no handler: on Linux each trial was started with
``PR_SET_PDEATHSIG`` (:func:`dies_with`), so the kernel sends it SIGTERM and it stops the same way.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def dies_with(parent: int, sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` (Linux) asking the kernel to send the child ``sig`` (SIGTERM) when the sweep dies,
    even by SIGKILL: the trial then stops like a preempted one (``last.ckpt``, status preempted) instead
    of training on with parent PID 1. The flag is checked against a parent that died before it was set.
    Elsewhere None: a sweep killed with SIGKILL leaves its trials running there."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork, not in the child
    except (OSError, AttributeError):
        return None

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the sweep is already gone
            os.kill(os.getpid(), sig)

    return preexec


def stop_process(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM the trial's process group (DDP ranks included), SIGKILL after ``grace_s``."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=wait)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def signal_group(proc: subprocess.Popen, signum: int) -> None:
    """``signum`` to the trial's process group (its DDP ranks too); nothing if it has ended."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signum)
        except ProcessLookupError:
            pass


FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)


def install_handlers(handler: Callable[[int, Any], None]) -> dict[int, Any]:
    """``handler`` for :data:`FORWARDED_SIGNALS` (main thread only); the handlers it replaced."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {int(sig): signal.signal(sig, handler) for sig in FORWARDED_SIGNALS}


def restore_handlers(previous: dict[int, Any]) -> None:
    """Put back what :func:`install_handlers` replaced."""
    for sig, handler in previous.items():
        signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def wait_any(active: list[Any], timeout_s: float | None,
             interrupted: Callable[[], bool] = lambda: False) -> Any | None:
    """Block until one active trial's process exits (killing any that outlive ``timeout_s``); None as
    soon as ``interrupted()`` says the sweep got a termination signal. ``active``: the runner's live trials
    (``proc``, ``started``, ``trial.name``, ``budget``: how many trials' time the process has)."""
    while not interrupted():
        for running in active:
            limit = None if timeout_s is None else timeout_s * getattr(running, "budget", 1)  # K stacked trials: K×
            if limit is not None and running.proc.poll() is None and time.time() - running.started > limit:
                log.warning("trial %s exceeded %.0f s: stopping it", running.trial.name, limit)
                stop_process(running.proc)
            if running.proc.poll() is not None:
                return running
        time.sleep(0.2)
    return None
