"""Lightning's console lines (the device banner "GPU available: ...") wait until a
loop starts (:mod:`attnlab_run.console`): input refused while the data is prepared, after the Trainer
is built, is the only line on stderr; a run that trains still prints them, in their order."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest

from attnlab.cli import main
from attnlab_run.console import HELD_LOGGERS, HeldConsole

REPO = Path(__file__).parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "multi30k"
TINY_MODEL = ["--model.init_args.d_model=16", "--model.init_args.d_ff=32", "--model.init_args.encoder_layers=1",
              "--model.init_args.decoder_layers=1", "--trainer.accelerator=cpu", "--trainer.enable_progress_bar=false"]


@pytest.fixture()
def console(monkeypatch) -> io.StringIO:
    """Lightning's console (its loggers' stream handler) written into a string for the test."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    for name in HELD_LOGGERS:
        monkeypatch.setattr(logging.getLogger(name), "handlers", [handler])
        monkeypatch.setattr(logging.getLogger(name), "propagate", False)
    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.delenv("ATTNLAB_RUN_DIR", raising=False)
    return stream


def _handlers() -> dict[str, tuple[list[logging.Handler], bool]]:
    return {name: (list(logging.getLogger(name).handlers), logging.getLogger(name).propagate) for name in HELD_LOGGERS}


def test_a_data_error_found_after_the_trainer_is_built_is_the_only_line(tmp_path, capsys, console):
    """Parallel files of different lengths are found in ``prepare_data``, inside ``trainer.fit``: the
    banner the Trainer logged when it was built is dropped with the refused command."""
    for lang, keep in (("de", None), ("en", 3)):
        lines = (FIXTURES / f"train.{lang}").read_text().splitlines(keepends=True)
        (tmp_path / f"short.{lang}").write_text("".join(lines[:keep]))
    before = _handlers()
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", str(REPO / "ablations" / "configs" / "multi30k_transformer.yaml"),
              "--data.init_args.source=files", f"--data.init_args.train_path={tmp_path / 'short'}",
              f"--data.init_args.val_path={FIXTURES / 'val'}", f"--data.init_args.test_path={FIXTURES / 'test'}",
              f"--data.init_args.data_dir={tmp_path / 'data'}", "--data.init_args.vocab_size=60",
              f"--run.root={tmp_path / 'runs'}", *TINY_MODEL])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has 24 lines" in err and err.startswith("attnlab: error: "), err
    assert console.getvalue() == "", "Lightning's lines came before the error"
    assert _handlers() == before and not (tmp_path / "runs").exists()


def test_a_run_that_trains_still_prints_the_banner(tmp_path, capsys, console):
    before = _handlers()
    main(["fit", "--config", str(REPO / "ablations" / "configs" / "transformer_reverse.yaml"),
          "--data.init_args.train_size=16", "--data.init_args.val_size=8", "--data.init_args.test_size=8",
          "--data.init_args.batch_size=8", "--trainer.max_steps=1", f"--run.root={tmp_path}", *TINY_MODEL])
    printed = console.getvalue()
    gpu, tpu, stopped = (printed.find(s) for s in ("GPU available:", "TPU available:", "`Trainer.fit` stopped"))
    assert -1 < gpu < tpu < stopped, printed  # in their order, before training ended
    assert _handlers() == before


def test_held_lines_print_in_order_when_a_loop_starts_and_never_after_a_discard():
    stream = io.StringIO()
    logger = logging.getLogger("lightning.pytorch.test_console")
    parent = logging.getLogger("lightning.pytorch")
    saved = (parent.handlers, parent.propagate)
    parent.handlers, parent.propagate = [logging.StreamHandler(stream)], False
    try:
        held = HeldConsole()
        held.hold()
        logger.info("first")
        logger.warning("second")
        assert stream.getvalue() == "" and held.holding
        held.on_train_start(None, None)  # type: ignore[arg-type]  # a loop starts
        assert stream.getvalue() == "first\nsecond\n" and not held.holding
        logger.info("third")  # printed at once
        assert stream.getvalue().endswith("third\n")
        held.hold()
        logger.info("dropped")
        held.discard()
        held.release()  # nothing left to print
        assert "dropped" not in stream.getvalue() and len(parent.handlers) == 1
    finally:
        parent.handlers, parent.propagate = saved


def test_spawned_processes_receive_nothing_held():
    """ddp_spawn pickles the Trainer with its callbacks: the hold (handlers with locks) stays behind."""
    import pickle

    held = HeldConsole()
    held.hold()
    try:
        copy = pickle.loads(pickle.dumps(held))
        assert not copy.holding
    finally:
        held.release()



def test_lines_are_released_before_the_progress_bar_draws():
    """Lightning appends its progress bar after the callbacks it is given, so at each loop start the
    held lines print before the bar is drawn."""
    import lightning as L
    from lightning.pytorch.callbacks import ProgressBar

    held = HeldConsole()
    trainer = L.Trainer(callbacks=[held], accelerator="cpu", logger=False, enable_checkpointing=False)
    bar = next(i for i, c in enumerate(trainer.callbacks) if isinstance(c, ProgressBar))
    assert trainer.callbacks.index(held) < bar
