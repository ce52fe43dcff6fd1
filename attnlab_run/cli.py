"""``attnlab`` command line: LightningCLI (fit / validate / test / predict) with the run-directory
contract, decode-time options and one-line errors for bad input.

    attnlab fit --config ablations/configs/transformer_reverse.yaml --model.norm=pre
    attnlab test --config ablations/configs/transformer_reverse.yaml --ckpt_path runs/.../best.ckpt
"""

from __future__ import annotations

import errno
import importlib
import inspect
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from attnlab_core.errors import UsageError, user_error_line
from attnlab_core.yamlfile import check_config_files
from attnlab_run.cachedirs import route_wandb_dirs
from attnlab_run.console import HeldConsole
from attnlab_run.continuation import branch_checkpoint, parent_record, refuse_changed_resume, run_seed
from attnlab_run.conventions import (
    arm_values,
    import_named_classes,
    misspelt_option,
    quiet_console,
    refuse_disabled_logger,
    run_root,
    user_loggers,
)
from attnlab_run.evaluations import fit_arm, fit_checkpoint
from attnlab_run.faults import LastCheckpoint, RngState
from attnlab_run.guards import (
    DIVERGED_EXIT,
    check_parsed,
    command_line_keys,
    refuse_moot_overrides,
    remove_fresh,
)
from attnlab_run.inputs import (
    CKPT_KEYWORDS,
    check_checkpoint_fits,
    check_data_paths,
    load_checkpoint,
    nearest_existing,
)
from attnlab_run.launch import RUN_DIR_ENV
from attnlab_run.memory import check_config_memory
from attnlab_run.ownership import claim_all, move_aside, own_run_dir, release_all
from attnlab_run.preemption import PreemptionCheckpoint, is_preemption, preemption_exit_code
from attnlab_run.recording import RunOptions, RunSummary, build_loggers
from attnlab_run.rundir import (
    RunPaths,
    Status,
    check_writable,
    evaluation_id,
    named_checkpoint,
    read_summary,
    refuse_finished_run,
    relative_checkpoint,
    resolve_run_dir,
    resume_preempted,
    set_aside_stale_log,
    stable_run_name,
)
from attnlab_run.trainer_setup import (
    RunConfigSaver,
    best_or_last,
    evaluation_options,
    flatten,
    report_evaluation,
    report_run,
    warn_slow_bf16,
    with_atomic_io,
)
from attnlab_run.wandb_run import BestValidation, HistoryStep, wandb_identity
from lit_models.blocks.decoding import DecodeConfig
from lit_models.figures import AttentionFigures
from lit_models.predictions import PredictionWriter
from lit_models.probes import default_probes

os.environ.setdefault("JSONARGPARSE_DEPRECATION_WARNINGS", "off")
log = logging.getLogger(__name__)


def _save_experiment(cfg: Any, experiment: str) -> None:
    """Write the resolved experiment name into the config that ``config.yaml`` saves, so re-running
    ``<run>/config.yaml`` lands in the same experiment (not in one named after the file, ``config``)."""
    if isinstance(cfg.run, dict):
        cfg.run["experiment"] = experiment
    else:
        cfg.run.experiment = experiment


class AttnlabCLI(LightningCLI):
    """LightningCLI with decode options, run-directory options and vocabulary links.

    ``arm_axes(experiment)`` names the CLI paths that define an arm of that experiment (the W&B tags
    and display name); the command layer above, which knows the ablation questions, overrides it.
    """

    only: str | None = None
    """The subcommand on the command line (set by :func:`run_cli`); only its parser is built."""
    argv: tuple[str, ...] = ()
    """The command line (set by :func:`run_cli`): which ``--model.*`` options the user gave."""
    diverged_at: int | None = None
    """Set after a ``fit`` that diverged (the step), for :func:`run_cli`'s exit status."""
    fresh: tuple[Path, Path] | None = None
    """(run directory, its nearest existing ancestor) when this command creates the run directory:
    refused input found later (e.g. in the data) removes what it created, up to that ancestor."""
    console: HeldConsole | None = None
    """Lightning's console lines, held by :func:`run_cli` until a loop starts (set by it)."""
    continued: bool = False
    """This ``fit`` continues its run: its config was compared with the run's (``continuation``)."""
    parent: dict[str, Any] | None = None
    """This ``fit`` branches from another run's checkpoint: what it records of that parent."""

    @staticmethod
    def arm_axes(experiment: str) -> tuple[str, ...]:
        return ()

    def subcommands(self) -> dict[str, set[str]]:  # type: ignore[override]  # Lightning's is a staticmethod
        """Lightning builds the parsers of all four subcommands (~75 ms each, most of the ~0.3 s it spends
        on parsers); build only the one asked for, or all when none of them is named (help, a typo)."""
        every = LightningCLI.subcommands()
        return {self.only: every[self.only]} if self.only in every else every

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_class_arguments(DecodeConfig, "decode", help="Decode-time options (never saved in checkpoints).")
        parser.add_class_arguments(RunOptions, "run", help="Run directory and checkpoint selection.")
        for target, attr in (("src_vocab_size", "src_vocab_size"), ("tgt_vocab_size", "tgt_vocab_size")):
            parser.link_arguments("data", f"model.init_args.{target}", compute_fn=_attr(attr), apply_on="instantiate")

    def _parse_ckpt_path(self) -> None:
        """As Lightning's, but keep only checkpoint hparams the model class accepts: the config dump
        saves link targets (e.g. tgt_vocab_size) as None for models that have no such argument."""
        if not self.config.get("subcommand"):
            return
        ckpt_path = self.config[self.config.subcommand].get("ckpt_path")
        if not ckpt_path or ckpt_path in CKPT_KEYWORDS:
            return
        hparams = dict(load_checkpoint(ckpt_path).get("hyper_parameters") or {})
        hparams.pop("_instantiator", None)
        class_path = hparams.pop("_class_path", None)
        if not hparams or class_path is None:
            return super()._parse_ckpt_path()
        model_cfg = self.config[self.config.subcommand].get("model", {})
        configured = model_cfg.get("class_path")
        if configured and configured != class_path:
            raise UsageError(f"{ckpt_path} is a checkpoint of {class_path}, but the config's model is {configured}")
        module, _, name = class_path.rpartition(".")
        accepted = inspect.signature(getattr(importlib.import_module(module), name)).parameters
        kept = {k: v for k, v in hparams.items() if k in accepted}
        if not self.continued:  # a continuation compared every key with the run's config.yaml already
            refuse_moot_overrides(str(ckpt_path), hparams=kept, configured=dict(vars(model_cfg.get("init_args") or {})),
                                  given=command_line_keys(self.argv))
        model = {"class_path": class_path, "dict_kwargs": kept}
        try:
            self.config = self.parser.parse_object({self.config.subcommand: {"model": model}}, self.config)
        except SystemExit:
            raise UsageError(f"{ckpt_path}: its hyper-parameters do not fit {class_path}") from None

    def _set_seed(self) -> None:
        """Check the input and choose the run directory first: bad input is one line, refused before
        anything is seeded, built or created."""
        if self.subcommand is not None:
            self._prepare_run()
        seed_log = logging.getLogger("lightning.fabric.utilities.seed")  # "Seed set to N": the seed is in
        level = seed_log.level  # config.yaml and summary.json; printed here it would precede a data error's line
        seed_log.setLevel(logging.WARNING)
        try:
            super()._set_seed()
        finally:
            seed_log.setLevel(level)

    def _prepare_run(self) -> None:
        cfg = self.config[self.subcommand]
        check_parsed(cfg)
        check_config_memory(cfg, subcommand=self.subcommand, argv=self.argv)
        data = cfg.get("data")
        check_data_paths(data.get("init_args") if data is not None else None)
        configs = cfg.get("config") or []
        default_experiment = Path(str(configs[0])).stem if configs else "default"
        self.run_opts = RunOptions(**vars(cfg.run)) if not isinstance(cfg.run, dict) else RunOptions(**cfg.run)
        self.run_opts.root = run_root(self.run_opts.root, cfg.trainer.get("default_root_dir"))
        refuse_disabled_logger(cfg.trainer.get("logger"))
        self.run_dir = resolve_run_dir(self.run_opts, default_experiment=default_experiment,
                                       ckpt_path=cfg.get("ckpt_path"))
        check_writable(self.run_dir)
        type(self).fresh = None if self.run_dir.exists() else (self.run_dir, nearest_existing(self.run_dir))
        restart = self.subcommand == "fit" and self.run_opts.restart  # the old run will be moved aside
        own_run_dir(self.run_dir, subcommand=self.subcommand, ckpt_path=cfg.get("ckpt_path"),
                    restart=self.run_opts.restart)
        if not restart:
            refuse_finished_run(self.run_dir, subcommand=self.subcommand, ckpt_path=cfg.get("ckpt_path"))
        cfg.ckpt_path = resume_preempted(self.run_dir, subcommand=self.subcommand, ckpt_path=cfg.get("ckpt_path"),
                                         restart=restart)
        if self.subcommand == "fit":
            _save_experiment(cfg, self.run_dir.parent.name)
        stale_log = self.subcommand == "fit" and not cfg.get("ckpt_path")  # a fresh fit: not appended to
        self._continue_or_branch(cfg, restart=restart)
        if self.subcommand != "fit" and not cfg.get("ckpt_path"):
            cfg.ckpt_path = fit_checkpoint(self.run_dir, self.subcommand)  # never an untrained model under a fit
        if cfg.get("ckpt_path") in ("best", "last") and stable_run_name(self.run_opts) is None:
            raise UsageError(f"--ckpt_path={cfg.ckpt_path} needs --run.name (the run to continue or evaluate)")
        if self.subcommand != "fit" and cfg.get("ckpt_path") in ("best", "last"):
            cfg.ckpt_path = str(named_checkpoint(self.run_dir, cfg.ckpt_path))
            self._parse_ckpt_path()
        elif cfg.get("ckpt_path") == "last" and (self.run_dir / "checkpoints" / "last.ckpt").is_file():
            cfg.ckpt_path = str(self.run_dir / "checkpoints" / "last.ckpt")  # found whatever the W&B run id
            self._parse_ckpt_path()  # a checkpoint of another family is refused before anything runs
        self._accepted(restart=restart, stale_log=stale_log)

    def _accepted(self, *, restart: bool, stale_log: bool) -> None:
        """Every refusal has passed: only now move things (``--run.restart`` moves the old run aside, a fresh fit
        sets an old ``metrics.csv`` aside), then claim the run directory (its lock file names this process)."""
        moved = move_aside(self.run_dir) if restart else None
        if moved is not None:
            log.warning("--run.restart: the previous run in %s was moved to %s", self.run_dir, moved)
            type(self).fresh = (self.run_dir, self.run_dir.parent)
        elif stale_log:
            set_aside_stale_log(self.run_dir)
        claim_all()

    def _continue_or_branch(self, cfg: Any, *, restart: bool) -> None:
        """``fit`` with a checkpoint of this very run continues it exactly (``continuation``: a changed key is
        refused); ``--run.branch_from`` starts this new run from another run's checkpoint and records it as the
        parent; ``--ckpt_path best`` (Lightning refuses it for fit, after the run was marked) is one line."""
        if self.subcommand != "fit":
            return
        ckpt = cfg.get("ckpt_path")
        if ckpt == "best":
            raise UsageError("--ckpt_path=best is for test/validate: fit continues a run with --ckpt_path last, or "
                             "starts a new run from another run's checkpoint with --run.branch_from")
        if self.run_opts.branch_from and (restart or not RunPaths(self.run_dir).checkpoint("last").is_file()):
            parent = branch_checkpoint(self.run_opts.branch_from)
            if ckpt not in (None, "last") or parent.resolve().parent.parent == self.run_dir.resolve():
                raise UsageError(f"--run.branch_from={self.run_opts.branch_from} starts a new run from that "
                                 "checkpoint: give a new --run.name, and no --ckpt_path")
            cfg.ckpt_path, self.parent = str(parent), parent_record(parent)
            self._parse_ckpt_path()  # the checkpoint decides the model, as for an evaluation
        elif ckpt and RunPaths(self.run_dir).config.is_file():
            cfg.seed_everything = run_seed(self.run_dir, cfg.get("seed_everything"))
            dumped = self._parser(self.subcommand).dump(cfg, skip_none=False, format="yaml")
            refuse_changed_resume(self.run_dir, flatten(dumped))
            self.continued = True

    def instantiate_trainer(self, **kwargs: Any) -> L.Trainer:
        ckpt_path = self.config[self.subcommand].get("ckpt_path")
        if ckpt_path and ckpt_path not in CKPT_KEYWORDS:  # before any logger: a misfit is one line
            check_checkpoint_fits(ckpt_path, self.model)
        cfg = self.config_init[self.subcommand]
        seed = cfg.get("seed_everything")
        options = evaluation_options(self.config[self.subcommand])
        checkpoint = evaluation = None
        if self.subcommand in ("test", "validate"):  # its own record, log folder and W&B run
            checkpoint = relative_checkpoint(self.run_dir, self.config[self.subcommand].get("ckpt_path"))
            evaluation = evaluation_id(self.subcommand, options, checkpoint)
        paths = RunPaths(self.run_dir)
        own_dir = paths.run if self.subcommand == "fit" else (  # an evaluation writes only below its own folder
            paths.evaluation_log(evaluation) if evaluation else paths.evaluation(self.subcommand))
        callbacks = [
            ModelCheckpoint(dirpath=str(self.run_dir / "checkpoints"), filename="best", enable_version_counter=False,
                            monitor=self.run_opts.monitor, mode=self.run_opts.mode, save_last=False),
            RunSummary(run_dir=self.run_dir, seed=seed if isinstance(seed, int) else None, parent=self.parent,
                       subcommand=self.subcommand, evaluation=evaluation, options=options, checkpoint=checkpoint),
            BestValidation(),
            HistoryStep(),
            AttentionFigures(run_dir=own_dir, max_drawings=self.run_opts.figure_drawings),
            *default_probes(),
            *_fault_callbacks(self.run_dir, self.run_opts),
            *([self.console] if self.console is not None else []),  # before the progress bar Lightning adds
        ]
        if self.subcommand == "predict":
            callbacks.append(PredictionWriter(path=RunPaths(self.run_dir).predictions))
        trainer_cfg = dict(self.config_init[self.subcommand]["trainer"])
        trainer_cfg["callbacks"] = list(trainer_cfg.get("callbacks") or []) + callbacks
        trainer_cfg["plugins"] = with_atomic_io(trainer_cfg.get("plugins"))
        experiment = self.run_dir.parent.name
        arm = (fit_arm(self.run_dir, self.arm_axes(experiment)) if self.subcommand != "fit" else None)
        arm = arm if arm is not None else arm_values(self.config[self.subcommand], self.arm_axes(experiment))
        identity = wandb_identity(self.run_dir, subcommand=self.subcommand, arm=arm,
                                  seed=seed if isinstance(seed, int) else None, evaluation=evaluation,
                                  checkpoint=checkpoint)
        if self.parent:  # a branch names its parent in its W&B config too
            identity = replace(identity, config={**identity.config,
                                                 **{f"parent.{k}": v for k, v in self.parent.items()}})
        route_wandb_dirs(own_dir)  # an evaluation's W&B cache stays in its own folder too
        trainer_cfg["logger"] = [*build_loggers(self.run_dir, self.run_opts, subcommand=self.subcommand,
                                                identity=identity, evaluation=evaluation),
                                 *user_loggers(trainer_cfg.get("logger"))]  # ours first: config.yaml goes there
        trainer_cfg["default_root_dir"] = str(self.run_dir)
        self.save_config_kwargs = {**self.save_config_kwargs, "config_dir": str(own_dir)}
        warn_slow_bf16(trainer_cfg)
        extra = [self._get(self.config_init, c) for c in self._parser(self.subcommand).callback_keys]
        if trainer_cfg.get("fast_dev_run"):  # Lightning saves no config then; a smoke run's config is re-runnable
            extra.append(RunConfigSaver(self._parser(self.subcommand), self.config[self.subcommand],
                                        **self.save_config_kwargs))
        return self._instantiate_trainer({**trainer_cfg, **kwargs}, extra)

    def after_instantiate_classes(self) -> None:
        decode_cfg = self.config_init[self.subcommand]["decode"]
        self.model.decoding = decode_cfg if isinstance(decode_cfg, DecodeConfig) else DecodeConfig(**vars(decode_cfg))
        # RunConfigSaver logs every setting once, under its CLI path; Lightning would add the model's
        # and datamodule's hyper-parameters again under bare names (norm next to model.norm).
        for module in (self.model, self.datamodule):
            if module is not None:
                module._log_hyperparams = False

    def after_fit(self) -> None:
        # Rank 0 owns summary.json; every rank must take the same decision, or the others' collectives hang.
        summary = read_summary(self.run_dir)
        finished = self.trainer.is_global_zero and summary.status is Status.FINISHED
        if self.trainer.is_global_zero and summary.status is Status.DIVERGED:
            self.diverged_at = summary.diverged_at if summary.diverged_at is not None else summary.global_step
        if self.run_opts.test_after_fit and self.trainer.strategy.broadcast(finished, src=0):
            self.trainer.test(self.model, datamodule=self.datamodule, ckpt_path=best_or_last(self.trainer))
        report_run(self.run_dir, self.trainer)

    def after_test(self) -> None:
        report_run(self.run_dir, self.trainer)
        report_evaluation(self.run_dir, self.trainer, self.subcommand, self.config[self.subcommand])

    def after_predict(self) -> None:
        if self.trainer.is_global_zero:
            print(f"predictions: {RunPaths(self.run_dir).predictions}")


def _fault_callbacks(run_dir: Path, opts: RunOptions) -> list[L.Callback]:
    """RNG states in checkpoints, an always-current ``last.ckpt`` (every validation, every N steps if
    asked, end of training) and preemption handling."""
    last = run_dir / "checkpoints" / "last.ckpt"
    return [RngState(), LastCheckpoint(path=last, every_n_steps=opts.checkpoint_every_n_steps),
            PreemptionCheckpoint(ckpt_path=last)]


def _attr(name: str):
    def read(datamodule: Any) -> Any:
        return getattr(datamodule, name, None)

    return read


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
        args=args,
    )


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
    node: BaseException | None = err
    while node is not None:
        if isinstance(node, OSError) and node.errno == errno.ENOSPC:
            return f"{node.strerror}: cannot write {node.filename}" if node.filename else str(node)
        node = node.__cause__ or node.__context__
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
