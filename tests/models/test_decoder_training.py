"""The decoder-training knobs: declared once (``DecoderTraining``), shown flat under every family with
that family's defaults, recorded as hyper-parameters, and resolved once by the forcing policy."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from jsonargparse import ArgumentParser

from attnlab_core.errors import UsageError
from lit_models import forcing
from lit_models.families.captioner import ShowAttendTell
from lit_models.families.causal_lm import CausalLM
from lit_models.families.recurrent_seq2seq import RecurrentSeq2Seq
from lit_models.families.seq2seq import TransformerSeq2Seq
from lit_models.policies.forcing import ForcingPolicy, gold_probability
from lit_models.training.decoder_training import DecoderTraining, Feeding

KNOBS = [f.name for f in dataclasses.fields(DecoderTraining)]
FAMILY_DEFAULTS = {  # what each family's signature gave before the knobs were declared once
    TransformerSeq2Seq: {"scheduled_mode": "two_pass", "label_smoothing": 0.1, "lr": 1e-3, "lr_schedule": "noam",
                         "warmup_steps": 400},
    CausalLM: {"scheduled_mode": "two_pass", "label_smoothing": 0.0, "lr": 1e-3, "lr_schedule": "noam",
               "warmup_steps": 400},
    RecurrentSeq2Seq: {"scheduled_mode": "per_step", "label_smoothing": 0.0, "lr": 3e-3, "lr_schedule": "constant",
                       "warmup_steps": 100},
    ShowAttendTell: {"scheduled_mode": "per_step", "label_smoothing": 0.0, "lr": 1e-3, "lr_schedule": "constant",
                     "warmup_steps": 100},
}
COMMON = {"forcing": "teacher", "scheduled_decay": "inverse_sigmoid", "scheduled_steps": 2000,
          "scheduled_floor": 0.0, "weight_decay": 0.0}


@pytest.mark.parametrize("family", FAMILY_DEFAULTS, ids=lambda c: c.__name__)
def test_the_cli_shows_every_knob_flat_with_the_family_default_and_its_help(family):
    parser = ArgumentParser(exit_on_error=False)
    parser.add_class_arguments(family, "model")
    defaults = parser.get_defaults().model
    assert {k: defaults[k] for k in KNOBS} == {**COMMON, **FAMILY_DEFAULTS[family]}
    shown = [a.dest.removeprefix("model.") for a in parser._actions if a.dest.startswith("model.")]
    assert shown[-len(KNOBS):] == KNOBS  # after the family's own arguments, in one order
    helps = {a.dest.removeprefix("model."): a.help for a in parser._actions if a.dest.startswith("model.")}
    assert all(helps[k] and not helps[k].startswith("(type") for k in KNOBS), helps
    assert list(inspect.signature(family).parameters) == shown  # the checkpoint guard reads this one


@pytest.mark.parametrize("family", [TransformerSeq2Seq, RecurrentSeq2Seq], ids=lambda c: c.__name__)
def test_every_knob_is_a_hyperparameter_even_when_left_at_its_default(family):
    m = family(src_vocab_size=12, tgt_vocab_size=12, lr=0.5)
    assert {k: m.hparams[k] for k in KNOBS} == {**COMMON, **FAMILY_DEFAULTS[family], "lr": 0.5}
    assert m.hparams.src_vocab_size == 12


def test_an_unknown_knob_is_refused():
    with pytest.raises(TypeError, match="no knob lrr"):
        DecoderTraining.with_defaults(lrr=1.0)
    with pytest.raises(TypeError):
        TransformerSeq2Seq(src_vocab_size=12, tgt_vocab_size=12, lrr=1.0)


def test_the_policy_resolves_its_strings_once(monkeypatch):
    policy = ForcingPolicy(forcing="scheduled", scheduled_mode="two_pass", decay="inverse_sigmoid", steps=100,
                           floor=0.1)
    monkeypatch.setattr(forcing, "DECAYS", {})  # no lookup is left for the step
    monkeypatch.setattr(forcing, "GOLD_SCHEDULES", {})
    monkeypatch.setattr(forcing, "FEEDS", {})
    monkeypatch.setattr(forcing, "_inverse_sigmoid_k", None)
    got = [policy.p_gold(s) for s in (0, 50, 500)]
    monkeypatch.undo()
    assert got == [gold_probability("inverse_sigmoid", step=s, steps=100, floor=0.1) for s in (0, 50, 500)]
    assert policy.feed is forcing.two_pass


@pytest.mark.parametrize("group", [Feeding, DecoderTraining])
def test_label_smoothing_is_checked_by_its_own_group_once(group, monkeypatch):
    """``Feeding`` declares label_smoothing, so building it (alone or inside ``DecoderTraining``) refuses ε >= 1 in
    one line; the range table is read once per group built, not once per base class."""
    import lit_models.training.optim as optim
    import lit_models.validation as validation

    calls, check = [], validation.check_model_values

    def counted(values, **kw):
        calls.append(1)
        return check(values, **kw)

    for module in (validation, optim):  # wherever the check is reached from
        if hasattr(module, "check_model_values"):
            monkeypatch.setattr(module, "check_model_values", counted)
    group(label_smoothing=0.1)
    assert len(calls) == 1
    with pytest.raises(UsageError, match=r"^label_smoothing=1.0 is not allowed: it must be a number in \[0, 1\)$"):
        group(label_smoothing=1.0)


@pytest.mark.parametrize(("field", "value", "rule"), [
    ("scheduled_steps", 0, "an integer >= 1"), ("scheduled_steps", 2.5, "an integer >= 1"),
    ("scheduled_floor", -0.1, r"a number in \[0, 1\]"), ("scheduled_floor", 1.5, r"a number in \[0, 1\]"),
])
def test_the_scheduled_sampling_horizon_and_floor_are_range_checked(field, value, rule):
    """A zero horizon divided by zero at the first scheduled step (the linear and exponential decays), and a floor
    outside [0, 1] is not a probability: both are refused when the group is built, in one line."""
    with pytest.raises(UsageError, match=rf"^{field}={value} is not allowed: it must be {rule}$"):
        Feeding(forcing="scheduled", **{field: value})
    Feeding(forcing="scheduled", scheduled_steps=1, scheduled_floor=1.0)  # the edges are allowed
