"""``attnlab`` command line: runs one command of the LightningCLI (:class:`attnlab_run.command.AttnlabCLI`: fit /
validate / test / predict) and turns its end into an exit status and, for bad input, one line (exit 2).

    attnlab fit --config ablations/configs/transformer_reverse.yaml --model.norm=pre
    attnlab test --config ablations/configs/transformer_reverse.yaml --ckpt_path runs/.../best.ckpt
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any

import lightning as L

from attnlab_core.errors import exception_chain, user_error_line
from attnlab_core.yamlfile import check_config_files, config_paths, load_user_yaml
from attnlab_run.command import AttnlabCLI
from attnlab_run.console import HeldConsole
from attnlab_run.conventions import import_named_classes, misspelt_option, quiet_console
from attnlab_run.guards import DIVERGED_EXIT, remove_fresh
from attnlab_run.launch import RUN_DIR_ENV
from attnlab_run.ownership import release_all
from attnlab_run.preemption import is_preemption, preemption_exit_code
from attnlab_run.rundir import default_experiment
from attnlab_run.trainer_setup import RunConfigSaver

os.environ.setdefault("JSONARGPARSE_DEPRECATION_WARNINGS", "off")


def run_cli(args: list[str] | None = None, *, arm_axes: Callable[[str], tuple[str, ...]] | None = None) -> None:
    """fit / validate / test / predict through :class:`AttnlabCLI`; bad input is one line and exit 2.

    Args:
        args: the arguments after the program name (None: ``sys.argv[1:]``).
        arm_axes: experiment name -> the CLI paths that define its arms (W&B tags, display name).
    """
    argv = sys.argv[1:] if args is None else list(args)
    console = HeldConsole()
    cli_class = cli_class_for(argv, arm_axes=arm_axes, console=console)
    quiet_console()
    console.hold()  # the device banner waits: input refused while the data is set up stays the only line
    try:
        _run_held(cli_class, argv, args, console)
    finally:
        console.release()  # a command that never started a loop (or crashed) still shows what was held
        release_all()  # the run directory is free for the next command (also when this one runs in-process)


def cli_class_for(argv: list[str], *, arm_axes: Callable[[str], tuple[str, ...]] | None = None,
                  console: HeldConsole | None = None, **fields: Any) -> type[AttnlabCLI]:
    """The CLI class of one command line (``argv``: the arguments after the program name)."""
    fields = {"only": argv[0] if argv else None, "argv": tuple(argv), "console": console, **fields}
    if arm_axes is not None:
        fields["arm_axes"] = staticmethod(arm_axes)
    return type("QuestionCLI" if arm_axes is not None else "AttnlabCLI", (AttnlabCLI,), fields)


def build_cli(cli_class: type[AttnlabCLI], argv: list[str], args: list[str] | None) -> AttnlabCLI:
    """Parse, seed, build and (unless ``cli_class`` defers it) run one command, as ``attnlab`` does."""
    check_config_files(argv)
    import_named_classes(argv)
    printed = with_printed_experiment(argv)
    with warnings.catch_warnings() if printed else contextlib.nullcontext():
        if printed:  # the option added is ours: Lightning's warning about args beside sys.argv is noise
            warnings.filterwarnings("ignore", message="LightningCLI's args parameter")
        return cli_class(
            L.LightningModule,
            L.LightningDataModule,
            subclass_mode_model=True,
            subclass_mode_data=True,
            save_config_callback=RunConfigSaver,
            save_config_kwargs={"overwrite": True},
            auto_configure_optimizers=False,
            trainer_defaults={"use_distributed_sampler": False},
            parser_kwargs={"exit_on_error": False},
            args=printed or args,
        )


def with_printed_experiment(argv: list[str]) -> list[str] | None:
    """``--print_config`` prints before the run directory is resolved, so ``run.experiment`` would read null and
    the printed file, run again, would land in ``<root>/<its own stem>/``: name the experiment this command uses."""
    if (not any(a.startswith("--print_config") for a in argv)
            or any(a.startswith("--run.experiment") for a in argv)):
        return None
    configs = config_paths(argv)
    for path in configs:
        run = (load_user_yaml(path) or {}).get("run")
        if isinstance(run, dict) and run.get("experiment"):
            return None
    return [*argv, f"--run.experiment={default_experiment(configs)}"]


def _run_held(cli_class: type[AttnlabCLI], argv: list[str], args: list[str] | None, console: HeldConsole) -> None:
    """:func:`run_cli`'s body: build and run the CLI; bad input is one line and exit 2."""
    try:
        cli = build_cli(cli_class, argv, args)
        finish_wandb()
        if cli.diverged_at is not None:
            print(f"attnlab: diverged at step {cli.diverged_at} (non-finite loss); run directory "
                  f"{cli.run_dir} (exit {DIVERGED_EXIT})", file=sys.stderr)
            raise SystemExit(DIVERGED_EXIT)
    except SystemExit as exc:
        if not is_preemption(exc):
            raise
        code = preemption_exit_code(exc)
        console.release()
        print(f"attnlab: preempted (exit {code}): checkpoint saved in {os.environ.get(RUN_DIR_ENV, 'the run')}"
              "/checkpoints/last.ckpt; continue with the same --run.name and --ckpt_path last", file=sys.stderr)
        raise SystemExit(code) from None
    except Exception as err:  # noqa: BLE001 - bad input arrives as several exception types
        full = no_space(err)
        if full is not None and not os.environ.get("ATTNLAB_DEBUG"):
            finish_wandb()  # the run keeps its directory: summary.json records the cause, last.ckpt is intact
            print(f"attnlab: error: {full}; free space there, then continue with --ckpt_path last", file=sys.stderr)
            raise SystemExit(2) from None
        line = user_error_line(err)
        if line is None or os.environ.get("ATTNLAB_DEBUG"):
            raise
        finish_wandb()
        remove_fresh(cli_class.fresh)
        console.discard()
        print(f"attnlab: error: {misspelt_option(line, argv) or line}", file=sys.stderr)
        raise SystemExit(2) from None


def no_space(err: BaseException) -> str | None:
    """The line for a write that failed on a full disk (``attnlab_core.atomic``), naming the disk and file."""
    for node in exception_chain(err):
        if isinstance(node, OSError) and node.errno == errno.ENOSPC:
            return f"{node.strerror}: cannot write {node.filename}" if node.filename else str(node)
    return None


def finish_wandb() -> None:
    """Close this command's W&B run (if any), so the next command in the same process opens its own."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and getattr(wandb, "run", None) is not None:
        wandb.finish()


def main(args: list[str] | None = None) -> None:
    """``python attnlab_run/cli.py fit|validate|test|predict ...`` (the ``attnlab`` command adds the rest)."""
    run_cli(args)


if __name__ == "__main__":
    main()
