"""Every axis word resolves in ``lit_models.registries``: each ``Literal`` of ``lit_models.axes`` has its
registries there (``BY_AXIS``), each keyed by exactly the axis's values, and no registry names a word its
axis lacks."""

from __future__ import annotations

import typing

import pytest

from lit_models import axes, registries

SELECTS_A_SPEC = {"EncoderFamily": "the classifier's encoder chooses which of its two specs ClassifierSpec builds"}
"""Axes resolved elsewhere, each with the reason (none may be added without one)."""


def _axes() -> dict[str, object]:
    return {name: value for name, value in vars(axes).items() if typing.get_origin(value) is typing.Literal}


def test_the_axes_module_declares_the_axes_the_design_names():
    assert {"Norm", "Positions", "AttnScale", "Forcing", "ScheduledMode", "Tying", "Cell", "Attention"} <= set(_axes())


@pytest.mark.parametrize("name", sorted(_axes()))
def test_every_axis_resolves_in_registries_keyed_by_exactly_its_words(name):
    axis = _axes()[name]
    if name in SELECTS_A_SPEC:
        assert axis not in registries.BY_AXIS
        return
    assert axis in registries.BY_AXIS, f"{name} has no registry in lit_models.registries"
    for registry in registries.BY_AXIS[axis]:
        assert list(registry) == list(typing.get_args(axis)), name


def test_every_registry_is_listed_under_its_axis():
    listed = {id(r) for regs in registries.BY_AXIS.values() for r in regs}
    for name in registries.__all__:
        value = getattr(registries, name)
        if isinstance(value, dict) and name != "BY_AXIS":
            assert id(value) in listed, name


def test_scheduled_forcing_reads_its_mode_and_schedule_and_the_others_ignore_them():
    """FEEDS and GOLD_SCHEDULES resolve every forcing word themselves (no None left to an ``or``)."""
    modes = typing.get_args(axes.ScheduledMode)
    for forcing in ("teacher", "student"):
        assert len({registries.FEEDS[forcing](mode) for mode in modes}) == 1
        gold = [registries.GOLD_SCHEDULES[forcing](decay, steps=10, floor=0.2)(step)
                for decay in typing.get_args(axes.ScheduledDecay) for step in (0, 5, 50)]
        assert set(gold) == {1.0 if forcing == "teacher" else 0.0}
    assert [registries.FEEDS["scheduled"](mode) for mode in modes] == [registries.SCHEDULED_MODES[m] for m in modes]
    curve = registries.GOLD_SCHEDULES["scheduled"]("linear", steps=10, floor=0.2)
    assert [curve(0), curve(5), curve(50)] == pytest.approx([1.0, 0.5, 0.2])
