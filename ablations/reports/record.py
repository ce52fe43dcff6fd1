"""One question's saved result (``<out>/<question>/result.json``): what its report step writes and the findings
README and the power plan read."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ablations.catalog.lookup import question_for
from ablations.catalog.questions import Question

RESULT = "result.json"


@dataclass
class QuestionResult:
    """One question's report as the README shows it; paths are relative to the findings folder."""

    name: str
    verdict: str
    key_numbers: str
    report: str
    figures: list[str]
    warning: str | None = None
    trial_wall_s: float | None = None
    trials_span: list[float] | None = None  # [first trial's start, last trial's end], epoch seconds
    trials: int = 0
    commits: list[str] = field(default_factory=list)
    cpus: list[str] = field(default_factory=list)
    written: str = ""
    quick: list[str] = field(default_factory=list)  # the quick preset the runs were made with

    @property
    def question(self) -> Question:
        question = question_for(self.name)
        if question is None:
            raise KeyError(self.name)
        return question

    def save(self, out: Path) -> Path:
        path = out / self.name / RESULT
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")
        return path


def stamp() -> str:
    """Now, UTC, to the minute (when a question's result was written)."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


