"""Evaluations are their own records: a ``test`` never rewrites the fit it evaluates, on W&B or in
summary.json; each evaluation is kept with its options and checkpoint and a report reads one of them.
W&B is offline and read back from the run directory (``wandb_records``)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import lightning as L
import pytest

import attnlab_run.cli as cli
import attnlab_run.command as command
from ablations.reports.report import write_report
from ablations.reports.results import choose_evaluations, load_run, with_evaluations
from attnlab_run.cli import main
from attnlab_run.evaluations import evaluation_id, evaluation_records
from attnlab_run.rundir import Status, read_summary
from attnlab_run.wandb_run import metric_goal
from tests.cli.wandb_records import offline_runs

CONFIG = str(Path(__file__).parents[2] / "ablations" / "configs" / "transformer_reverse.yaml")
TINY = ["--trainer.max_epochs=1", "--trainer.enable_progress_bar=false", "--trainer.log_every_n_steps=1",
        "--model.d_model=16", "--model.d_ff=32", "--model.encoder_layers=1", "--model.decoder_layers=1",
        "--data.train_size=32", "--data.val_size=8", "--data.test_size=8", "--data.batch_size=16"]


@pytest.fixture(autouse=True)
def _wandb_offline(monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.delenv("WANDB_RUN_ID", raising=False)
    monkeypatch.setenv("WANDB_PROJECT", "attnlab-test")
    yield
    os.environ.pop("ATTNLAB_RUN_DIR", None)  # main() exports it for DDP children


def _fit_identity(run: Path) -> tuple[Path, bytes, tuple]:
    (fit,) = [r for r in offline_runs(run) if r["job_type"] == "fit"]
    (log,) = fit["folder"].glob("run-*.wandb")
    return fit["folder"], log.read_bytes(), (fit["id"], fit["name"], fit["job_type"], fit["group"], fit["tags"],
                                             fit["config"])


def test_two_tests_leave_the_fit_as_it_was_and_are_read_separately(tmp_path):
    common = ["--config", CONFIG, f"--run.root={tmp_path}", "--run.name=r", *TINY]
    main(["fit", *common, "--seed_everything=2", "--run.experiment=positions", "--run.test_after_fit=true"])
    run = tmp_path / "positions" / "r"
    folder, log_before, identity_before = _fit_identity(run)
    summary_before = read_summary(run)
    ((in_fit_key, in_fit),) = summary_before.evaluations.items()  # the fit's own test: in its W&B run and metrics
    assert in_fit["in_fit"] and in_fit["wandb_run_id"] == identity_before[0]
    assert in_fit["metrics"] == {k: v for k, v in summary_before.metrics.items() if k.startswith("test/")}
    main(["test", *common, "--run.experiment=positions", "--ckpt_path=best", "--decode.strategy=beam",
          "--data.test_size=16"])
    main(["test", *common, "--run.experiment=positions", "--ckpt_path=best"])

    folder_after, log_after, identity_after = _fit_identity(run)
    assert folder_after == folder and log_after == log_before, "the fit's W&B run is byte-for-byte unchanged"
    assert identity_after == identity_before and identity_before[1:5] == ("r", "fit", "positions", ["seed=2"])
    summary = read_summary(run)
    assert (summary.seed, summary.status, summary.wandb_run_id, summary.metrics) == (
        2, Status.FINISHED, summary_before.wandb_run_id, summary_before.metrics)

    assert set(summary.evaluations) == {in_fit_key}, "a test writes its own record, not the fit's summary"
    records = evaluation_records(run)
    evals = {r["config"]["eval.id"]: r for r in offline_runs(run) if r["job_type"] == "eval"}
    assert set(evals) == set(records) and len(evals) == 2, "the same greedy test replaced the fit's"
    for key, record in records.items():
        wb = evals[key]
        assert (wb["group"], wb["tags"], wb["config"]["eval.fit_run"]) == ("positions", ["seed=2"], identity_before[0])
        assert wb["config"]["seed_everything"] == 2, "the config's seed is the fit's, as its tags say"
        assert wb["config"]["eval.checkpoint"] == record["checkpoint"] == "checkpoints/best.ckpt"
        assert wb["config"]["decode.strategy"] == record["options"]["decode.strategy"]
        assert wb["summary"]["test/exact_match"] == pytest.approx(record["metrics"]["test/exact_match"])
        assert key == evaluation_id("test", record["options"], record["checkpoint"])
    by_strategy = {e["options"]["decode.strategy"]: (k, e) for k, e in records.items()}
    assert by_strategy["beam"][1]["options"]["data.test_size"] == 16
    assert by_strategy["greedy"][1]["options"]["data.test_size"] == 8

    default = load_run(run)  # the fit's own decode settings (greedy)
    beam = load_run(run, evaluation={"decode.strategy": "beam"})
    assert default.evaluations == {"test": by_strategy["greedy"][0]}
    assert beam.evaluations == {"test": by_strategy["beam"][0]}
    assert default.metrics["test/loss"] == by_strategy["greedy"][1]["metrics"]["test/loss"]
    assert beam.metrics["test/loss"] == by_strategy["beam"][1]["metrics"]["test/loss"]
    assert {k for k in default.metrics if k.startswith("test/")} == set(by_strategy["greedy"][1]["metrics"])
    assert default.metrics["val/loss"] == summary.metrics["val/loss"]
    report = write_report("positions", [beam], tmp_path / "report").path.read_text()
    assert f"| r | finished | 2 | test {by_strategy['beam'][0]} |" in report  # the report names what it read


def test_the_wandb_summary_keeps_the_best_validation_and_its_step(tmp_path):
    # val/loss monitored as if higher were better: it falls while training, so its best is an early one
    main(["fit", "--config", CONFIG, f"--run.root={tmp_path}", "--run.name=b", *TINY, "--trainer.max_epochs=3",
          "--run.monitor=val/loss", "--run.mode=max", "--trainer.num_sanity_val_steps=0"])
    run = tmp_path / "transformer_reverse" / "b"
    (fit,) = offline_runs(run)
    rows = [(r["trainer/global_step"], r["val/loss"], r["val/token_acc"]) for r in fit["history"] if "val/loss" in r]
    assert len(rows) == 3
    best_loss = max(rows, key=lambda r: r[1])
    assert best_loss[1] > rows[-1][1] + 1e-3, f"val/loss did not fall: {rows}"
    summary = fit["summary"]
    # the plain key is a number (the last value, as summary.json's metrics), which sweeps and panels can read
    assert summary["val/loss"] == pytest.approx(rows[-1][1])
    assert summary["best/val/loss"] == pytest.approx(best_loss[1]) and summary["best_step/val/loss"] == best_loss[0]
    best_acc = max(rows, key=lambda r: r[2])  # not monitored: higher is better by its name
    assert summary["val/token_acc"] == pytest.approx(rows[-1][2])
    assert summary["best/val/token_acc"] == pytest.approx(best_acc[2])
    assert read_summary(run).best["score"] == pytest.approx(best_loss[1])


def test_config_yaml_lands_in_the_run_with_its_experiment_and_a_smoke_run_blocks_nothing(tmp_path):
    csv = ["--trainer.logger=lightning.pytorch.loggers.CSVLogger", f"--trainer.logger.save_dir={tmp_path / 'csv'}"]
    main(["fit", "--config", CONFIG, f"--run.root={tmp_path}", "--run.name=s", *TINY, *csv,
          "--trainer.fast_dev_run=true"])
    run = tmp_path / "transformer_reverse" / "s"
    assert read_summary(run).status is Status.SMOKE
    config = run / "config.yaml"
    assert config.is_file(), "config.yaml goes to the run directory whatever logger comes with it"
    saved = (tmp_path / "saved.yaml")
    saved.write_text(config.read_text())
    main(["fit", "--config", str(saved), f"--run.root={tmp_path}", "--run.name=s", "--trainer.fast_dev_run=false"])
    assert read_summary(run).status is Status.FINISHED, "a smoke run never blocks a real fit of its name"
    assert [p.name for p in tmp_path.iterdir() if p.name not in ("csv", "saved.yaml")] == ["transformer_reverse"]


def test_choosing_an_evaluation_never_mixes_two():
    evaluations = {
        "test-a": {"subcommand": "test", "options": {"decode.strategy": "greedy"}, "ended": 1.0,
                   "metrics": {"test/bleu": 0.1, "test/by_len/1": 0.2}},
        "test-b": {"subcommand": "test", "options": {"decode.strategy": "beam"}, "ended": 3.0,
                   "metrics": {"test/bleu": 0.5}},
        "test-c": {"subcommand": "test", "options": {"decode.strategy": "greedy"}, "ended": 2.0,
                   "metrics": {"test/bleu": 0.3}},
        "validate-d": {"subcommand": "validate", "options": {"decode.strategy": "beam"}, "ended": 4.0,
                       "metrics": {"val/bleu": 0.9}},
    }
    params = {"decode.strategy": "greedy"}
    assert choose_evaluations(evaluations, params) == {"test": "test-c", "validate": "validate-d"}, (
        "of each kind the latest with the run's decode settings, or the only one")
    assert choose_evaluations(evaluations, params, {"decode.strategy": "beam"}) == {
        "test": "test-b", "validate": "validate-d"}
    assert choose_evaluations(evaluations, params, "test-a") == {"test": "test-a"}
    assert choose_evaluations({"test-b": evaluations["test-b"]}, params) == {"test": "test-b"}, "the only one"
    fit = {"val/bleu": 0.4, "test/bleu": 0.0, "test/by_len/1": 0.0}
    assert with_evaluations(fit, {"test": evaluations["test-c"]}) == {"val/bleu": 0.4, "test/bleu": 0.3}


def test_metric_direction_and_evaluation_id():
    assert [metric_goal(k) for k in ("val/loss", "val/mse", "val/exposure_gap", "val/exact_match", "val/cider_d")] \
        == ["min", "min", "min", "max", "max"]
    options = {"decode.strategy": "beam", "data.test_size": 16}
    assert evaluation_id("test", options, "checkpoints/best.ckpt") == evaluation_id(
        "test", dict(reversed(options.items())), "checkpoints/best.ckpt")
    assert evaluation_id("test", options, "checkpoints/best.ckpt") != evaluation_id(
        "test", {**options, "data.test_size": 8}, "checkpoints/best.ckpt")
    assert evaluation_id("test", options, "checkpoints/best.ckpt").startswith("test-")


class _SigtermAt(L.Callback):
    """Sends SIGTERM to this very process after optimizer step ``step`` (a scheduler's preemption)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if trainer.global_step == self.step:
            os.kill(os.getpid(), signal.SIGTERM)


def test_a_preempted_fit_resumed_offline_is_one_complete_wandb_run(tmp_path, monkeypatch):
    """What ``wandb sync`` uploads for a preempted fit: every attempt's folder carries the fit's one id
    and identity (wandb >= 0.2x syncs the folders of one run in order of start time, as a resumed
    run: ``wandb sync --help``, wandb/wandb#10708), the resumed attempt continues the step count
    instead of replaying it, the folders together hold every step, and the last summary's best
    covers both attempts. W&B's own row numbers (``_step``) continue too: in upload order they
    increase strictly across the two folders (W&B replaces or drops a row whose ``_step`` is not
    beyond the last, wandb/wandb#3841, #5865), and every validation row of both attempts is there."""
    common = ["--config", CONFIG, f"--run.root={tmp_path}", "--run.name=p", *TINY, "--data.train_size=64",
              "--trainer.max_epochs=2", "--data.batch_size=16"]  # 4 steps per epoch, 8 planned
    original = command._fault_callbacks
    monkeypatch.setattr(command, "_fault_callbacks", lambda run_dir, opts: [*original(run_dir, opts), _SigtermAt(6)])
    with pytest.raises(SystemExit):
        main(["fit", *common])
    cli.finish_wandb()  # the preempted process ends here
    monkeypatch.setattr(command, "_fault_callbacks", original)
    main(["fit", *common, "--ckpt_path=last"])
    run = tmp_path / "transformer_reverse" / "p"
    first, second = offline_runs(run)
    assert first["id"] == second["id"] == read_summary(run).wandb_run_id
    assert (first["job_type"], first["name"], first["tags"]) == (second["job_type"], second["name"], second["tags"])
    steps = [sorted({int(r["trainer/global_step"]) for r in f["history"] if "trainer/global_step" in r})
             for f in (first, second)]
    assert steps[0][0] == 0 and steps[1][0] >= 6 > steps[0][-1] - 1, steps
    assert set(range(8)) <= set(steps[0]) | set(steps[1]), "every step reaches W&B once the folders are synced"
    acc = [(r["val/token_acc"], r["trainer/global_step"]) for f in (first, second) for r in f["history"]
           if "val/token_acc" in r]
    best = max(v for v, _ in acc)
    assert len(acc) == 2 and second["summary"]["best/val/token_acc"] == pytest.approx(best)
    assert second["summary"]["best_step/val/token_acc"] == min(s for v, s in acc if v == best), "first reached"
    assert read_summary(run).status is Status.FINISHED
    _assert_one_history(run, first, second)


def _assert_one_history(run: Path, first: dict[str, Any], second: dict[str, Any]) -> None:
    """The two folders of a preempted fit upload as one history: same run, in start-time order, its
    ``_step`` strictly increasing from the first folder into the second, and every validation row that
    ``metrics.csv`` (the CSV logger's independent record) holds present in one of them."""
    import csv

    assert (first["project"], first["group"]) == (second["project"], second["group"])
    assert first["resume"] and second["resume"], "resume='allow': the run record a sync reads"
    assert first["start_time"] < second["start_time"], "wandb sync uploads the preempted attempt first"
    w_steps = [[r["_step"] for r in f["history"]] for f in (first, second)]
    uploaded = w_steps[0] + w_steps[1]
    assert all(a < b for a, b in zip(uploaded[:-1], uploaded[1:], strict=True)), w_steps
    assert w_steps[1][0] == w_steps[0][-1] + 1, "the resumed rows start right after the preempted ones"
    with (run / "metrics.csv").open() as fh:
        csv_val = sorted(int(r["step"]) for r in csv.DictReader(fh) if r.get("val/loss"))
    wb_val = sorted(int(r["trainer/global_step"]) for f in (first, second) for r in f["history"] if "val/loss" in r)
    assert wb_val == csv_val and len(csv_val) == 2, (wb_val, csv_val)
    assert all(any("val/loss" in r for r in f["history"]) for f in (first, second)), "each attempt validated"


class _FakeRun:
    """What the logger uses of a W&B run: ``step`` (the next row's) and ``log`` with W&B's step rules."""

    def __init__(self, step: int) -> None:
        self.step, self.logged = step, []

    def log(self, data: dict, step: int | None = None, commit: bool | None = None) -> None:
        self.logged.append((data, step, commit))
        if step is not None and step > self.step:
            self.step = step
        if (step is None and commit is None) or commit:
            self.step += 1


@pytest.mark.parametrize(("current", "stored", "stage", "moved"),
                         [(0, 12, "fit", True), (20, 12, "fit", False), (0, 12, "test", False)])
def test_the_history_step_moves_only_forwards_and_only_for_a_resumed_fit(tmp_path, current, stored, stage, moved):
    """An online resume already starts after the server's last step: a stored step below it is not
    applied (W&B would drop the row). An evaluation restoring a fit's checkpoint keeps its own steps."""
    from types import SimpleNamespace

    from attnlab_run.wandb_run import HistoryStep, QuietWandbLogger

    logger = QuietWandbLogger(save_dir=str(tmp_path), project="p", mode="disabled")
    logger._experiment = run = _FakeRun(current)
    callback = HistoryStep()
    callback.setup(SimpleNamespace(loggers=[logger]), None, stage)
    callback.load_state_dict({"wandb_step": stored})
    logger.log_metrics({"train/loss": 1.0}, step=3)
    logger.log_metrics({"train/loss": 0.5}, step=4)
    assert (run.logged[0] == ({}, stored, False)) is moved and len(run.logged) == 2 + moved
    assert [(d["train/loss"], s) for d, s, _ in run.logged[moved:]] == [(1.0, None), (0.5, None)]
    assert callback.state_dict() == {"wandb_step": (stored if moved else current) + 2}


def test_a_wandb_that_does_not_say_its_step_costs_no_checkpoint_and_no_row(tmp_path):
    from types import SimpleNamespace

    from attnlab_run.wandb_run import HistoryStep, QuietWandbLogger

    class Silent(_FakeRun):
        @property
        def step(self) -> int:
            raise TimeoutError("no answer")  # what Run.step raises after 30 s without one

        @step.setter
        def step(self, value: int) -> None:
            pass

        def log(self, data: dict, step: int | None = None, commit: bool | None = None) -> None:
            self.logged.append((data, step, commit))

    logger = QuietWandbLogger(save_dir=str(tmp_path), project="p", mode="disabled")
    logger._experiment = run = Silent(0)
    callback = HistoryStep()
    callback.setup(SimpleNamespace(loggers=[logger]), None, "fit")
    assert callback.state_dict() == {}, "the checkpoint is saved without the step"
    callback.load_state_dict({"wandb_step": 12})
    logger.log_metrics({"train/loss": 1.0}, step=3)
    assert [(d["train/loss"], s) for d, s, _ in run.logged] == [(1.0, None)], "the row is logged, unmoved"


@pytest.mark.parametrize("mode", ["online", "offline"])
def test_log_model_logs_the_best_checkpoint_through_lightning_online_and_offline(tmp_path, monkeypatch, mode):
    from attnlab_run.recording import RunOptions, build_loggers
    from attnlab_run.wandb_run import QuietWandbLogger, WandbIdentity

    monkeypatch.setenv("WANDB_MODE", mode)  # nothing below opens the run: no network is touched
    identity = WandbIdentity(group="g", job_type="fit", name="n")
    for log_model, subcommand in ((True, "fit"), ("all", "fit"), (False, "fit"), (True, "test")):
        opts = RunOptions(log_model=log_model)
        (wb,) = [lg for lg in build_loggers(tmp_path, opts, subcommand=subcommand, identity=identity,
                                            evaluation="test-0" if subcommand == "test" else None)
                 if isinstance(lg, QuietWandbLogger)]
        expected = log_model if subcommand == "fit" else False  # offline: `wandb sync` uploads it later
        assert wb._log_model == expected, (mode, log_model, subcommand)


def test_an_online_record_reads_the_last_value_beside_a_kept_best():
    from ablations.reports.results import _last_values

    summary = {"val/acc": {"max": 0.9, "last": 0.5}, "val/loss": {"min": 0.1}, "test/acc": 0.7}
    assert _last_values(summary) == {"val/acc": 0.5, "val/loss": {"min": 0.1}, "test/acc": 0.7}


def test_a_run_is_named_by_its_fits_seed(tmp_path):
    """An evaluation is tagged with the fit's seed; a fresh fit in a directory that holds an earlier attempt's summary
    (a smoke run, a failed fit) with its own seed; an unseeded fit has none. (A resumed fit's command carries the run's
    seed already: ``continuation.run_seed``.)"""
    from attnlab_run.rundir import Summary, write_summary
    from attnlab_run.wandb_run import wandb_identity

    assert wandb_identity(tmp_path, subcommand="fit", arm={}, seed=False).tags == ()
    assert wandb_identity(tmp_path, subcommand="fit", arm={"model.norm": "pre"}, seed=3).tags == ("model.norm=pre",
                                                                                                 "seed=3")
    write_summary(tmp_path, Summary(seed=2))
    assert wandb_identity(tmp_path, subcommand="test", arm={}, seed=1).tags == ("seed=2",)
    assert wandb_identity(tmp_path, subcommand="fit", arm={}, seed=3001).tags == ("seed=3001",)
