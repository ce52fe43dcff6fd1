"""``attnlab findings --power``: a third, disjoint seed set whose size per question is fixed once from the
earlier sets' verdicts (``ablations.reports.power``); nothing trains here."""

from __future__ import annotations

import json
from pathlib import Path

from test_report import fake_run
from test_stats import seeds

from ablations.findings import findings_main
from ablations.reports.findings_readme import readme
from ablations.reports.power import CAP, FIRST_SEED, cell, load_or_make_plan, make_plan, planned_seeds
from ablations.reports.record import QuestionResult
from ablations.verdicts.replication import FIRST_SEED as REPLICATION_SEED
from ablations.verdicts.rules import at_most, better, join, needs_in
from ablations.verdicts.stats import stat


def _noisy(claim: str) -> str:
    """A verdict whose one comparison is within seed noise (its text says how many seeds would resolve it)."""
    check = better({("a",): {"m": stat([0.73, 0.64, 0.77], [1, 2, 3])},
                    ("b",): {"m": stat([0.66, 0.64, 0.70], [1, 2, 3])}}, ("a",), ("b",), metric="m",
                   goal="maximize", claim=claim)
    assert check.needs is not None and 3 < check.needs <= CAP
    return join([check])


def _result(name: str, verdict: str) -> QuestionResult:
    return QuestionResult(name=name, verdict=verdict, key_numbers="", report=f"{name}/report.md", figures=[])


def test_needs_are_read_back_from_the_verdict_line_each_with_its_claim():
    verdict = _noisy("a beats b")
    (claim, n), = needs_in(verdict)
    assert claim == "a beats b" and n > 3
    assert needs_in("supported: a beats b: supported — m: ...") == []
    two = join([better({("a",): {"m": stat([0.70, 0.62, 0.75], [1, 2, 3])},
                        ("b",): {"m": stat([0.66, 0.64, 0.70], [1, 2, 3])}}, ("a",), ("b",), metric="m",
                       goal="maximize", claim=c) for c in ("first", "second")])
    assert [c for c, _ in needs_in(two)] == ["first", "second"]


def test_a_difference_of_about_zero_says_no_seed_count_would_resolve_it():
    same = better({("a",): {"m": stat([0.70, 0.62, 0.75], [1, 2, 3])},
                   ("b",): {"m": stat([0.70, 0.62, 0.75], [1, 2, 3])}}, ("a",), ("b",), metric="m",
                  goal="maximize", claim="a beats b")
    assert same.answer == "inconclusive" and same.needs == 0
    assert "no count up to 10,000 seeds would resolve the observed difference" in same.text()
    assert needs_in(join([same])) == [], "nothing to plan for"


def test_a_straddled_bound_says_how_many_seeds_would_place_the_mean_on_one_side():
    check = at_most({("a",): {"drop": seeds(0.05, 0.12)}}, ("a",), metric="drop", bound=0.15, claim="flat")
    assert check.answer == "inconclusive" and check.needs is not None and check.needs >= 2
    assert needs_in(join([check])) == [("flat", check.needs)]
    far = at_most({("a",): {"drop": seeds(0.10, 0.19)}}, ("a",), metric="drop", bound=0.15, claim="flat")
    assert far.needs is not None and far.needs > check.needs, "a mean nearer the bound needs more seeds"


def test_the_plan_takes_the_largest_need_up_to_the_cap_and_skips_claims_beyond_this_scale():
    noisy = _noisy("a beats b")
    need = needs_in(noisy)[0][1]
    beyond = "not shown at this scale: " + noisy.partition(": ")[2]
    plan = make_plan({"q": _result("q", "supported: x: supported — m"), "far": _result("far", beyond),
                      "clear": _result("clear", "supported: x: supported — m")},
                     {"q": _result("q", noisy), "far": _result("far", beyond)})
    q, far, clear = (plan["questions"][n] for n in ("q", "far", "clear"))
    assert q["seeds"] == need and q["because"] == [{"claim": "a beats b", "seeds": need, "set": "replication"}]
    assert planned_seeds(plan, "q") == list(range(FIRST_SEED, FIRST_SEED + need))
    assert far["seeds"] == 0 and far["beyond"] and "beyond this scale" in far["why"]
    assert clear["seeds"] == 0 and planned_seeds(plan, "clear") == [] and planned_seeds(plan, "absent") == []
    assert cell(plan, "q", None) == f"n={need}: planned, not run"
    assert cell(plan, "q", _result("q", "supported: ...")) == f"n={need}: supported"
    assert cell(plan, "far", None) == "none: claim beyond this scale" and cell(plan, "clear", None) == "—"
    assert cell(None, "q", None) == "—"
    assert not set(planned_seeds(plan, "q")) & set(range(1, REPLICATION_SEED + CAP)), "disjoint from both sets"


def test_a_need_beyond_the_cap_is_said_not_run(monkeypatch):
    monkeypatch.setattr("ablations.reports.power.needs_in", lambda verdict: [("tiny gap", CAP + 1), ("small gap", 6)])
    plan = make_plan({"q": _result("q", "inconclusive (x): ...")}, {})
    entry = plan["questions"]["q"]
    assert entry["seeds"] == 6 and entry["beyond"] == [{"claim": "tiny gap", "seeds": CAP + 1, "set": "main"}]


def test_the_plan_is_fixed_once_and_a_dry_run_writes_nothing(tmp_path: Path):
    noisy = {"q": _result("q", _noisy("a beats b"))}
    plan, made = load_or_make_plan(tmp_path, noisy, {}, write=False)
    assert made and not (tmp_path / "power").exists()
    plan, made = load_or_make_plan(tmp_path, noisy, {})
    assert made and (tmp_path / "power" / "plan.json").is_file()
    again, made = load_or_make_plan(tmp_path, {"q": _result("q", "supported: clear")}, {})
    assert not made and again == plan, "later verdicts never change a declared plan"


def test_the_readme_gives_the_third_sets_answer_and_what_was_planned(tmp_path: Path):
    main = [_result("scaling", _noisy("sqrt_dk beats dk"))]
    plan = make_plan({"scaling": main[0]}, {})
    more = _result("scaling", "supported: sqrt_dk beats dk: supported — m")
    more.trials_span, more.trials = [1.8e9, 1.8e9 + 600], 30
    text = readme(main, command="attnlab findings --power", wall_s=1.0, plan=plan, more_seeds={"scaling": more})
    assert f"- **Trials ran, more seeds ({FIRST_SEED}..):** " in text and "0:10:00" in text, "each set its own span"
    row = next(line for line in text.splitlines() if line.startswith("| [scaling]"))
    assert f"| n={plan['questions']['scaling']['seeds']}: supported |" in row
    assert "- **More seeds, exploratory** (" in text and "(power/scaling/report.md)" in text
    assert "power/plan.json" in text
    bare = readme(main, command="attnlab findings", wall_s=1.0)
    assert "| — |" in next(line for line in bare.splitlines() if line.startswith("| [scaling]"))


def test_power_refuses_seeds_and_replicate_in_one_line(tmp_path: Path, capsys):
    for extra in (["--seeds", "3"], ["--replicate"]):
        assert findings_main(["--power", "--root", str(tmp_path / "r"), "--out", str(tmp_path / "o"), *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("attnlab findings: error: --power") and "\n" not in err
    assert not (tmp_path / "r").exists() and not (tmp_path / "o").exists()


def test_power_runs_only_the_planned_questions_on_their_fresh_seeds(tmp_path: Path, capsys):
    root, out = tmp_path / "runs", tmp_path / "docs"
    for scale, acc in {"sqrt_dk": 0.9, "dk": 0.88, "none": 0.1}.items():
        for seed in range(1, 6):
            fake_run(root / "scaling", scale, seed, acc=acc)
    assert findings_main(["--root", str(root), "--out", str(out), "--only", "scaling"]) == 0
    plan = json.loads(json.dumps(make_plan({"scaling": _result("scaling", _noisy("x"))}, {})))
    (out / "power").mkdir(parents=True)
    (out / "power" / "plan.json").write_text(json.dumps(plan))
    n = plan["questions"]["scaling"]["seeds"]
    assert findings_main(["--root", str(root), "--out", str(out), "--power", "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "plan as declared" in printed and f"scaling: {n} seeds" in printed
    assert f"seed={FIRST_SEED}" in printed and f"seed={FIRST_SEED + n - 1}" in printed
    assert f"seed={FIRST_SEED + n}," not in printed and "== norm" not in printed, "only what the plan gives"
    assert not (root / "power").exists(), "a dry run trains nothing"
