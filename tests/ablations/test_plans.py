"""Every question's pre-registered plan (issue #42): the committed file equals its rendering from code, every
comparison states its direction and smallest effect of interest, every arm is judged or ranked only, and the
confirmatory seeds are fresh (disjoint from the exploratory sets and from every earlier version's)."""

from __future__ import annotations

import subprocess

import pytest

from ablations.catalog import plans
from ablations.catalog.plan import CONFIRM_FIRST, CONFIRM_STRIDE, Plan
from ablations.catalog.power_estimate import LEAST, MOST, estimate
from ablations.catalog.questions import QUESTIONS
from ablations.catalog.questions_real import REAL_QUESTIONS
from ablations.reports.headline import committed
from ablations.reports.power import FIRST_SEED as POWER_FIRST
from ablations.verdicts.replication import FIRST_SEED as REPLICATION_FIRST

EVERY = [*QUESTIONS.values(), *REAL_QUESTIONS.values()]


def _in_git() -> bool:
    done = subprocess.run(["git", "rev-parse", "--verify", "--quiet", "0367f32"], cwd=plans.REPO,
                          capture_output=True, check=False)
    return done.returncode == 0


needs_history = pytest.mark.skipif(not _in_git(), reason="the power estimate reads the exploratory record from git")


@pytest.mark.parametrize("question", EVERY, ids=lambda q: q.name)
def test_every_question_has_a_plan(question):
    assert isinstance(question.plan, Plan), f"{question.name}: Question(plan=...) missing"


@needs_history
@pytest.mark.parametrize("question", EVERY, ids=lambda q: q.name)
def test_the_committed_plan_equals_its_rendering(question):
    """A plan changed in code without its file (or the reverse) fails: run python -m ablations.catalog.plans, and
    after confirmatory seeds ran, raise the plan's version (fresh seeds) and keep the old answer in superseded."""
    path = plans.plan_path(question)
    assert path.is_file(), f"{path} missing: python -m ablations.catalog.plans"
    assert path.read_text(encoding="utf-8") == plans.text(question), f"{path} differs from its rendering"


@pytest.mark.parametrize("question", EVERY, ids=lambda q: q.name)
def test_every_comparison_states_its_direction_and_smallest_effect(question):
    found, judged = plans.comparisons(question)
    assert found and judged
    for c in found:
        spec = c["spec"]
        if spec["kind"] in ("beats", "extrapolates"):
            assert spec.get("sesoi") is not None, f"{question.name}: {c['claim']} states no smallest effect"
            assert spec["direction"] in ("maximize", "minimize")
        if spec["kind"] == "equivalent":
            assert spec["margin"] > 0
        if spec["kind"] == "extrapolates":
            assert spec.get("chance") is not None


@pytest.mark.parametrize("question", EVERY, ids=lambda q: q.name)
def test_the_arms_a_plan_chose_are_judged(question):
    found, judged = plans.comparisons(question)
    for role, value in question.chosen.items():
        assert str(value) in judged, f"{question.name}: the plan's {role} arm {value} is not judged"


def test_confirmatory_seeds_are_fresh_for_every_version():
    assert CONFIRM_FIRST > POWER_FIRST + MOST and CONFIRM_FIRST > REPLICATION_FIRST + MOST
    assert CONFIRM_STRIDE >= MOST, "two versions' seed sets would overlap"
    first = {q.name: q.plan.first_seed for q in EVERY}
    assert all(f >= CONFIRM_FIRST and (f - CONFIRM_FIRST) % CONFIRM_STRIDE == 0 for f in first.values())
    assert Plan(stated="", changes="", version=2).first_seed == CONFIRM_FIRST + CONFIRM_STRIDE


def test_the_plans_command_checks_and_names_a_stale_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(plans, "plan_path", lambda q, root=plans.REPO: tmp_path / f"{q.name}.yaml")
    monkeypatch.setattr(plans, "every_question", lambda: [QUESTIONS["heads"]])
    monkeypatch.setattr(plans, "REPO", tmp_path)
    assert plans.main(["--check"]) == 1 and "heads.yaml" in capsys.readouterr().out
    assert not (tmp_path / "heads.yaml").exists()


@needs_history
def test_confirm_takes_the_seeds_its_committed_plan_names_and_refuses_a_stale_one(monkeypatch):
    from ablations import findings

    heads = QUESTIONS["heads"]
    seeds, problem = findings.confirm_seeds([heads])
    if not committed(plans.plan_path(heads)):  # a working copy with the plan file edited: nothing to check
        pytest.skip(f"{plans.plan_path(heads)} is not committed as it stands")
    first = heads.plan.first_seed
    assert problem is None and seeds["heads"][0] == first and seeds["heads"] == list(range(first, first + len(
        seeds["heads"])))
    monkeypatch.setattr(plans, "text", lambda q, root=plans.REPO: "changed\n")
    seeds, problem = findings.confirm_seeds([heads])
    assert seeds is None and "docs/findings/plans/heads.yaml" in problem and "--write-plans" in problem


@pytest.mark.parametrize("question", EVERY, ids=lambda q: q.name)
def test_every_plan_takes_at_least_the_floor_of_seeds(question):
    assert plans.load(question)["seeds"]["count"] >= LEAST
    with pytest.raises(ValueError, match=f"at least {LEAST}"):
        Plan(stated="s", changes="c", seeds=LEAST - 1)


def _verdict(diff: float, d: float) -> str:
    return (f"x: inconclusive — m: a 0.5 ± 0.1 [0.4, 0.6] vs b 0.5 ± 0.1 [0.4, 0.6]; Δ={diff:+.3f} [-0.1, +0.1] "
            f"(paired, n=5, p=0.5, d={d:.2f})")


def test_an_equivalence_is_powered_for_its_margin_and_nothing_powered_says_floor():
    """TOST: the seeds must resolve margin - |Δ|; a plan with no powered comparison names the floor, not an
    estimate."""
    from ablations.verdicts.stats import seeds_for_power

    equivalent = {"claim": "a ≈ b", "secondary": False,
                  "spec": {"kind": "equivalent", "a": "a", "b": "b", "metric": "m", "margin": 0.05}}
    power = estimate([equivalent], {"main": _verdict(0.01, 0.5)})  # spread 0.02: (0.05 - 0.01) / 0.02 = 2
    assert power["comparisons"][0]["needs"]["main"] == seeds_for_power(2.0, paired=True)
    assert plans.count_from(power) == "power estimate"
    outside = estimate([equivalent], {"main": _verdict(0.06, 0.5)})
    assert "not resolvable" in outside["comparisons"][0]["needs"]["main"] and outside["count"] == LEAST
    assert plans.count_from(outside).startswith(f"floor ({LEAST}")
    closer = {**equivalent, "spec": {**equivalent["spec"], "kind": "closer"}}
    assert plans.count_from(estimate([closer], {"main": _verdict(0.01, 0.5)})).startswith("floor")

