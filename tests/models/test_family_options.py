"""The classifier, RAM and full-view families take their arguments once (``option_groups``: the architecture's
spec, then ``optim.Optimisation``): the CLI still shows each flat with its default and its help, every one is a
hyper-parameter, and the flat hyper-parameters of a checkpoint saved before the options were grouped reload."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch
from jsonargparse import ArgumentParser

from lit_models.families.classifier import SentimentClassifier
from lit_models.families.full_view import FullViewClassifier
from lit_models.families.glimpse import RecurrentAttentionModel
from lit_models.families.seq2seq import TransformerSeq2Seq
from lit_models.training.decoder_training import DecoderTraining
from lit_models.training.optim import Optimisation

SAVED_BEFORE = {  # a checkpoint's hyper_parameters as each family's flat __init__ saved them (defaults, sizes set)
    SentimentClassifier: {
        "src_vocab_size": 30, "num_classes": 2, "encoder": "recurrent", "pooling": "attention", "cell": "lstm",
        "embed_dim": 64, "hidden_size": 64, "num_layers": 1, "bidirectional": True, "d_model": 64, "heads": 4,
        "d_ff": 256, "norm": "pre", "positions": "sinusoidal", "attn_scale": "sqrt_dk", "max_positions": 512,
        "attn_size": 64, "dropout": 0.1, "lr": 3e-3, "weight_decay": 0.0, "lr_schedule": "constant",
        "warmup_steps": 0},
    RecurrentAttentionModel: {
        "num_classes": 10, "in_channels": 1, "glimpses": 6, "patch_size": 12, "scales": 3, "scale_factor": 2,
        "std": 0.15, "glimpse_hidden": 128, "location_hidden": 128, "glimpse_size": 256, "hidden_size": 256,
        "cell": "lstm", "reinforce_weight": 1.0, "lr": 1e-3, "weight_decay": 0.0},
    FullViewClassifier: {
        "num_classes": 10, "in_channels": 1, "canvas_size": 60, "hidden_size": 256, "layers": 2, "lr": 1e-3,
        "weight_decay": 0.0},
}

TRANSFORMER_KNOBS_47 = {"qk_norm": False, "kv_heads": None, "ffn_absorbs_kv": False, "rope_scaling": "none",
                       "rope_factor": 1.0, "rope_train_len": 0, "rope_scaling_train": False}
"""The Transformer knobs of issue #47 at the defaults that build the model as it was before them."""
ADDED_SINCE = {SentimentClassifier: {"position_options": None, **TRANSFORMER_KNOBS_47}}  # knobs added later: an old
# checkpoint gets the default


def _now(family: type) -> dict[str, object]:
    """What the family saves today for SAVED_BEFORE's arguments: the old ones, then the later ones' defaults."""
    return {**SAVED_BEFORE[family], **ADDED_SINCE.get(family, {})}


def _shown(family: type) -> tuple[dict[str, object], dict[str, str]]:
    parser = ArgumentParser(exit_on_error=False)
    parser.add_class_arguments(family, "model")
    actions = [a for a in parser._actions if a.dest.startswith("model.")]
    defaults = vars(parser.get_defaults().model)
    return defaults, {a.dest.removeprefix("model."): a.help for a in actions}


@pytest.mark.parametrize("family", SAVED_BEFORE, ids=lambda c: c.__name__)
def test_the_cli_shows_every_argument_flat_with_its_old_default_and_a_help(family):
    defaults, helps = _shown(family)
    old = _now(family)
    assert set(helps) == set(old)
    assert {k: v for k, v in defaults.items() if k != "src_vocab_size"} == {k: v for k, v in old.items()
                                                                           if k != "src_vocab_size"}
    assert all(h and not h.startswith("(type") for h in helps.values()), helps
    assert list(inspect.signature(family).parameters) == list(helps)  # what the checkpoint guard keeps


@pytest.mark.parametrize("family", SAVED_BEFORE, ids=lambda c: c.__name__)
def test_old_flat_hyperparameters_reload_and_every_argument_is_one(family):
    old = SAVED_BEFORE[family]
    model = family(**old)
    assert dict(model.hparams) == _now(family)
    torch.manual_seed(0)
    again = family(**{k: model.hparams[k] for k in inspect.signature(family).parameters})
    assert dict(again.hparams) == _now(family)


def test_the_optimiser_knobs_are_declared_once():
    """``Optimisation`` is the one declaration: the decoder families' training spec extends it, and every
    family shows its knobs with the same help."""
    knobs = [f.name for f in dataclasses.fields(Optimisation)]
    assert [f.name for f in dataclasses.fields(DecoderTraining)][-len(knobs):] == knobs
    helps = [_shown(family)[1] for family in (*SAVED_BEFORE, TransformerSeq2Seq)]
    for knob in ("lr", "weight_decay"):
        assert len({h[knob] for h in helps}) == 1, [h[knob] for h in helps]


def test_an_unknown_argument_is_refused():
    with pytest.raises(TypeError, match="no knob poolng"):
        SentimentClassifier(src_vocab_size=30, poolng="mean")
    with pytest.raises(TypeError, match="no knob lr_schedule"):  # RAM's learning rate is constant: no schedule
        RecurrentAttentionModel(lr_schedule="cosine")
