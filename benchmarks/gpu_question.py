"""The GPU section's "question on one GPU" row (issue #26): one question's quick preset, every seed, run by
``attnlab sweep --scale quick --jobs N`` on one GPU, so N trials share (pack) the device at once.

Measured per N: wall time, trials per hour, and the GPU's utilisation and memory while the sweep runs, sampled
once a second with ``nvidia-smi`` (mean and peak). The goal the issue sets: a quick preset, all seeds, in at most
2 minutes on one H200. Runs only with CUDA (the GPU section is skipped without it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

from attnlab_run.rundir import read_summary

QUESTION = "scaling"  # a Transformer question: its trials are the GPU's kind of work
JOBS = (1, 4, 8)
GOAL_S = 120.0  # issue #26: a question's quick preset, all seeds, in <= 2 minutes on one H200
SMI = ("nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits")


def parse_smi(text: str) -> tuple[float, float]:
    """(utilisation %, memory MiB) of the first GPU in ``nvidia-smi --query-gpu=...,csv,noheader,nounits`` output."""
    util, mem = (float(x) for x in text.strip().splitlines()[0].split(","))
    return util, mem


class Sampler(threading.Thread):
    """Samples ``SMI`` every ``period`` seconds until :meth:`stop`; readings that fail are skipped."""

    def __init__(self, period: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.period, self.samples, self._done = period, [], threading.Event()

    def run(self) -> None:
        while not self._done.wait(self.period):
            try:
                out = subprocess.run(SMI, capture_output=True, text=True, check=True, timeout=10).stdout
                self.samples.append(parse_smi(out))
            except (OSError, subprocess.SubprocessError, ValueError, IndexError):
                continue

    def stop(self) -> dict:
        """Stop and summarise: mean and peak utilisation, peak memory, number of samples."""
        self._done.set()
        self.join()
        utils = [u for u, _ in self.samples] or [float("nan")]
        mems = [m for _, m in self.samples] or [float("nan")]
        return {"gpu_util_mean": sum(utils) / len(utils), "gpu_util_peak": max(utils),
                "gpu_mem_peak_mib": max(mems), "samples": len(self.samples)}


def trials_of(root: Path) -> int:
    """Trials done under ``root``: their ``summary.json`` says finished or diverged (``attnlab_run.rundir.DONE``).
    A failed, interrupted or still running trial has a summary too, and does not count."""
    return sum(1 for path in root.glob("*/*/summary.json") if read_summary(path.parent).done)


def run_sweep(cmd: list[str], *, timeout_s: float, log: IO[str] | None = None) -> dict:
    """Run ``cmd`` in its own process group: {"returncode" (None when it timed out), "wall_s", "timed_out"}.

    Past ``timeout_s`` the whole group is killed (the sweep and the trials it started), and the row says so
    instead of raising ``subprocess.TimeoutExpired``. Its output goes to ``log`` (default: discarded).
    """
    t0 = time.perf_counter()
    out = log if log is not None else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        code: int | None = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the group this call created (start_new_session), nothing else
        proc.wait()
        code = None
    return {"returncode": code, "wall_s": time.perf_counter() - t0, "timed_out": code is None}


def bench_question_on_gpu(question: str = QUESTION, jobs: tuple[int, ...] = JOBS, timeout_s: int = 900) -> dict:
    """One row per N: {jobs, wall_s, trials, trials_per_hour, gpu_util_mean, ..., timed_out, goal_met}."""
    rows = []
    for n in jobs:
        with tempfile.TemporaryDirectory(prefix="attnlab-gpu-question-") as root:
            cmd = [sys.executable, "-m", "attnlab", "sweep", question, "--scale", "quick", "--jobs", str(n),
                   "--root", root, "--quiet"]
            sampler = Sampler()
            sampler.start()
            run = run_sweep(cmd, timeout_s=timeout_s)
            usage = sampler.stop()
            done = trials_of(Path(root))
            rows.append({"question": question, "jobs": n, **run, "trials": done,
                         "trials_per_hour": done / run["wall_s"] * 3600, **usage,
                         "goal_met": run["returncode"] == 0 and run["wall_s"] <= GOAL_S})
    return {"goal_s": GOAL_S, "rows": rows}


def question_table(result: dict) -> str:
    """Markdown rows of :func:`bench_question_on_gpu`, the goal marked on each."""
    lines = ["| question | jobs (trials packed) | wall | trials | trials/hour | GPU util mean / peak | peak memory "
             f"| ≤ {result['goal_s']:.0f} s |", "|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['question']} | {r['jobs']} | {r['wall_s']:.0f} s | {r['trials']} | "
                     f"{r['trials_per_hour']:.0f} | {r['gpu_util_mean']:.0f}% / {r['gpu_util_peak']:.0f}% | "
                     f"{r['gpu_mem_peak_mib']:.0f} MiB | {_verdict(r)} |")
    return "\n".join(lines)


def _verdict(row: dict) -> str:
    """met / not met, and why not where the sweep timed out or failed."""
    if row["goal_met"]:
        return "met"
    if row.get("timed_out"):
        return "not met (timed out)"
    return "not met" if row.get("returncode", 0) == 0 else f"not met (exit {row['returncode']})"
