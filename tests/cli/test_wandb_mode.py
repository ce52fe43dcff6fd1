"""W&B's mode is decided by wandb itself, one rule per test, with a fake home and no network:
an explicit WANDB_MODE wins; otherwise online exactly when wandb finds credentials for its
configured base URL (API key, netrc entry for that host -- also at a NETRC path); else offline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
KEY = "a" * 40  # wandb's API key format (40 characters)


def _mode(home: Path, code: str = "from attnlab_run.wandb_mode import wandb_mode; print(wandb_mode())",
          **env: str) -> str:
    """``wandb_mode()`` (or ``code``) in a fresh process (wandb caches its settings per process) with only ``env``
    set."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_") and k != "NETRC"}
    base.update(HOME=str(home), PYTHONPATH=str(REPO), XDG_CONFIG_HOME=str(home / ".config"), **env)
    proc = subprocess.run([sys.executable, "-c", code],
                          cwd=home, env=base, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def _netrc(path: Path, host: str) -> Path:
    path.write_text(f"machine {host}\n  login user\n  password {KEY}\n")
    path.chmod(0o600)
    return path


@pytest.mark.parametrize("explicit, expected", [("offline", "offline"), ("dryrun", "offline"),
                                                ("disabled", "disabled"), ("online", "online")])
def test_explicit_mode_wins(home, explicit, expected):
    _netrc(home / ".netrc", "api.wandb.ai")
    assert _mode(home, WANDB_MODE=explicit, WANDB_API_KEY=KEY) == expected
    assert _mode(home, WANDB_MODE=explicit) == expected


def test_no_credentials_is_offline(home):
    assert _mode(home) == "offline"


def test_api_key_is_online(home):
    assert _mode(home, WANDB_API_KEY=KEY) == "online"


def test_netrc_entry_for_the_configured_base_url(home):
    _netrc(home / ".netrc", "wandb.example.org")
    assert _mode(home, WANDB_BASE_URL="https://wandb.example.org") == "online"
    assert _mode(home, WANDB_BASE_URL="https://other.example.org") == "offline", "an entry for another host"


def test_netrc_entry_for_the_cloud_does_not_cover_a_self_hosted_server(home):
    _netrc(home / ".netrc", "api.wandb.ai")
    assert _mode(home, WANDB_BASE_URL="https://wandb.example.org") == "offline"
    assert _mode(home, WANDB_BASE_URL="https://api.wandb.ai") == "online"


def test_netrc_path_from_the_environment(home, tmp_path):
    elsewhere = _netrc(tmp_path / "custom-netrc", "wandb.example.org")
    assert _mode(home, WANDB_BASE_URL="https://wandb.example.org") == "offline"
    assert _mode(home, WANDB_BASE_URL="https://wandb.example.org", NETRC=str(elsewhere)) == "online"


def test_without_credentials_a_fit_logs_offline(home, tmp_path):
    """The default a new user gets (no WANDB_MODE, no key): the fit runs and writes an offline W&B run;
    wandb must not try to log in (its settings exist before Lightning's logger would set the mode)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_") and k != "NETRC"}
    base.update(HOME=str(home), PYTHONPATH=str(REPO), XDG_CONFIG_HOME=str(home / ".config"))
    tiny = ["--model.d_model=16", "--model.d_ff=32", "--model.encoder_layers=1", "--model.decoder_layers=1",
            "--data.train_size=32", "--data.val_size=8", "--data.test_size=8", "--data.batch_size=16",
            "--trainer.max_epochs=1", "--trainer.enable_progress_bar=false"]
    proc = subprocess.run([sys.executable, "-m", "attnlab", "fit", "--config",
                           str(REPO / "ablations/configs/transformer_reverse.yaml"), f"--run.root={tmp_path}",
                           "--run.name=r", *tiny], cwd=home, env=base, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert list((tmp_path / "transformer_reverse" / "r").glob("wandb/offline-run-*")), "an offline W&B run"


def test_the_dashboard_asks_wandb_for_credentials_as_the_mode_does(home, tmp_path):
    """``attnlab dashboard`` refuses to save without credentials by the same lookup (no netrc read by hand)."""
    ask = "from ablations.reports.dashboard import credentials_problem; print(credentials_problem() is None)"
    elsewhere = _netrc(tmp_path / "custom-netrc", "wandb.example.org")
    assert _mode(home, ask, NETRC=str(elsewhere), WANDB_BASE_URL="https://wandb.example.org") == "True"
    assert _mode(home, ask, NETRC=str(elsewhere)) == "False", "a self-hosted entry does not cover the cloud"
    assert _mode(home, ask, WANDB_API_KEY=KEY) == "True"
