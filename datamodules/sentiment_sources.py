"""Where sentiment examples come from: one :data:`SENTIMENT_SOURCES` entry (:class:`SentimentCorpus`) per
``source``, each reading a frozen :class:`~datamodules.sources.SentimentSpec` (never the DataModule).

IMDB (Maas et al. 2011; ``aclImdb/{train,test}/{pos,neg}/*.txt``) and SST-2 (GLUE TSV ``sentence<TAB>label``
with header; GLUE's test labels are hidden, so its dev set is our test set) are downloaded once with
checksums into ``data_dir`` unless a local copy is there; MR is :mod:`datamodules.vader_snippets`; ``files``
are local TSV/CSV/JSONL files with text and label columns. The synthetic language has no reader (the
DataModule generates it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from attnlab_core.errors import UsageError
from attnlab_core.progress import track
from datamodules.download import Resource, extract, fetch
from datamodules.sources import SentimentSpec, Source
from datamodules.tokenization import read_records, read_text
from datamodules.vader_snippets import VaderDomain, read_mr, require_sdist

SentimentSource = Literal["synthetic", "imdb", "sst2", "mr", "files"]
"""Where examples come from: the offline synthetic language, IMDB, SST-2 (GLUE), VADER's movie-review snippets,
local files."""

Example = tuple[str, int]  # (text, class index)
RawSplits = tuple[list[Example], list[Example] | None, list[Example]]
"""(train, val or None when the corpus publishes no validation split, test) as read from disk."""

IMDB = Resource(url="https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz",
                checksum="md5:7c2ac02c03563afcf9b574c7e56c153a")
SST2 = Resource(url="https://dl.fbaipublicfiles.com/glue/data/SST-2.zip",
                checksum="md5:9f81648d4199384278b86e315dac217c")


def _parse_label(value: str, labels: Sequence[str], where: str) -> int:
    if value.strip() not in labels:
        raise UsageError(f"{where}: label {value!r} is not one of the declared labels {list(labels)}")
    return list(labels).index(value.strip())


def read_labelled(path: Path, *, text_column: str, label_column: str, labels: Sequence[str]) -> list[Example]:
    """(text, class) pairs of a TSV/CSV/JSONL file; labels must be in ``labels`` (class = position)."""
    return [(text, _parse_label(label, labels, f"{path}:{line}"))
            for line, (text, label) in read_records(path, fields=(text_column, label_column))]


_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)


def read_imdb(root: Path, split: Literal["train", "test"]) -> list[Example]:
    """IMDB reviews of ``root/aclImdb/<split>/{neg,pos}/*.txt`` (neg = 0, pos = 1), ``<br />`` -> space."""
    out: list[Example] = []
    for label, polarity in enumerate(("neg", "pos")):
        folder = root / "aclImdb" / split / polarity
        if not folder.is_dir():
            raise UsageError(f"{folder}: no such directory (expected the aclImdb layout {split}/{polarity}/*.txt)")
        files = sorted(folder.glob("*.txt"))
        out += [(_BREAK.sub(" ", read_text(p)), label)
                for p in track(files, what=f"reading IMDB {split}/{polarity}", unit="files")]
    return out


def corpus_root(spec: SentimentSpec, resource: Resource, name: str, inner: str) -> Path:
    """``data_dir/<name>`` holding ``inner``: a local copy if present, else the verified download."""
    root = spec.data_dir / name
    if not (root / inner).is_dir():
        extract(fetch(resource, cache_dir=spec.data_dir / "downloads"), root)
    return root


def _read_imdb(spec: SentimentSpec) -> RawSplits:
    root = corpus_root(spec, IMDB, "imdb", "aclImdb")
    return read_imdb(root, "train"), None, read_imdb(root, "test")


def _read_sst2(spec: SentimentSpec) -> RawSplits:
    sst = corpus_root(spec, SST2, "sst2", "SST-2") / "SST-2"
    kw = {"text_column": "sentence", "label_column": "label", "labels": ["0", "1"]}
    return read_labelled(sst / "train.tsv", **kw), None, read_labelled(sst / "dev.tsv", **kw)


def _read_files(spec: SentimentSpec) -> RawSplits:
    kw = {"text_column": spec.text_column, "label_column": spec.label_column, "labels": spec.labels}
    val = read_labelled(Path(spec.val_path), **kw) if spec.val_path else None
    return read_labelled(Path(str(spec.train_path)), **kw), val, read_labelled(Path(str(spec.test_path)), **kw)


@dataclass(frozen=True, kw_only=True)
class SentimentCorpus(Source[SentimentSpec]):
    """How one sentiment ``source`` is obtained.

    Args:
        read: spec -> (train, val | None, test) from disk (fetching first); None: the generated language.
        declared_labels: class names are the ``labels`` argument (else negative / positive).
        test_domains: the values ``test_domain`` may take (out-of-domain test sets the source offers).
    """

    read: Callable[[SentimentSpec], RawSplits] | None = None
    declared_labels: bool = False
    test_domains: tuple[str, ...] = ()


SENTIMENT_SOURCES: dict[str, SentimentCorpus] = {
    "synthetic": SentimentCorpus(),
    "imdb": SentimentCorpus(read=_read_imdb),
    "sst2": SentimentCorpus(read=_read_sst2),
    "mr": SentimentCorpus(read=read_mr, check=require_sdist, test_domains=get_args(VaderDomain)),
    "files": SentimentCorpus(read=_read_files, requires=("train_path", "test_path"), declared_labels=True),
}
"""Every :data:`SentimentSource`, resolved once in ``SentimentData.__init__``."""
