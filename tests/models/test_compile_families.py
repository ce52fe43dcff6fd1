"""``CompileModel`` compiles what each family actually calls, on every config (issue #43, item 4).

``nn.Module.compile`` replaces a module's ``__call__`` only. Each config runs two training and two
validation batches through the real CLI with ``CompileModel(backend="eager")``; every callable it
compiled must then have been invoked (a compiled decoder reached only through ``.step()`` never is), and
the compiled modules are found by the calls of each phase's first batch (training, validation), so the check
is the later batches of each phase.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
from torch import nn

from attnlab_run.cli import main
from attnlab_run.compile import CompileModel
from tests.configs.test_configs import CONFIGS, SMALL_DATA, _overrides
from tests.datamodules.real_data import real_data_args

RECORDS: list[RecordingCompile] = []
HERE = "tests.models.test_compile_families"


class RecordingCompile(CompileModel):
    """CompileModel that counts the calls of each callable it compiled."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.calls: dict[str, int] = {}
        self.batches: dict[str, int] = {}
        self.phase_of: dict[str, str] = {}
        self.phase = ""
        RECORDS.append(self)

    def _watch(self, pl_module: nn.Module, phase: str) -> None:
        self.phase, self.batches[phase] = phase, self.batches.get(phase, 0) + 1
        super()._watch(pl_module, phase)

    def _compile(self, pl_module: nn.Module, path: str) -> None:
        fresh = path not in self.compiled
        super()._compile(pl_module, path)
        if fresh:
            module = pl_module.get_submodule(path)
            compiled = module._compiled_call_impl
            self.calls[path], self.phase_of[path] = 0, self.phase

            def counted(*args: Any, **kwargs: Any) -> Any:
                self.calls[path] += 1
                return compiled(*args, **kwargs)

            module._compiled_call_impl = counted


@pytest.mark.parametrize("config", CONFIGS, ids=[c.stem for c in CONFIGS])
def test_compile_model_compiles_what_each_family_calls(config: Path, tmp_path: Path) -> None:
    records = importlib.import_module(HERE).RECORDS  # the CLI imports this file under its package name
    records.clear()
    callback = f'{{"class_path": "{HERE}.RecordingCompile", "init_args": {{"backend": "eager"}}}}'
    main(["fit", "--config", str(config), "--trainer.fast_dev_run=2", "--trainer.accelerator=cpu",
          "--trainer.devices=1", f"--run.root={tmp_path}", "--data.init_args.batch_size=4", *SMALL_DATA,
          *(["--data.init_args.max_tokens=null"] if "max_tokens:" in config.read_text() else []),  # several batches
          f"--trainer.callbacks+={callback}", *_overrides(config, tmp_path), *real_data_args(config.stem, tmp_path)])
    (record,) = records
    assert record.compiled, "nothing compiled"
    # a target found in a phase's first batch is due to be called in that phase's later batches (a tiny real-data
    # fixture may give a phase one batch only)
    due = {path: n for path, n in record.calls.items() if record.batches[record.phase_of[path]] > 1}
    assert due, f"no phase ran a second batch: {record.batches}"
    idle = [path for path, n in due.items() if n == 0]
    assert not idle, f"compiled but never called through the compiled callable: {idle}"
