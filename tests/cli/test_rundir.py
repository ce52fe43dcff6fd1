"""The run directory's owner: typed summary with a status enum, unknown keys kept, atomic write."""

from __future__ import annotations

import json

from attnlab_run.rundir import DONE, RunPaths, Status, Summary, read_summary, write_summary


def test_summary_round_trip_keeps_unknown_keys(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps(
        {"status": "diverged", "metrics": {"val/loss": 1.5, "note": "x"}, "global_step": 7, "argv": ["fit"]}))
    summary = read_summary(tmp_path)
    assert summary.status is Status.DIVERGED and summary.done and summary.global_step == 7
    assert summary.metrics == {"val/loss": 1.5}, "only scalar metrics"
    assert summary.extra == {"argv": ["fit"]}
    summary.status = Status.FINISHED
    write_summary(tmp_path, summary)
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["status"] == "finished" and data["argv"] == ["fit"] and "error" not in data
    assert not list(tmp_path.glob("*.tmp"))


def test_missing_or_torn_summary_reads_as_empty(tmp_path):
    assert read_summary(tmp_path) == Summary()
    (tmp_path / "summary.json").write_text('{"status": "fini')
    assert read_summary(tmp_path).status is None
    (tmp_path / "summary.json").write_text('{"status": "sideways"}')
    assert read_summary(tmp_path).status is None and not read_summary(tmp_path).done


def test_paths_and_done_states(tmp_path):
    paths = RunPaths(tmp_path)
    assert paths.checkpoint("best") == tmp_path / "checkpoints" / "best.ckpt"
    assert paths.predictions == tmp_path / "predict" / "predictions.jsonl"
    assert DONE == {Status.FINISHED, Status.DIVERGED}
    assert {s.value for s in Status} == {"running", "finished", "diverged", "failed", "interrupted", "preempted",
                                         "smoke"}
    assert Status.SMOKE not in DONE, "a fast_dev_run smoke check never blocks a real fit"
    assert paths.evaluation_log("test-1a2b3c4d") == tmp_path / "test" / "test-1a2b3c4d"


def test_evaluations_round_trip_beside_the_fit_fields(tmp_path):
    from attnlab_run.evaluations import Evaluation, evaluation_records, record_evaluation

    write_summary(tmp_path, Summary(status=Status.FINISHED, seed=2, metrics={"val/loss": 1.0}))
    for key, ended in (("test-b", 2.0), ("test-a", 1.0)):
        record_evaluation(tmp_path, key, Evaluation(subcommand="test", options={"decode.strategy": key},
                                                   checkpoint="checkpoints/best.ckpt", metrics={"test/bleu": ended},
                                                   ended=ended, seed=1))
    summary = read_summary(tmp_path)
    assert (summary.status, summary.seed, summary.metrics) == (Status.FINISHED, 2, {"val/loss": 1.0})
    assert list(evaluation_records(tmp_path)) == ["test-a", "test-b"], "oldest first"
    assert evaluation_records(tmp_path)["test-b"]["metrics"] == {"test/bleu": 2.0}
    assert "evaluations" not in Summary().to_dict()


def test_an_unfinished_evaluation_is_one_bounded_note():
    from attnlab_run.evaluations import evaluation_notes

    error = "RuntimeError: " + "x|y\n" * 60
    notes = evaluation_notes({"test-a": {"subcommand": "test", "status": "failed", "error": error},
                              "test-b": {"subcommand": "test", "status": "running"},
                              "test-c": {"subcommand": "test", "status": "finished"}})
    assert notes[1] == "test test-b stopped (no end recorded)" and len(notes) == 2
    assert notes[0].startswith("test test-a failed (RuntimeError: x/y x/y") and "\n" not in notes[0]
    assert "more characters)" in notes[0] and "|" not in notes[0] and len(notes[0]) < 160
