"""W&B's mode as W&B itself decides it (no hand-read netrc): light to import, so a process can ask
before Lightning is loaded."""

from __future__ import annotations

import logging
import os
from typing import Literal

log = logging.getLogger(__name__)


def wandb_mode() -> Literal["online", "offline", "disabled"]:
    """W&B's mode as W&B itself would decide it: an explicit ``WANDB_MODE`` always wins; otherwise
    online exactly when wandb finds credentials for its configured base URL (``WANDB_API_KEY``, an
    identity-token file, the netrc file -- ``NETRC`` or ``~/.netrc`` -- entry for that host, or its
    settings), else offline (sync later with ``wandb sync``)."""
    mode = os.environ.get("WANDB_MODE", "").strip().lower()
    if mode == "disabled":
        return "disabled"
    if mode in ("offline", "dryrun"):
        return "offline"
    if mode in ("online", "run"):
        return "online"
    return "online" if wandb_finds_credentials() else "offline"


def wandb_finds_credentials() -> bool:
    """Whether wandb's own credential lookup finds an API key for its configured base URL (no network)."""
    from wandb.sdk import wandb_setup

    settings = wandb_setup.singleton().settings
    try:
        from wandb.sdk.lib.wbauth import HostUrl
        from wandb.sdk.lib.wbauth.authenticate import _use_system_auth
    except ImportError:  # wandb before the wbauth package: its older single lookup function
        from wandb.sdk.lib import apikey

        return bool(apikey.api_key(settings=settings))
    try:
        found = _use_system_auth(host=HostUrl(settings.base_url), source="attnlab", update_session=False)
    except Exception as err:  # noqa: BLE001 - a malformed key: wandb would refuse it, so log offline
        log.warning("W&B credentials found but unusable (%s): logging offline", err)
        return False
    return found is not None
