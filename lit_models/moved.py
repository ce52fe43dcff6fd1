"""The modules that left the root of ``lit_models`` for a subpackage, and the finder that keeps their old
paths working.

Saved LightningCLI ``config.yaml`` files and checkpoints (their ``_class_path`` hyper-parameter) name a class
by the module it lived in when they were written: ``lit_models.seq2seq.TransformerSeq2Seq``. :data:`MOVED`
maps each old module path to the new one. :func:`install` (run by ``import lit_models``) puts a finder on
``sys.meta_path`` that answers an old path with the new module itself, the same object, so classes, their
``isinstance`` checks and pickles are one. :func:`current` rewrites an old dotted path for the readers that
compare class paths as text (a checkpoint against a config, a resumed run's config against its saved one).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from collections.abc import Mapping
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

GROUPS: dict[str, tuple[str, ...]] = {
    "families": ("seq2seq", "recurrent_seq2seq", "causal_lm", "classifier", "captioner", "glimpse", "full_view",
                 "regressor"),
    "training": ("decoder_training", "reinforce", "stochastic", "optim", "stacking", "evaluation", "steplogs"),
    "policies": ("forcing", "schedules"),
    "callbacks": ("probes", "grad_probes", "logit_probe", "figures", "heatmap_plot", "predictions"),
    "scoring": ("metrics", "caption_metrics", "bleu_by_length"),
}
"""Subpackage -> the modules that moved into it from the root of ``lit_models``, keeping their file names."""

MOVED: dict[str, str] = {f"lit_models.{m}": f"lit_models.{group}.{m}" for group, ms in GROUPS.items() for m in ms}
"""Old module path -> new module path."""


def current(path: str) -> str:
    """``path`` (a module or ``module.Name``) as it is named now: an old module path rewritten, else unchanged."""
    module = path
    while module:
        if module in MOVED:
            return MOVED[module] + path[len(module):]
        module = module.rpartition(".")[0]
    return path


def current_paths(flat: Mapping[str, Any]) -> dict[str, Any]:
    """A flat config (``model.class_path``: ...) with every ``*class_path`` value :func:`current`."""
    return {k: current(v) if k.endswith("class_path") and isinstance(v, str) else v for k, v in flat.items()}


class OldPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module path (a key of :data:`MOVED`) as its new module, registered under both names."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> ModuleSpec | None:
        return importlib.util.spec_from_loader(fullname, self) if fullname in MOVED else None

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        module = importlib.import_module(MOVED[spec.name])
        spec.loader_state = module.__spec__  # the import system sets __spec__ to the old path's; put it back
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = module.__spec__.loader_state  # the module ran when its new path was imported


def install() -> None:
    """Put one :class:`OldPaths` first on ``sys.meta_path`` (again: nothing), ahead of any finder that could
    answer an old path with another copy of the project (an editable install of another checkout)."""
    if not any(isinstance(finder, OldPaths) for finder in sys.meta_path):
        sys.meta_path.insert(0, OldPaths())
