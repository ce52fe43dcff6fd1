"""Downloads: verified, cached (no second request), resumed with Range, corrupt files never cached;
extraction refuses members outside the target. All against a local server on 127.0.0.1."""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from attnlab_core.errors import UsageError
from datamodules.download import Resource, extract, fetch
from tests.datamodules.package_fixtures import tar_gz

PAYLOAD = bytes(range(256)) * 400  # 100 KiB


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def publish(server, name: str, data: bytes) -> Resource:
    server.files[f"/{name}"] = data
    return Resource(url=f"{server.url}/{name}", checksum=sha256(data))


def test_download_verifies_and_caches(http_server, tmp_path: Path) -> None:
    res = publish(http_server, "corpus.bin", PAYLOAD)
    path = fetch(res, cache_dir=tmp_path)
    assert path.read_bytes() == PAYLOAD and path.name == "corpus.bin"
    assert len(http_server.requests) == 1
    assert fetch(res, cache_dir=tmp_path) == path
    assert len(http_server.requests) == 1  # served from the cache: no request at all
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.bin", "corpus.bin.ok"]


def test_md5_checksums_are_accepted(http_server, tmp_path: Path) -> None:
    http_server.files["/a.bin"] = PAYLOAD
    res = Resource(url=f"{http_server.url}/a.bin", checksum="md5:" + hashlib.md5(PAYLOAD).hexdigest())
    assert fetch(res, cache_dir=tmp_path).read_bytes() == PAYLOAD


def test_resume_sends_range_and_appends(http_server, tmp_path: Path) -> None:
    res = publish(http_server, "corpus.bin", PAYLOAD)
    (tmp_path / "corpus.bin.part").write_bytes(PAYLOAD[:30000])  # an interrupted earlier download
    assert fetch(res, cache_dir=tmp_path).read_bytes() == PAYLOAD
    assert http_server.requests == [("/corpus.bin", "bytes=30000-")]
    assert not (tmp_path / "corpus.bin.part").exists()


def test_server_ignoring_range_restarts_cleanly(http_server, tmp_path: Path) -> None:
    http_server.honour_range = False
    res = publish(http_server, "corpus.bin", PAYLOAD)
    (tmp_path / "corpus.bin.part").write_bytes(b"x" * 500)  # would corrupt the file if appended to
    assert fetch(res, cache_dir=tmp_path).read_bytes() == PAYLOAD


def test_checksum_mismatch_leaves_nothing_in_the_cache(http_server, tmp_path: Path) -> None:
    res = publish(http_server, "corpus.bin", PAYLOAD)
    http_server.files["/corpus.bin"] = PAYLOAD[:-1] + b"\x00"  # corrupted in transit / on the mirror
    with pytest.raises(UsageError, match=r"checksum mismatch .*expected sha256") as err:
        fetch(res, cache_dir=tmp_path)
    assert "\n" not in str(err.value) and res.url in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_mirror_used_when_primary_fails(http_server, tmp_path: Path) -> None:
    good = publish(http_server, "mirror.bin", PAYLOAD)
    res = Resource(url=f"{http_server.url}/missing.bin", checksum=good.checksum, filename="c.bin",
                   mirrors=(good.url,))
    assert fetch(res, cache_dir=tmp_path).read_bytes() == PAYLOAD


def test_unreachable_is_one_line_naming_the_cache_path(http_server, tmp_path: Path) -> None:
    res = Resource(url=f"{http_server.url}/nothing.bin", checksum=sha256(b""))
    with pytest.raises(UsageError, match="could not download nothing.bin") as err:
        fetch(res, cache_dir=tmp_path)
    assert str(tmp_path / "nothing.bin") in str(err.value)


def test_extract_tar_and_skip_when_present(tmp_path: Path) -> None:
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(tar_gz({"train.en": b"hello\n", "sub/train.de": b"hallo\n"}))
    target = extract(archive, tmp_path / "out")
    assert (target / "train.en").read_bytes() == b"hello\n" and (target / "sub" / "train.de").is_file()
    archive.write_bytes(b"not an archive any more")
    assert extract(archive, tmp_path / "out") == target  # already extracted: not touched again


@pytest.mark.parametrize("filtered", [True, False])
def test_tar_filter_where_python_has_it_and_member_checks_without(tmp_path: Path, monkeypatch, filtered: bool) -> None:
    """``extractall(filter=...)`` needs Python >= 3.10.12 / 3.11.4 (PEP 706); older 3.10 interpreters extract
    without it, still refusing links and escapes (checked before extracting)."""
    from datamodules import download

    assert download.TAR_FILTER == ({"filter": "data"} if hasattr(tarfile, "data_filter") else {})
    if not filtered:
        monkeypatch.setattr(download, "TAR_FILTER", {})
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(tar_gz({"train.en": b"hello\n"}))
    assert (extract(archive, tmp_path / "out") / "train.en").read_bytes() == b"hello\n"
    archive.write_bytes(tar_gz({"fine.txt": b"x"}, symlink="passwd"))
    with pytest.raises(UsageError, match="link or device"):
        extract(archive, tmp_path / "links")


@pytest.mark.parametrize("evil", ["../escape.txt", "/abs/escape.txt", "ok/../../escape.txt"])
def test_extract_refuses_paths_outside_target(tmp_path: Path, evil: str) -> None:
    archive = tmp_path / "evil.tar.gz"
    archive.write_bytes(tar_gz({"fine.txt": b"x", evil: b"pwned"}))
    with pytest.raises(UsageError, match="outside the target directory"):
        extract(archive, tmp_path / "out" / "t")
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path / "out" / "escape.txt").exists()
    assert list((tmp_path / "out").iterdir()) == []  # no target, no half-extracted temp dir


def test_extract_refuses_links(tmp_path: Path) -> None:
    archive = tmp_path / "link.tar.gz"
    archive.write_bytes(tar_gz({"fine.txt": b"x"}, symlink="passwd"))
    with pytest.raises(UsageError, match="link or device"):
        extract(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_extract_zip_refuses_escape_and_gz_single_file(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("../evil.txt", "pwned")
    (tmp_path / "evil.zip").write_bytes(buf.getvalue())
    with pytest.raises(UsageError, match="outside"):
        extract(tmp_path / "evil.zip", tmp_path / "z")
    (tmp_path / "val.en.gz").write_bytes(gzip.compress(b"a line\n"))
    assert (extract(tmp_path / "val.en.gz", tmp_path / "g") / "val.en").read_bytes() == b"a line\n"
