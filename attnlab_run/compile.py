"""Optional ``torch.compile`` as a Lightning callback.

Usage (no code or config change)::

    attnlab fit --config ablations/configs/transformer_reverse.yaml \\
        --trainer.callbacks+=attnlab_run.compile.CompileModel
    attnlab fit ... --trainer.callbacks+=attnlab_run.compile.CompileModel \\
        --trainer.callbacks.init_args.mode=max-autotune

Submodules are compiled *in place* (``nn.Module.compile``), so parameter names, checkpoints and
``weights_only`` reloading are unchanged. ``nn.Module.compile`` compiles a module's ``__call__`` only: a
module reached through another method (a recurrent decoder's ``.step()`` / ``.teacher_forward()``) would
stay eager. So by default the targets are found, not named: during the first batch of each phase
(training, validation, test, predict) a pre-hook on every submodule records which ones are called, and at
that batch's end the outermost called ones are compiled (a whole ``net`` where the family calls
``self.net(...)``; the encoder, the decoder's cells, attention and read-out where it calls methods). Each
family is thus compiled where it actually runs, whatever its layout; that first batch runs eager.
Incremental decoding feeds growing caches, so shapes are dynamic after the first recompilation
(``dynamic=None`` lets torch detect that).
"""

from __future__ import annotations

import logging
from typing import Any, Literal

import lightning as L
from torch import nn
from torch.utils.hooks import RemovableHandle
from torchmetrics import Metric

log = logging.getLogger(__name__)

CompileMode = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]


class CompileModel(L.Callback):
    """Compile submodules of the LightningModule with ``torch.compile``.

    Args:
        modules: dotted paths of submodules relative to the LightningModule (``get_submodule``), compiled at
            setup; None (default): the outermost submodules each phase's first batch calls (module docstring).
        mode: ``torch.compile`` mode.
        backend: ``torch.compile`` backend (``inductor``; ``aot_eager``/``eager`` for debugging).
        dynamic: ``torch.compile`` ``dynamic`` (None: detect dynamic shapes after a recompilation).
        fullgraph: fail instead of falling back on graph breaks.
    """

    def __init__(
        self,
        *,
        modules: list[str] | None = None,
        mode: CompileMode = "default",
        backend: str = "inductor",
        dynamic: bool | None = None,
        fullgraph: bool = False,
    ) -> None:
        super().__init__()
        self.modules = list(modules) if modules is not None else None
        self.mode, self.backend, self.dynamic, self.fullgraph = mode, backend, dynamic, fullgraph
        self.compiled: list[str] = []
        self.called: set[str] = set()
        self.hooks: list[RemovableHandle] = []
        self.phases: set[str] = set()

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        """Compile each named target once (a later stage on the same module does not recompile)."""
        for path in self.modules or []:
            try:
                pl_module.get_submodule(path)
            except AttributeError as err:
                raise ValueError(f"CompileModel: {type(pl_module).__name__} has no submodule {path!r}") from err
            self._compile(pl_module, path)

    def _compile(self, pl_module: L.LightningModule, path: str) -> None:
        if path in self.compiled:
            return
        kwargs: dict[str, Any] = {"backend": self.backend, "dynamic": self.dynamic, "fullgraph": self.fullgraph}
        if self.backend == "inductor":
            kwargs["mode"] = self.mode
        pl_module.get_submodule(path).compile(**kwargs)
        self.compiled.append(path)
        log.info("torch.compile: %s (backend=%s, mode=%s)", path, self.backend, self.mode)

    def _watch(self, pl_module: L.LightningModule, phase: str) -> None:
        """Record the submodules this phase's first batch calls."""
        if self.modules is not None or phase in self.phases:
            return
        self.phases.add(phase)
        for name, module in pl_module.named_modules():  # a compiled module keeps its hooks (no recompiles)
            if name and not isinstance(module, Metric) and not within(name, self.compiled):
                self.hooks.append(module.register_forward_pre_hook(_Seen(self.called, name)))

    def _settle(self, pl_module: L.LightningModule) -> None:
        """Compile the outermost submodules the batch called (those not inside one compiled already)."""
        if not self.hooks:
            return
        for handle in self.hooks:
            handle.remove()
        self.hooks = []
        for name in outermost(self.called | set(self.compiled)):
            self._compile(pl_module, name)
        self.called.clear()

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        self._watch(pl_module, "train")

    def on_validation_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        self._watch(pl_module, "validation")

    def on_test_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        self._watch(pl_module, "test")

    def on_predict_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        self._watch(pl_module, "predict")

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        self._settle(pl_module)

    def on_validation_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        self._settle(pl_module)

    def on_test_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        self._settle(pl_module)

    def on_predict_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        self._settle(pl_module)


class _Seen:
    """A forward pre-hook adding its module's name to a set."""

    def __init__(self, called: set[str], name: str) -> None:
        self.called, self.name = called, name

    def __call__(self, module: nn.Module, args: Any) -> None:
        self.called.add(self.name)


def outermost(names: set[str]) -> list[str]:
    """The dotted names none of whose ancestors is in ``names``, sorted."""
    return sorted(n for n in names if not any(n.startswith(f"{other}.") for other in names))


def within(name: str, roots: list[str]) -> bool:
    """Whether ``name`` is one of ``roots`` or inside one."""
    return any(name == root or name.startswith(f"{root}.") for root in roots)
