"""``attnlab dashboard`` as a command: a dry run prints every panel with its keys (every question, real data
included), saving without credentials or without an entity is one line and exit 2, and with credentials the
question's runs name the probe buckets and the view is saved (W&B's API and the save replaced: no network)."""

from __future__ import annotations

from typing import Any

import pytest

from ablations.catalog.questions import QUESTIONS
from ablations.catalog.questions_real import REAL_QUESTIONS

pytest.importorskip("wandb_workspaces")

from ablations.reports.dashboard import MEDIA_KEYS, STEP, dashboard_main  # noqa: E402 - after the importorskip


def test_dry_run_prints_every_panel_with_its_keys(capsys, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    assert dashboard_main(["positions", "--entity", "someone", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "summary:test/exact_match" in out and "config:model.positions.value" in out
    assert f"history:{STEP}" in out and "media:attention/cross/ex0" in out
    assert "run:group = 'positions'" in out


@pytest.mark.parametrize("name", sorted(REAL_QUESTIONS))
def test_dry_run_of_a_real_data_question(name, capsys, monkeypatch):
    """Every question on real data is a choice of ``attnlab dashboard``; its view filters on its own group and
    reads its metric and axes (its keys are checked against a real run by the slow cases above)."""
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    question = REAL_QUESTIONS[name]
    assert dashboard_main([name, "--entity", "someone", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"run:group = {name!r}" in out and f"summary:{question.metric}" in out
    assert all(f"config:{axis}.value" in out for axis in question.axes)
    assert set(MEDIA_KEYS) <= {*QUESTIONS, *REAL_QUESTIONS}, "a media entry names no question"


def test_saving_without_credentials_is_one_line_and_exit_2(capsys, monkeypatch, tmp_path):
    for var in ("WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE", "WANDB_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    assert dashboard_main(["positions", "--entity", "someone"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "wandb login" in lines[0] and "WANDB_API_KEY" in lines[0], captured.err
    assert captured.out == ""


def test_without_entity_is_a_usage_error(capsys):
    from ablations.commands import dashboard_main as command

    with pytest.raises(SystemExit) as exit_info:
        command(["positions"])
    assert exit_info.value.code == 2 and "--entity" in capsys.readouterr().err


def test_saving_reads_the_bucket_keys_from_the_runs_and_saves(capsys, monkeypatch):
    """With credentials, the question's runs on W&B name the buckets of a ``test/`` prefix probe (bars over
    them), and the view is saved (W&B's API and the save replaced: no network here)."""
    import wandb
    import wandb_workspaces.workspaces as ws

    buckets = ["test/acc_by_len/len_001_005", "test/acc_by_len/len_016_020"]
    calls: dict[str, Any] = {}

    class FakeApi:
        def runs(self, path, filters=None, per_page=None):
            calls.update(path=path, filters=filters)
            return [type("Run", (), {"summary": {k: 0.5 for k in [*buckets, "test/exact_match"]}})()]

    def fake_save(self):
        calls["saved"] = self
        return type("Saved", (), {"url": "https://wandb.ai/someone/attnlab?nw=x"})()

    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    monkeypatch.setattr(wandb, "Api", FakeApi)
    monkeypatch.setattr(ws.Workspace, "save", fake_save)
    assert dashboard_main(["positions", "--entity", "someone"]) == 0
    assert calls["path"] == "someone/attnlab" and calls["filters"] == {"group": "positions", "jobType": "fit"}
    bars = [p for s in calls["saved"].sections for p in s.panels if getattr(p, "title", "") == "test/acc_by_len/"]
    assert [type(p).__name__ for p in bars] == ["BarPlot"] and bars[0].metrics == buckets
    assert "saved: https://wandb.ai/someone/attnlab?nw=x" in capsys.readouterr().out
