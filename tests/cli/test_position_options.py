"""Position-scheme options from the CLI (``--model.position_options``): the scheme is built with them,
and an option the scheme does not take is one ``attnlab: error:`` line naming it, exit 2, nothing created."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from jsonargparse import ArgumentParser

import attnlab_run.cli  # noqa: F401  (Lightning's console handler binds the real stderr first)
from attnlab.cli import main
from lit_models.blocks.positions import RotaryEmbedding
from lit_models.families.causal_lm import CausalLM
from lit_models.families.classifier import SentimentClassifier
from lit_models.families.seq2seq import TransformerSeq2Seq

REVERSE = ["--config", str(Path(__file__).parents[2] / "ablations" / "configs" / "transformer_reverse.yaml")]
TINY = ["--data.init_args.train_size=32", "--data.init_args.val_size=8", "--data.init_args.test_size=8",
        "--data.init_args.batch_size=16", "--model.init_args.d_model=16", "--model.init_args.d_ff=32",
        "--model.init_args.encoder_layers=1", "--model.init_args.decoder_layers=1",
        "--trainer.enable_progress_bar=false"]


@pytest.mark.parametrize("value", ['{"base": 500}', "{'base': 500}"])  # JSON, and a W&B agent's str(dict)
def test_the_option_reaches_the_scheme(value):
    parser = ArgumentParser(exit_on_error=False)
    parser.add_class_arguments(TransformerSeq2Seq, "model")
    cfg = parser.parse_args(["--model.src_vocab_size=12", "--model.tgt_vocab_size=12", "--model.d_model=16",
                             "--model.positions=rope", f"--model.position_options={value}"])
    model = parser.instantiate_classes(cfg).model
    assert model.hparams.position_options == {"base": 500}
    for scheme in (model.net.src_positions, model.net.tgt_positions):
        torch.testing.assert_close(scheme.rope.inv_freq, RotaryEmbedding(d_head=4, base=500.0).inv_freq,
                                   rtol=0, atol=0)
        assert not torch.equal(scheme.rope.inv_freq, RotaryEmbedding(d_head=4).inv_freq)


def test_the_classifier_encoder_takes_it_too():
    parser = ArgumentParser(exit_on_error=False)
    parser.add_class_arguments(SentimentClassifier, "model")
    cfg = parser.parse_args(["--model.src_vocab_size=12", "--model.encoder=transformer", "--model.d_model=16",
                             "--model.positions=rope", '--model.position_options={"base": 500}'])
    scheme = parser.instantiate_classes(cfg).model.net.states.positions
    torch.testing.assert_close(scheme.rope.inv_freq, RotaryEmbedding(d_head=4, base=500.0).inv_freq, rtol=0, atol=0)
    with pytest.raises(Exception, match="positions=rope has no option 'max_distance'"):
        parser.instantiate_classes(parser.parse_args([
            "--model.src_vocab_size=12", "--model.encoder=transformer", "--model.positions=rope",
            '--model.position_options={"max_distance": 8}']))


def test_every_transformer_family_shows_it_with_its_help():
    for family in (TransformerSeq2Seq, CausalLM, SentimentClassifier):
        parser = ArgumentParser(exit_on_error=False)
        parser.add_class_arguments(family, "model")
        action = next(a for a in parser._actions if a.dest == "model.position_options")
        assert action.default is None and "base" in action.help


def test_a_fit_runs_with_it(tmp_path):
    main(["fit", *REVERSE, *TINY, "--trainer.fast_dev_run=1", "--model.init_args.positions=rope",
          '--model.init_args.position_options={"base": 500}', f"--run.root={tmp_path}"])


@pytest.mark.parametrize(("option", "named"), [
    ('{"max_distance": 128}', "positions=rope has no option 'max_distance' (its options: base)"),
    ('{"base": "far"}', "--model.position_options: Given value"),  # refused by its type, at parsing
])
def test_an_option_the_scheme_does_not_take_is_one_line(tmp_path, capsys, option, named):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", *REVERSE, *TINY, "--model.init_args.positions=rope",
              f"--model.init_args.position_options={option}", f"--run.root={tmp_path}"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if "error" in ln.lower()]
    assert "Traceback" not in err and len(lines) == 1 and named in lines[0], err
    assert not any(tmp_path.iterdir())


def test_python_users_get_the_same_check():
    from attnlab_core.errors import UsageError
    from lit_models.specs import TransformerSpec

    with pytest.raises(UsageError, match=r"^position_options: base=True is not allowed: positions=rope takes a float$"):
        TransformerSpec(positions="rope", position_options={"base": True})
    with pytest.raises(UsageError, match=r"positions=sinusoidal has no option 'base' \(its options: none\)$"):
        TransformerSpec(position_options={"base": 500})
