"""Every translation source (each value of the ``TranslationSource`` Literal) is a registry entry and,
given its fixture here, serves batches offline. A new corpus is one TRANSLATION_SOURCES entry plus
one fixture in SOURCE_FIXTURES: the parametrized test picks it up by itself."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import get_args

import pytest

from datamodules.batching import BOS, EOS
from datamodules.tokenization import word_tokenize
from datamodules.translation import TRANSLATION_SOURCES, TranslationData, TranslationSource
from tests.datamodules.real_data import require_package
from tests.datamodules.served import serve_multi30k

FIXTURES = Path(__file__).parents[1] / "fixtures" / "multi30k"
SPLITS = {"train": "train", "val": "val", "test": "test"}


def _none(tmp_path: Path, http_server, monkeypatch) -> dict[str, str]:
    return {}


def _served_multi30k(tmp_path: Path, http_server, monkeypatch) -> dict[str, str]:
    """The packaged sample as tarballs in the published layout, on a local server."""
    serve_multi30k(http_server, monkeypatch, {split: f"{split}.tar.gz" for split in SPLITS})
    return {}


def _prepared(name: str) -> Callable[..., dict[str, str]]:
    """fairseq-prepared ``data_dir/<name>/{train,valid,test}.{de,en}``."""

    def fixture(tmp_path: Path, http_server, monkeypatch) -> dict[str, str]:
        root = tmp_path / name
        root.mkdir()
        for split, prepared in (("train", "train"), ("val", "valid"), ("test", "test")):
            for lang in ("de", "en"):
                (root / f"{prepared}.{lang}").write_text((FIXTURES / f"{split}.{lang}").read_text())
        return {}

    return fixture


def _bible(tmp_path: Path, http_server, monkeypatch) -> dict[str, str]:
    """A tiny SWORD library in the published zText layout (tests/datamodules/sword_fixture.py)."""
    require_package("pysword")  # the bible source reads SWORD modules with pysword
    from tests.datamodules.sword_fixture import tiny_library

    return {"sword_path": str(tiny_library(tmp_path / "sword")), "src_lang": "es"}


def _files(tmp_path: Path, http_server, monkeypatch) -> dict[str, str]:
    return {f"{split}_path": str(FIXTURES / split) for split in SPLITS}


SOURCE_FIXTURES: dict[str, Callable[..., dict[str, str]]] = {
    "synthetic": _none,
    "multi30k": _served_multi30k,
    "iwslt14": _prepared("iwslt14"),
    "wmt14": _prepared("wmt14"),
    "bible": _bible,
    "files": _files,
}


def test_registry_and_fixtures_cover_the_literal() -> None:
    assert set(TRANSLATION_SOURCES) == set(get_args(TranslationSource)) == set(SOURCE_FIXTURES)


@pytest.mark.parametrize("source", get_args(TranslationSource))
def test_every_source_serves_batches(source: str, tmp_path: Path, http_server, monkeypatch) -> None:
    extra = SOURCE_FIXTURES[source](tmp_path, http_server, monkeypatch)
    # 48 ids: every fixture's 20 training pairs have more distinct words (the smallest, bible, has 50)
    dm = TranslationData(source=source, data_dir=str(tmp_path), tokenizer="word", vocab_size=48, batch_size=4,
                         train_size=20, val_size=4, test_size=4, **extra)  # type: ignore[arg-type]
    dm.prepare_data()
    dm.setup("fit")
    assert (dm.tokenizers[0].size, dm.tokenizers[1].size) == (dm.src_vocab_size, dm.tgt_vocab_size)  # the model's
    assert [len(dm.raw_splits()[s]) for s in ("val", "test")] == [4, 4]
    batch = next(iter(dm.train_dataloader()))
    assert batch.src.max() < dm.src_vocab_size and batch.tgt.max() < dm.tgt_vocab_size
    val = next(iter(dm.val_dataloader()))
    assert (val.tgt[:, 0] == BOS).all() and (val.tgt == EOS).sum() == val.tgt.size(0)
    text = dm.raw_splits()["val"][0][1]
    assert dm.decode_tokens(val.tgt[0, 1:]).split() == [w if w in dm.tokenizers[1].stoi else "<unk>"
                                                        for w in word_tokenize(text)]
