"""The findings README, assembled from one saved result per question.

Each question's report step saves ``<out>/<question>/result.json`` (verdict, key numbers, figures and
the provenance of its runs: commits, CPUs, trials, summed wall time). The README is rebuilt from every
saved result, so ``attnlab findings --only norm`` refreshes norm's row and section and keeps the others
as their own runs left them; each section says which commit and CPU its numbers come from. The questions on
real data (``ablations.catalog.questions_real``) get their own README (``attnlab findings --real``), whose header also
names the versions of the data packages.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ablations.catalog.questions import QUESTIONS, Question
from ablations.reports.record import RESULT, QuestionResult
from ablations.verdicts.replication import FIRST_SEED, replicated


def load_results(out: Path, order: Sequence[str], *, questions: Mapping[str, Question] = QUESTIONS,
                 ) -> list[QuestionResult]:
    """Every saved result under ``out`` for a question of ``questions``, in ``order`` (then the rest)."""
    names = [*order, *(n for n in questions if n not in order)]
    results = []
    for name in names:
        path = out / name / RESULT
        if path.is_file():
            results.append(QuestionResult(**json.loads(path.read_text())))
    return results


def hms(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _utc(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


SITTING_GAP_S = 900  # questions whose trials start within this of the previous ones' end ran in one sitting


def _span_line(results: Sequence[QuestionResult], seeds: str = "") -> list[str]:
    """When the trials of one seed set (``seeds``: its name, if not the main one) ran: first start to last end
    (one line; none if unrecorded). Questions rerun later (``--only``) make several sittings, each given alone:
    one span over both would count the days between them as running time."""
    timed = sorted((r for r in results if r.trials_span), key=lambda r: r.trials_span[0])
    if not timed:
        return []
    sittings: list[list[QuestionResult]] = []
    end = -math.inf  # the latest end so far: sorted by start, it is the current sitting's
    for r in timed:
        if r.trials_span[0] > end + SITTING_GAP_S:
            sittings.append([])
        sittings[-1].append(r)
        end = max(end, r.trials_span[1])
    parts = [_sitting(group) for group in sittings]
    head = f"- **Trials ran{f', {seeds}' if seeds else ''}:** "
    if len(parts) == 1:
        return [f"{head}{parts[0]} from the first trial's start to the last one's end ({_counted(timed)}, as "
                "recorded by the runner)"]
    each = "; ".join(f"{p} ({_counted(g)})" for p, g in zip(parts, sittings, strict=True))
    return [f"{head}in {len(parts)} sittings (questions rerun later), first trial's start to last one's end in each, "
            f"as recorded by the runner: {each}"]


def _sitting(group: Sequence[QuestionResult]) -> str:
    lo, hi = min(r.trials_span[0] for r in group), max(r.trials_span[1] for r in group)
    return f"{_utc(lo)} to {_utc(hi)}: {hms(hi - lo)}"


def _counted(group: Sequence[QuestionResult]) -> str:
    return f"{sum(r.trials for r in group)} trials of {len(group)} questions"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _provenance(r: QuestionResult) -> str:
    commits = ", ".join(c[:7] for c in r.commits) or "not recorded"
    wall = hms(r.trial_wall_s) if r.trial_wall_s is not None else "not recorded"
    cpus = "; ".join(r.cpus) or "not recorded"
    written = r.written or "not recorded"
    return f"{r.trials} trials at commit {commits} on {cpus}, written {written}; summed trial wall time {wall}"


def _replication_line(rep: QuestionResult | None) -> list[str]:
    """The section's line for the replication seed set (none when it has not run)."""
    if rep is None:
        return []
    return [f"- **Replication, exploratory** (seeds {FIRST_SEED} and up): {rep.verdict} ({_provenance(rep)}; "
            f"[report](replication/{rep.report}))"]


def _confirm_lines(name: str, head: str, conf: QuestionResult | None, plan_rel: str) -> list[str]:
    """The section's headline line: the confirmatory verdict (or why there is none) and its plan file."""
    plan = f"plan [{plan_rel}]({plan_rel})"
    if conf is None or head.startswith("refused") or head.startswith("pending"):
        return [f"- **Headline (confirmatory):** {head} ({plan})"]
    return [f"- **Headline (confirmatory):** {conf.verdict} ({_provenance(conf)}; {plan}; "
            f"[report](confirm/{conf.report}))"]


def _section(r: QuestionResult, rep: QuestionResult | None = None, more: list[str] | None = None,
             confirm: list[str] | None = None) -> list[str]:
    q = r.question
    lines = [
        "",
        f"## {q.name}",
        "",
        f"- **Claim:** {q.claim} ({q.source})",
        f"- **Expected:** {q.expected}",
        *(confirm or []),
        f"- **Verdict, exploratory** (main seeds 1 and up, read while choosing the preset): {r.verdict}",
        f"- **Runs:** {_provenance(r)}",
        *_replication_line(rep),
        *(more or []),
        f"- **Full (GPU) preset:** {q.full}",
        f"- **Quick preset:** `{' '.join(r.quick or q.quick)}`",
        *([f"- **Preset changed after its verdict was seen:** {q.preset_changed}"] if q.preset_changed else []),
        f"- **Full report:** [{r.report}]({r.report})",
    ]
    if r.warning:
        lines.append(f"- **Warning:** {r.warning}")
    lines.append("")
    stems = [(Path(f).stem, f) for f in r.figures]
    lines += [f"![{q.name} {stem}]({f})" for stem, f in stems if stem != "attention"]
    lines += [f"![{q.name} attention]({f})" for stem, f in stems if stem == "attention"]
    return lines


def _data_lines() -> list[str]:
    """The real data's provenance (``ablations.reports.provenance.data_versions``), one bullet."""
    from ablations.reports.provenance import data_versions

    return ["- **Data:** " + "; ".join(data_versions(data_dir=Path("data"))) + " (as found when this README was "
            "written; `data/` relative to where the command ran)"]


def readme(results: Sequence[QuestionResult], *, command: str, wall_s: float, missing: Sequence[Question] = (),
           real: bool = False, replications: Mapping[str, QuestionResult] | None = None,
           more_seeds: Mapping[str, QuestionResult] | None = None, plan: Mapping[str, Any] | None = None,
           confirmed: Mapping[str, QuestionResult] | None = None) -> str:
    """The findings README: header, one row per claim, a section per question with its figures. ``real``:
    the README of the questions on real data (its title, and a line naming the data packages' versions).
    ``replications``: each question's result on the replication seeds (``ablations.verdicts.replication``), by name;
    ``more_seeds`` and ``plan``: the third seed set's results and its plan (``ablations.reports.power``);
    ``confirmed``: the confirmatory set's results, the only ones headlined (``ablations.reports.headline``)."""
    from ablations.catalog import plans as registered
    from ablations.reports import headline as head
    from ablations.reports import power
    from ablations.verdicts.rules import verdict_word

    again, more, conf = replications or {}, more_seeds or {}, confirmed or {}
    qs = {r.name: r.question for r in results} | {q.name: q for q in missing}
    files = {n: registered.plan_path(q) for n, q in qs.items()}
    plans = {n: registered.load(q) for n, q in qs.items()}
    heads = {n: head.headline(conf.get(n), plans[n], files[n], registered.text(q)) if n in conf else head.PENDING
             for n, q in qs.items()}
    from attnlab_run.environment import cpu_model

    trial_wall = sum(r.trial_wall_s or 0.0 for r in results)
    lines = [
        f"# Findings{' on real data' if real else ''}: does each ablation reproduce its literature result?",
        "",
        f"- **Command:** `{command}` (the last invocation; each section's **Runs** line says which commit, CPU "
        "and date its numbers come from)",
        f"- **CPU:** {cpu_model()} ({os.cpu_count()} logical cores visible)",
        f"- **Wall time:** {hms(wall_s)} for this invocation (finished trials are skipped on a rerun); "
        f"{hms(trial_wall)} summed over the trials' own training wall times, every question below",
        *_span_line(results),
        *_span_line(list(again.values()), f"replication seeds ({FIRST_SEED}..)"),
        *_span_line(list(more.values()), f"more seeds ({power.FIRST_SEED}..)"),
        *(_data_lines() if real else []),
        f"- **Scale:** `--scale quick` presets (`ablations/catalog/questions{'_real' if real else ''}.py`); seeds "
        "per arm as in each sweep file. "
        'Verdicts read paired-by-seed 95% intervals (`ablations/verdicts/stats.py`); "not shown at this scale" means '
        "the arms that should learn the task did not, with the scale at which the finding should show; "
        '"supported where shown" means every check was supported except comparisons the question names as '
        "beyond this scale, which came out within seed noise (each says why and where it should show).",
        "- **Headline:** the confirmatory answer only: each question's seeds fixed in its plan file "
        f"(`{'docs/findings/real/plans' if real else 'docs/findings/plans'}/<question>.yaml`, committed before they "
        "ran; `attnlab findings --confirm`). A result whose plan was committed after its runs' commit, or whose "
        f'preset differs from the plan\'s, is refused; without confirmatory runs the headline reads "{head.PENDING}".',
        "- **Exploratory:** the main seeds (1..), the replication (1001..) and the more-seeds set (2001..) were read "
        "while presets and rules were chosen; their answers are shown, labelled exploratory, never headlined.",
        f"- **Replicated (exploratory):** whether the verdict's answer is the same on a second, disjoint seed set "
        f"({FIRST_SEED}, {FIRST_SEED + 1}, ...: `attnlab findings --replicate`), with the replication's answer in "
        "brackets.",
        f"- **More seeds (exploratory):** where a comparison sat within seed noise, the answer on a third, disjoint "
        f"seed set "
        f"({power.FIRST_SEED}, ...) of the size that comparison needs (80% power, at most {power.CAP}), fixed "
        f"in [power/{power.PLAN}](power/{power.PLAN}) before any of it ran and read alone, never pooled "
        "(`attnlab findings --power`); \"needs N\": the seeds a comparison would need, beyond that cap.",
        "",
        "| question | claim | source | headline (confirmatory) | exploratory: main seeds | exploratory: replicated "
        "| exploratory: more seeds | key numbers (main seeds, exploratory) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        q, rep = r.question, again.get(r.name)
        lines.append(
            f"| [{q.name}](#{q.name}) | {_cell(q.claim)} | {_cell(q.source)} | **{heads[r.name]}** | "
            f"{verdict_word(r.verdict)} | {replicated(r.verdict, rep.verdict if rep else None)} | "
            f"{power.cell(plan, r.name, more.get(r.name))} | {_cell(r.key_numbers)} |"
        )
    lines += [f"| {q.name} | {_cell(q.claim)} | {_cell(q.source)} | **{heads[q.name]}** | not run | not run | — | — |"
              for q in missing]
    lines += ["", "## Headlines under the pre-registered plans (issue #42)", "",
              *head.change_rows([*(r.name for r in results), *(q.name for q in missing)],
                                {r.name: r for r in results}, heads, plans)]
    for r in results:
        m, rel = more.get(r.name), f"plans/{files[r.name].name}"  # beside this README in either findings folder
        lines += _section(r, again.get(r.name), power.section_lines(plan, r.name, m, _provenance(m) if m else ""),
                          _confirm_lines(r.name, heads[r.name], conf.get(r.name), rel))
    return "\n".join(lines) + "\n"
