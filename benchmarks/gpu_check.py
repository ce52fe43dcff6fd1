"""``python -m benchmarks.gpu_check``: what has never run on a GPU, run on one in at most 8 minutes (issue #43).

Run it whenever a GPU is lent; ``--dry-run`` prints the plan and its time budget on any machine (a CPU too).
Every check is recorded, passed or not, in one JSON file (``--out``, default ``benchmarks/results/gpu_check.json``):

1. ``sdpa_masked_rows``: ``F.scaled_dot_product_attention`` under each backend (math, efficient, flash, cudnn)
   and dtype with a boolean mask holding a fully masked row, and attnlab's ``scaled_dot_product``: which give NaN.
2. ``vmap_dropout``: dropout and SDPA with dropout under ``torch.func.vmap(randomness="different")``, as
   ``lit_models.training.stacking`` maps stacked seeds.
3. ``family:<name>``: each family's config (synthetic data) through the real CLI (``attnlab fit``) for
   ``--steps`` steps in fp32, 16-mixed and bf16-mixed, single-device and one-process DDP, in one worker process
   per family: status, final loss, wall, tokens/s (``summary.json``) and peak allocated memory.
4. ``beam``: beam search (beam 4) of the Transformer and the recurrent seq2seq on the GPU under bf16 autocast.
5. ``stacked_pair``: two seeds of one arm trained stacked (``attnlab sweep --stack --count 2``); ``trial.json``
   says how each ran.
6. ``jobs_packing``: one question's quick preset with ``--jobs 4`` trials packed on the device
   (``benchmarks.gpu_question``), its wall time, trials done and GPU utilisation.

Checks run in the plan's order; one whose estimate no longer fits the remaining budget is recorded as skipped, so
the script ends within ``BUDGET_S`` whatever fails. The estimates are guesses for one H100 until a first run
replaces them with its measured times (the results file holds each check's wall time).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

BUDGET_S = 480.0  # issue #43: at most 8 minutes on one H100
PRECISIONS = ("32-true", "16-mixed", "bf16-mixed")
STRATEGIES = ("single", "ddp")
FAMILIES: dict[str, tuple[str, ...]] = {
    "transformer": ("ablations/configs/transformer_reverse.yaml",),
    "recurrent": ("ablations/configs/rnn_reverse.yaml",),
    "causal_lm": ("ablations/configs/lm_reverse.yaml",),
    "regressor": ("ablations/configs/adding.yaml",),
    "captioner": ("ablations/configs/caption_soft.yaml",),
    "classifier": ("ablations/configs/sentiment_transformer.yaml",),
    "glimpse": ("ablations/configs/ram_mnist.yaml", "--data.init_args.source=glyphs"),
    "full_view": ("ablations/configs/ram_mnist_fc.yaml", "--data.init_args.source=glyphs"),
}
"""Family -> its config and overrides: procedural data only (a lent GPU machine reaches no network and need not
have the packages that bundle real data, so the MNIST configs read the ``glyphs`` digits)."""
STACK_QUESTION = "scaling"
PACK_QUESTION, PACK_JOBS = "scaling", 4


class Check(NamedTuple):
    """One planned check: its name, its estimated seconds on one H100, and what runs it (the remaining budget in)."""

    name: str
    estimate_s: float
    run: Callable[[float], dict[str, Any]]


# ------------------------------------------------------------------------------------------- in-process checks
def sdpa_masked_rows(_: float, device: str = "cuda") -> dict[str, Any]:
    """{backend/dtype: "finite" | "nan" | error line} for SDPA with a fully masked query row, and attnlab's path.
    ``device``: the GPU's ``cuda``; ``cpu`` where the tests run it."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from lit_models.blocks.attention import scaled_dot_product

    out: dict[str, Any] = {}
    mask = torch.ones(2, 1, 8, 8, dtype=torch.bool, device=device)
    mask[0, 0, 3] = False  # query row 3 of example 0 may attend to nothing
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        q, k, v = (torch.randn(2, 4, 8, 64, device=device, dtype=dtype) for _ in range(3))
        for backend in (SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.FLASH_ATTENTION,
                        SDPBackend.CUDNN_ATTENTION):
            key = f"{backend.name.lower()}/{str(dtype).removeprefix('torch.')}"
            try:
                with sdpa_kernel(backend):
                    y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                out[key] = "finite" if torch.isfinite(y).all() else "nan"
            except RuntimeError as err:
                out[key] = f"unavailable: {str(err).splitlines()[0][:160]}"
        y, _ = scaled_dot_product(q, k, v, mask=mask, scale=0.125, dropout_p=0.0, need_weights=False)
        out[f"attnlab/{str(dtype).removeprefix('torch.')}"] = "finite" if torch.isfinite(y).all() else "nan"
    return out


def vmap_dropout(_: float, device: str = "cuda") -> dict[str, Any]:
    """Dropout and SDPA-with-dropout under ``vmap(randomness="different")`` over 2 stacked seeds, on ``device``."""
    import torch
    import torch.nn.functional as F
    from torch.func import vmap

    x = torch.ones(2, 4, 256, device=device)
    drop = vmap(lambda t: F.dropout(t, p=0.5, training=True), randomness="different")(x)
    q = torch.randn(2, 4, 2, 16, 32, device=device)
    sdpa = vmap(lambda a: F.scaled_dot_product_attention(a, a, a, dropout_p=0.1, is_causal=True),
                randomness="different")(q)
    return {"dropout_seeds_differ": bool((drop[0] != drop[1]).any()), "dropout_kept": float((drop != 0).float().mean()),
            "sdpa_dropout_finite": bool(torch.isfinite(sdpa).all())}


def beam(_: float, device: str = "cuda") -> dict[str, Any]:
    """Beam search (beam 4) of the Transformer and the recurrent seq2seq on ``device``, bf16 autocast: time, shape."""
    import torch

    from ablations.stacked import build
    from lit_models.blocks.decoding import DecodeConfig

    out: dict[str, Any] = {}
    for name in ("transformer", "recurrent"):
        accelerator = "gpu" if device == "cuda" else device
        cli = build([["fit", "--config", *FAMILIES[name], f"--trainer.accelerator={accelerator}"]])[0]
        model, data = cli.model.to(device).eval(), cli.datamodule
        data.setup("fit")
        src = next(iter(data.val_dataloader())).src.to(device)
        model.decoding = DecodeConfig(strategy="beam", beam_size=4)
        _synchronize(device)
        t0 = time.perf_counter()
        with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16):
            pred = model.generate(src)
        _synchronize(device)
        out[name] = {"batch": src.size(0), "out_shape": list(pred.shape), "s": time.perf_counter() - t0}
    return out


def _synchronize(device: str) -> None:
    """Wait for the device's queued kernels (a CPU runs them as they are called)."""
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


# ------------------------------------------------------------------------------------------ subprocess checks
def _python(args: list[str], timeout_s: float) -> dict[str, Any]:
    """Run ``python ARGS`` in its own session: {"returncode" (None: timed out), "wall_s", "tail"}."""
    from benchmarks.gpu_question import run_sweep

    with tempfile.NamedTemporaryFile("w+", suffix=".log") as log:
        res = run_sweep([sys.executable, *args], timeout_s=timeout_s, log=log)
        log.seek(0)
        return {**res, "tail": log.read()[-1500:]}


def family_check(name: str, steps: int) -> Callable[[float], dict[str, Any]]:
    """The family's six fits in one worker process (``--worker NAME``), its JSON read back."""
    def run(budget: float) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="attnlab-gpu-check-") as tmp:
            out = Path(tmp) / "family.json"
            res = _python(["-m", "benchmarks.gpu_check", "--worker", name, "--steps", str(steps), "--out", str(out)],
                          timeout_s=budget)
            return {**res, "fits": json.loads(out.read_text()) if out.exists() else None}
    return run


def stacked_pair(budget: float) -> dict[str, Any]:
    """Two seeds of one arm of ``STACK_QUESTION`` trained stacked; each trial's ``trial.json``."""
    with tempfile.TemporaryDirectory(prefix="attnlab-gpu-stack-") as root:
        res = _python(["-m", "attnlab", "sweep", STACK_QUESTION, "--scale", "quick", "--stack", "--count", "2",
                       "--root", root, "--quiet"], timeout_s=budget)
        trials = {p.parent.name: json.loads(p.read_text()) for p in Path(root).glob("*/*/trial.json")}
        return {**res, "trials": trials}


def jobs_packing(budget: float) -> dict[str, Any]:
    """``PACK_QUESTION``'s quick preset with ``PACK_JOBS`` trials packed on the GPU (``benchmarks.gpu_question``)."""
    from benchmarks.gpu_question import bench_question_on_gpu

    return bench_question_on_gpu(PACK_QUESTION, jobs=(PACK_JOBS,), timeout_s=int(budget))


def plan(steps: int) -> list[Check]:
    """The checks in the order they run, with their estimated seconds on one H100."""
    fits = len(PRECISIONS) * len(STRATEGIES)
    return [
        Check("sdpa_masked_rows", 15, sdpa_masked_rows),
        Check("vmap_dropout", 5, vmap_dropout),
        Check("beam", 20, beam),
        Check("stacked_pair", 30, stacked_pair),
        Check("jobs_packing", 60, jobs_packing),
        *(Check(f"family:{name}", 10 + fits * 3.5 * steps / 200, family_check(name, steps)) for name in FAMILIES),
    ]


# ------------------------------------------------------------------------------------------------ the worker
def fit_args(name: str, precision: str, strategy: str, steps: int, root: str, accelerator: str = "gpu") -> list[str]:
    """``attnlab fit`` arguments of one family fit: the family's config, ``steps`` steps, two validation batches."""
    config, *overrides = FAMILIES[name]
    return ["fit", "--config", config, *overrides, f"--trainer.accelerator={accelerator}", "--trainer.devices=1",
            f"--trainer.precision={precision}", f"--trainer.max_steps={steps}", "--trainer.max_epochs=-1",
            "--trainer.limit_val_batches=2", "--trainer.val_check_interval=null", "--trainer.num_sanity_val_steps=0",
            *(["--trainer.strategy=ddp"] if strategy == "ddp" else []),
            f"--run.root={root}", f"--run.experiment={name}", f"--run.name={precision}-{strategy}"]


def worker(name: str, steps: int, accelerator: str = "gpu") -> list[dict[str, Any]]:
    """Every precision × strategy fit of family ``name`` in this process (imports paid once). ``accelerator="cpu"``
    runs the same fits on a CPU (the tests do), where memory reads 0 and 16-mixed is CPU autocast."""
    import torch

    from attnlab_run.cli import run_cli
    from attnlab_run.rundir import read_summary

    rows, gpu = [], accelerator == "gpu"
    with tempfile.TemporaryDirectory(prefix="attnlab-gpu-fit-") as root:
        for precision in PRECISIONS:
            for strategy in STRATEGIES:
                if gpu:
                    torch.cuda.reset_peak_memory_stats()
                t0, error, environ = time.perf_counter(), None, dict(os.environ)
                try:
                    run_cli(fit_args(name, precision, strategy, steps, root, accelerator))
                except BaseException as err:  # noqa: BLE001 - a check records every failure, SystemExit included
                    error = f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"
                finally:
                    if torch.distributed.is_available() and torch.distributed.is_initialized():
                        torch.distributed.destroy_process_group()  # the next DDP fit initialises its own
                    os.environ.clear()  # a DDP fit exports LOCAL_RANK, MASTER_PORT and its run directory: a later
                    os.environ.update(environ)  # launch that inherited them would take itself for a rank it is not
                summary = read_summary(Path(root) / name / f"{precision}-{strategy}")
                rows.append({"precision": precision, "strategy": strategy, "error": error,
                             "status": summary.status.value if summary.status else None,
                             "steps": summary.global_step, "wall_s": time.perf_counter() - t0,
                             "tokens_per_s": summary.tokens_per_s, "train_loss": summary.metrics.get("train/loss"),
                             "peak_mem_mib": torch.cuda.max_memory_allocated() / 2**20 if gpu else 0.0})
    return rows


# ------------------------------------------------------------------------------------------------- the driver
def describe(checks: list[Check]) -> str:
    """The plan as printed by ``--dry-run``: one line per check, then the total against the budget."""
    lines = [f"{c.name:<22} ~{c.estimate_s:4.0f} s" for c in checks]
    total = sum(c.estimate_s for c in checks)
    lines.append(f"{'total':<22} ~{total:4.0f} s of a {BUDGET_S:.0f} s budget (8 minutes on one H100); a check that "
                 "no longer fits the remaining budget is skipped and recorded as such")
    return "\n".join(lines)


def run_checks(checks: list[Check], *, budget_s: float = BUDGET_S) -> list[dict[str, Any]]:
    """Run each check that still fits the budget, given at most twice its estimate; every check's outcome."""
    start, results = time.perf_counter(), []
    for check in checks:
        left = budget_s - (time.perf_counter() - start)
        if check.estimate_s > left:
            results.append({"check": check.name, "skipped": f"budget: {left:.0f} s left, ~{check.estimate_s:.0f} s"})
            continue
        t0 = time.perf_counter()
        try:
            outcome: dict[str, Any] = {"ok": True, "result": check.run(min(left, 2 * check.estimate_s))}
        except Exception as err:  # noqa: BLE001 - a failing check is a finding, recorded; the rest still run
            outcome = {"ok": False, "error": f"{type(err).__name__}: {err}"[:500]}
        results.append({"check": check.name, "wall_s": time.perf_counter() - t0, **outcome})
        print(f"{check.name}: {'ok' if outcome['ok'] else outcome['error']} ({results[-1]['wall_s']:.0f} s)",
              flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu_check", description=__doc__.splitlines()[0])
    p.add_argument("--dry-run", action="store_true", help="print the plan and its time budget; run nothing")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/gpu_check.json"))
    p.add_argument("--steps", type=int, default=200, help="training steps of each family fit (default 200)")
    p.add_argument("--worker", choices=FAMILIES, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.steps < 1:
        print(f"gpu_check: error: --steps must be at least 1, got {args.steps}", file=sys.stderr)
        return 2
    if args.worker:
        args.out.write_text(json.dumps(worker(args.worker, args.steps), indent=1))
        return 0
    checks = plan(args.steps)
    print(describe(checks))
    if args.dry_run:
        return 0
    import torch

    if not torch.cuda.is_available():
        print("gpu_check: error: CUDA is not available (use --dry-run to see the plan)", file=sys.stderr)
        return 2
    results = run_checks(checks)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                    "budget_s": BUDGET_S, "steps": args.steps, "checks": results}, indent=1))
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
