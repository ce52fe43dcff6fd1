"""The ``attnlab`` LightningCLI (fit / validate / test / predict): decode-time and run-directory options, the
Trainer it builds around the run directory (checkpoints, records, loggers, figures) and what it does after each
subcommand. Admission (the refusals before a run starts) is :mod:`attnlab_run.admission`; the process around it
(exit statuses, one-line errors) is :mod:`attnlab_run.cli`.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from attnlab_core.errors import UsageError
from attnlab_run.admission import Admission
from attnlab_run.cachedirs import route_wandb_dirs
from attnlab_run.console import HeldConsole
from attnlab_run.continuation import fit_arm
from attnlab_run.conventions import arm_values, user_loggers
from attnlab_run.evaluations import evaluation_id
from attnlab_run.faults import LastCheckpoint, RngState
from attnlab_run.guards import command_line_keys, refuse_moot_overrides
from attnlab_run.inputs import CKPT_KEYWORDS, check_checkpoint_fits, load_checkpoint
from attnlab_run.preemption import PreemptionCheckpoint
from attnlab_run.recording import RunOptions, RunSummary, build_loggers
from attnlab_run.rundir import RunPaths, Status, read_summary, relative_checkpoint
from attnlab_run.trainer_setup import (
    RunConfigSaver,
    best_or_last,
    evaluation_options,
    report_evaluation,
    report_run,
    warn_slow_bf16,
    with_atomic_io,
)
from attnlab_run.wandb_run import BestValidation, HistoryStep, wandb_identity
from lit_models.blocks.decoding import DecodeConfig
from lit_models.callbacks.figures import AttentionFigures
from lit_models.callbacks.predictions import PredictionWriter
from lit_models.callbacks.probes import default_probes
from lit_models.moved import current

os.environ.setdefault("JSONARGPARSE_DEPRECATION_WARNINGS", "off")


class AttnlabCLI(Admission, LightningCLI):
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
    console: HeldConsole | None = None
    """Lightning's console lines, held by :func:`run_cli` until a loop starts (set by it)."""

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
        class_path = current(class_path)  # a checkpoint saved before lit_models' modules moved
        model_cfg = self.config[self.config.subcommand].get("model", {})
        configured = model_cfg.get("class_path")
        if configured and current(configured) != class_path:
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
