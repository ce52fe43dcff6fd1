"""Seeds stacked (issue #26): ``python -m ablations.stacked ARGS_1 --- ARGS_2 [--- ARGS_K ...]``.

Each ``ARGS_k`` is what ``attnlab`` gets for one trial of the same arm: ``fit --config X
--seed_everything N ... --run.root R --run.name NAME``. Each is parsed and built by the project's own
CLI, one after the other, exactly as its alone run would be (its seed, its datamodule, its model, its
trainer with every callback, its run directory, its CSV and W&B loggers); then the K fits run
together, one thread each, meeting at every training step for one vectorised forward and backward
(``attnlab_run.lockstep``). Everything else (validation, checkpoint selection, test after the fit,
summary.json, metrics.csv, figures) is each seed's own alone code path, so each run directory holds
what its alone run would write. W&B runs are one per seed (``reinit="create_new"``).

Exit status: 0 when every seed finished or diverged (each summary says which); ``REFUSED_EXIT`` with one
line ``REFUSAL: <why>`` when the seeds cannot be stacked (nothing trained: run them alone); else the
first seed's failure status (2 bad input, 1 failure, 128 + N preempted: each seed then saved its own
``last.ckpt`` and resumes alone from it with ``--ckpt_path last``).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import Any

from lightning.pytorch.cli import LightningCLI

from ablations.catalog.lookup import arm_axes
from ablations.engine.stackgroups import REFUSAL, REFUSED_EXIT, SEPARATOR
from ablations.engine.trialproc import install_handlers, restore_handlers
from attnlab_core.errors import user_error_line
from attnlab_run.cli import build_cli, cli_class_for
from attnlab_run.command import AttnlabCLI
from attnlab_run.conventions import quiet_console
from attnlab_run.guards import DIVERGED_EXIT
from attnlab_run.lockstep import Lockstep
from attnlab_run.preemption import PreemptionCheckpoint, is_preemption, preemption_exit_code
from lit_models.training.stacking import refusal

log = logging.getLogger(__name__)


def split_argv(argv: list[str]) -> list[list[str]]:
    """``a b --- c d`` -> ``[[a, b], [c, d]]``."""
    groups: list[list[str]] = [[]]
    for arg in argv:
        if arg == SEPARATOR:
            groups.append([])
        else:
            groups[-1].append(arg)
    return groups


def why_not(clis: list[AttnlabCLI]) -> str | None:
    """Why these built seeds cannot train stacked, or None. Checked before anything trains."""
    first = clis[0]
    why = refusal(first.model)
    if why is not None:
        return why
    if any(type(c.model) is not type(first.model) or dict(c.model.hparams) != dict(first.model.hparams)
           for c in clis[1:]):
        return "the seeds are not one arm (model class or hyper-parameters differ)"
    for cli in clis:
        trainer, ckpt = cli.trainer, cli.config[cli.subcommand].get("ckpt_path")
        if trainer.world_size != 1:
            return f"{trainer.world_size} processes: stacking runs the seeds in one"
        device, first_device = trainer.strategy.root_device, first.trainer.strategy.root_device
        if device != first_device:
            return f"devices {first_device} and {device}: the stacked step runs on one"
        if str(trainer.precision) != "32-true":
            return f"precision {trainer.precision}: stacking's equality with alone runs is established at 32-true"
        if ckpt:
            return f"{cli.run_dir.name} continues from {ckpt}: a resumed seed continues alone from its own checkpoint"
    return None


def _deferred(cli_class: type[AttnlabCLI]) -> type[AttnlabCLI]:
    """``cli_class`` that builds everything but does not run the subcommand yet."""
    return type(cli_class.__name__, (cli_class,), {"_run_subcommand": lambda self, subcommand: None})


def _fit(cli: AttnlabCLI, k: int, lockstep: Lockstep, codes: list[int]) -> None:
    """Seed ``k``'s fit (and test after it) through LightningCLI's own subcommand runner; its exit status."""
    try:
        LightningCLI._run_subcommand(cli, "fit")
        codes[k] = DIVERGED_EXIT if cli.diverged_at is not None else 0
    except SystemExit as exc:
        codes[k] = preemption_exit_code(exc) if is_preemption(exc) else exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - one seed's failure is its exit status; the others go on
        log.exception("stacked seed %s failed", cli.run_dir.name)
        codes[k] = 1
    finally:
        lockstep.leave(k)
        for logger in cli.trainer.loggers:  # its own W&B run, one of several open in this process
            if getattr(logger, "_experiment", None) is not None and hasattr(logger._experiment, "finish"):
                logger._experiment.finish()


def _forward_signals(clis: list[AttnlabCLI]) -> dict[int, Any]:
    """Preemption signals reach the main thread only: each seed's callback stops its fit at its next exact point.
    Returns the handlers replaced, for :func:`ablations.engine.trialproc.restore_handlers`."""
    callbacks = [cb for cli in clis for cb in cli.trainer.callbacks if isinstance(cb, PreemptionCheckpoint)]

    def handle(signum: int, frame: Any) -> None:
        for callback in callbacks:
            callback.request(signum)

    return install_handlers(handle)


def _one_wandb_run_per_seed() -> None:
    """Each seed's WandbLogger opens its own W&B run (wandb's ``reinit="create_new"``), not the first one's."""
    if os.environ.get("WANDB_MODE") != "disabled":
        import wandb

        wandb.setup(settings=wandb.Settings(reinit="create_new"))


def build(groups: list[list[str]]) -> list[AttnlabCLI]:
    """Each seed's CLI, built one after the other (each seeds the global RNG before its model)."""
    saved, sys.argv = sys.argv, sys.argv[:1]  # LightningCLI warns when given args beside a command line
    try:
        return [build_cli(_deferred(cli_class_for(args, arm_axes=arm_axes)), args, args) for args in groups]
    finally:
        sys.argv = saved


def run(groups: list[list[str]]) -> int:
    """Build, check, train stacked; the exit status (see the module docstring)."""
    quiet_console()
    _one_wandb_run_per_seed()
    try:
        clis = build(groups)
    except Exception as err:  # noqa: BLE001 - bad input arrives as several exception types
        line = user_error_line(err)
        if line is None:
            raise
        print(f"attnlab: error: {line}", file=sys.stderr)
        return 2
    why = why_not(clis)
    if why is not None:
        print(f"{REFUSAL}: {why}", flush=True)
        return REFUSED_EXIT
    lockstep = Lockstep([cli.model for cli in clis])
    codes = [1] * len(clis)
    threads = [threading.Thread(target=_fit, args=(cli, k, lockstep, codes), name=f"seed-{k}")
               for k, cli in enumerate(clis)]
    previous = _forward_signals(clis)
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)  # short waits: the main thread runs the signal handler
    finally:
        restore_handlers(previous)
    for cli, code in zip(clis, codes, strict=True):
        print(f"{cli.run_dir}: exit {code}", flush=True)
    return next((c for c in codes if c not in (0, DIVERGED_EXIT)), 0)


def main(argv: list[str] | None = None) -> int:
    groups = split_argv(sys.argv[1:] if argv is None else list(argv))
    if len(groups) < 2 or any(not g or g[0] != "fit" for g in groups):
        print(f"usage: python -m ablations.stacked fit ARGS {SEPARATOR} fit ARGS [{SEPARATOR} ...]", file=sys.stderr)
        return 2
    return run(groups)


if __name__ == "__main__":
    raise SystemExit(main())
