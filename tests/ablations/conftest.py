"""Fixtures of the experiment-layer tests: a stand-in training program that starts in milliseconds."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

FAKE_CLI = textwrap.dedent('''
    """Stand-in for `attnlab fit|test`: honours --run.* (test_after_fit too); x=bad fails, nan diverges, slow sleeps."""
    import json, sys, time
    from pathlib import Path
    sub, args = sys.argv[1], dict(a[2:].split("=", 1) for a in sys.argv[2:] if a.startswith("--"))
    x = args.get("x")
    if x == "bad":
        print("error: --x=bad is not allowed", file=sys.stderr)
        sys.exit(2)
    if x == "slow":
        time.sleep(60)
    run = Path(args["run.root"]) / args["run.experiment"] / args["run.name"]
    run.mkdir(parents=True, exist_ok=True)
    summary = json.loads((run / "summary.json").read_text()) if (run / "summary.json").exists() else {}
    metrics = summary.get("metrics", {})
    if sub == "fit":
        metrics["val/score"] = float("nan") if x == "nan" else float(x) + int(args.get("seed_everything", 0))
    status = "diverged" if x == "nan" else "finished"
    (run / "summary.json").write_text(json.dumps({"status": status, "metrics": metrics, "argv": sys.argv}))
    (run / "calls").open("a").write(sub + "\\n")
    if sub == "test" or (status == "finished" and args.get("run.test_after_fit") == "true"):
        if Path(args["run.root"], "fail-tests").exists():
            sys.exit(1)
        metrics["test/score"] = 1.0
        (run / "summary.json").write_text(json.dumps({"status": status, "metrics": metrics, "argv": sys.argv}))
        (run / "calls").open("a").write("test\\n")
''')



@pytest.fixture()
def fake_program(tmp_path: Path) -> Path:
    """A script honouring the CLI's --run.* contract: fails for x=bad, diverges for x=nan, sleeps for x=slow."""
    program = tmp_path / "fake_cli.py"
    program.write_text(FAKE_CLI)
    return program
