"""Baseline arms (``Question.baselines``): a question's arm that runs another config, such as ``ram_mnist``'s
same-budget full-view network. The runner enumerates its trials on the sweep's seeds with the quick flags that
apply to its config, the results label its runs as the arm, and the verdict judges RAM against it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ablations import findings
from ablations.catalog import claims_real
from ablations.catalog.arms import Arms
from ablations.catalog.baselines import baseline_specs
from ablations.catalog.question import BASELINE_KEY, model_class
from ablations.catalog.questions import QUESTIONS, REPO
from ablations.catalog.questions_real import QUICK_RAM, REAL_QUESTIONS
from ablations.engine.sweepspec import SweepError, applicable_args, command_config, with_config
from ablations.reports.results import group_arms, load_experiment
from ablations.runner import load_sweep, make_plan, run_sweep
from ablations.verdicts.replication import FIRST_SEED
from ablations.verdicts.rules import verdict_word
from ablations.verdicts.stats import stat

ALL = {**QUESTIONS, **REAL_QUESTIONS}
RAM = REAL_QUESTIONS["ram_mnist"]
FULL = claims_real.FULL_VIEW
FC_CONFIG = "ablations/configs/ram_mnist_fc.yaml"


@pytest.mark.parametrize("name", sorted(n for n, q in ALL.items() if q.baselines))
def test_a_declared_baseline_config_exists_and_is_read_by_the_verdict(name: str):
    question = ALL[name]
    own = model_class(REPO / command_config(load_sweep(question.sweep_path)))
    for label in question.baselines:
        config = question.baseline_config(label)
        assert config.is_file(), f"{name}: baseline {label}: {config} does not exist"
        assert model_class(config), f"{name}: baseline {label}: {config} names no model.class_path"
        assert model_class(config) != own, f"{name}: baseline {label} runs the sweep's own model class"
    arms = question.arms()
    question.verdict({}, arms)
    assert set(question.baseline_arms) <= set(arms.judged), f"{name}: the verdict does not judge its baselines"


def test_ram_mnist_declares_the_full_view_baseline():
    assert RAM.baselines == {FULL: FC_CONFIG} and RAM.baseline_arms == ((FULL,),)
    assert not [q.name for q in QUESTIONS.values() if q.baselines], "no synthetic question has a baseline"


# ------------------------------------------------------------------------------------------------ the runner
def test_dry_run_enumerates_the_baseline_trials_after_the_grid(tmp_path: Path):
    root, lines = tmp_path / "runs", []
    plan = make_plan(load_sweep(RAM.sweep_path), root=root, scale="quick", threads=1)
    outcomes = run_sweep(plan, dry_run=True, echo=lines.append)
    names = [o.trial.name for o in outcomes]
    grid = [f"glimpses={g},seed={s}" for g in (1, 3, 6) for s in (1, 2, 3)]
    assert sorted(names[:9]) == sorted(grid)
    assert names[9:] == [f"baseline=full_view,seed={s}" for s in (1, 2, 3)]
    assert lines[-1].startswith("[12/12] baseline=full_view,seed=3"), lines[-1]
    for outcome in outcomes[9:]:
        trial, seed = outcome.trial, outcome.trial.params["seed_everything"]
        assert trial.params == {BASELINE_KEY: FULL, "seed_everything": seed}
        command = trial.command
        assert command[command.index("--config") + 1] == FC_CONFIG
        assert f"--seed_everything={seed}" in command and "--run.experiment=ram_mnist" in command
        assert "--run.test_after_fit=true" in command and f"--run.name={trial.name}" in command
        assert all(flag in command for flag in QUICK_RAM), "RAM's quick flags all apply to the FC config"
        assert not [c for c in command if c.startswith(("--model.glimpses", f"--{BASELINE_KEY}"))]
        assert trial.run_dir == root.resolve() / "ram_mnist" / trial.name
    assert not root.exists(), "a dry run creates nothing"


def test_full_scale_and_replication_keep_the_baseline_on_the_sweeps_seeds(tmp_path: Path):
    full = make_plan(load_sweep(RAM.sweep_path), root=tmp_path, scale="full", threads=1)
    (trial, *_) = full.baseline_trials()
    assert not [c for c in trial.command if c.startswith(("--trainer.max_epochs", "--data.train_size"))]
    replicated = findings._plan(RAM, tmp_path, None, replicate=True)
    seeds = [t.params["seed_everything"] for t in replicated.baseline_trials()]
    assert seeds == [FIRST_SEED, FIRST_SEED + 1, FIRST_SEED + 2]


def test_only_the_quick_flags_that_apply_to_the_baseline_config_are_passed():
    args = ["--trainer.max_epochs=1", "--model.glimpses=3", "--model.warmup_steps=30", "--model.hidden_size=8",
            "--data.train_size=10", "--data.no_such_option=1", "--run.monitor=val/acc"]
    kept = applicable_args(args, REPO / FC_CONFIG)
    assert kept == ["--trainer.max_epochs=1", "--model.hidden_size=8", "--data.train_size=10", "--run.monitor=val/acc"]
    assert baseline_specs(RAM, args) == {FULL: (FC_CONFIG, kept)} and baseline_specs(None, args) == {}


def test_the_baseline_config_replaces_the_sweeps_config():
    command = ["python", "cli.py", "fit", "--config", "a.yaml", "--x=1"]
    assert with_config(command, "b.yaml") == ["python", "cli.py", "fit", "--config", "b.yaml", "--x=1"]
    assert with_config(["fit", "--config=a.yaml"], "b.yaml") == ["fit", "--config=b.yaml"]
    assert command_config({"command": command}) == "a.yaml" and command_config({"command": ["fit"]}) is None
    with pytest.raises(SweepError, match="no --config"):
        with_config(["fit"], "b.yaml")


# ------------------------------------------------------------------------------------------------ results
def _run(root: Path, name: str, *, cls: str, acc: float, seed: int, trial: dict | None) -> None:
    run = root / "ram_mnist" / name
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"seed_everything": seed, "model": {"class_path": cls}}))
    (run / "summary.json").write_text(json.dumps({"status": "finished",
                                                  "metrics": {"val/acc": acc, "test/acc": acc}}))
    if trial is not None:
        (run / "trial.json").write_text(json.dumps({"status": "finished", **trial}))


@pytest.fixture
def ram_runs(tmp_path: Path) -> Path:
    ram, fc = model_class(REPO / "ablations/configs/ram_mnist.yaml"), model_class(REPO / FC_CONFIG)
    for seed in (1, 2, 3):
        for glimpses in (1, 6):
            _run(tmp_path, f"glimpses={glimpses},seed={seed}", cls=ram, acc=0.3 + 0.1 * glimpses + 0.01 * seed,
                 seed=seed, trial={"params": {"model.glimpses": glimpses, "seed_everything": seed}})
        # the runner's trials record the label; a run started by hand (or by wandb agent) has only its class
        record = {"params": {BASELINE_KEY: FULL, "seed_everything": seed}} if seed < 3 else None
        _run(tmp_path, f"baseline=full_view,seed={seed}" if record else f"fc_by_hand_{seed}", cls=fc,
             acc=0.6 + 0.01 * seed, seed=seed, trial=record)
    return tmp_path


def test_results_label_baseline_runs_as_their_arm(ram_runs: Path):
    runs = load_experiment(ram_runs / "ram_mnist")
    arms = group_arms(runs, RAM.axes, RAM.baseline_of)
    assert set(arms) == {(1,), (6,), (FULL,)}
    assert sorted(r.seed for r in arms[(FULL,)]) == [1, 2, 3]
    assert set(group_arms(runs, RAM.axes)) == {(1,), (6,), (None,)}, "without the question, no label"


def test_report_and_findings_show_the_baseline_arm(ram_runs: Path, tmp_path: Path):
    result = findings.report_question(RAM, root=ram_runs, out=tmp_path / "docs")
    assert result is not None and "full_view 0.620 ± 0.010" in result.key_numbers
    report = (tmp_path / "docs" / "ram_mnist" / "report.md").read_text()
    results = report.split("## Results", 1)[1].split("\n## ", 1)[0]  # the table: arm, n (finished/total), ...
    rows = [line.split(" | ")[:2] for line in results.splitlines() if line.startswith("| ") and "/3" in line]
    assert rows == [["| glimpses=1", "3/3"], ["| glimpses=6", "3/3"], ["| baseline: full_view", "3/3"]]
    assert "RAM with 6 glimpses beats the same-budget full-view network" in result.verdict
    assert "no same-budget" not in report and "not compared" not in report
    assert "· **baseline arm:** `full_view` (`ablations/configs/ram_mnist_fc.yaml`)" in report


# ------------------------------------------------------------------------------------------------ the verdict
def _s(mean: float, spread: float, rot: int = 0):
    values = (mean - spread, mean, mean + spread)
    values = values[rot % 3:] + values[: rot % 3]
    return stat(list(values), [1, 2, 3])


def _stats(ram6: float, fc: float, spread: float = 0.01) -> dict:
    return {(1,): {"val/acc": _s(0.45, 0.01)}, (3,): {"val/acc": _s(0.5, 0.01)},
            (6,): {"val/acc": _s(0.85, 0.01, 1), "test/acc": _s(ram6, spread, 1)},
            (FULL,): {"val/acc": _s(fc, spread), "test/acc": _s(fc, spread)}}


@pytest.mark.parametrize(("ram6", "fc", "spread", "pair", "overall"), [
    (0.92, 0.72, 0.01, "supported", "supported"),  # the paper's direction (Table 1, 60x60 translated MNIST)
    (0.62, 0.72, 0.01, "not supported", "not supported"),  # the full-view network wins
    (0.72, 0.72, 0.08, "inconclusive", "inconclusive"),  # within seed noise
])
def test_ram_mnist_judges_ram_against_the_full_view_network(ram6, fc, spread, pair, overall):
    stats = _stats(ram6, fc, spread)
    verdict = RAM.judge(stats)
    assert verdict_word(verdict) == overall, verdict
    (check,) = [c for c in verdict.split(" | ") if "beats the same-budget full-view network" in c]
    assert f"reports test error): {pair}" in check, check
    assert "test/acc: 6 " in check and " vs full_view " in check


def test_ram_mnist_without_baseline_runs_says_so():
    stats = _stats(0.92, 0.72)
    del stats[(FULL,)]
    verdict = claims_real.ram_mnist(stats, Arms(swept=[(1,), (3,), (6,)], baselines=[(FULL,)], ranked_only=((3,),)))
    assert verdict_word(verdict) == "inconclusive" and "no finished seed for full_view" in verdict


# ------------------------------------------------------------------------------------------------ W&B
def test_wandb_report_reads_the_baseline_runs_of_the_questions_group(monkeypatch):
    """A W&B grid cannot cross configs: the baseline's runs are the question's group's, not the sweep's."""
    import wandb

    from ablations.reports.results import load_wandb_sweep

    ram, fc = model_class(REPO / "ablations/configs/ram_mnist.yaml"), model_class(REPO / FC_CONFIG)

    class Run:
        def __init__(self, id_: str, cls: str, seed: int, **model: int) -> None:
            self.id, self.name, self.state, self.job_type = id_, id_, "finished", "fit"
            self.config = {"model.class_path": cls, "seed_everything": seed,
                           **{f"model.{k}": v for k, v in model.items()}}
            self.summary = {"val/acc": 0.5, "test/acc": 0.5}

        def scan_history(self, keys):
            return []

    in_sweep = [Run(f"ram{s}", ram, s, glimpses=6) for s in (1, 2)]
    group = [*in_sweep, Run("fc1", fc, 1), Run("fc2", fc, 2)]
    asked = []
    sweep = type("Sweep", (), {"id": "abc", "config": {"name": "ram_mnist", "metric": {"name": "val/acc"}},
                               "runs": in_sweep})

    class Api:
        def sweep(self, path):
            return sweep

        def runs(self, project, filters):
            asked.append((project, filters))
            return group

    monkeypatch.setattr(wandb, "Api", Api)
    name, records = load_wandb_sweep("me/attnlab/abc")
    assert name == "ram_mnist" and asked == [("me/attnlab", {"group": "ram_mnist", "jobType": "fit"})]
    assert sorted(r.name for r in records) == ["fc1", "fc2", "ram1", "ram2"], "each run once"
    arms = group_arms(records, RAM.axes, RAM.baseline_of)
    assert {a: sorted(r.name for r in runs) for a, runs in arms.items()} == {(6,): ["ram1", "ram2"],
                                                                            (FULL,): ["fc1", "fc2"]}


def test_dashboard_groups_a_baselines_runs_by_model_class():
    pytest.importorskip("wandb_workspaces")
    from ablations.reports.dashboard import build_workspace

    def keys(question):
        return [str(g) for g in build_workspace(question, entity="e", project="p").runset_settings.groupby]

    assert any("model.class_path" in k for k in keys(RAM)) and any("model.glimpses" in k for k in keys(RAM))
    assert not any("class_path" in k for k in keys(QUESTIONS["scaling"])), "unchanged without baselines"


def test_findings_dry_run_counts_the_baseline_trials(tmp_path: Path, capsys):
    argv = ["--real", "--dry-run", "--only", "ram_mnist", "--root", str(tmp_path / "runs"), "--out", str(tmp_path)]
    assert findings.findings_main(argv) == 0
    printed = capsys.readouterr().out
    assert "== ram_mnist (12 trials)" in printed and "findings: 12/12 trials" in printed
    assert "[12/12] baseline=full_view,seed=3" in printed and not (tmp_path / "runs").exists()
