"""Warm trials: a fork server that has imported torch, Lightning and the project starts each trial
of the offline runner, so a trial no longer pays the 4-25 s of imports before its first step.

The server is a fresh interpreter (``python -c 'from ablations.engine.warm import main; main()'``) started
with the sweep's interpreter, environment and working directory, in its own session and before it
runs anything else, so no state of the runner (its threads, signal handlers, W&B service) reaches a
trial. It imports :data:`PRELOAD` and runs no torch operation (fork after OpenMP's thread pool
exists is unsafe): it refuses to serve when the imports left a second thread or CUDA initialised,
and the runner then starts trials cold. For each trial it forks a child that does what the cold
path's ``Popen`` does -- a new session (``setsid``: the trial's process group is its pid),
``PR_SET_PDEATHSIG``, stdin from /dev/null, stdout+stderr appended to ``trial.log``, the trial's
cwd and environment, signal dispositions of a fresh interpreter, torch threads from
``OMP_NUM_THREADS`` -- and then runs the program like the interpreter would (``runpy``: a script,
or ``-m module``) with the same ``sys.argv``; an uncaught exception (traceback, 1), ``SystemExit``
(LightningCLI's exit codes, divergence exit 3) or KeyboardInterrupt (SIGINT) ends the child as it would
end a cold interpreter, whose shutdown it runs (threads joined, atexit, streams flushed) except the
teardown of the preloaded modules (:func:`finish`). The server reaps its children and reports
``exit <pid> <code>``; the runner's handle (:class:`WarmProcess`) answers ``poll``/``wait``/``pid``/
``returncode`` like ``subprocess.Popen``.

Dying together: the server gets SIGKILL when the runner dies (``PR_SET_PDEATHSIG``) and exits at EOF
of its control pipe; each trial gets SIGTERM when the server dies, so a runner killed with SIGKILL
still takes its trials down, which then save ``last.ckpt`` as on a preemption. Only the argument
lists ``${env} ${interpreter} <script or -m module> ...`` with the sweep's own interpreter are run
warm (:func:`warm_argv`); anything else, and ``wandb agent``, starts a plain subprocess.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import json
import logging
import os
import pkgutil
import runpy
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ablations.engine.trialproc import FORWARDED_SIGNALS, dies_with

log = logging.getLogger(__name__)

WARM_ENV = "ATTNLAB_WARM_TRIALS"  # 0/false/no: every trial cold (as `attnlab sweep --no-warm`); default warm
PRELOAD = ("torch", "lightning.pytorch", "wandb", "attnlab_run.cli", "attnlab.cli")
PRELOAD_PACKAGES = ("lit_models", "datamodules", "attnlab_run")  # every module: the trial's class_paths resolve at once
PER_CALL_ENV = ("PYTEST_CURRENT_TEST",)  # differs per call, read by no import: shares one server
SERVER_CODE = "from ablations.engine.warm import main; main()"


def warm_wanted() -> bool:
    """Warm on Linux unless :data:`WARM_ENV` says 0/false/no (the default since the runner's signal, resume
    and CLI tests passed with every trial warm; fork is Linux-only here)."""
    off = os.environ.get(WARM_ENV, "").strip().lower() in ("0", "false", "no")
    return sys.platform.startswith("linux") and not off


def warm_argv(command: list[str], interpreter: str) -> list[str] | None:
    """The part after the interpreter (``script args`` or ``-m module args``) when ``command`` is
    ``[/usr/bin/env] interpreter script|-m module ...`` with ``interpreter``; else None (run cold)."""
    rest = list(command)
    if rest and Path(rest[0]).name == "env":
        rest = rest[1:]
    if len(rest) < 2 or rest[0] != interpreter:
        return None
    args = rest[1:]
    if args[0] == "-m":
        return args if len(args) > 1 and not args[1].startswith("-") else None
    return None if args[0].startswith("-") or "=" in Path(rest[0]).name else args


# ---------------------------------------------------------------- the server (its own interpreter)
def _preload() -> str | None:
    """Import :data:`PRELOAD` and the project's modules; a reason not to fork, or None."""
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception as err:  # noqa: BLE001 - a module the trial may not need: it imports it itself
            log.debug("warm: not preloaded %s: %s", name, err)
    for package in PRELOAD_PACKAGES:
        try:
            path = importlib.import_module(package).__path__
        except Exception:  # noqa: BLE001
            continue
        for info in pkgutil.walk_packages(path, prefix=f"{package}."):
            try:
                importlib.import_module(info.name)
            except Exception as err:  # noqa: BLE001
                log.debug("warm: not preloaded %s: %s", info.name, err)
    tasks = Path("/proc/self/task")
    threads = len(list(tasks.iterdir())) if tasks.is_dir() else 1
    if threads > 1:
        return f"the imports started {threads - 1} thread(s)"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "the imports initialised CUDA"
    return None


def _reap(out: int) -> None:
    """Report every ended child: ``exit <pid> <code>`` (``-signal`` when killed, as Popen's)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        os.write(out, f"exit {pid} {os.waitstatus_to_exitcode(status)}\n".encode())


def _fork_trial(request: dict[str, Any], ctl: tuple[int, int]) -> int:
    """Fork one trial; in the parent its pid once it runs in its own session, in the child 0."""
    ready_r, ready_w = os.pipe()
    hook = dies_with(os.getpid())
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        _become_trial(request, ctl, hook)
        os.write(ready_w, b"1")
        os.close(ready_w)
        return 0
    os.close(ready_w)
    os.read(ready_r, 1)  # b"" if the child died before: its exit is reported anyway
    os.close(ready_r)
    return pid


def _become_trial(request: dict[str, Any], ctl: tuple[int, int], hook: Any) -> None:
    """In the forked child: the process state the cold path's ``Popen`` gives a trial."""
    os.setsid()
    for sig in (*FORWARDED_SIGNALS, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
    if hook is not None:  # after SIGTERM's default is back: it must end a child whose server is gone
        hook()
    for fd in ctl:
        os.close(fd)
    log_fd = os.open(request["log"], os.O_WRONLY | os.O_APPEND)
    for fd in (1, 2):
        os.dup2(log_fd, fd)
    os.close(log_fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    threads = request["env"].get("OMP_NUM_THREADS", "")
    if "torch" in sys.modules and threads.isdigit() and int(threads) > 0:
        sys.modules["torch"].set_num_threads(int(threads))
    if "numpy" in sys.modules:  # a fresh process draws a fresh seed (random does this at fork itself)
        sys.modules["numpy"].random.seed()


def serve() -> dict[str, Any] | None:
    """The server's loop; returns only in a forked child, with the trial's request."""
    ctl_in, ctl_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    for sig in (*FORWARDED_SIGNALS, signal.SIGHUP):  # a terminal's or a scheduler's signals are the runner's
        signal.signal(sig, signal.SIG_IGN)
    unsafe = _preload()
    gc.freeze()  # the preloaded objects: no collection in a trial touches (and copies) their pages
    os.write(ctl_out, f"unsafe {unsafe}\n".encode() if unsafe else b"ready\n")
    if unsafe:
        return None
    buffer = b""
    while True:
        readable = select.select([ctl_in], [], [], 0.05)[0]
        _reap(ctl_out)
        if not readable:
            continue
        chunk = os.read(ctl_in, 1 << 16)
        if not chunk:  # the runner is gone or done: the trials (if any) get SIGTERM as we exit
            return None
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            pid = _fork_trial(json.loads(line), (ctl_in, ctl_out))
            if pid == 0:
                return json.loads(line)
            os.write(ctl_out, f"pid {pid}\n".encode())


def run_program(argv: list[str]) -> None:
    """``python <argv>`` in this interpreter: ``script args`` or ``-m module args`` as ``__main__``."""
    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
        sys.path[0] = os.getcwd()
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.realpath(argv[0]))
    runpy.run_path(argv[0], run_name="__main__")


def exit_code(exc: SystemExit) -> int:
    """The status an interpreter ends with on ``exc`` (None: 0; an int; anything else printed, 1)."""
    if exc.code is None or isinstance(exc.code, int):
        return int(exc.code or 0)
    print(exc.code, file=sys.stderr)
    return 1


def finish(code: int, *, interrupted: bool = False) -> None:
    """End the trial as the interpreter's own shutdown would (join non-daemon threads, atexit, flush),
    but without tearing down the preloaded modules: in a forked child that writes every shared page
    (reference counts), seconds of copy-on-write per trial. KeyboardInterrupt ends by SIGINT, as cold."""
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    gc.collect()  # what the trial created (the preloaded objects are frozen): finalizers run, files close
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code & 0xFF)


def main() -> None:
    """Entry point of the server process (:data:`SERVER_CODE`); a trial's program runs at its end."""
    request = serve()
    if request is None:
        raise SystemExit(0)
    code, interrupted = 0, False
    try:
        run_program(request["argv"])
    except SystemExit as exc:
        code = exit_code(exc)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        code, interrupted = 1, True
    except BaseException:  # noqa: BLE001 - an uncaught exception: its traceback and status 1, as cold
        sys.excepthook(*sys.exc_info())
        code = 1
    finish(code, interrupted=interrupted)


# ---------------------------------------------------------------- the runner's side
class WarmProcess:
    """A trial the server forked, answering like ``subprocess.Popen`` (pid, poll, wait, returncode)."""

    def __init__(self, *, server: WarmServer, pid: int, args: list[str]) -> None:
        self.server, self.pid, self.args = server, pid, args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            alive = self.server.read_events(block=False)
            self.returncode = self.server.exits.pop(self.pid, None)
            if self.returncode is None and not alive and not Path(f"/proc/{self.pid}").exists():
                self.returncode = -signal.SIGTERM  # its exit code died with the server: the parent-death signal
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            time.sleep(0.02)
        return self.returncode  # type: ignore[return-value]


class WarmServer:
    """The runner's handle on one fork server (:func:`main`), for one interpreter, environment and cwd."""

    def __init__(self, *, interpreter: str, env: Mapping[str, str], cwd: Path) -> None:
        self.interpreter = interpreter
        self.exits: dict[int, int] = {}
        self._buffer = b""
        self._replies: list[str] = []
        self.proc = subprocess.Popen([interpreter, "-c", SERVER_CODE], cwd=cwd, env=dict(env),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True,
                                     preexec_fn=dies_with(os.getpid(), signal.SIGKILL))
        self.ready: bool | None = None  # None until the server answered

    def read_events(self, *, block: bool) -> bool:
        """Read what the server wrote (waiting for something when ``block``); False at its EOF."""
        out = self.proc.stdout
        assert out is not None
        if out.closed or self.ready is False and self.proc.poll() is not None:
            return False
        if select.select([out], [], [], None if block else 0)[0]:
            chunk = os.read(out.fileno(), 1 << 16)
            if not chunk:
                self._gone()
                return False
            self._buffer += chunk
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            word, _, rest = line.decode().partition(" ")
            if word == "exit":
                pid, code = rest.split()
                self.exits[int(pid)] = int(code)
            else:
                self._replies.append(line.decode())
        return True

    def _gone(self) -> None:
        self.ready = False
        self.proc.wait()

    def _reply(self) -> str | None:
        while not self._replies:
            if self.ready is False or not self.read_events(block=True):
                return None
        return self._replies.pop(0)

    def start(self) -> bool:
        """Wait until the server has preloaded; False (with a warning) if it cannot serve."""
        if self.ready is None:
            answer = self._reply() or "unsafe it exited (cannot import ablations.engine.warm?)"
            self.ready = answer == "ready"
            if not self.ready:
                log.warning("warm trials: %s; starting trials cold", answer.removeprefix("unsafe "))
        return self.ready

    def launch(self, argv: list[str], *, command: list[str], env: Mapping[str, str], cwd: Path,
               log_path: Path) -> WarmProcess:
        """Fork a trial running ``python <argv>``; OSError when the server cannot."""
        request = {"argv": argv, "env": dict(env), "cwd": str(cwd), "log": str(log_path)}
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError) as err:
            raise OSError(f"warm server gone: {err}") from err
        reply = self._reply()
        if reply is None or not reply.startswith("pid "):
            raise OSError(f"warm server did not start the trial: {reply}")
        return WarmProcess(server=self, pid=int(reply.split()[1]), args=command)

    def close(self) -> None:
        if self.proc.poll() is None:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


_SERVERS: dict[tuple[str, str, tuple[tuple[str, str], ...]], WarmServer] = {}


def server_for(*, interpreter: str, env: Mapping[str, str], cwd: Path) -> WarmServer | None:
    """The running server for this interpreter, environment and cwd (started at the first call; shared
    by the sweeps of one process, e.g. ``attnlab findings``); None when it cannot serve."""
    key = (interpreter, str(cwd), tuple(sorted((k, v) for k, v in env.items() if k not in PER_CALL_ENV)))
    server = _SERVERS.get(key)
    if server is None:
        if not _SERVERS:
            atexit.register(close_servers)
        server = _SERVERS[key] = WarmServer(interpreter=interpreter, env=env, cwd=cwd)
    return server if server.start() else None


def close_servers() -> None:
    """Stop every server (its trials have ended: the runner waits for them)."""
    while _SERVERS:
        _SERVERS.popitem()[1].close()
