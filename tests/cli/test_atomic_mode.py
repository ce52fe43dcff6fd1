"""``atomic_write`` leaves a file with the permissions an ordinary write would: a new file gets 0666 less the
umask (``summary.json`` readable by the group on a shared filesystem), a replaced one keeps its own mode. The
temporary file it writes first is private (0600), which ``os.replace`` would otherwise carry over."""

import os
import stat

from attnlab_core.atomic import atomic_write


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_gets_the_umask_mode(tmp_path):
    old = os.umask(0o022)
    try:
        atomic_write(tmp_path / "summary.json", b"{}")
        os.umask(0o027)
        atomic_write(tmp_path / "other.json", b"{}")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "summary.json") == 0o644
    assert _mode(tmp_path / "other.json") == 0o640


def test_a_replaced_file_keeps_its_mode(tmp_path):
    target = tmp_path / "summary.json"
    target.write_bytes(b"old")
    target.chmod(0o604)
    atomic_write(target, b"new")
    assert target.read_bytes() == b"new" and _mode(target) == 0o604
