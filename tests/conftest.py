"""Test-wide settings: no network, no W&B server, quiet Lightning, CPU only."""

import os
import signal
import warnings

os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("JSONARGPARSE_DEPRECATION_WARNINGS", "off")
os.environ["CUDA_VISIBLE_DEVICES"] = ""

# Lightning gives its loggers a StreamHandler bound to sys.stderr as it is at import. Imported here, that is
# pytest's session-long capture; imported first inside a test that uses capsys, it would be that test's
# stream, closed afterwards, and every later Lightning log line would print "--- Logging error ---".
import lightning.pytorch  # noqa: E402, F401
import pytest  # noqa: E402
import torch  # noqa: E402

# Two cores shared by everything: one intra-op thread keeps small-tensor tests fast and predictable.
torch.set_num_threads(1)
# Under pytest-xdist (`-n 2`, as CI runs) two workers already fill the two cores: a subprocess test (a CLI fit, a
# DDP pair) inheriting torch's default of one thread per core would oversubscribe them, which slows small-tensor
# runs many times over. Pin the children to one thread too.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"


# Real data (issue #27): a test that needs a registry package's data skips, naming the install step, where the
# package is absent, through tests/datamodules/real_data.py (its reason starts with REAL_DATA_SKIP). CI installs
# every such package and sets ATTNLAB_REQUIRE_REAL_DATA=1, so a broken install fails there instead of skipping
# silently. ATTNLAB_REAL_DATA_SKIPS=FILE appends each such skip's node id to FILE: CI's fresh-machine pass (with
# ATTNLAB_HIDE_REAL_DATA=1) lists them and reruns exactly those once the data is installed.
from tests.datamodules.real_data import hide_real_data, is_real_data_skip  # noqa: E402

hide_real_data()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not is_real_data_skip(report):
        return
    if os.environ.get("ATTNLAB_REQUIRE_REAL_DATA") == "1":
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"real data required (ATTNLAB_REQUIRE_REAL_DATA=1) but absent: {reason}"
    elif listing := os.environ.get("ATTNLAB_REAL_DATA_SKIPS"):  # CI: the fresh-machine pass names what to rerun
        with open(listing, "a", encoding="utf-8") as out:
            out.write(item.nodeid + "\n")


def pytest_collection_modifyitems(config, items):
    """Longest first: tests marked ``minutes(N)`` run in descending N before the rest (in their order).

    CI runs the suite on two xdist workers; a 15-minute training that starts last keeps one worker busy
    while the other idles. Starting the longest first (LPT scheduling) lets the short ones fill the gaps.
    The marks are rough wall times on 2 cores, from the ``--durations`` report of a CI run.
    """
    def minutes(item) -> float:
        mark = item.get_closest_marker("minutes")
        return float(mark.args[0]) if mark else 0.0

    items.sort(key=minutes, reverse=True)  # stable: unmarked tests keep their collection order


_PREEMPTION_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)


@pytest.fixture(autouse=True)
def _signal_handlers_put_back():
    """Each test ends with the process's preemption-signal handlers as it found them. A test (or the code it
    calls in-process) that leaves its own is named in a warning and its handlers are put back, so no later
    test on the same worker sees them (CI once failed on that order, session 17)."""
    found = {sig: signal.getsignal(sig) for sig in _PREEMPTION_SIGNALS}
    yield
    left = [sig.name for sig, handler in found.items() if signal.getsignal(sig) is not handler]
    for sig, handler in found.items():
        signal.signal(sig, handler)
    if left:
        warnings.warn(f"this test left its own handler for {', '.join(left)} (put back)", stacklevel=1)
