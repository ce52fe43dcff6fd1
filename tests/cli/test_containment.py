"""Issue #24: everything a run writes lies inside its root, and every error a user can cause is one
line, exit 2, with the file tree unchanged.

- A property test over generated names (``..``, absolute, separators, ``.``, empty, unicode, very
  long, control characters, random mixtures): a name is refused or its run directory resolves strictly
  inside the root as one folder per name; through the CLI, a refused name writes nothing anywhere.
- The bad-input battery: one case per class (paths, numbers, enums, files, checkpoints, sweep files,
  data, credentials), each through ``attnlab`` in-process, asserting exit 2, one stderr line naming
  the problem, nothing on stdout, and a byte-identical file tree. All but the data case fail before
  any data is read; the data case fails while the data is prepared, after the Trainer is built.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
import torch

from attnlab.cli import main
from attnlab_core.errors import UsageError
from attnlab_run.recording import RunOptions
from attnlab_run.rundir import NAME_RULE, check_name, resolve_run_dir, run_dir_in, safe_name
from tests.cli.trees import one_line, tree

REPO = Path(__file__).parents[2]
REVERSE = ["--config", str(REPO / "ablations" / "configs" / "transformer_reverse.yaml")]

EDGE_NAMES = ["..", ".", "", "/", "/abs/x", "../x", "a/../../b", "a/b", "a\\b", "..\\x", "~", "~/x", "-rf", ".hidden",
              "x\x00y", "line\nbreak", "tab\t", " lead", "é", "名前", "\u2024\u2024", "ａ", "a" * 129, "a" * 4096,
              "../" * 40 + "etc", "C:\\x", "%2e%2e", "$HOME", "*", "a:b", "a b"]
FRAGMENTS = ["..", ".", "/", "\\", "a", "Z9", "_", "-", "=", ",", "+", "é", "\x00", "\n", " ", "~", "名", "%", ":"]


def generated_names(n: int, seed: int = 24) -> list[str]:
    """The edge cases plus ``n`` random mixtures of path-ish fragments (fixed seed: reproducible)."""
    rng = random.Random(seed)
    mixed = ["".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(0, 12))) for _ in range(n)]
    return EDGE_NAMES + mixed


@pytest.mark.parametrize("name", generated_names(400))
def test_generated_name_is_refused_or_stays_inside_the_root(tmp_path, name):
    root = tmp_path / "runs"
    try:
        run = run_dir_in(root, name, name, options=("--run.experiment", "--run.name"))
    except UsageError as err:
        assert "--run.experiment=" in str(err) and NAME_RULE in str(err) and "\n" not in str(err).strip("'")
        return
    resolved = run.resolve()
    assert resolved.parent.parent == root.resolve(), (name, resolved)
    assert Path(name).name == name and len(Path(name).parts) == 1, name
    assert check_name(name, option="x") == name


@pytest.mark.parametrize("name", generated_names(200, seed=7))
def test_derived_default_experiment_is_always_safe(name):
    assert check_name(safe_name(name), option="x")


@pytest.mark.parametrize("field", ["name", "experiment"])
@pytest.mark.parametrize("name", generated_names(60, seed=3))
def test_resolve_run_dir_never_leaves_the_root(tmp_path, monkeypatch, field, name):
    monkeypatch.delenv("ATTNLAB_RUN_DIR", raising=False)
    monkeypatch.delenv("WANDB_RUN_ID", raising=False)
    root = tmp_path / "deep" / "runs"
    opts = RunOptions(root=str(root), **{field: name})
    try:
        run = resolve_run_dir(opts, default_experiment="exp", ckpt_path=None)
    except UsageError as err:
        assert f"--run.{field}=" in str(err)
        return
    assert run.resolve().is_relative_to(root.resolve()) and run.resolve() != root.resolve()


def test_a_symlinked_experiment_pointing_outside_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("ATTNLAB_RUN_DIR", raising=False)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "exp").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UsageError, match="outside the run root"):
        resolve_run_dir(RunOptions(root=str(tmp_path / "runs"), name="r"), default_experiment="exp", ckpt_path=None)


# ------------------------------------------------------------------------------------------ the battery
@pytest.fixture()
def sandbox(tmp_path, monkeypatch):
    """cwd = tmp_path with a pre-existing ``precious/config.yaml``; W&B (offline) would write under tmp_path."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb_dir"))
    monkeypatch.delenv("ATTNLAB_RUN_DIR", raising=False)
    monkeypatch.delenv("WANDB_RUN_ID", raising=False)
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "config.yaml").write_text("notes\n")
    return tmp_path


def _fit(*extra: str) -> list[str]:
    return ["fit", *REVERSE, "--run.root=runs", "--trainer.max_steps=1", *extra]


@pytest.mark.parametrize(("argv", "needle"), [
    (["--run.name=../../precious"], "--run.name='../../precious' is not a valid name"),
    (["--run.name=/abs/where"], "--run.name='/abs/where' is not a valid name"),
    (["--run.name=."], "--run.name='.' is not a valid name"),
    (["--run.name="], "--run.name='' is not a valid name"),
    (["--run.experiment=../x"], "--run.experiment='../x' is not a valid name"),
], ids=["dotdot", "absolute", "dot", "empty", "experiment"])
def test_paths(sandbox, capsys, argv, needle):
    line = one_line(capsys, _fit(*argv), sandbox)
    assert needle in line and "one folder name" in line
    assert (sandbox / "precious" / "config.yaml").read_text() == "notes\n"


@pytest.mark.parametrize(("option", "needle"), [
    ("--model.d_model=0", "--model.d_model=0 is not allowed: it must be a positive integer"),
    ("--model.d_model=-8", "--model.d_model=-8 is not allowed: it must be a positive integer"),
    ("--model.heads=0", "--model.heads=0 is not allowed: it must be a positive integer"),
    ("--model.init_args.decoder_layers=0", "--model.decoder_layers=0 is not allowed"),
    ("--model.heads=3", "d_model=64 is not divisible by heads=3"),
], ids=["d_model0", "d_model-8", "heads0", "layers0", "indivisible"])
def test_numbers(sandbox, capsys, option, needle):
    assert needle in one_line(capsys, _fit(option), sandbox)


def test_enums(sandbox, capsys):
    line = one_line(capsys, _fit("--model.norm=sideways"), sandbox)
    assert "--model.norm=sideways is not allowed; choose one of: post, pre" in line


@pytest.mark.parametrize("case", ["malformed", "unknown_key"])
def test_files(sandbox, capsys, case):
    config = sandbox / "cfg.yaml"
    text = (REPO / "ablations" / "configs" / "transformer_reverse.yaml").read_text()
    config.write_text(text.replace("    d_model:", "    d_modle:") if case == "unknown_key" else text + "  : [\n")
    line = one_line(capsys, ["fit", "--config", str(config), "--run.root=runs"], sandbox)
    if case == "unknown_key":
        assert line.endswith("no option model.d_modle; did you mean model.d_model?")
    else:
        assert f"{config}:" in line and "malformed YAML" in line


def _transformer_checkpoint(path: Path) -> Path:
    """A checkpoint of the Transformer (d_model 16), saved as LightningCLI saves one."""
    from lit_models.families.seq2seq import TransformerSeq2Seq

    model = TransformerSeq2Seq(src_vocab_size=12, tgt_vocab_size=12, d_model=16, heads=2, d_ff=32,
                               encoder_layers=1, decoder_layers=1)
    hparams = {"_class_path": "lit_models.families.seq2seq.TransformerSeq2Seq", **dict(model.hparams)}
    torch.save({"state_dict": model.state_dict(), "hyper_parameters": hparams, "global_step": 0, "epoch": 0,
                "pytorch-lightning_version": "2.6.6"}, path)
    return path


@pytest.mark.parametrize("case", ["junk", "empty", "truncated", "moot_override"])
def test_checkpoints(sandbox, capsys, case):
    ckpt = sandbox / "model.ckpt"
    if case == "moot_override":
        _transformer_checkpoint(ckpt)
    else:
        full = _transformer_checkpoint(sandbox / "full.ckpt").read_bytes()
        ckpt.write_bytes({"junk": b"101\n", "empty": b"", "truncated": full[:2000]}[case])
    extra = ["--model.d_model=32"] if case == "moot_override" else []
    line = one_line(capsys, ["test", *REVERSE, f"--ckpt_path={ckpt}", "--run.root=runs", *extra], sandbox)
    expected = {"junk": "not a checkpoint (not a file torch.save writes)",
                "empty": "not a checkpoint (the file is empty)",
                "truncated": "not a checkpoint that loads safely (the file is truncated or damaged)",
                "moot_override": "--model.d_model=32 (checkpoint: 16) cannot apply"}[case]
    assert f"{ckpt}" in line and expected in line


@pytest.mark.parametrize("case", ["malformed", "unknown_parameter", "unsafe_name", "count", "jobs"])
def test_sweep_files(sandbox, capsys, case):
    sweep = sandbox / "s.yaml"
    text = (REPO / "sweeps" / "heads.yaml").read_text()
    edits = {"malformed": text.replace("values: [1, 4, 8, 16]", "values: [1, 4"),
             "unknown_parameter": text.replace("model.heads:", "model.haeds:"),
             "unsafe_name": text.replace("name: heads\n", "name: ../../precious\n")}
    sweep.write_text(edits.get(case, text))
    extra = {"count": ["--count", "-1"], "jobs": ["--jobs", "0"]}.get(case, [])
    line = one_line(capsys, ["sweep", str(sweep), "--dry-run", "--root", "runs", *extra], sandbox,
                     prefix="attnlab sweep: error: ")
    expected = {"malformed": f"{sweep}:", "unknown_parameter": "no option model.haeds; did you mean model.heads?",
                "unsafe_name": "name='../../precious' is not a valid name",
                "count": "argument --count: -1 is not allowed",
                "jobs": "argument --jobs: 0 is not allowed"}[case]
    assert expected in line


SMALL_CORPUS = {"de": ["ein hund läuft im park", "zwei kinder spielen", "die katze schläft"],
                "en": ["a dog runs in the park", "two children play", "the cat sleeps"]}
"""The issue's case: valid parallel files of about 30 words, far fewer than the configs' 8000 ids."""


@pytest.mark.parametrize("tokenizer", ["word", "bpe"])
def test_data(sandbox, capsys, tokenizer):
    """A vocabulary larger than the training text supports, found when the data is prepared (after the
    Trainer exists): the same one line for words and SentencePiece, naming option, files and maximum."""
    for lang, lines in SMALL_CORPUS.items():
        (sandbox / f"c.{lang}").write_text("\n".join(lines) + "\n")
    config = REPO / "ablations" / "configs" / "multi30k_transformer.yaml"
    argv = ["fit", "--config", str(config), "--data.init_args.source=files", f"--data.init_args.tokenizer={tokenizer}",
            *(f"--data.init_args.{split}_path={sandbox / 'c'}" for split in ("train", "val", "test")),
            "--model.init_args.d_model=16", "--model.init_args.d_ff=32", "--model.init_args.encoder_layers=1",
            "--model.init_args.decoder_layers=1", "--trainer.accelerator=cpu", "--run.root=runs"]
    line = one_line(capsys, argv, sandbox)
    words = len({w for lines in SMALL_CORPUS.values() for t in lines for w in t.split()})
    assert f"--data.vocab_size=8000 is too large for the training files {sandbox}/c.de and {sandbox}/c.en: " in line
    if tokenizer == "word":
        assert line.endswith(f"it has {words} distinct words + 4 special tokens = {words + 4} ids; "
                             f"give --data.vocab_size={words + 4} or less")
    else:
        assert re.search(r"SentencePiece \(bpe\) supports at most (\d+); give --data.vocab_size=\1 or less$", line)


def test_credentials(sandbox, capsys, monkeypatch):
    """No W&B credentials: ``wandb.Api()`` raises wandb's UsageError (mocked here: no network in tests)."""
    import wandb
    import wandb.errors

    def no_key(*args, **kwargs):
        raise wandb.errors.UsageError("No API key configured. Use `wandb login` to log in.")

    monkeypatch.setattr(wandb, "Api", no_key)
    line = one_line(capsys, ["report", "runs", "--wandb-sweep", "me/proj/abc123"], sandbox,
                     prefix="attnlab report: error: ")
    assert "--wandb-sweep me/proj/abc123: W&B refused: No API key configured" in line and "wandb login" in line


# ------------------------------------------------------------------------------------------ outcomes
TINY = ["--data.init_args.train_size=32", "--data.init_args.val_size=8", "--data.init_args.test_size=8",
        "--data.init_args.batch_size=16", "--model.init_args.d_model=16", "--model.init_args.d_ff=32",
        "--model.init_args.encoder_layers=1", "--model.init_args.decoder_layers=1",
        "--trainer.enable_progress_bar=false", "--trainer.accelerator=cpu"]


def test_a_diverged_fit_says_so_and_exits_3(sandbox, capsys):
    from attnlab_run.guards import DIVERGED_EXIT
    from attnlab_run.rundir import Status, read_summary

    with pytest.raises(SystemExit) as exit_info:
        main(["fit", *REVERSE, *TINY, "--run.root=runs", "--run.name=d", "--trainer.max_steps=4", "--model.lr=1e30"])
    assert exit_info.value.code == DIVERGED_EXIT == 3
    run = sandbox / "runs" / "transformer_reverse" / "d"
    assert read_summary(run).status is Status.DIVERGED
    assert f"attnlab: diverged at step {read_summary(run).diverged_at} (non-finite loss)" in capsys.readouterr().err


def test_best_of_a_run_that_never_validated(sandbox, capsys):
    main(["fit", *REVERSE, *TINY, "--run.root=runs", "--run.name=short", "--trainer.max_steps=1"])
    capsys.readouterr()  # the fit's own report (its run directory and summary)
    line = one_line(capsys, ["test", *REVERSE, *TINY, "--run.root=runs", "--run.name=short", "--ckpt_path=best"],
                     sandbox)
    assert "has no best checkpoint: the run never validated" in line and "--ckpt_path last" in line


def test_input_refused_after_the_run_started_leaves_no_run(sandbox, capsys):
    """A learned position table shorter than the data is found at the first batch, after the loggers
    and the summary started: the run directory this command created is removed again."""
    before = tree(sandbox)
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", *REVERSE, *TINY, "--run.root=runs", "--trainer.max_steps=1",
              "--model.init_args.positions=learned", "--model.init_args.max_positions=4"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "exceeds the learned position table (max_len=4)" in err and "Traceback" not in err
    assert not (sandbox / "runs").exists()
    assert {k: v for k, v in tree(sandbox).items() if not k.startswith("wandb_dir")} == before


def test_ids_past_a_word_vocabulary_decode_as_unk():
    """A defence behind the refusal of a too-small word vocabulary (``test_data``): an id the
    vocabulary does not have renders as ``<unk>`` (this was an IndexError at the first validation)."""
    from datamodules.batching import EOS, ids_to_text
    from datamodules.tokenization import WordVocab

    vocab = WordVocab.build(["a b c"], vocab_size=8000)
    assert vocab.size == 7
    assert ids_to_text([4, 7999, 5, EOS], itos=vocab.itos) == "a <unk> b"
    assert vocab.decode([4, 5000]) == "a <unk>" and vocab.piece(5000) == "<unk>"
