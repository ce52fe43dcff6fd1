"""Out-of-domain tests of a question (``ablations.reports.domains``): the commands, resumability, which evaluation
the report reads, and the table."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ablations.catalog.questions_real import REAL_QUESTIONS
from ablations.reports.domains import domain_table, domain_test_command, pending, run_domain_tests
from ablations.reports.results import choose_evaluations, group_arms, load_experiment

FIT = ["/usr/bin/env", "python", "attnlab/cli.py", "fit", "--config", "ablations/configs/mr_lstm_attention.yaml",
       "--run.test_after_fit=true", "--model.pooling=mean", "--seed_everything=1", "--run.name=pooling=mean,seed=1"]


def _evaluation(domain: str | None, acc: float, ended: float) -> dict:
    return {"subcommand": "test", "ended": ended, "options": {"data.test_domain": domain, "decode.strategy": "greedy"},
            "metrics": {"test/acc": acc}}


def _run(root: Path, name: str, *, pooling: str, status: str = "finished", evaluations: dict | None = None) -> Path:
    run = root / "sentiment_pooling_mr" / name
    run.mkdir(parents=True)
    command = [a.replace("mean", pooling) for a in FIT]
    (run / "trial.json").write_text(json.dumps({"status": status, "command": command,
                                                "params": {"model.pooling": pooling}}))
    (run / "config.yaml").write_text(f"model:\n  pooling: {pooling}\ndata:\n  test_domain: null\n"
                                     "decode:\n  strategy: greedy\n")
    (run / "summary.json").write_text(json.dumps({"status": status, "metrics": {"val/acc": 0.7},
                                                  "evaluations": evaluations or {}}))
    return run


def test_the_test_command_is_the_trials_own_fit_command_on_the_best_checkpoint():
    argv = domain_test_command(FIT, "tweets")
    assert argv[:4] == ["/usr/bin/env", "python", "attnlab/cli.py", "test"]
    assert "--run.test_after_fit=true" not in argv and "--run.name=pooling=mean,seed=1" in argv
    assert argv[-2:] == ["--ckpt_path=best", "--data.test_domain=tweets"]
    with pytest.raises(ValueError, match="not a fit command"):
        domain_test_command(["python", "attnlab/cli.py", "validate"], "nyt")


def test_pending_skips_unfinished_trials_and_domains_already_tested(tmp_path):
    done = {"test-a": _evaluation(None, 0.78, 1.0), "test-b": _evaluation("tweets", 0.53, 2.0)}
    _run(tmp_path, "pooling=mean,seed=1", pooling="mean", evaluations=done)
    _run(tmp_path, "pooling=max,seed=1", pooling="max", status="failed")
    todo = pending(tmp_path / "sentiment_pooling_mr", ("tweets", "nyt"))
    assert [(run.name, domain) for run, domain, _ in todo] == [("pooling=mean,seed=1", "nyt")]
    assert pending(tmp_path / "absent", ("tweets",)) == []


def test_an_out_of_domain_test_never_stands_for_the_runs_own_test():
    evaluations = {"test-in": _evaluation(None, 0.78, 1.0), "test-ood": _evaluation("tweets", 0.53, 2.0)}
    params = {"data.test_domain": None, "decode.strategy": "greedy"}
    assert choose_evaluations(evaluations, params) == {"test": "test-in"}, "the later OOD test was read as the test"
    assert choose_evaluations(evaluations, params, {"data.test_domain": "tweets"}) == {"test": "test-ood"}


def test_the_table_has_each_arm_in_domain_and_per_domain(tmp_path):
    for seed, (acc, tweets) in enumerate([(0.78, 0.50), (0.76, 0.56)], start=1):
        _run(tmp_path, f"pooling=mean,seed={seed}", pooling="mean",
             evaluations={"test-in": _evaluation(None, acc, 1.0), "test-t": _evaluation("tweets", tweets, 2.0)})
    runs = load_experiment(tmp_path / "sentiment_pooling_mr")
    arms = group_arms(runs, ("model.pooling",))
    table = domain_table(arms, list(arms), ("tweets", "nyt"), metric="test/acc", label=lambda a: "/".join(a))
    row = table.splitlines()[-1]
    assert row.startswith("| mean | 0.770 ± 0.014 (n=2) | 0.530 ± 0.042 (n=2) | — |"), table


def test_run_domain_tests_runs_each_pending_test_and_counts_failures(tmp_path):
    script = ("import sys, pathlib; d = sys.argv[-1].split('=')[1]; "
              "pathlib.Path(sys.argv[1], d).write_text(' '.join(sys.argv)); sys.exit(3 if d == 'nyt' else 0)")
    run = _run(tmp_path, "pooling=mean,seed=1", pooling="mean")
    trial = json.loads((run / "trial.json").read_text())
    trial["command"] = [sys.executable, "-c", script, str(tmp_path), "fit", "--seed_everything=1"]
    (run / "trial.json").write_text(json.dumps(trial))
    lines: list[str] = []
    failed = run_domain_tests(tmp_path / "sentiment_pooling_mr", ("tweets", "nyt"), cwd=tmp_path, env=None, jobs=2,
                              echo=lines.append)
    assert failed == 1
    assert (tmp_path / "tweets").read_text().endswith("test --seed_everything=1 --ckpt_path=best "
                                                      "--data.test_domain=tweets")
    assert (run / "test_nyt.log").exists() and any("failed (exit 3" in line for line in lines)


def test_one_runs_domains_are_tested_one_after_another_and_runs_side_by_side(tmp_path):
    """Each fake test holds ``<run>.busy`` for a while (created exclusively, as the run directory's owner lock
    refuses a second live owner); two at once on one run exit 5. With ``jobs=2`` the two runs overlap."""
    script = ("import os, sys, time, pathlib; run = pathlib.Path(sys.argv[1]); busy = run.with_suffix('.busy')\n"
              "try: fd = os.open(busy, os.O_CREAT | os.O_EXCL)\nexcept FileExistsError: sys.exit(5)\n"
              "(run.parent / 'started').open('a').write(run.name + '\\n'); time.sleep(0.4); os.close(fd); "
              "busy.unlink()")
    for seed in (1, 2):
        run = _run(tmp_path, f"pooling=mean,seed={seed}", pooling="mean")
        trial = json.loads((run / "trial.json").read_text())
        trial["command"] = [sys.executable, "-c", script, str(run), "fit"]
        (run / "trial.json").write_text(json.dumps(trial))
    lines: list[str] = []
    failed = run_domain_tests(tmp_path / "sentiment_pooling_mr", ("tweets", "nyt", "amazon"), cwd=tmp_path, env=None,
                              jobs=2, echo=lines.append)
    assert failed == 0, lines
    started = (tmp_path / "sentiment_pooling_mr" / "started").read_text().split()
    assert len(started) == 6 and set(started[:2]) == {"pooling=mean,seed=1", "pooling=mean,seed=2"}


def test_the_movie_review_question_tests_the_three_other_domains():
    assert REAL_QUESTIONS["sentiment_pooling_mr"].test_domains == ("tweets", "nyt", "amazon")
