"""Time to answer (issue #17): where the wall time of one quick question trial goes.

The trial runs exactly as ``attnlab sweep --scale quick`` runs it (the sweep's command, the question's
quick arguments, a fresh subprocess), plus ``--trainer.profiler=benchmarks.trial_time.HookTimeline``.
That profiler receives every action Lightning profiles (hooks of the module, datamodule, callbacks and
strategy; ``run_training_batch``; batch fetching; ``save_checkpoint``) and charges each moment of time
to the innermost action that has a category (self time, so nested actions are never counted twice):

- start-up: process start until Lightning's first profiled action (imports, config parsing, building
  the model and the datamodule objects, Trainer construction);
- data: datamodule hooks (prepare_data, setup = split generation, *_dataloader) and batch fetching;
- training steps: ``run_training_batch`` (forward, backward, optimizer) outside callbacks;
- validation: validation steps (free-running decoding) and the module's validation hooks;
- figures: the ``AttentionFigures`` callback; checkpointing: checkpoint callbacks and ``save_checkpoint``;
- probes, summary, progress: the other callbacks (probes include free-running validation losses);
- Lightning loop: time inside ``fit`` that no categorised action covers;
- exit: the end of ``fit`` until the process has exited (test-after-fit, report lines, teardown).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lightning.pytorch.profilers import Profiler
from torch.utils.flop_counter import FlopCounterMode

from ablations.catalog.arms import REPO

T0_ENV = "ATTNLAB_BENCH_T0"  # the parent's time.time() just before it started the trial
OUT_ENV = "ATTNLAB_BENCH_TIMELINE"  # where HookTimeline writes its JSON
FLOPS_STEP = 3  # HookTimeline counts the FLOPs of this training batch (after the first steps' one-off costs)
ROWS = ("start-up", "data", "training steps", "validation", "figures", "checkpointing", "probes, summary, progress",
        "test", "Lightning loop", "exit")
TRAIN_HOOKS = ("training_step", "backward", "optimizer_step", "optimizer_zero_grad", "on_before_backward",
               "on_after_backward", "on_before_optimizer_step", "on_before_zero_grad", "configure_gradient_clipping",
               "lr_scheduler_step", "on_train_batch_start", "on_train_batch_end", "batch_to_device")


def category(action: str) -> str | None:
    """The row of the table an action's own time belongs to; None: its enclosing action decides."""
    if action.startswith("[Callback]"):
        callback, hook = action[len("[Callback]"):].rsplit(".", 1)
        if callback.startswith("AttentionFigures"):
            return "figures"
        if "Checkpoint" in callback or hook in ("on_save_checkpoint", "state_dict"):
            return "checkpointing"
        return "probes, summary, progress"
    hook = action.rsplit(".", 1)[-1]
    if action == "save_checkpoint" or hook == "on_save_checkpoint":
        return "checkpointing"
    if action.startswith("[LightningDataModule]") or hook.endswith("_dataloader_next") or hook.endswith("_next"):
        return "data"
    if action == "run_training_batch" or hook in TRAIN_HOOKS:
        return "training steps"
    if "validation" in hook:
        return "validation"
    if "test" in hook:
        return "test"
    return None


class HookTimeline(Profiler):
    """A Lightning profiler that sums self time per category (see :func:`category`) and writes JSON.

    Cheap: two ``time.perf_counter`` calls and a list push/pop per profiled action. The JSON (path from
    ``$ATTNLAB_BENCH_TIMELINE``) is rewritten at the end of every trainer stage (fit, then test).
    """

    def __init__(self) -> None:
        super().__init__()
        self.created = time.time()
        self.first: float | None = None  # time.time() of the first profiled action
        self.last_stop = self.created
        self.stack: list[list] = []  # [name, category, resume perf_counter]
        self.by_category: dict[str, float] = defaultdict(float)
        self.by_action: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.step_flops: int | None = None  # FLOPs of training batch FLOPS_STEP (torch's FlopCounterMode)
        self._counter: FlopCounterMode | None = None

    def start(self, action_name: str) -> None:
        if action_name == "run_training_batch" and self.calls[action_name] == FLOPS_STEP - 1:
            self._counter = FlopCounterMode(display=False)
            self._counter.__enter__()
        now = time.perf_counter()
        if self.first is None:
            self.first, self.perf_first = time.time(), now
        if self.stack:
            self._charge(self.stack[-1], now)
        inherited = self.stack[-1][1] if self.stack else None
        self.stack.append([action_name, category(action_name) or inherited, now])

    def stop(self, action_name: str) -> None:
        now = time.perf_counter()
        i = next((i for i in range(len(self.stack) - 1, -1, -1) if self.stack[i][0] == action_name), None)
        if i is None:
            return
        frame = self.stack.pop(i)
        if i == len(self.stack):  # the innermost frame: its running time is its own
            self._charge(frame, now)
        self.calls[action_name] += 1
        if action_name == "run_training_batch" and self._counter is not None:
            self._counter.__exit__(None, None, None)
            self.step_flops, self._counter = self._counter.get_total_flops(), None
        if self.stack:
            self.stack[-1][2] = now
        self.last_stop = time.time()

    def _charge(self, frame: list, now: float) -> None:
        self.by_category[frame[1] or "Lightning loop"] += now - frame[2]
        self.by_action[frame[0]] += now - frame[2]
        frame[2] = now

    def summary(self) -> str:
        path = os.environ.get(OUT_ENV)
        if path:
            inside = self.last_stop - (self.first or self.last_stop)
            Path(path).write_text(json.dumps({
                "created": self.created, "first": self.first, "last_stop": self.last_stop,
                "by_category": dict(self.by_category), "inside_actions_s": inside,
                "top_actions": sorted(self.by_action.items(), key=lambda kv: -kv[1])[:15],
                "calls": dict(self.calls), "step_flops": self.step_flops}, indent=1))
        return ""  # nothing printed: the benchmark renders the table


@dataclass(frozen=True)
class TrialSpec:
    """One trial of a question: its sweep parameters (the grid point) and extra CLI arguments."""

    question: str
    params: dict
    extra: tuple[str, ...] = ()


QUESTION_TRIALS = (
    TrialSpec("attention_bottleneck", {"model.attention": "none", "model.bidirectional": False,
                                       "seed_everything": 1}),
    TrialSpec("scaling", {"model.attn_scale": "sqrt_dk", "model.d_model": 256, "model.heads": 2,
                          "model.d_ff": 512, "seed_everything": 1}),
)
QUICK_THREADS = 1  # what `attnlab sweep --scale quick` and `attnlab demo` give each trial
# Tiny sizes for the smoke test: a few steps, two validations, one epoch.
QUICK_EXTRA = ("--trainer.max_epochs=1", "--data.train_size=256", "--data.val_size=16", "--data.test_size=16",
               "--trainer.val_check_interval=0.5", "--trainer.limit_val_batches=1")


def run_trial(spec: TrialSpec, root: Path, *, threads: int = QUICK_THREADS, warm: bool = False) -> dict:
    """Run ``spec`` as ``attnlab sweep --scale quick`` would, timed; the breakdown as a dict. ``warm``: forked
    from the runner's preloaded server (``ablations.engine.warm``, started before the clock), else a fresh
    interpreter."""
    from ablations.catalog.questions import QUESTIONS, SWEEPS_DIR
    from ablations.engine.sweepspec import load_sweep
    from ablations.runner import make_plan

    plan = make_plan(load_sweep(SWEEPS_DIR / QUESTIONS[spec.question].sweep), root=root / ("warm" if warm else "cold"),
                     scale="quick", threads=threads, warm=warm)
    trial = plan.trial(spec.params)
    timeline = trial.run_dir.parent / f"{spec.question}.timeline.json"
    command = [*trial.command, *spec.extra, "--trainer.profiler=benchmarks.trial_time.HookTimeline"]
    env = {**plan.env, OUT_ENV: str(timeline), "PYTHONPATH": _pythonpath(plan.env)}
    trial.run_dir.mkdir(parents=True, exist_ok=True)
    code, t0, wall = _start_and_wait(command, plan, env, trial.run_dir / "trial.log", warm=warm)
    if code != 0 or not timeline.is_file():
        raise RuntimeError(f"trial {spec.question} failed (exit {code}); see {trial.run_dir / 'trial.log'}")
    summary = json.loads((trial.run_dir / "summary.json").read_text())
    return breakdown(json.loads(timeline.read_text()), t0=t0, wall=wall) | {
        "question": spec.question, "params": spec.params, "steps": summary.get("global_step"),
        "metric": summary.get("metrics", {}).get(plan.metric or "", None), "command": " ".join(command),
        "threads": threads, "start": "warm" if warm else "cold"}


def _start_and_wait(command: list[str], plan: Any, env: dict, log: Path, *, warm: bool) -> tuple[int, float, float]:
    """(exit code, start time, wall seconds) of one trial, cold (``subprocess``) or forked from the warm server."""
    from ablations.engine.warm import server_for, warm_argv

    if not warm:
        with log.open("w") as log_file:
            t0 = time.time()
            proc = subprocess.run(command, cwd=plan.cwd, env={**env, T0_ENV: str(t0)}, stdout=log_file,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, check=False)
            return proc.returncode, t0, time.time() - t0
    server = server_for(interpreter=plan.interpreter, env=env, cwd=plan.cwd)  # preloads now, before the clock
    argv = warm_argv(command, plan.interpreter)
    if server is None or argv is None:
        raise RuntimeError("the warm server cannot start this trial (see the warning above)")
    log.write_text(f"$ {' '.join(command)}\n")  # the trial appends to it, as the runner's warm trials do
    t0 = time.time()
    code = server.launch(argv, command=command, env=env, cwd=plan.cwd, log_path=log).wait()
    return code, t0, time.time() - t0


def _pythonpath(env: dict) -> str:
    """The repository first, so the trial imports this checkout's ``benchmarks`` package."""
    return os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)


def breakdown(timeline: dict, *, t0: float, wall: float) -> dict:
    """Seconds per row of :data:`ROWS`; the rows sum to ``wall``."""
    first = timeline["first"] or timeline["created"]
    rows = {name: 0.0 for name in ROWS}
    rows["start-up"] = first - t0
    rows.update({k: v for k, v in timeline["by_category"].items() if k in rows})
    rows["Lightning loop"] += max(0.0, timeline["inside_actions_s"] - sum(timeline["by_category"].values()))
    rows["exit"] = t0 + wall - timeline["last_stop"]
    return {"wall_s": wall, "rows": rows, "until_profiler_s": timeline["created"] - t0,
            "top_actions": timeline["top_actions"], "step_flops": timeline.get("step_flops"),
            "training_batches": timeline.get("calls", {}).get("run_training_batch", 0)}
