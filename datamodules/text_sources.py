"""Where running text for language modelling comes from: one :data:`TEXT_SOURCES` entry (:class:`TextCorpus`)
per ``source``, each reading a frozen :class:`~datamodules.sources.TextSpec` (never the DataModule).

- ``wikitext2`` / ``wikitext103``: WikiText (Merity et al. 2017), raw, downloaded once and checksummed (md5 of
  the published ``wikitext-{2,103}-raw-v1.zip``), cached and extracted under ``data_dir``; its layout is
  ``wikitext-2-raw/wiki.{train,valid,test}.raw``.
- ``web``: the World English Bible (public domain, modern English) from its SWORD module, offline
  (:mod:`datamodules.bible`: ``sword_path``, else ``$SWORD_PATH``, else /usr/share/sword), one verse a line
  in canonical order, markup stripped, split by whole held-out books (``bible.book_split``).
- ``file``: a local UTF-8 file cut in order into train / validation / test (90 / 5 / 5 % of its characters;
  contiguous text, never shuffled).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

from attnlab_core.errors import UsageError
from datamodules.bible import book_split, module_confs, read_verses, sword_root
from datamodules.download import Resource, extract, fetch
from datamodules.sources import Source, TextSpec
from datamodules.splits import SPLITS, contiguous_splits

TextSource = Literal["wikitext2", "wikitext103", "web", "file"]
"""Where the text comes from: WikiText-2 raw, WikiText-103 raw (downloaded), the World English Bible
(a SWORD module, offline), or a local UTF-8 file."""

Texts = dict[str, str]
"""Split name -> raw text."""

_S3 = "https://s3.amazonaws.com/research.metamind.io/wikitext/"
WIKITEXT: dict[str, Resource] = {
    "wikitext2": Resource(url=_S3 + "wikitext-2-raw-v1.zip", checksum="md5:f407a2d53283fc4a49bcff21bc5f3770",
                          mirrors=("https://huggingface.co/datasets/ggml-org/ci/resolve/main/wikitext-2-raw-v1.zip",
                                   "https://wikitext.smerity.com/wikitext-2-raw-v1.zip")),
    "wikitext103": Resource(url=_S3 + "wikitext-103-raw-v1.zip", checksum="md5:0ca3512bd7a238be4a63ce7b434f8935",
                            mirrors=("https://wikitext.smerity.com/wikitext-103-raw-v1.zip",)),
}
"""The published raw archives (md5 as listed by the WikiText release's users; the original S3 host first)."""
WIKITEXT_DIR = {"wikitext2": "wikitext-2-raw", "wikitext103": "wikitext-103-raw"}
SPLIT_FILES = {"train": "wiki.train.raw", "val": "wiki.valid.raw", "test": "wiki.test.raw"}
FILE_SPLITS = {"train": (0.0, 0.9), "val": (0.9, 0.95), "test": (0.95, 1.0)}


def fetch_wikitext(spec: TextSpec, *, name: str) -> None:
    """Download (once, checksummed) and extract WikiText ``name`` under ``data_dir/<name>``."""
    archive = fetch(WIKITEXT[name], cache_dir=spec.data_dir / "downloads")
    extract(archive, spec.data_dir / name)


def read_wikitext(spec: TextSpec, *, name: str) -> Texts:
    """The three published splits of the extracted archive (one line naming the files a layout lacks)."""
    root = spec.data_dir / name / WIKITEXT_DIR[name]
    missing = [f for f in SPLIT_FILES.values() if not (root / f).is_file()]
    if missing:
        raise UsageError(f"{root}: missing {', '.join(missing)} (unexpected WikiText layout)")
    return {k: (root / f).read_text(encoding="utf-8") for k, f in SPLIT_FILES.items()}


def check_web(spec: TextSpec) -> None:
    """At construction: pysword and the WEB module are there (else one line naming what to install)."""
    module_confs(sword_root(spec.sword_path), ("web",))


def read_web(spec: TextSpec) -> Texts:
    """The World English Bible, one verse a line, split by whole books (empty verse slots skipped)."""
    lines: dict[str, list[str]] = {split: [] for split in SPLITS}
    for verse in read_verses(sword_root(spec.sword_path), "web"):
        if verse.text:
            lines[book_split(verse.book)].append(verse.text)
    return {split: "".join(line + "\n" for line in lines[split]) for split in SPLITS}


def check_file(spec: TextSpec) -> None:
    """At construction: a file is named (``--data.path``)."""
    if not spec.path:
        raise UsageError("source=file needs --data.path (a UTF-8 text file)")


def read_file(spec: TextSpec) -> Texts:
    """The local file cut in order at :data:`FILE_SPLITS`."""
    file = Path(str(spec.path))
    if not file.is_file():
        raise UsageError(f"--data.path {file}: no such file")
    return contiguous_splits(file.read_text(encoding="utf-8"), FILE_SPLITS)


@dataclass(frozen=True, kw_only=True)
class TextCorpus(Source[TextSpec]):
    """How one text ``source`` is obtained.

    Args:
        read: spec -> the raw text of every split (from disk; after ``prepare``).
        prepare: spec -> None, fetching what ``read`` needs (once, in ``prepare_data``); None: nothing to fetch.
    """

    read: Callable[[TextSpec], Texts]
    prepare: Callable[[TextSpec], None] | None = None


TEXT_SOURCES: dict[str, TextCorpus] = {
    "wikitext2": TextCorpus(read=partial(read_wikitext, name="wikitext2"),
                            prepare=partial(fetch_wikitext, name="wikitext2")),
    "wikitext103": TextCorpus(read=partial(read_wikitext, name="wikitext103"),
                              prepare=partial(fetch_wikitext, name="wikitext103")),
    "web": TextCorpus(read=read_web, check=check_web),
    "file": TextCorpus(read=read_file, check=check_file),
}
"""Every :data:`TextSource`, resolved in ``TextLM.__init__``."""
