"""Every sentiment source (each value of the ``SentimentSource`` Literal) is a registry entry and, given
its fixture here, serves labelled batches offline. A new corpus is one SENTIMENT_SOURCES entry plus one
fixture in SOURCE_FIXTURES."""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import get_args

import pytest

import datamodules.sentiment_sources as sentiment
from datamodules.download import Resource
from datamodules.sentiment import SENTIMENT_SOURCES, SentimentData, SentimentSource
from tests.datamodules.package_fixtures import write_vader_sdist

FIXTURES = Path(__file__).parents[1] / "fixtures" / "sentiment"
ROWS = [(f"a {'fine' if i % 2 else 'poor'} film number {i} scene {i + 100}", i % 2) for i in range(30)]


def _none(tmp_path: Path, http_server, monkeypatch) -> dict[str, object]:
    return {}


def _imdb(tmp_path: Path, http_server, monkeypatch) -> dict[str, object]:
    """A local copy in the published ``aclImdb/{train,test}/{pos,neg}/*.txt`` layout."""
    for split in ("train", "test"):
        for polarity in ("pos", "neg"):
            folder = tmp_path / "imdb" / "aclImdb" / split / polarity
            folder.mkdir(parents=True)
            for i in range(10):
                (folder / f"{i}_7.txt").write_text(f"{polarity} review {i} take {i + 10}<br />the end")
    return {}


def _sst2(tmp_path: Path, http_server, monkeypatch) -> dict[str, object]:
    """The GLUE zip layout, served locally."""
    buf = io.BytesIO()
    lines = "sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in ROWS)
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("SST-2/train.tsv", lines)
        zf.writestr("SST-2/dev.tsv", lines)
    http_server.files["/SST-2.zip"] = buf.getvalue()
    monkeypatch.setattr(sentiment, "SST2", Resource(url=f"{http_server.url}/SST-2.zip",
                                                    checksum="md5:" + hashlib.md5(buf.getvalue()).hexdigest()))
    return {}


def _files(tmp_path: Path, http_server, monkeypatch) -> dict[str, object]:
    return {"train_path": str(FIXTURES / "train.tsv"), "test_path": str(FIXTURES / "test.jsonl"),
            "labels": ["neg", "pos"]}


def _mr(tmp_path: Path, http_server, monkeypatch) -> dict[str, object]:
    """A tiny sdist in the vaderSentiment 3.3.2 layout, where `pip download -d data_dir/downloads` puts it."""
    write_vader_sdist(tmp_path, monkeypatch=monkeypatch)
    return {}


SOURCE_FIXTURES: dict[str, Callable[..., dict[str, object]]] = {
    "synthetic": _none, "imdb": _imdb, "sst2": _sst2, "mr": _mr, "files": _files,
}


def test_registry_and_fixtures_cover_the_literal() -> None:
    assert set(SENTIMENT_SOURCES) == set(get_args(SentimentSource)) == set(SOURCE_FIXTURES)


@pytest.mark.parametrize("source", get_args(SentimentSource))
def test_every_source_serves_labelled_batches(source: str, tmp_path: Path, http_server, monkeypatch) -> None:
    extra = SOURCE_FIXTURES[source](tmp_path, http_server, monkeypatch)
    # 20 ids: the synthetic language needs 19; every fixture's 8 training texts have more distinct words
    dm = SentimentData(source=source, data_dir=str(tmp_path), vocab_size=20, batch_size=4, train_size=8,
                       val_size=2, test_size=4, **extra)  # type: ignore[arg-type]
    dm.prepare_data()
    dm.setup("fit")
    assert dm.tokenizer.size == dm.src_vocab_size == 20
    assert [len(dm.raw_splits()[s]) for s in ("train", "val", "test")] == [8, 2, 4]
    batch = next(iter(dm.test_dataloader()))
    assert batch.tokens.size(0) == 4 and batch.tokens.max() < dm.src_vocab_size
    assert 0 <= batch.labels.min() and batch.labels.max() < dm.num_classes == 2
