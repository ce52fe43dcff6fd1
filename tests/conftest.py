"""Test-wide settings: no network, no W&B server, quiet Lightning, CPU only."""

import os
import re

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


# Real data (issue #27): a test that needs a registry package's data skips, naming the install step, where the
# package is absent. CI installs every such package and sets ATTNLAB_REQUIRE_REAL_DATA=1, so a broken install
# fails there instead of skipping silently.
_REAL_DATA_SKIP = re.compile(r"pysword|SWORD|sword-text|vaderSentiment|mlxtend|MR snippets")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("ATTNLAB_REQUIRE_REAL_DATA") == "1":
        reason = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if _REAL_DATA_SKIP.search(reason):
            report.outcome = "failed"
            report.longrepr = f"real data required (ATTNLAB_REQUIRE_REAL_DATA=1) but absent: {reason}"
