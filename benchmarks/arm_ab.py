"""Before / after of the demo arms' training steps on one machine: ``python -m benchmarks.arm_ab BEFORE AFTER``.

BEFORE and AFTER are two checkouts of the project (e.g. a worktree at main and one at a branch). Each arm the demo
trains (the arms its question judges, from the demo's own plan) is timed in a fresh interpreter with
``PYTHONPATH`` set to one checkout, at one thread as a demo trial runs, the checkouts interleaved arm by arm and
round by round, so load from other processes hits both alike. A run reports per arm the median over rounds of each
process's median step, in wall time and in process CPU time (which a busy machine inflates less), and the demo
floor each gives (Σ step × the arm's steps × seeds / jobs, ``benchmarks.demo_floor.floor_s``). The timed process
loads this file by path and calls :func:`worker`, which times the step with ``benchmarks.demo_floor.arm_step_s``,
loaded by path from beside this file: one timing loop for both checkouts, each building its own model, data and
demo plan.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType


def _demo_floor() -> ModuleType:
    """``benchmarks/demo_floor.py`` beside this file, loaded by path: the same timing loop for both checkouts (the
    model, data and plan it builds come from the checkout on ``sys.path``)."""
    name = "arm_ab_demo_floor"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("demo_floor.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return sys.modules[name]


def _demo_grid(root: str) -> tuple[str, list[dict]]:
    """(the demo question's axis, the demo plan's parameter sets: one per arm) of the checkout on ``sys.path``."""
    from ablations.catalog.questions import QUESTIONS
    from ablations.commands import DEMO_QUESTION

    floor = _demo_floor()
    return QUESTIONS[DEMO_QUESTION].axes[0], floor.plan_grid(floor.demo_plan(root, seeds=1))


def demo_arms() -> list[str]:
    """The arms ``attnlab demo`` trains (the ones its question judges), in its plan's order."""
    with tempfile.TemporaryDirectory(prefix="attnlab-arm-ab-") as root:
        axis, grid = _demo_grid(root)
    return [str(p[axis]) for p in grid]


def worker(arm: str, *, timed: int = 40, warmup: int = 5) -> dict:
    """{arm, wall_ms, cpu_ms, steps}: median wall and CPU milliseconds of the arm's training step at one thread, as
    ``benchmarks.demo_floor.arm_step_s`` times it on the arm's demo trial."""
    import torch

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="attnlab-arm-ab-") as root:
        axis, grid = _demo_grid(root)
        params = [p for p in grid if str(p[axis]) == arm]
        if not params:
            raise ValueError(f"{arm!r} is not an arm of this checkout's demo: {[str(p[axis]) for p in grid]}")
        trial = _demo_floor().demo_plan(root, seeds=1).trial(params[0])
        step = _demo_floor().arm_step_s(trial.command[trial.command.index("fit"):], timed=timed, warmup=warmup)
    return {"arm": arm, "wall_ms": step.wall_s * 1e3, "cpu_ms": step.cpu_s * 1e3, "steps": step.steps}


def _time(tree: Path, arm: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    # This file, loaded by path: the checkout under test need not have it (a "before" usually does not).
    code = ("import importlib.util as u, json, sys; s = u.spec_from_file_location('arm_ab_worker', sys.argv[1]); "
            "m = u.module_from_spec(s); s.loader.exec_module(m); print(json.dumps(m.worker(sys.argv[2])))")
    out = subprocess.run([sys.executable, "-c", code, __file__, arm], cwd=tree, env=env,
                         capture_output=True, text=True, check=True, timeout=600).stdout
    return json.loads(out.strip().splitlines()[-1])


def compare(before: Path, after: Path, *, rounds: int, seeds: int | None = None, jobs: int = 2,
            arms: list[str] | None = None) -> dict:
    """Interleaved timings of ``arms`` (default: the demo's): {"arms", "before": {arm: {...}}, "after": ...,
    "floor_s": {side: {"wall": s, "cpu": s}}}; the floor at ``seeds`` an arm (default: the demo's own count)."""
    arms = arms or demo_arms()
    seeds = seeds or _demo_floor().demo_seed_count()
    runs: dict[str, dict[str, list[dict]]] = {"before": {a: [] for a in arms}, "after": {a: [] for a in arms}}
    for _ in range(rounds):
        for arm in arms:
            for side, tree in (("before", before), ("after", after)):
                runs[side][arm].append(_time(tree, arm))
    out: dict = {"arms": arms, "rounds": rounds, "seeds": seeds, "jobs": jobs, "floor_s": {}}
    for side, timed in runs.items():
        out[side] = {a: {k: statistics.median(r[k] for r in rs) for k in ("wall_ms", "cpu_ms")} | {
            "steps": rs[0]["steps"], "all": rs} for a, rs in timed.items()}
        out["floor_s"][side] = {k: _demo_floor().floor_s(((v[f"{k}_ms"] / 1e3, v["steps"]) for v in out[side].values()),
                                                         seeds=seeds, jobs=jobs) for k in ("wall", "cpu")}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.arm_ab", description=__doc__.splitlines()[0])
    p.add_argument("trees", nargs="*", type=Path, help="BEFORE and AFTER checkouts")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path, default=None, help="write the JSON here too")
    args = p.parse_args(argv)
    if len(args.trees) != 2 or not all((t / "lit_models").is_dir() for t in args.trees):
        print("arm_ab: error: give two checkouts of the project (BEFORE AFTER)", file=sys.stderr)
        return 2
    res = compare(*args.trees, rounds=args.rounds)
    for arm in res["arms"]:
        b, a = res["before"][arm], res["after"][arm]
        print(f"{arm:<9} wall {b['wall_ms']:6.1f} -> {a['wall_ms']:6.1f} ms   "
              f"cpu {b['cpu_ms']:6.1f} -> {a['cpu_ms']:6.1f} ms")
    fb, fa = res["floor_s"]["before"], res["floor_s"]["after"]
    print(f"floor     wall {fb['wall']:6.0f} -> {fa['wall']:6.0f} s    cpu {fb['cpu']:6.0f} -> {fa['cpu']:6.0f} s")
    if args.out:
        args.out.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
