"""Before / after of the demo arms' training steps on one machine: ``python -m benchmarks.arm_ab BEFORE AFTER``.

BEFORE and AFTER are two checkouts of the project (e.g. a worktree at main and one at a branch). Each arm of the
demo (``benchmarks.demo_floor``) is timed in a fresh interpreter with ``PYTHONPATH`` set to one checkout, at one
thread as a demo trial runs, the checkouts interleaved arm by arm and round by round, so load from other processes
hits both alike. A run reports per arm the median over rounds of each process's median step, in wall time and in
process CPU time (which a busy machine inflates less), and the demo floor each gives (Σ step × the arm's steps ×
seeds / jobs). The timed process loads this file by path and calls :func:`worker`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ARMS = ("none", "additive", "dot", "general", "hard")


def worker(arm: str, *, timed: int = 40, warmup: int = 5) -> dict:
    """{arm, wall_ms, cpu_ms, steps}: median wall and CPU milliseconds of the arm's training step at one thread."""
    import torch

    from ablations.commands import demo_plan
    from ablations.stacked import build
    from benchmarks.demo_floor import plan_grid
    from lit_models.optim import adamw

    torch.set_num_threads(1)
    plan = demo_plan(Path(tempfile.mkdtemp()), seeds=1)
    params = next(p for p in plan_grid(plan) if p["model.attention"] == arm)
    trial = plan.trial(params)
    cli = build([trial.command[trial.command.index("fit"):]])[0]
    model, data = cli.model.train(), cli.datamodule
    data.setup("fit")
    batches = list(data.train_dataloader())
    opt, clip = adamw(model.parameters(), lr=1e-3), cli.trainer.gradient_clip_val
    walls, cpus = [], []
    warnings.simplefilter("ignore")  # self.log outside a Trainer warns
    for i in range(warmup + timed):
        w, c = time.perf_counter(), time.process_time()
        loss, _ = model.training_loss(batches[i % len(batches)], i)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), float(clip))
        opt.step()
        if i >= warmup:
            walls.append(time.perf_counter() - w)
            cpus.append(time.process_time() - c)
    return {"arm": arm, "wall_ms": statistics.median(walls) * 1e3, "cpu_ms": statistics.median(cpus) * 1e3,
            "steps": int(cli.trainer.max_epochs) * len(batches)}


def _time(tree: Path, arm: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    # This file, loaded by path: the checkout under test need not have it (a "before" usually does not).
    code = ("import importlib.util as u, json, sys; s = u.spec_from_file_location('arm_ab_worker', sys.argv[1]); "
            "m = u.module_from_spec(s); s.loader.exec_module(m); print(json.dumps(m.worker(sys.argv[2])))")
    out = subprocess.run([sys.executable, "-c", code, __file__, arm], cwd=tree, env=env,
                         capture_output=True, text=True, check=True, timeout=600).stdout
    return json.loads(out.strip().splitlines()[-1])


def compare(before: Path, after: Path, *, rounds: int, seeds: int = 2, jobs: int = 2) -> dict:
    """Interleaved timings: {"before": {arm: {...}}, "after": ..., "floor_s": {side: {"wall": s, "cpu": s}}}."""
    runs: dict[str, dict[str, list[dict]]] = {"before": {a: [] for a in ARMS}, "after": {a: [] for a in ARMS}}
    for _ in range(rounds):
        for arm in ARMS:
            for side, tree in (("before", before), ("after", after)):
                runs[side][arm].append(_time(tree, arm))
    out: dict = {"rounds": rounds, "seeds": seeds, "jobs": jobs, "floor_s": {}}
    for side, arms in runs.items():
        out[side] = {a: {k: statistics.median(r[k] for r in rs) for k in ("wall_ms", "cpu_ms")} | {
            "steps": rs[0]["steps"], "all": rs} for a, rs in arms.items()}
        out["floor_s"][side] = {k: sum(v[f"{k}_ms"] / 1e3 * v["steps"] for v in out[side].values()) * seeds / jobs
                                for k in ("wall", "cpu")}
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
    for arm in ARMS:
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
