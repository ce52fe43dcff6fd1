"""Time-to-answer section (issues #17, #26): the profiler's self-time accounting, one tiny real trial cold and
warm, and the recorded findings-set comparison."""

from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


@pytest.fixture
def trial_time(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    import benchmarks.trial_time as module

    return module


def test_categories(trial_time):
    c = trial_time.category
    assert c("[Callback]AttentionFigures.on_validation_epoch_end") == "figures"
    assert c("[Callback]ModelCheckpoint{'monitor': 'val/loss'}.on_validation_end") == "checkpointing"
    assert c("save_checkpoint") == "checkpointing"
    assert c("[Callback]AlignmentMass.on_validation_epoch_end") == "probes, summary, progress"
    assert c("[LightningDataModule]SyntheticSeq2Seq.setup") == "data"
    assert c("[_TrainingEpochLoop].train_dataloader_next") == "data"
    assert c("run_training_batch") == "training steps"
    assert c("[Strategy]SingleDeviceStrategy.validation_step") == "validation"
    assert c("run_training_epoch") is None


def test_self_time_is_charged_to_the_innermost_categorised_action(trial_time, monkeypatch):
    """Nested actions are never counted twice; an uncategorised child inherits its parent's row."""
    clock = iter([0.0, 1.0, 3.0, 4.0, 4.5, 10.0, 12.0, 13.0])
    monkeypatch.setattr(trial_time.time, "perf_counter", lambda: next(clock))
    p = trial_time.HookTimeline()
    p.start("run_training_epoch")  # 0: uncategorised -> Lightning loop
    p.start("run_training_batch")  # 1
    p.start("[Callback]AlignmentMass.on_before_optimizer_step")  # 3
    p.stop("[Callback]AlignmentMass.on_before_optimizer_step")  # 4
    p.start("[LightningModule]M.some_unlisted_hook")  # 4.5: inherits training steps
    p.stop("[LightningModule]M.some_unlisted_hook")  # 10
    p.stop("run_training_batch")  # 12
    p.stop("run_training_epoch")  # 13
    assert p.by_category["training steps"] == pytest.approx(2.0 + 0.5 + 5.5 + 2.0)
    assert p.by_category["probes, summary, progress"] == pytest.approx(1.0)
    assert p.by_category["Lightning loop"] == pytest.approx(1.0 + 1.0)
    assert sum(p.by_category.values()) == pytest.approx(13.0)


def test_breakdown_rows_sum_to_wall(trial_time):
    timeline = {"created": 101.0, "first": 102.0, "last_stop": 110.0, "inside_actions_s": 8.0,
                "by_category": {"training steps": 5.0, "figures": 2.0}, "top_actions": []}
    out = trial_time.breakdown(timeline, t0=100.0, wall=12.0)
    assert out["rows"]["start-up"] == pytest.approx(2.0) and out["rows"]["exit"] == pytest.approx(2.0)
    assert out["rows"]["Lightning loop"] == pytest.approx(1.0)
    assert sum(out["rows"].values()) == pytest.approx(12.0)


def test_one_tiny_trial_cold_and_warm_through_the_real_cli(tmp_path, monkeypatch):
    """attention_bottleneck's first trial at tiny sizes, started cold and warm: every part measured, the parts
    add up to the wall, a training step's FLOPs counted; the before/after table and the overhead goal render."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.answer_time import answer_goals, answer_table, overhead_s, trials_cold_and_warm
    from benchmarks.report import time_to_answer_table

    trials = trials_cold_and_warm(tmp_path, quick=True)
    assert [t["start"] for t in trials] == ["cold", "warm"]
    for res in trials:
        rows = res["rows"]
        assert all(v >= 0 for v in rows.values()), rows
        assert sum(rows.values()) == pytest.approx(res["wall_s"], rel=0.02)
        for part in ("start-up", "training steps", "validation", "figures", "checkpointing"):
            assert rows[part] > 0, part
        assert res["steps"] and res["steps"] > 0 and res["step_flops"] > 0
        res["overhead_s"], res["utilisation"] = overhead_s(res), 0.01
    assert trials[1]["rows"]["start-up"] < trials[0]["rows"]["start-up"], "warm skips the imports"
    assert "warm" in time_to_answer_table(trials) and "start-up" in time_to_answer_table(trials)
    table = answer_table({"trials": trials, "ceiling_1thread_gflops": 50.0, "findings": None})
    assert "fixed overhead, attention_bottleneck" in table and "utilisation" in table
    (goal,) = answer_goals({"trials": trials})
    assert goal["goal"].startswith("per-trial fixed overhead, warm") and goal["value"] == trials[1]["overhead_s"]


def test_findings_sets_compare_only_the_questions_both_ran(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    import json

    from benchmarks.answer_time import answer_goals, findings_sets

    def result(folder: Path, name: str, span: list[float], cpu: str) -> None:
        (folder / name).mkdir(parents=True)
        (folder / name / "result.json").write_text(json.dumps({
            "name": name, "verdict": "supported", "key_numbers": "", "report": "r.md", "figures": [],
            "trials_span": span, "trials": 3, "cpus": [cpu]}))

    result(tmp_path, "scaling", [0.0, 600.0], "AMD EPYC")
    result(tmp_path, "norm", [600.0, 1500.0], "AMD EPYC")
    result(tmp_path, "heads", [5000.0, 5100.0], "AMD EPYC")  # rerun after the replication set began
    result(tmp_path / "replication", "scaling", [2000.0, 2150.0], "AMD EPYC")
    result(tmp_path / "replication", "heads", [2150.0, 2200.0], "AMD EPYC")
    sets = findings_sets(tmp_path)
    assert sets["questions"] == ["scaling"] and sets["before"]["span_s"] == 600.0 and sets["after"]["span_s"] == 150.0
    (goal,) = answer_goals({"trials": [], "findings": sets})
    assert goal["value"] == 0.25 and goal["met"]
    sets["after"]["cpus"] = ["Intel Xeon"]
    assert answer_goals({"trials": [], "findings": sets}) == [], "no verdict across CPU kinds"


def test_bf16_true_training_rows(monkeypatch):
    """``--precisions bf16-true fp32``: both rows measured with a finite loss; the bf16-true speed-up goal is judged."""
    monkeypatch.syspath_prepend(str(ROOT))
    import torch

    from benchmarks.common import QUICK_SIZES
    from benchmarks.report import training_goals
    from benchmarks.training import bench_training

    rows = bench_training(list(QUICK_SIZES.values()), ["attnlab"], ["bf16-true", "fp32"], {"fp32": 1.0, "bf16": 1.0},
                          rounds=1, steps=1, warmup=0)
    assert [r["precision"] for r in rows] == ["bf16-true", "fp32"]
    assert all(r["tokens_per_s"] > 0 and torch.isfinite(torch.tensor(r["first_loss"])) for r in rows)
    assert any(g["goal"] == "train tiny: bf16-true >= 2.5x our fp32" for g in training_goals(rows))


def test_the_demo_floor_times_each_arm_as_its_trial_builds_it(tmp_path, monkeypatch):
    """One demo arm's training step through the trial's own CLI build; the floor sums step × steps × seeds / jobs
    over the arms and is judged against the demo goal."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.syspath_prepend(str(ROOT))
    import benchmarks.demo_floor as floor
    from benchmarks.answer_time import answer_goals, answer_table

    plan = floor.demo_plan(tmp_path, seeds=1)
    grid = floor.plan_grid(plan)
    assert len(grid) == 3 and {p["model.attention"] for p in grid} == {"none", "additive", "hard"}  # the judged arms
    command = plan.trial(grid[0]).command
    step_s, cpu_s, steps = floor.arm_step_s(command[command.index("fit"):], timed=2, warmup=1)
    assert 0 < step_s < 5 and 0 < cpu_s < 5
    assert steps == 20 * 64  # QUICK_RECURRENT: 20 epochs of 4096 examples in batches of 64

    import torch

    threads_seen: list[int] = []
    monkeypatch.setattr(floor, "arm_step_s", lambda args, **_: (threads_seen.append(torch.get_num_threads()),
                                                                floor.StepTimes(0.01, 0.01, 1000))[1])
    before = torch.get_num_threads()
    res = floor.demo_floor(tmp_path / "f", seeds=2, jobs=2)
    assert threads_seen == [1] * 3 and torch.get_num_threads() == before  # timed as a trial runs, then restored
    assert res["floor_s"] == pytest.approx(3 * 0.01 * 1000 * 2 / 2) and res["threads"] == 1  # as a demo trial
    assert [a["arm"] for a in res["arms"]][0].startswith("attention=") and "seed" not in res["arms"][0]["arm"]
    (goal,) = answer_goals({"trials": [], "demo_floor": res})
    assert goal["value"] == pytest.approx(30.0) and goal["met"]
    assert "floor: training steps alone" in answer_table({"trials": [], "demo_floor": res,
                                                           "ceiling_1thread_gflops": 50.0})
