"""``attnlab``: the command table. Lightning subcommands (fit / validate / test / predict) run the
LightningCLI of ``attnlab_run.cli``; the experiment commands come from ``ablations.commands.COMMANDS``.

This module sits on top of both packages (neither imports it) and imports nothing heavy until a
subcommand is chosen, so ``attnlab --help`` and ``attnlab --version`` answer at once.

    attnlab fit --config ablations/configs/transformer_reverse.yaml --model.norm=pre
    attnlab sweep positions --scale quick
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Callable

LIGHTNING: dict[str, str] = {
    "fit": "train a model (LightningCLI; --config FILE, --model.*, --data.*, --trainer.*, --run.*)",
    "validate": "evaluate a run's checkpoint on the validation split (--run.name R --ckpt_path best)",
    "test": "evaluate a run's checkpoint on the test split; adds test/* to the run and its W&B run",
    "predict": "decode the test inputs with a checkpoint into <run>/predict/predictions.jsonl",
}


def _experiment_commands() -> dict[str, Callable[[list[str]], int]]:
    from ablations.commands import COMMANDS

    return dict(COMMANDS)


def _summary(name: str, command: Callable[[list[str]], int]) -> str:
    """One help line: ``ablations.commands.SUMMARIES[name]``, else the command's docstring."""
    from ablations.commands import SUMMARIES

    if name in SUMMARIES:
        return SUMMARIES[name]
    doc = (command.__doc__ or "").strip().splitlines()
    return doc[0].split(":", 1)[-1].strip() if doc else ""


def usage() -> str:
    """``attnlab --help``: every subcommand with one line."""
    rows = dict(LIGHTNING)
    rows.update({name: _summary(name, fn) for name, fn in _experiment_commands().items()})
    width = max(map(len, rows))
    lines = ["usage: attnlab <command> [options]     (attnlab <command> --help for its options)", "",
             "commands:"]
    lines += [f"  {name.ljust(width)}  {text}" for name, text in rows.items()]
    lines += ["", "options:", "  -h, --help     show this message", "  --version      print the version",
              "  --quiet        (after fit/validate/test/predict) no progress bars or progress lines",
              "", "Runs land in runs/<experiment>/<run>/; W&B logs online when wandb finds credentials, "
              "else offline (WANDB_MODE overrides)."]
    return "\n".join(lines)


def question_axes(experiment: str) -> tuple[str, ...]:
    """The CLI paths that define an arm of ``experiment`` when it is an ablation question."""
    from ablations.catalog.lookup import arm_axes

    return arm_axes(experiment)


def _quiet(argv: list[str]) -> list[str]:
    """``--quiet`` on a Lightning subcommand: no progress bar and no data-side progress lines
    (``ATTNLAB_QUIET``, read by ``attnlab_core.progress``); warnings and errors still print."""
    os.environ["ATTNLAB_QUIET"] = "1"
    return [a for a in argv if a != "--quiet"] + ["--trainer.enable_progress_bar=false"]


def _line_buffered() -> None:
    """Progress lines of the long commands (sweep, findings, demo) reach a redirected log as they happen
    (``nohup attnlab findings > log``), not when Python's block buffer fills."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure") and not stream.line_buffering:
            stream.reconfigure(line_buffering=True)


def main(args: list[str] | None = None) -> None:
    """Entry point of the ``attnlab`` console script (``args``: the arguments after ``attnlab``)."""
    argv = sys.argv[1:] if args is None else list(args)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        raise SystemExit(0 if argv else 2)
    if argv[0] == "--version":
        from attnlab import version

        print(f"attnlab {version()}")
        raise SystemExit(0)
    name = argv[0]
    from attnlab_run.conventions import quiet_console

    quiet_console()  # before any library is imported: its warnings too
    if name in LIGHTNING:
        from attnlab_run.cli import run_cli

        run_cli(_quiet(argv) if "--quiet" in argv else args, arm_axes=question_axes)
        return
    commands = _experiment_commands()
    if name in commands:
        _line_buffered()
        raise SystemExit(commands[name](argv[1:]))
    close = difflib.get_close_matches(name, [*LIGHTNING, *commands], n=1)
    hint = f"; did you mean {close[0]}?" if close else f"; choose one of: {', '.join([*LIGHTNING, *commands])}"
    print(f"attnlab: error: no command {name!r}{hint}", file=sys.stderr)
    raise SystemExit(2)


if __name__ == "__main__":
    main()
