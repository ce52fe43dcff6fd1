"""Run the benchmark sections and collect one results dict (see ``benchmarks/__init__.py``)."""

from __future__ import annotations

import datetime
import importlib.util
import logging
import platform
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch

from benchmarks import report
from benchmarks.answer_time import answer_goals, bench_answer_time
from benchmarks.attention import bench_attention_memory, bench_vmap_attention, linear_fit
from benchmarks.ceiling import matmul_ceiling
from benchmarks.common import QUICK_SIZES, SIZES, threads
from benchmarks.compiled import bench_compile
from benchmarks.decoding import bench_decoding
from benchmarks.gpu import bench_gpu
from benchmarks.gpu_question import JOBS, bench_question_on_gpu
from benchmarks.optimizer import bench_optimizer
from benchmarks.profiles import profile_decoding, profile_training
from benchmarks.recurrent import bench_recurrent_step, bench_recurrent_training
from benchmarks.training import bench_training

log = logging.getLogger(__name__)
VMAP_SHAPES = [(3, 64, 4, 24, 16), (3, 32, 4, 128, 16)]
"""(seeds, batch, heads, length, d_head): lm_positions' quick trials (lm_reverse.yaml, 3 seeds an arm), and a
128-token context (lm_positions_web's L)."""
SECTIONS = ("ceiling", "training", "optimizer", "compile", "decoding", "attention", "recurrent", "gpu", "profiles",
            "time")


@dataclass
class Options:
    """What to run. ``quick`` shrinks every section to tiny sizes (a smoke test, not a measurement)."""

    quick: bool = False
    threads: int = 2
    sections: tuple[str, ...] = SECTIONS
    systems: tuple[str, ...] = ("attnlab", "torch", "marian")
    precisions: tuple[str, ...] = ("fp32", "bf16")
    rounds: int = 5
    steps: int = 3
    extra: dict = field(default_factory=dict)


def machine() -> dict:
    """CPU model (lscpu), cores, versions."""
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        cpu = next(line.split(":", 1)[1].strip() for line in lscpu.splitlines() if line.startswith("Model name"))
    except (OSError, StopIteration):
        cpu = platform.processor() or "unknown"
    tf = importlib.util.find_spec("transformers")
    return {
        "cpu": cpu, "cores": _cores(), "threads": torch.get_num_threads(),
        "torch": torch.__version__, "transformers": _version("transformers") if tf else "absent",
        "python": platform.python_version(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "native_bf16_gemm": bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()),
    }


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _version(pkg: str) -> str:
    from importlib.metadata import version

    return version(pkg)


def _systems(opts: Options) -> list[str]:
    """Drop Marian when the ``bench`` extra is not installed."""
    if "marian" in opts.systems and importlib.util.find_spec("transformers") is None:
        log.warning("transformers is not installed (pip install -e '.[bench]'): Marian rows skipped")
        return [s for s in opts.systems if s != "marian"]
    return list(opts.systems)


def _run_sections(opts: Options, res: dict) -> None:
    q = opts.quick
    sizes = list((QUICK_SIZES if q else SIZES).values())
    timing = dict(rounds=1 if q else opts.rounds, steps=1 if q else opts.steps, warmup=1 if q else 2)
    systems = _systems(opts)
    if "ceiling" in opts.sections or "training" in opts.sections:
        res["ceiling"] = matmul_ceiling(n=256 if q else 2048, rounds=timing["rounds"], steps=2 if q else 5)
    if "training" in opts.sections:
        res["training_skipped"] = []
        res["training"] = bench_training(sizes, systems, list(opts.precisions), res["ceiling"], **timing,
                                         skipped=res["training_skipped"])
    _speed_sections(opts, res, sizes, timing, systems)
    if "decoding" in opts.sections:
        dec_systems = [s for s in systems if s != "torch"]
        res["decoding"] = bench_decoding(sizes, dec_systems, [1, 4], **timing)
    if "attention" in opts.sections:
        lengths = [64, 128] if q else [512, 1024, 2048, 4096, 8192]
        res["attention"] = bench_attention_memory(lengths, d_model=64 if q else 256, heads=4, threads=opts.threads,
                                                  explicit_limit_mib=2048)
        res["attention_fit"] = linear_fit(res["attention"])
        res["attention_fit_explicit"] = linear_fit(res["attention"], "explicit")
        shapes = [(2, 2, 2, 8, 4)] if q else VMAP_SHAPES
        with threads(1):  # a stacked group's one thread
            res["attention_vmap"] = [bench_vmap_attention(seeds=k, batch=b, heads=h, length=t, d_head=d,
                                                          rounds=timing["rounds"] * 4) for k, b, h, t, d in shapes]
    if "recurrent" in opts.sections:
        dims = dict(batch=4, steps=4, vocab=64, embed=16, hidden=32) if q else dict(
            batch=32, steps=32, vocab=8000, embed=256, hidden=512)
        res["recurrent"] = bench_recurrent_step(**dims, rounds=timing["rounds"], warmup=timing["warmup"])
        shape = dict(batch=4, src_len=6, tgt_len=6, vocab=64, width=16) if q else dict(
            batch=96, src_len=40, tgt_len=41, vocab=8000, width=256)  # ~4000 tokens a side: bible_gru_attention
        res["recurrent_training"] = bench_recurrent_training(**shape, rounds=timing["rounds"], warmup=timing["warmup"])
    if "gpu" in opts.sections:
        gpu = bench_gpu(rounds=timing["rounds"], steps=timing["steps"], warmup=timing["warmup"])
        if "skipped" not in gpu:
            gpu["question"] = bench_question_on_gpu(jobs=(2,) if q else JOBS)  # N trials packed on one GPU
            res["gpu"] = gpu
    if "profiles" in opts.sections:
        res["profiles"] = _profiles(sizes, q)
    if "time" in opts.sections:
        with threads(1):  # the ceiling of one quick trial's one thread
            one = matmul_ceiling(n=512 if q else 1024, rounds=timing["rounds"], steps=timing["steps"])["fp32"]
        with tempfile.TemporaryDirectory(prefix="attnlab-time-") as root:  # each trial cold, then warm
            res["answer"] = bench_answer_time(Path(root), quick=q, ceiling_gflops=one)
            res["time_to_answer"] = res["answer"]["trials"]


def _speed_sections(opts: Options, res: dict, sizes: list, timing: dict, systems: list[str]) -> None:
    """The AdamW implementations at every size; eager vs ``torch.compile`` at the smallest size."""
    if "optimizer" in opts.sections:
        res["optimizer"] = bench_optimizer(sizes, **timing)
    if "compile" in opts.sections:  # --quick: one system and fp32 (each pair costs a ~30 s cold compile)
        n = 1 if opts.quick else None
        res["compile"] = bench_compile(sizes[0], systems[:n], **timing, precisions=tuple(opts.precisions[:n]))


def _profiles(sizes: list, quick: bool) -> dict:
    """Top ops of our fp32 training step and beam-4 decoding at the largest size, and of a bf16
    training step at the smallest size (one call: bf16 steps can be very slow on CPUs without bf16 GEMM)."""
    big, small, kw = sizes[-1], sizes[0], dict(calls=1 if quick else 3, top=12)
    return {
        f"attnlab train {big.name} fp32": profile_training(big, "attnlab", "fp32", **kw),
        f"attnlab train {small.name} bf16": profile_training(small, "attnlab", "bf16", calls=1, top=12, warmup=False),
        f"attnlab decode {big.name} beam 4": profile_decoding(big, "attnlab", 4, **kw),
    }


def run(opts: Options) -> dict:
    """Run the selected sections with ``opts.threads`` intra-op threads; results plus goal verdicts."""
    with threads(opts.threads):
        res: dict = {"machine": machine(), "options": {k: v for k, v in vars(opts).items() if k != "extra"}}
        _run_sections(opts, res)
    goals = []
    if res.get("training"):
        goals += report.training_goals(res["training"])
    if res.get("decoding"):
        goals += report.decoding_goals(res["decoding"])
    if res.get("compile"):
        goals += report.compile_goals(res["compile"])
    if "attention_fit" in res:
        goals += report.memory_goal(res["attention_fit"])
    if res.get("answer"):
        goals += answer_goals(res["answer"])
    res["goals"] = goals
    return res
