"""Checksummed, resumable, cached downloads and safe archive extraction for real corpora.

- :func:`fetch` downloads a :class:`Resource` into a cache directory. A file that was verified once
  is reused without any request (a ``<file>.ok`` marker holds the checksum it was verified
  against). An interrupted download resumes from ``<file>.part`` with an HTTP ``Range`` request
  (restarting when the server ignores it). The checksum is checked before the file is moved into
  place: a mismatch deletes the download and raises, so the cache never holds a corrupt file.
- :func:`extract` unpacks ``.tar(.gz|.bz2|.xz)`` / ``.tgz`` / ``.zip`` / single-file ``.gz``
  archives into a directory, refusing any member that would land outside it (absolute paths,
  ``..``, links, devices). Extraction goes to a temporary sibling directory that is renamed into
  place, so a half-extracted directory is never mistaken for a finished one.

Several processes may call both at once (e.g. one per node on a shared filesystem): extraction is
race-free, but concurrent downloads of one file share its ``.part`` file, so on a shared filesystem
run ``prepare_data`` once (``prepare_data_per_node=False``).

Errors the user can act on (network failure, checksum mismatch, unsafe archive) are one-line
:class:`attnlab_core.errors.UsageError`\\ s naming the URL or file.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from attnlab_core.errors import UsageError
from attnlab_core.progress import Progress, track

log = logging.getLogger(__name__)
CHUNK = 1 << 20
NET_CHUNK = 1 << 16  # small enough for a live progress line on a slow link


@dataclass(frozen=True)
class Resource:
    """A published file.

    Attributes:
        url: where it is published.
        checksum: ``"sha256:<hex>"`` or ``"md5:<hex>"`` of the file's bytes.
        filename: name in the cache; default: the URL's last path component.
        mirrors: further URLs serving the same bytes, tried in order when ``url`` fails.
    """

    url: str
    checksum: str
    filename: str | None = None
    mirrors: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.filename or PurePosixPath(self.url.split("?", 1)[0]).name


def file_checksum(path: Path, algorithm: str) -> str:
    """Hex digest of a file's bytes with ``hashlib.new(algorithm)``."""
    h = hashlib.new(algorithm)
    with Progress(what=f"verifying {path.name}", total=path.stat().st_size, unit="bytes", delay_s=0.5) as bar, \
            path.open("rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            bar.update(len(chunk))
    return h.hexdigest()


def _split_checksum(checksum: str) -> tuple[str, str]:
    algorithm, sep, digest = checksum.partition(":")
    if not sep or algorithm not in ("sha256", "md5", "sha1", "sha512"):
        raise ValueError(f"checksum must look like 'sha256:<hex>' or 'md5:<hex>', got {checksum!r}")
    return algorithm, digest.lower()


def fetch(resource: Resource, *, cache_dir: Path, timeout: float = 60.0) -> Path:
    """The verified file of ``resource`` in ``cache_dir``, downloaded (or resumed) only if needed.

    Args:
        resource: what to download and its checksum.
        cache_dir: directory of the cache (created).
        timeout: seconds per network operation.

    Returns:
        ``cache_dir / resource.name``, whose checksum matches.
    """
    algorithm, expected = _split_checksum(resource.checksum)
    path = cache_dir / resource.name
    marker = path.with_name(path.name + ".ok")
    if path.is_file() and marker.is_file() and marker.read_text().strip() == resource.checksum:
        return path
    cache_dir.mkdir(parents=True, exist_ok=True)
    if path.is_file() and file_checksum(path, algorithm) == expected:
        marker.write_text(resource.checksum)
        return path
    part = path.with_name(path.name + ".part")
    errors = []
    for url in (resource.url, *resource.mirrors):
        try:
            _download(url, part, timeout=timeout)
            break
        except (urllib.error.URLError, OSError) as err:
            errors.append(f"{url}: {getattr(err, 'reason', err)}")
    else:
        raise UsageError(
            f"could not download {resource.name} ({'; '.join(errors)}); "
            f"place the file at {path} by hand to use it offline"
        )
    actual = file_checksum(part, algorithm)
    if actual != expected:
        part.unlink(missing_ok=True)
        raise UsageError(
            f"{resource.url}: checksum mismatch (expected {algorithm} {expected}, got {actual}); "
            "the download was deleted"
        )
    os.replace(part, path)
    marker.write_text(resource.checksum)
    return path


def _download(url: str, part: Path, *, timeout: float) -> None:
    """Stream ``url`` into ``part``, resuming with ``Range: bytes=<size>-`` when ``part`` exists."""
    have = part.stat().st_size if part.is_file() else 0
    request = urllib.request.Request(url, headers={"User-Agent": "attnlab"})
    if have:
        request.add_header("Range", f"bytes={have}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 - URLs come from Resource
    except urllib.error.HTTPError as err:
        if err.code == 416 and have:  # the part is already complete; the checksum decides
            return
        raise
    with response:
        resumed = have > 0 and response.status == 206
        if have and not resumed:
            log.info("%s ignored the Range request; restarting the download", url)
        start = have if resumed else 0
        length = response.headers.get("Content-Length")
        total = start + int(length) if length and length.isdigit() else None
        with part.open("ab" if resumed else "wb") as f, \
                Progress(what=f"downloading {part.name.removesuffix('.part')}", total=total, unit="bytes",
                         initial=start) as bar:
            while chunk := response.read(NET_CHUNK):
                f.write(chunk)
                bar.update(len(chunk))


# --------------------------------------------------------------------------- extraction
def _check_member(archive: Path, target: Path, name: str) -> Path:
    """Where member ``name`` goes under ``target``; refuse anything that would escape it."""
    pure = PurePosixPath(name.replace("\\", "/"))
    dest = (target / pure).resolve()
    if pure.is_absolute() or ".." in pure.parts or not dest.is_relative_to(target.resolve()):
        raise UsageError(
            f"{archive}: member {name!r} would be written outside the target directory; refusing to extract"
        )
    return dest


# ``extractall(filter="data")`` exists from Python 3.12 and in the security releases 3.10.12 / 3.11.4 (PEP 706),
# which define ``tarfile.data_filter``; an older 3.10 (requires-python is >= 3.10) passes no filter and relies on
# the member checks of ``_extract_tar`` (no links, devices or paths outside the target); the filter also clears
# setuid bits and write permission for group and others.
TAR_FILTER: dict[str, str] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}


def _extract_tar(archive: Path, target: Path) -> None:
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        for m in members:
            _check_member(archive, target, m.name)
            if not (m.isfile() or m.isdir()):
                raise UsageError(f"{archive}: member {m.name!r} is a link or device; refusing to extract")
        tar.extractall(target, members=track(members, what=f"extracting {archive.name}", unit="files"),
                       **TAR_FILTER)


def _extract_zip(archive: Path, target: Path) -> None:
    with zipfile.ZipFile(archive) as zf:
        infos = zf.infolist()
        for info in infos:
            _check_member(archive, target, info.filename)
            if (info.external_attr >> 16) & 0o170000 == 0o120000:
                raise UsageError(f"{archive}: member {info.filename!r} is a symlink; refusing to extract")
        zf.extractall(target, members=track(infos, what=f"extracting {archive.name}", unit="files"))


def _extract_gzip(archive: Path, target: Path) -> None:
    with gzip.open(archive, "rb") as src, (target / archive.name[: -len(".gz")]).open("wb") as dst:
        shutil.copyfileobj(src, dst, CHUNK)


def extract(archive: Path, target: Path) -> Path:
    """Extract ``archive`` into the directory ``target`` (skipped if ``target`` already exists).

    Unsafe members (outside ``target``, links, devices) raise a UsageError before anything is
    written. A ``.gz`` that is not a tarball becomes one file named without ``.gz``.
    """
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".partial"))
    name = archive.name.lower()
    try:
        if zipfile.is_zipfile(archive):
            _extract_zip(archive, tmp)
        elif tarfile.is_tarfile(archive):
            _extract_tar(archive, tmp)
        elif name.endswith(".gz"):
            _extract_gzip(archive, tmp)
        else:
            raise UsageError(f"{archive}: not a tar, zip or gzip archive")
        try:
            os.replace(tmp, target)
        except OSError:
            if not target.is_dir():  # not another process finishing first: a real failure
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target
