"""Out-of-domain test sets of a question: each finished trial's best checkpoint tested on every domain.

A question with ``test_domains`` (``Question.test_domains``, e.g. the movie-review pooling question's
tweets, NYT editorials and Amazon reviews of Hutto & Gilbert 2014) trains and tests in domain as its
sweep says; then ``attnlab findings`` runs, for each finished trial and each domain it has not yet been
tested on, the trial's own command as ``test`` with ``--ckpt_path best --data.test_domain=<domain>``.
Each such test is one more evaluation record of the run (``attnlab_run.evaluations``), so the
step is resumable and the in-domain numbers stay what the report reads (``results.choose_evaluations``
matches ``data.test_domain`` too). The report adds a table: test accuracy per arm and domain.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ablations.reports.results import RunRecord, choose_evaluations, read_mapping, stat
from attnlab_run.evaluations import evaluation_records, finished_evaluations

DOMAIN_OPTION = "data.test_domain"
DROPPED = ("--run.test_after_fit",)  # fit-only options of a trial's command


def tested_domains(run_dir: Path) -> set[str]:
    """The domains a run already holds a finished test evaluation for."""
    evaluations = finished_evaluations(evaluation_records(run_dir))
    return {str(e["options"][DOMAIN_OPTION]) for e in evaluations.values()
            if isinstance(e, dict) and e.get("subcommand") == "test" and (e.get("options") or {}).get(DOMAIN_OPTION)}


def domain_test_command(fit_command: Sequence[str], domain: str) -> list[str]:
    """A trial's fit argv turned into the test of its best checkpoint on ``domain``."""
    if "fit" not in fit_command:
        raise ValueError(f"not a fit command: {' '.join(fit_command)}")
    at = list(fit_command).index("fit")
    rest = [a for a in fit_command[at + 1:] if not a.startswith(DROPPED)]
    return [*fit_command[:at], "test", *rest, "--ckpt_path=best", f"--data.test_domain={domain}"]


def pending(exp_dir: Path, domains: Sequence[str]) -> list[tuple[Path, str, list[str]]]:
    """(run dir, domain, argv) for every finished trial under ``exp_dir`` not yet tested on a domain."""
    out = []
    for run in sorted(p for p in exp_dir.iterdir() if (p / "trial.json").is_file()) if exp_dir.is_dir() else []:
        trial = read_mapping(run / "trial.json")
        if trial.get("status") != "finished" or not trial.get("command"):
            continue
        done = tested_domains(run)
        out += [(run, d, domain_test_command(trial["command"], d)) for d in domains if d not in done]
    return out


def run_domain_tests(exp_dir: Path, domains: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None,
                     jobs: int, echo: Callable[[str], None] = print) -> int:
    """Run the pending out-of-domain tests, ``jobs`` runs at once; each logs to ``<run>/test_<domain>.log``.
    One run's domains are tested one after another: a run directory has one live owner at a time
    (``attnlab_run.rundir``), so a second test of the same run would be refused while the first holds it.
    Returns how many failed (a failure is echoed and left pending for the next call)."""
    todo = pending(exp_dir, domains)
    if todo:
        echo(f"  out-of-domain tests: {len(todo)} ({', '.join(domains)})")
    by_run: dict[Path, list[tuple[str, list[str]]]] = {}
    for run, domain, argv in todo:
        by_run.setdefault(run, []).append((domain, argv))

    def one(run: Path, domain: str, argv: list[str]) -> bool:
        with open(run / f"test_{domain}.log", "w") as log:
            code = subprocess.run(argv, cwd=cwd, env=dict(env) if env is not None else None, stdout=log,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, check=False).returncode
        echo(f"  [{domain}] {run.name}  {'tested' if code == 0 else f'failed (exit {code}, see {log.name})'}")
        return code == 0

    def run_all(run: Path) -> int:
        return sum(not one(run, domain, argv) for domain, argv in by_run[run])

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return sum(pool.map(run_all, by_run))


def domain_metric(run: RunRecord, domain: str, metric: str) -> float | None:
    """``metric`` of the run's latest test on ``domain`` (None if it has none)."""
    evaluations = finished_evaluations(evaluation_records(run.run_dir)) if run.run_dir else {}
    chosen = choose_evaluations(evaluations, run.params, {DOMAIN_OPTION: domain}).get("test")
    value = (evaluations[chosen].get("metrics") or {}).get(metric) if chosen else None
    return float(value) if isinstance(value, (int, float)) else None


def domain_table(arms: Mapping[tuple, Sequence[RunRecord]], order: Sequence[tuple], domains: Sequence[str], *,
                 metric: str, label: Callable[[tuple], str]) -> str:
    """Markdown: per arm, ``metric`` in domain and on each test domain, mean ± std over finished seeds (n)."""
    head = f"| arm | in domain | {' | '.join(domains)} |\n|---|---|{'---|' * len(domains)}"
    rows = []
    for arm in order:
        done = [r for r in arms[arm] if r.status == "finished"]
        cells = [_cell([r.metrics.get(metric) for r in done])]
        cells += [_cell([domain_metric(r, d, metric) for r in done]) for d in domains]
        rows.append(f"| {label(arm)} | {' | '.join(cells)} |")
    return "\n".join([head, *rows])


def domains_section(question: Any, arms: Mapping[tuple, Sequence[RunRecord]], order: Sequence[tuple], *,
                    label: Callable[[tuple], str]) -> list[str]:
    """The report's out-of-domain lines for a question with ``test_domains`` (none without): the test
    counterpart of its metric (``val/acc`` -> ``test/acc``) per arm and domain."""
    metric, domains = "test/" + question.metric.split("/", 1)[-1], question.test_domains
    if not domains:
        return []
    return ["## Out of domain", "", f"`{metric}` of each run's best checkpoint on each test domain (mean ± std over "
            "finished seeds; the verdict reads the in-domain test only).", "",
            domain_table(arms, order, domains, metric=metric, label=label), ""]


def _cell(values: Sequence[float | None]) -> str:
    got = [v for v in values if v is not None]
    s = stat(got)
    return f"{s.mean:.3f} ± {s.std:.3f} (n={s.n})" if s.n else "—"

