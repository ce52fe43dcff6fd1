"""Archives built in memory in a published layout and served by the local ``http_server`` fixture
(``tests/datamodules/conftest.py``) as checksummed :class:`~datamodules.download.Resource`\\ s: never the network.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import pytest

import datamodules.translation as translation
from datamodules.download import Resource
from tests.datamodules.package_fixtures import tar_gz

MULTI30K_SAMPLE = Path(__file__).parents[1] / "fixtures" / "multi30k"
"""The packaged Multi30k sample: ``{train,val,test}.{de,en}``."""


def zip_of(files: dict[str, bytes | str]) -> bytes:
    """A zip archive holding ``files`` (archive name -> content)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def serve(http_server, name: str, data: bytes, *, algorithm: str = "md5") -> Resource:
    """Publish ``data`` at ``/<name>``; the Resource that downloads it, with its ``algorithm`` checksum."""
    http_server.files[f"/{name}"] = data
    digest = hashlib.new(algorithm, data).hexdigest()
    return Resource(url=f"{http_server.url}/{name}", checksum=f"{algorithm}:{digest}")


def multi30k_archive(split: str) -> bytes:
    """The sample's ``<split>.de`` and ``<split>.en`` in a tarball laid out like the published one (at its root)."""
    return tar_gz({f"{split}.{lang}": (MULTI30K_SAMPLE / f"{split}.{lang}").read_bytes() for lang in ("de", "en")})


def serve_multi30k(http_server, monkeypatch: pytest.MonkeyPatch, names: dict[str, str]) -> None:
    """Serve each split's :func:`multi30k_archive` as ``names[split]`` and point ``translation.MULTI30K`` at them."""
    resources = {split: serve(http_server, name, multi30k_archive(split), algorithm="sha256")
                 for split, name in names.items()}
    monkeypatch.setattr(translation, "MULTI30K", resources)
