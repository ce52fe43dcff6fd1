"""Lightning conventions the attnlab CLI keeps: ``--trainer.default_root_dir`` is the run root, a
user's ``--trainer.logger`` runs beside ours, and the values of an arm read from the parsed config.
"""

from __future__ import annotations

from typing import Any

from attnlab_core.errors import UsageError

DEFAULT_ROOT = "runs"


def run_root(run_root_opt: str, default_root_dir: Any) -> str:
    """``--trainer.default_root_dir`` sets the run root like ``--run.root``; both, disagreeing, are refused."""
    if default_root_dir in (None, ""):
        return run_root_opt
    if run_root_opt not in (DEFAULT_ROOT, str(default_root_dir)):
        raise UsageError(f"--trainer.default_root_dir={default_root_dir} and --run.root={run_root_opt} disagree; "
                         "give one of them (both set the root that holds <experiment>/<run>/)")
    return str(default_root_dir)


def refuse_disabled_logger(logger: Any) -> None:
    """``--trainer.logger=false`` would drop metrics.csv, which the run-directory contract needs."""
    if logger is False:
        raise UsageError("--trainer.logger=false is not supported: every run writes metrics.csv "
                         "(turn W&B off with WANDB_MODE=disabled)")


def user_loggers(logger: Any) -> list[Any]:
    """The loggers the user configured (instantiated), kept beside attnlab's CSV and W&B loggers."""
    if logger in (None, True, False):
        return []
    return list(logger) if isinstance(logger, (list, tuple)) else [logger]


def arm_values(cfg: Any, axes: tuple[str, ...]) -> dict[str, Any]:
    """``{short name: value}`` of each axis (a CLI path such as ``model.positions``) in the parsed config.

    Subclass-mode groups store ``model.positions`` as ``model.init_args.positions``; the short name
    is the path's last part (``positions``), as in the sweep runner's trial names.
    """
    out: dict[str, Any] = {}
    for axis in axes:
        head, _, rest = axis.partition(".")
        value = None
        for key in (f"{head}.init_args.{rest}", axis):
            try:
                value = cfg.get(key) if rest else cfg.get(axis)
            except (KeyError, AttributeError):
                value = None
            if value is not None:
                break
        if value is not None:
            out[axis.rsplit(".", 1)[-1]] = value
    return out


MODEL_MODULES = tuple(f"lit_models.families.{m}" for m in ("seq2seq", "recurrent_seq2seq", "causal_lm", "classifier",
                                                           "captioner", "glimpse", "full_view", "regressor"))
DATA_MODULES = ("datamodules.synthetic", "datamodules.lm_tasks", "datamodules.translation", "datamodules.wikitext",
                "datamodules.sentiment", "datamodules.captioning", "datamodules.adding", "datamodules.digits")


def import_named_classes(argv: list[str]) -> None:
    """``--model TransformerSeq2Seq`` (a short class name) resolves only among imported subclasses:
    import the families' modules when a short name is given (a ``--config`` names full paths)."""
    import importlib

    for i, arg in enumerate(argv):
        group, _, value = arg.partition("=")
        if group in ("--model", "--data"):
            value = value or (argv[i + 1] if i + 1 < len(argv) else "")
            if value and "." not in value and not value.startswith("{"):
                for module in MODEL_MODULES if group == "--model" else DATA_MODULES:
                    importlib.import_module(module)


def misspelt_option(line: str, argv: list[str]) -> str | None:
    """``no option model.nrom; did you mean model.norm?`` for a parser error about an unknown option."""
    import difflib
    import re

    nested = re.search(r"--(\w+): Given value: NestedArg\(key='([^']+)'", line)
    unknown = re.search(r"unrecognized arguments: --([\w.]+)", line)
    unaccepted = re.match(r"--(\w+)\.(\w+) is not an option of ", line)
    if nested:
        group, key = nested.group(1), nested.group(2)
    elif unaccepted:
        group, key = unaccepted.group(1), unaccepted.group(2)
    elif unknown and "." in unknown.group(1):
        group, _, key = unknown.group(1).partition(".")
    else:
        return None
    key = key.removeprefix("init_args.")
    options = option_names(group, argv)
    close = difflib.get_close_matches(key, options, n=1, cutoff=0.6)
    return f"no option {group}.{key}" + (f"; did you mean {group}.{close[0]}?" if close else "")


def option_names(group: str, argv: list[str]) -> list[str]:
    """The options of ``group`` (trainer, model, data, decode, run) for the classes the command names."""
    import inspect

    if group == "trainer":
        import lightning as L

        return list(inspect.signature(L.Trainer.__init__).parameters)[1:]
    if group in ("decode", "run"):
        from dataclasses import fields

        from attnlab_run.recording import RunOptions
        from lit_models.blocks.decoding import DecodeConfig

        return [f.name for f in fields(DecodeConfig if group == "decode" else RunOptions)]
    cls = _configured_class(group, argv)
    return list(inspect.signature(cls).parameters) if cls is not None else []  # a family's flat knobs included


def option_choices(group: str, argv: list[str]) -> dict[str, tuple[Any, ...]]:
    """The options of ``group`` (model, data) whose type is a ``Literal``, with the values it allows."""
    import inspect
    import typing

    cls = _configured_class(group, argv) if group in ("model", "data") else None
    if cls is None:
        return {}
    out = {}
    for name, param in inspect.signature(cls).parameters.items():
        if typing.get_origin(param.annotation) is typing.Literal:
            out[name] = typing.get_args(param.annotation)
    return out


def _configured_class(group: str, argv: list[str]) -> Any:
    """The class ``--config`` files (or ``--model.class_path``) give ``group``; None when unknown."""
    import importlib
    from pathlib import Path

    from attnlab_core.yamlfile import load_user_yaml

    class_path = None
    for i, arg in enumerate(argv):
        value = arg.split("=", 1)[1] if arg.startswith("--config=") else (
            argv[i + 1] if arg in ("--config", "-c") and i + 1 < len(argv) else None)
        if value and Path(value).is_file():
            try:  # the same reader as the CLI's (check_config_files refused a bad file before this is asked)
                data = load_user_yaml(Path(value))
            except UsageError:
                return None
            node = data.get(group) if isinstance(data, dict) else None
            class_path = node.get("class_path", class_path) if isinstance(node, dict) else class_path
        if arg.startswith(f"--{group}.class_path="):
            class_path = arg.split("=", 1)[1]
    if not class_path or "." not in class_path:
        return None
    module, _, name = class_path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


class _NoTips:
    """Drops Lightning's advertising tips (``💡 Tip: ... litlogger``) from its rank-zero log."""

    @staticmethod
    def filter(record: Any) -> bool:
        return not str(record.getMessage()).startswith("💡")


QUIET_NOTICES = (
    # torch deprecates the LeafSpec class that Lightning's own _pytree.py still builds: nothing a user can change
    (FutureWarning, r".*isinstance\(treespec, LeafSpec\)` is deprecated"),
)
"""Library warnings a user can do nothing about, ignored by the commands (tests/cli/test_quiet_fit.py checks that
a fit prints none of them)."""


def quiet_console() -> None:
    """No Lightning advertising tips on the console (W&B's anonymous warning is gone at its source), and none of
    the :data:`QUIET_NOTICES` warnings. Idempotent."""
    import logging
    import warnings

    for category, message in QUIET_NOTICES:
        warnings.filterwarnings("ignore", message=message, category=category)
    for name in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _NoTips) for f in logger.filters):
            logger.addFilter(_NoTips())
