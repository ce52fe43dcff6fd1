"""Every captioning source (each value of the ``CaptionSource`` Literal) is a registry entry and, given
its fixture here, serves caption batches offline. A new corpus is one CAPTION_SOURCES entry plus one
fixture in SOURCE_FIXTURES."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import get_args

import pytest

import datamodules.caption_sources as sources
from datamodules.batching import BOS
from datamodules.captioning import CAPTION_SOURCES, CaptionData, CaptionSource
from tests.datamodules.served import serve, zip_of

FIXTURES = Path(__file__).parents[1] / "fixtures" / "captioning"
IMAGES = FIXTURES / "images"


def _serve(http_server, monkeypatch, attr: str, name: str, data: bytes) -> None:
    monkeypatch.setattr(sources, attr, serve(http_server, name, data))


def _none(tmp_path: Path, http_server, monkeypatch) -> dict[str, str]:
    return {}


def _preset(name: str, *, images_served: bool) -> Callable[..., dict[str, str]]:
    """The Karpathy ``caption_datasets.zip`` served locally; Flickr8k's image zip too, else a local image_dir."""

    def fixture(tmp_path: Path, http_server, monkeypatch) -> dict[str, str]:
        tiny = (FIXTURES / "dataset_tiny.json").read_bytes()
        _serve(http_server, monkeypatch, "KARPATHY_ZIP", "caption_datasets.zip",
               zip_of({sources.KARPATHY_FILES[name]: tiny}))
        if not images_served:
            return {"image_dir": str(IMAGES)}
        _serve(http_server, monkeypatch, "FLICKR8K_IMAGES", "Flickr8k_Dataset.zip",
               zip_of({f"Flicker8k_Dataset/{p.name}": p.read_bytes() for p in IMAGES.glob("*.png")}))
        return {}

    return fixture


def _karpathy(tmp_path: Path, http_server, monkeypatch) -> dict[str, str]:
    return {"karpathy_json": str(FIXTURES / "dataset_tiny.json"), "image_dir": str(IMAGES)}


def _folder(tmp_path: Path, http_server, monkeypatch) -> dict[str, str]:
    return {"train_path": str(FIXTURES / "train.tsv"), "val_path": str(FIXTURES / "val.jsonl"),
            "test_path": str(FIXTURES / "test.tsv"), "image_dir": str(IMAGES)}


def _clipart(tmp_path: Path, http_server, monkeypatch) -> dict[str, str]:
    return {"stamps_path": str(FIXTURES.parent / "clipart" / "stamps")}  # tests/datamodules/test_clipart.py


SOURCE_FIXTURES: dict[str, Callable[..., dict[str, str]]] = {
    "shapes": _none,
    "flickr8k": _preset("flickr8k", images_served=True),
    "flickr30k": _preset("flickr30k", images_served=False),
    "coco": _preset("coco", images_served=False),
    "karpathy": _karpathy,
    "folder": _folder,
    "clipart": _clipart,
}


def test_registry_and_fixtures_cover_the_literal() -> None:
    assert set(CAPTION_SOURCES) == set(get_args(CaptionSource)) == set(SOURCE_FIXTURES)


@pytest.mark.parametrize("source", get_args(CaptionSource))
def test_every_source_serves_caption_batches(source: str, tmp_path: Path, http_server, monkeypatch) -> None:
    extra = SOURCE_FIXTURES[source](tmp_path, http_server, monkeypatch)
    dm = CaptionData(source=source, data_dir=str(tmp_path), image_size=16, min_freq=1, batch_size=2,
                     train_size=4, val_size=2, test_size=2, **extra)  # type: ignore[arg-type]
    dm.prepare_data()
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    assert batch.src.dim() == 4 and batch.src.size(0) == 2 and batch.src.size(1) == 3
    assert (batch.tgt[:, 0] == BOS).all() and batch.tgt.max() < dm.tgt_vocab_size
    val = next(iter(dm.val_dataloader()))
    assert all(len(refs) >= 1 for refs in val.refs)
