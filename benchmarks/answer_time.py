"""Time to answer, before and after issue #26 (part of ``python -m benchmarks run --sections time``).

"Before" is how a trial started before issue #26 and how ``wandb agent`` still starts one: a fresh interpreter
(cold). "After" is the runner's default now: forked from a server that has already imported torch, Lightning
and the project (warm, ``ablations.engine.warm``). Each row is measured in this run on this machine, except the whole
findings set, which takes hours and is read from what the runner recorded:

- per-trial fixed overhead: wall minus training steps, validation and test, of each trial of
  ``benchmarks.trial_time.QUESTION_TRIALS`` started cold and warm (goal: at most 3 s warm);
- training-step utilisation: the FLOPs of one training step (torch's ``FlopCounterMode`` on step
  ``FLOPS_STEP``, which that step's own time then includes) times the steps, over the seconds of training
  steps, as a share of the 1-thread fp32 matmul ceiling measured in the same run (no goal: the issue asks
  for the number; tiny models sit far below the ceiling);
- ``attnlab demo`` wall, every trial cold and every trial warm (same arms, seeds, steps; goal: 150 s), and its
  compute floor: its trials' training steps alone over its jobs (``benchmarks.demo_floor``), which no cut outside
  the training steps can go below;
- the whole quick findings set: first trial's start to last trial's end as recorded in the findings'
  ``result.json`` files, of the original seed set (``docs/findings``) and of the replication set
  (``docs/findings/replication``) over the questions both have, with each set's CPUs; the goal (a third of
  before) is judged only when both ran on the same CPU kind.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

from ablations.catalog.arms import REPO
from benchmarks.demo_floor import demo_floor
from benchmarks.trial_time import QUESTION_TRIALS, QUICK_EXTRA, TrialSpec, run_trial

OVERHEAD_GOAL_S = 3.0
DEMO_GOAL_S = 150.0
FINDINGS_GOAL = 1 / 3
MEASURED = ("training steps", "validation", "test")


def overhead_s(trial: dict) -> float:
    """Everything but training steps, validation and test (the issue's per-trial fixed overhead)."""
    return trial["wall_s"] - sum(trial["rows"][r] for r in MEASURED)


def utilisation(trial: dict, ceiling_gflops: float) -> float | None:
    """Achieved training-step GFLOP/s over the 1-thread fp32 ceiling; None without a FLOP count."""
    flops, steps, secs = trial.get("step_flops"), trial.get("training_batches"), trial["rows"]["training steps"]
    if not flops or not steps or secs <= 0:
        return None
    return flops * steps / secs / 1e9 / ceiling_gflops


def trials_cold_and_warm(root: Path, *, quick: bool) -> list[dict]:
    """Each question trial (``quick``: the first, at tiny sizes) started cold, then warm, one after the other."""
    specs = [TrialSpec(s.question, s.params, QUICK_EXTRA) for s in QUESTION_TRIALS[:1]] if quick else QUESTION_TRIALS
    return [run_trial(spec, root / spec.question, warm=warm) for spec in specs for warm in (False, True)]


def demo_wall(root: Path, *, warm: bool) -> float:
    """Seconds of ``attnlab demo`` as a user runs it (its own defaults), cold or warm; RuntimeError if it fails."""
    env = {**os.environ, "ATTNLAB_WARM_TRIALS": "1" if warm else "0", "WANDB_MODE": "offline",
           "PYTHONPATH": str(REPO)}
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "attnlab", "demo", "--root", str(root)], cwd=REPO, env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"attnlab demo failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}")
    return time.time() - t0


def findings_sets(out: Path = REPO / "docs" / "findings") -> dict | None:
    """The recorded wall of the questions both seed sets ran: {"before"/"after": {span_s, trials, cpus}}. A question
    whose first set was rerun after the replication set began (``attnlab findings --only``, with later code) is
    left out: its "before" would not be before."""
    from ablations.catalog.questions import ORDER
    from ablations.reports.findings_readme import load_results
    from ablations.verdicts.replication import SUBDIR

    first = {r.name: r for r in load_results(out, ORDER) if r.trials_span}
    again = {r.name: r for r in load_results(out / SUBDIR, ORDER) if r.trials_span}
    began = min((r.trials_span[0] for r in again.values()), default=math.inf)
    both = [n for n in first if n in again and first[n].trials_span[0] < began]
    if not both:
        return None

    def summary(results: dict) -> dict:
        picked = [results[n] for n in both]
        return {"span_s": sum(r.trials_span[1] - r.trials_span[0] for r in picked),
                "trials": sum(r.trials for r in picked), "cpus": sorted({c for r in picked for c in r.cpus})}

    return {"questions": both, "before": summary(first), "after": summary(again)}


def bench_answer_time(root: Path, *, quick: bool, ceiling_gflops: float) -> dict:
    """The section's measurements (``quick``: one tiny trial each way, no demo)."""
    trials = trials_cold_and_warm(root / "trials", quick=quick)
    for t in trials:
        t["overhead_s"], t["utilisation"] = overhead_s(t), utilisation(t, ceiling_gflops)
    demo = None if quick else {w: demo_wall(root / f"demo-{w}", warm=w == "warm") for w in ("cold", "warm")}
    floor = None if quick else demo_floor(root / "demo-floor")
    return {"trials": trials, "demo_s": demo, "demo_floor": floor, "findings": findings_sets(),
            "ceiling_1thread_gflops": ceiling_gflops}


def answer_goals(res: dict) -> list[dict]:
    """The issue's goals this run can judge: warm overhead, demo wall, findings set (same CPU kind only)."""
    goals = [{"goal": f"per-trial fixed overhead, warm, {t['question']}: <= {OVERHEAD_GOAL_S:.0f} s",
              "value": t["overhead_s"], "met": t["overhead_s"] <= OVERHEAD_GOAL_S}
             for t in res["trials"] if t["start"] == "warm"]
    if res.get("demo_s"):
        warm = res["demo_s"]["warm"]
        goals.append({"goal": f"attnlab demo (warm, the default) <= {DEMO_GOAL_S:.0f} s", "value": warm,
                      "met": warm <= DEMO_GOAL_S})
    if res.get("demo_floor"):
        floor = res["demo_floor"]["floor_s"]
        goals.append({"goal": f"the demo's training steps alone, over its jobs (its floor) <= {DEMO_GOAL_S:.0f} s",
                      "value": floor, "met": floor <= DEMO_GOAL_S})
    sets = res.get("findings")
    if sets and sets["before"]["cpus"] == sets["after"]["cpus"]:
        ratio = sets["after"]["span_s"] / sets["before"]["span_s"]
        goals.append({"goal": "findings set wall <= 1/3 of before (same CPU kind)", "value": ratio,
                      "met": ratio <= FINDINGS_GOAL})
    return goals


def answer_table(res: dict) -> str:
    """Before (cold) and after (warm) per row, as markdown."""
    lines = ["| row | before (cold) | after (warm) | ratio |", "|---|---|---|---|"]
    by_q: dict[str, dict[str, dict]] = {}
    for t in res["trials"]:
        by_q.setdefault(f"{t['question']} ({t['steps']} steps)", {})[t["start"]] = t
    for name, pair in by_q.items():
        cold, warm = pair["cold"], pair["warm"]
        lines.append(f"| fixed overhead, {name} | {cold['overhead_s']:.1f} s | {warm['overhead_s']:.1f} s | "
                     f"{warm['overhead_s'] / cold['overhead_s']:.2f} |")
        lines.append(f"| trial wall, {name} | {cold['wall_s']:.1f} s | {warm['wall_s']:.1f} s | "
                     f"{warm['wall_s'] / cold['wall_s']:.2f} |")
        util = [pair[w]["utilisation"] for w in ("cold", "warm")]
        if None not in util:
            lines.append(f"| training-step utilisation of the 1-thread fp32 ceiling "
                         f"({res['ceiling_1thread_gflops']:.0f} GFLOP/s), {name} | {util[0]:.1%} | {util[1]:.1%} | |")
    if res.get("demo_s"):
        cold, warm = res["demo_s"]["cold"], res["demo_s"]["warm"]
        lines.append(f"| `attnlab demo` wall | {cold:.0f} s | {warm:.0f} s | {warm / cold:.2f} |")
    if res.get("demo_floor"):
        floor = res["demo_floor"]
        steps = ", ".join(f"{a['arm']} {a['step_ms']:.1f}" for a in floor["arms"])
        lines.append(f"| `attnlab demo` floor: training steps alone ({steps} ms a step; × steps × "
                     f"{floor['seeds']} seeds / {floor['jobs']} jobs; {floor.get('threads', 1)} thread as a trial) | | "
                     f"{floor['floor_s']:.0f} s | |")
    sets = res.get("findings")
    if sets:
        b, a = sets["before"], sets["after"]
        lines.append(f"| findings, {len(sets['questions'])} questions ({b['trials']} trials; recorded, not run here) | "
                     f"{b['span_s'] / 60:.0f} min on {', '.join(b['cpus'])} | {a['span_s'] / 60:.0f} min on "
                     f"{', '.join(a['cpus'])} (replication seeds) | {a['span_s'] / b['span_s']:.2f} |")
    return "\n".join(lines)
