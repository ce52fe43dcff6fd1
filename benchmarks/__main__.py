"""``python -m benchmarks run [--quick] [--out FILE]``: run every benchmark, print the table, write JSON.

Examples::

    flock /tmp/attnlab-heavy.lock python -m benchmarks run --out benchmarks/results/cpu.json
    OMP_NUM_THREADS=1 python -m benchmarks run --quick --threads 1
    python -m benchmarks run --sections training --systems attnlab torch
    python -m benchmarks report benchmarks/results/cpu.json      # re-print a saved run
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from benchmarks.common import PRECISIONS
from benchmarks.report import render
from benchmarks.runner import SECTIONS, Options, run


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the benchmarks, print the table and write JSON")
    r.add_argument("--out", type=Path, default=Path("benchmarks/results/cpu.json"),
                   help="JSON results file (the GPU section writes <stem>_gpu.json next to it)")
    r.add_argument("--quick", action="store_true", help="tiny sizes, one round: a smoke test in seconds")
    r.add_argument("--threads", type=int, default=2, help="torch intra-op threads (default 2)")
    r.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    r.add_argument("--systems", nargs="+", choices=("attnlab", "torch", "marian"),
                   default=["attnlab", "torch", "marian"])
    r.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=["fp32", "bf16"],
                   help="fp32; bf16 (bf16-mixed: autocast); bf16-true (bf16 weights and optimizer state)")
    r.add_argument("--rounds", type=int, default=5, help="timing rounds (median reported)")
    r.add_argument("--steps", type=int, default=3, help="calls per system per round")
    r.add_argument("--markdown", type=Path, default=None,
                   help="also write the table into this Markdown file between the table markers")
    show = sub.add_parser("report", help="print the table of an earlier run's JSON")
    show.add_argument("json", type=Path)
    return p.parse_args(argv)


START, END = "<!-- benchmarks:table:start -->", "<!-- benchmarks:table:end -->"


def write_between_markers(path: Path, table: str) -> None:
    """Replace the text between START and END in ``path`` (appending the markers if absent)."""
    text = path.read_text() if path.exists() else ""
    if START not in text or END not in text:
        text = f"{text}\n{START}\n{END}\n"
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    path.write_text(f"{head}{START}\n\n{table}\n\n{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = parse(argv)
    if args.command == "report":
        print(render(json.loads(args.json.read_text())))
        return 0
    opts = Options(quick=args.quick, threads=args.threads, sections=tuple(args.sections),
                   systems=tuple(args.systems), precisions=tuple(args.precisions), rounds=args.rounds,
                   steps=args.steps)
    results = run(opts)
    gpu = results.pop("gpu", None)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    if gpu is not None:
        args.out.with_name(f"{args.out.stem}_gpu.json").write_text(json.dumps(gpu, indent=1))
        results["gpu"] = gpu
    table = render(results)
    print(table)  # the command's user-facing output
    if args.markdown is not None:
        write_between_markers(args.markdown, table)
    print(f"\nresults: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
