"""Issue #45: values that used to crash mid-run, or be accepted silently, are refused at parse time in
one line, exit 2, before any directory or logger exists (the file tree byte-identical)."""

from __future__ import annotations

from pathlib import Path

import pytest

import attnlab_run.cli  # noqa: F401  (Lightning's console handler binds the real stderr; see test_bad_input)
from attnlab.cli import main
from attnlab_core.errors import MAX_LINE
from tests.cli.trees import in_sandbox, one_line

REPO = Path(__file__).parents[2]
CONFIG = str(REPO / "ablations" / "configs" / "transformer_reverse.yaml")


@pytest.fixture()
def sandbox(tmp_path, monkeypatch):
    (in_sandbox(tmp_path, monkeypatch) / "runs" / "transformer_reverse").mkdir(parents=True)
    return tmp_path


@pytest.mark.parametrize(("option", "expected"), [
    ("--model.lr=-1", "--model.lr=-1.0 is not allowed: it must be a finite number > 0"),
    ("--model.lr=1e400", "--model.lr=inf is not allowed: it must be a finite number > 0"),
    ("--model.lr=nan", "--model.lr=nan is not a valid float"),
    ("--model.label_smoothing=2", "--model.label_smoothing=2.0 is not allowed: it must be a number in [0, 1)"),
    ("--model.warmup_steps=-1", "--model.warmup_steps=-1 is not allowed: it must be an integer >= 0"),
    ("--trainer.val_check_interval=0", "--trainer.val_check_interval=0 is not allowed: it must be a number > 0"),
    ("--trainer.max_steps=-5", "--trainer.max_steps=-5 is not allowed: it must be -1 (no limit) or an integer >= 0"),
    ("--run.checkpoint_every_n_steps=-3", "--run.checkpoint_every_n_steps: Not of type NonNegativeInt: -3"),
])
def test_a_value_outside_its_range_is_one_line(sandbox, capsys, option, expected):
    line = one_line(capsys, ["fit", "--config", CONFIG, "--run.root=runs", "--run.name=r", option], sandbox)
    assert expected in line, line


def test_restart_and_ckpt_path_contradict(sandbox, capsys):
    line = one_line(capsys, ["fit", "--config", CONFIG, "--run.root=runs", "--run.name=r", "--run.restart=true",
                              "--ckpt_path=last"], sandbox)
    assert "--run.restart=true starts the run over, so it cannot also continue from --ckpt_path=last" in line


@pytest.mark.parametrize(("text", "expected"), [
    ("", "the config file is empty"),
    ("- a\n- b\n", "the config file holds a list, not a mapping of options"),
    ("trainer:\n  max_steps: 3\n  max_steps: 4\n", ":3: duplicate key 'max_steps' (first at line 2)"),
])
def test_a_config_file_that_is_empty_or_repeats_a_key_is_named(sandbox, capsys, text, expected):
    config = sandbox / "c.yaml"
    config.write_text(text)
    line = one_line(capsys, ["fit", "--config", str(config), "--run.root=runs"], sandbox)
    assert f"{config}" in line and expected in line, line


def _alias_bomb(path: Path, at: str) -> None:
    """Nine aliases per level, eight levels (9^8 values expanded), under ``at``."""
    lines, prev = ["a: &a [x, x, x, x, x, x, x, x, x]"], "a"
    for name in "bcdefgh":
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
        prev = name
    lines.append(f"{at}: *h" if ":" not in at else at.replace("VALUE", "*h"))
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("at", ["zzz", "trainer:\n  max_steps: VALUE"])
def test_a_yaml_alias_bomb_is_refused_in_one_short_line(sandbox, capsys, at):
    config = sandbox / "bomb.yaml"
    _alias_bomb(config, at)
    line = one_line(capsys, ["fit", "--config", str(config), "--run.root=runs"], sandbox)
    assert "its aliases expand to more than" in line and len(line) < MAX_LINE + 100


def test_a_checkpoint_with_a_wrong_shaped_tensor_is_one_line_and_no_run(sandbox, capsys):
    """``attnlab test --ckpt_path`` of a checkpoint of the right family whose one tensor has another shape:
    refused before any logger (was a load_state_dict traceback and a new run directory)."""
    import torch

    tiny = ["--model.d_model=16", "--model.d_ff=32", "--model.encoder_layers=1", "--model.decoder_layers=1",
            "--data.train_size=32", "--data.val_size=8", "--data.test_size=8", "--trainer.enable_progress_bar=false"]
    main(["fit", "--config", CONFIG, *tiny, "--trainer.max_steps=2", "--run.root=runs", "--run.name=src"])
    capsys.readouterr()
    ckpt = torch.load(sandbox / "runs" / "transformer_reverse" / "src" / "checkpoints" / "last.ckpt",
                      weights_only=True)
    key = next(k for k, v in ckpt["state_dict"].items() if v.ndim == 2)
    ckpt["state_dict"][key] = torch.zeros(ckpt["state_dict"][key].shape[0] + 1, ckpt["state_dict"][key].shape[1])
    torch.save(ckpt, sandbox / "bent.ckpt")
    line = one_line(capsys, ["test", "--config", CONFIG, *tiny, f"--ckpt_path={sandbox / 'bent.ckpt'}",
                              "--run.root=other"], sandbox)
    assert f"{sandbox / 'bent.ckpt'}: does not fit the model: {key} has shape" in line, line
    assert not (sandbox / "other").exists()


# ------------------------------------------------------------------------------------------ sweep files
def _sweep_refused(capsys, argv: list[str], root: Path) -> str:
    return one_line(capsys, argv, root, prefix="attnlab sweep: error: ")


def test_sweep_root_naming_a_file_is_one_line(sandbox, capsys):
    (sandbox / "afile").write_text("keep\n")
    line = _sweep_refused(capsys, ["sweep", str(REPO / "sweeps" / "norm.yaml"), "--dry-run", "--root", "afile"],
                          sandbox)
    assert "--root afile: not a directory" in line


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda t: t.replace("method: grid", "method: bayes").split("metric:")[0] + "parameters:"
     + t.split("parameters:", 1)[1], "method bayes needs a metric"),
    (lambda t: t.replace("values: [post, pre]", "values: [sideways, pre]"),
     "parameter model.norm has the value 'sideways', which --model.norm does not allow; choose from: post, pre"),
    (lambda t: t.replace("method: grid", "method: grid\nmethod: random"), ": duplicate key 'method' (first at line"),
])
def test_a_sweep_the_engine_or_the_trials_would_refuse_fails_its_dry_run(sandbox, capsys, edit, expected):
    text = (REPO / "sweeps" / "norm.yaml").read_text()
    sweep = sandbox / "s.yaml"
    sweep.write_text(edit(text))
    line = _sweep_refused(capsys, ["sweep", str(sweep), "--dry-run", "--count", "2", "--root", "r"], sandbox)
    assert expected in line, line


# ------------------------------------------------------------------------------- reports and questions
def test_report_marks_an_unreadable_summary_and_names_a_missing_experiment(sandbox, capsys):
    exp = sandbox / "runs" / "exp"
    for name, content in (("a", b'{"status": "fini'), ("b", bytes(range(256))), ("c", b"[1, 2]")):
        (exp / name).mkdir(parents=True)
        (exp / name / "summary.json").write_bytes(content)
        (exp / name / "trial.json").write_text('{"status": "finished", "params": {"model.norm": "pre"}}')
    with pytest.raises(SystemExit) as exit_info:
        main(["report", "runs"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0 and "no finished run (3 unreadable)" in out, out
    with pytest.raises(SystemExit) as exit_info:
        main(["report", "runs", "--experiment", "nosuch"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == "attnlab report: error: no experiment 'nosuch' under runs (there: exp)"


@pytest.mark.parametrize(("argv", "prefix"), [(["findings", "--only", "nonexistent"], "attnlab findings: error: "),
                                              (["dashboard", "nosuchquestion"], "attnlab dashboard: error: ")])
def test_an_unknown_question_is_one_line_not_a_usage_block(sandbox, capsys, argv, prefix):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(prefix) and "invalid choice" in err, err


def test_a_full_disk_is_found_anywhere_in_an_exception_chain_even_a_looping_one():
    """One walker of exception chains (attnlab_core.errors.exception_chain) serves the full-disk line and the
    full-disk check of atomic writes; a chain that loops back on itself ends."""
    import errno

    from attnlab_core.atomic import disk_full
    from attnlab_core.errors import exception_chain
    from attnlab_run.cli import no_space

    full = OSError(errno.ENOSPC, "No space left on device", "/runs/x/summary.json")
    outer = RuntimeError("file write failed")
    outer.__cause__ = full
    assert no_space(outer) == "No space left on device: cannot write /runs/x/summary.json"
    assert disk_full(Path("/"), outer) is not None
    looping = ValueError("a")
    looping.__context__ = RuntimeError("b")
    looping.__context__.__context__ = looping
    assert [str(e) for e in exception_chain(looping)] == ["a", "b"]
    assert no_space(looping) is None
