"""Optional ``torch.compile`` as a Lightning callback.

Usage (no code or config change)::

    attnlab fit --config ablations/configs/transformer_reverse.yaml \\
        --trainer.callbacks+=attnlab_run.compile.CompileModel
    attnlab fit ... --trainer.callbacks+=attnlab_run.compile.CompileModel \\
        --trainer.callbacks.init_args.mode=max-autotune

Submodules are compiled *in place* (``nn.Module.compile``), so parameter names, checkpoints and
``weights_only`` reloading are unchanged, and the compiled modules are the ones every path calls
(teacher-forced training, KV-cached decoding, figures). The default targets are the two layer
stacks of the Transformer (``net.encoder``, ``net.decoder``): the embedding, loss and decoding
loop stay eager. Incremental decoding feeds growing caches, so shapes are dynamic after the
first recompilation (``dynamic=None`` lets torch detect that).
"""

from __future__ import annotations

import logging
from typing import Literal

import lightning as L

log = logging.getLogger(__name__)

CompileMode = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]


class CompileModel(L.Callback):
    """Compile submodules of the LightningModule with ``torch.compile`` before fitting or evaluating.

    Args:
        modules: dotted paths of submodules relative to the LightningModule (``get_submodule``).
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
        self.modules = list(modules) if modules is not None else ["net.encoder", "net.decoder"]
        self.mode, self.backend, self.dynamic, self.fullgraph = mode, backend, dynamic, fullgraph
        self.compiled: list[str] = []

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        """Compile each target once (a later stage on the same module does not recompile)."""
        for path in self.modules:
            if path in self.compiled:
                continue
            module = pl_module.get_submodule(path)
            kwargs = {"backend": self.backend, "dynamic": self.dynamic, "fullgraph": self.fullgraph}
            if self.backend == "inductor":
                kwargs["mode"] = self.mode
            module.compile(**kwargs)
            self.compiled.append(path)
            log.info("torch.compile: %s (backend=%s, mode=%s)", path, self.backend, self.mode)
