"""Safe loading, checked over the source tree: every ``torch.load`` passes ``weights_only=True``,
subprocesses get argument lists (never a shell string), and checkpoints hold only primitive
hyper-parameters. Downloads and extraction are covered in tests/datamodules/test_download.py."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from attnlab_run.cli import main

REPO = Path(__file__).parents[2]
PACKAGES = ("attnlab_core", "lit_models", "datamodules", "attnlab_run", "ablations", "attnlab", "benchmarks", "tests")
SUBPROCESS_CALLS = {"run", "Popen", "call", "check_call", "check_output"}


def _sources() -> list[Path]:
    return [p for pkg in PACKAGES if (REPO / pkg).is_dir() for p in sorted((REPO / pkg).rglob("*.py"))]


def _calls(path: Path) -> list[ast.Call]:
    return [n for n in ast.walk(ast.parse(path.read_text(), filename=str(path))) if isinstance(n, ast.Call)]


def _name(call: ast.Call) -> tuple[str, str]:
    """(module-ish prefix, attribute) of ``a.b(...)``; ("", name) for a bare ``name(...)``."""
    func = call.func
    if isinstance(func, ast.Attribute):
        owner = func.value.id if isinstance(func.value, ast.Name) else ""
        return owner, func.attr
    return "", func.id if isinstance(func, ast.Name) else ""


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def test_every_torch_load_is_weights_only():
    offenders = []
    for path in _sources():
        for call in _calls(path):
            if _name(call) == ("torch", "load"):
                flag = _keyword(call, "weights_only")
                if not (isinstance(flag, ast.Constant) and flag.value is True):
                    offenders.append(f"{path.relative_to(REPO)}:{call.lineno}")
    assert not offenders, f"torch.load without weights_only=True: {offenders}"


def test_the_packages_checked_are_every_package():
    assert set(PACKAGES) >= {p.parent.name for p in REPO.glob("*/__init__.py")} - {"docs"}


@pytest.mark.parametrize("zip_format", [True, False], ids=["zip", "legacy pickle"])
def test_a_checkpoint_read_for_its_metadata_is_memory_mapped(tmp_path, monkeypatch, zip_format):
    """``inputs.load_checkpoint`` (hyper-parameters, shapes) maps a checkpoint's tensors instead of reading them
    into memory; a legacy (pre-zip) file, which torch cannot map, still loads."""
    from attnlab_run.inputs import load_checkpoint

    path = tmp_path / "c.ckpt"
    torch.save({"state_dict": {"w": torch.ones(4)}, "hyper_parameters": {"d_model": 4}}, path,
               _use_new_zipfile_serialization=zip_format)
    seen, real = [], torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **kw: seen.append(kw) or real(*a, **kw))
    ckpt = load_checkpoint(path)
    assert ckpt["hyper_parameters"] == {"d_model": 4} and ckpt["state_dict"]["w"].tolist() == [1.0] * 4
    assert [kw.get("mmap") for kw in seen] == [zip_format] and all(kw["weights_only"] is True for kw in seen)


def test_subprocesses_get_argument_lists_never_a_shell():
    offenders = []
    for path in _sources():
        for call in _calls(path):
            owner, attr = _name(call)
            if (owner, attr) in (("os", "system"), ("os", "popen")):
                offenders.append(f"{path.relative_to(REPO)}:{call.lineno} os.{attr}")
            if owner != "subprocess" or attr not in SUBPROCESS_CALLS:
                continue
            shell = _keyword(call, "shell")
            first = call.args[0] if call.args else _keyword(call, "args")
            if (shell is not None and not (isinstance(shell, ast.Constant) and shell.value is False)) or isinstance(
                first, (ast.JoinedStr, ast.Constant, ast.BinOp)
            ):
                offenders.append(f"{path.relative_to(REPO)}:{call.lineno} subprocess.{attr}")
    assert not offenders, f"shell strings: {offenders}"


PRIMITIVES = (int, float, bool, str, type(None))


@pytest.mark.parametrize("config, tiny", [
    ("transformer_reverse.yaml", ["--model.init_args.d_model=16", "--model.init_args.d_ff=32",
                                  "--model.init_args.encoder_layers=1", "--model.init_args.decoder_layers=1"]),
    ("adding.yaml", ["--data.init_args.seq_len=10", "--model.init_args.hidden_size=8"]),
    ("rnn_reverse.yaml", ["--model.init_args.attention=hard", "--model.init_args.hidden_size=8",
                          "--model.init_args.embed_dim=8"]),
    ("sentiment_lstm_attention.yaml", ["--model.init_args.hidden_size=8", "--model.init_args.embed_dim=8",
                                       "--model.init_args.attn_size=8"]),
])
def test_checkpoint_hyperparameters_are_primitives(tmp_path, config, tiny):
    main(["fit", "--config", str(REPO / "ablations" / "configs" / config), f"--run.root={tmp_path}", "--run.name=r",
          "--trainer.max_epochs=1", "--trainer.limit_train_batches=2", "--trainer.limit_val_batches=1",
          "--trainer.enable_progress_bar=false", "--data.init_args.train_size=32", "--data.init_args.val_size=8",
          "--data.init_args.test_size=8", "--data.init_args.batch_size=16", *tiny])
    ckpt = torch.load(next(tmp_path.rglob("last.ckpt")), weights_only=True)
    for section in ("hyper_parameters", "datamodule_hyper_parameters"):
        bad = {k: type(v).__name__ for k, v in ckpt.get(section, {}).items()
               if not isinstance(v, PRIMITIVES) and not (isinstance(v, (list, tuple))
                                                         and all(isinstance(x, PRIMITIVES) for x in v))}
        assert not bad, f"{section}: non-primitive hyper-parameters {bad}"
