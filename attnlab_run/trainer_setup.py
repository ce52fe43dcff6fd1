"""What the ``attnlab`` CLI adds around the Trainer it builds: the config saver (``config.yaml`` in the
run or evaluation folder, and flat keys in W&B), atomic checkpoint writes as the default CheckpointIO,
the slow-bf16 warning, and the lines printed at the end of a command. :mod:`attnlab_run.cli` assembles them.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.cli import SaveConfigCallback
from lightning.pytorch.loggers import WandbLogger

from attnlab_core.flatkeys import flat_options
from attnlab_run.evaluations import evaluation_id
from attnlab_run.faults import AtomicCheckpointIO
from attnlab_run.rundir import RunPaths, relative_checkpoint

log = logging.getLogger(__name__)


class RunConfigSaver(SaveConfigCallback):
    """Saves the resolved config as ``config.yaml`` in ``config_dir`` (``<run>/`` for fit,
    ``<run>/test/<evaluation>/`` when evaluating a run, so nothing is overwritten), whatever
    ``--trainer.logger`` adds and also under ``fast_dev_run`` (where Lightning swaps every logger for
    a dummy, and its own choice, the first logger's folder, is no folder), and logs it to W&B as flat
    dotted keys.

    Args:
        config_dir: where ``config.yaml`` goes; None: Lightning's choice (``trainer.log_dir``).
    """

    def __init__(self, *args: Any, config_dir: str | None = None, **kwargs: Any) -> None:
        to_log_dir = config_dir is None and kwargs.pop("save_to_log_dir", True)
        super().__init__(*args, save_to_log_dir=to_log_dir, **kwargs)
        self.config_dir = config_dir

    def save_config(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self.config_dir is not None:  # rank 0 only (Lightning calls this there)
            Path(self.config_dir).mkdir(parents=True, exist_ok=True)
            self.parser.save(self.config, str(Path(self.config_dir) / self.config_filename), skip_none=False,
                             overwrite=True, multifile=self.multifile)
        flat = flatten(self.parser.dump(self.config, skip_none=False, format="yaml"))
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger):
                logger.experiment.config.update(_fit_seed_first(flat, logger.experiment.config),
                                                allow_val_change=True)


def _fit_seed_first(flat: dict[str, Any], config: Any) -> dict[str, Any]:
    """An evaluation's W&B config says the seed of the fit it evaluates (``eval.fit_seed``, as its tags and name do)
    under ``seed_everything``; the evaluating command's own seed is kept as ``eval.seed_everything``."""
    fit_seed = config.get("eval.fit_seed")
    if fit_seed is None or "seed_everything" not in flat:
        return flat
    return {**flat, "seed_everything": fit_seed, "eval.seed_everything": flat["seed_everything"]}


def evaluation_options(cfg: Any) -> dict[str, Any]:
    """What decides an evaluation's numbers: the flat ``decode.*`` and ``data.*`` settings of ``cfg``."""
    import json

    groups = {k: cfg[k].as_dict() if hasattr(cfg[k], "as_dict") else cfg[k] for k in ("decode", "data") if cfg.get(k)}
    return flatten(json.dumps(groups, default=str, sort_keys=True))


def flatten(dumped: str) -> dict[str, Any]:
    """A dumped (YAML or JSON) config's flat options (:func:`attnlab_core.flatkeys.flat_options`)."""
    import yaml

    return flat_options(yaml.safe_load(dumped))


def best_or_last(trainer: L.Trainer) -> str:
    """The fit's best checkpoint; ``last`` when nothing was monitored (no best was saved)."""
    ckpt = trainer.checkpoint_callback
    return "best" if ckpt is not None and getattr(ckpt, "best_model_path", "") else "last"


def with_atomic_io(plugins: Any) -> list[Any]:
    """The user's plugins plus :class:`AtomicCheckpointIO`, unless they chose a CheckpointIO themselves."""
    from lightning.fabric.plugins import CheckpointIO

    listed = [] if plugins is None else list(plugins) if isinstance(plugins, (list, tuple)) else [plugins]
    return listed if any(isinstance(p, CheckpointIO) for p in listed) else [*listed, AtomicCheckpointIO()]


def native_bf16_cpu() -> bool:
    """Whether this CPU has native bf16 matmuls (AVX512-BF16 / AMX) that oneDNN can use. The probe is a private
    torch op (torch has no public one): a torch without it counts as native, so the advisory warning stays quiet."""
    probe = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return True if probe is None else bool(probe())


def warn_slow_bf16(trainer_cfg: dict[str, Any]) -> bool:
    """Warn (and return True) when bf16 precision would run on a CPU without native bf16 matmuls,
    where torch falls back to a scalar GEMM ~30-60x slower than fp32 (BENCHMARKS.md)."""
    precision = str(trainer_cfg.get("precision") or "")
    on_cpu = trainer_cfg.get("accelerator") == "cpu" or not torch.cuda.is_available()
    if precision.startswith("bf16") and on_cpu and not native_bf16_cpu():
        log.warning("--trainer.precision=%s: this CPU has no native bf16 matmul, so training runs far slower "
                    "than with 32-true (see BENCHMARKS.md)", precision)
        return True
    return False


def report_run(run_dir: Path, trainer: L.Trainer) -> None:
    """User-facing lines at the end of a command: where the run lives."""
    if not trainer.is_global_zero:
        return
    print(f"run directory: {run_dir}")
    print(f"  summary:     {run_dir / 'summary.json'}")
    if (run_dir / "figures").is_dir():
        print(f"  figures:     {run_dir / 'figures'}")
    ckpt = trainer.checkpoint_callback
    if ckpt is not None and getattr(ckpt, "best_model_path", ""):
        print(f"  best ckpt:   {ckpt.best_model_path}")


def report_evaluation(run_dir: Path, trainer: L.Trainer, subcommand: str, cfg: Any) -> None:
    """Which evaluation record this test wrote, and the folder that holds it (its log, config and record)."""
    if trainer.is_global_zero:
        key = evaluation_id(subcommand, evaluation_options(cfg), relative_checkpoint(run_dir, cfg.get("ckpt_path")))
        print(f"  evaluation:  {key} ({RunPaths(run_dir).evaluation_log(key)})")
