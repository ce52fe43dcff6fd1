"""Every question by name: the synthetic ones (``ablations.questions``) and those on real data
(``ablations.questions_real``), for whoever looks a question up by its sweep or experiment name."""

from __future__ import annotations

from ablations.questions import QUESTIONS, Question
from ablations.questions_real import REAL_QUESTIONS


def question_for(name: str) -> Question | None:
    """The question whose sweep (and experiment) is ``name``, synthetic or on real data; None for an ad-hoc sweep."""
    return QUESTIONS.get(name) or REAL_QUESTIONS.get(name)
