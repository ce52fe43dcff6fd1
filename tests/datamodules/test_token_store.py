"""Memory-mapped training data for large corpora (WMT14): streamed reading, encode-once token stores
that equal the in-memory encoding, atomic builds, and the same bad-input errors as in-memory files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attnlab_core.errors import UsageError
from datamodules.token_store import ParallelText, TokenStore, build_token_store
from datamodules.translation import TranslationData

FIXTURES = Path(__file__).parents[1] / "fixtures" / "multi30k"


def _prepared(tmp_path: Path) -> Path:
    """fairseq's prepare-wmt14en2de.sh layout (train|valid|test.{de,en}) built from the fixture corpus."""
    root = tmp_path / "wmt14"
    root.mkdir()
    for split, fixture in (("train", "train"), ("valid", "val"), ("test", "test")):
        for lang in ("de", "en"):
            (root / f"{split}.{lang}").write_text((FIXTURES / f"{fixture}.{lang}").read_text())
    return root


def _wmt(tmp_path: Path, **kw: object) -> TranslationData:
    args = {"source": "wmt14", "data_dir": str(tmp_path), "vocab_size": 60, "batch_size": 4, "tokenizer": "unigram"}
    return TranslationData(**{**args, **kw})  # type: ignore[arg-type]


def _ready(dm: TranslationData) -> TranslationData:
    dm.prepare_data()
    dm.setup("fit")
    return dm


def test_wmt14_train_split_is_memory_mapped_and_equals_direct_encoding(tmp_path: Path) -> None:
    root = _prepared(tmp_path)
    dm = _wmt(tmp_path, max_len=30)
    dm.prepare_data()
    dm.setup("fit")
    store = dm.datasets["train"]
    assert isinstance(store, TokenStore) and all(isinstance(t, np.memmap) for t in store.tokens)
    src_tok, tgt_tok = dm.tokenizers
    de, en = ((root / f"train.{lang}").read_text().splitlines() for lang in ("de", "en"))
    expected = [(src_tok.encode(s), tgt_tok.encode(t)) for s, t in zip(de, en, strict=True)]
    expected = [p for p in expected if len(p[0]) <= 30 and len(p[1]) <= 30]
    assert 0 < len(store) < len(de)  # max_len dropped some pairs
    assert [store[i] for i in range(len(store))] == expected
    assert store.lengths().tolist() == [max(len(s), len(t) + 2) for s, t in expected]
    batch = next(iter(_ready(_wmt(tmp_path, max_len=30, max_tokens=40)).train_dataloader()))
    assert batch.src.numel() <= 40 and batch.tgt.size(0) == batch.src.size(0)


def test_store_is_built_once_and_train_size_takes_a_seeded_subset(tmp_path: Path) -> None:
    _prepared(tmp_path)
    dm = _wmt(tmp_path)
    dm.prepare_data()
    stores = list((tmp_path / "stores").iterdir())
    stamp = (stores[0] / "src.bin").stat().st_mtime_ns
    small = _wmt(tmp_path, train_size=5)
    small.prepare_data()
    small.setup("fit")
    assert list((tmp_path / "stores").iterdir()) == stores and (stores[0] / "src.bin").stat().st_mtime_ns == stamp
    again = _ready(_wmt(tmp_path, train_size=5))
    assert len(small.datasets["train"]) == 5
    assert [small.datasets["train"][i] for i in range(5)] == [again.datasets["train"][i] for i in range(5)]


def test_a_failed_build_leaves_no_store(tmp_path: Path) -> None:
    (tmp_path / "a.de").write_text("eins\nzwei\ndrei\n")
    (tmp_path / "a.en").write_text("one\ntwo\nthree\n")
    calls = []

    def flaky(text: str) -> list[int]:
        calls.append(text)
        if len(calls) > 3:
            raise KeyboardInterrupt  # a crash mid-way
        return [5, 6]

    target = tmp_path / "stores" / "s"
    with pytest.raises(KeyboardInterrupt):
        build_token_store(ParallelText(tmp_path / "a.de", tmp_path / "a.en"), directory=target,
                          encoders=(flaky, flaky), max_len=10)
    assert not target.exists() and list((tmp_path / "stores").iterdir()) == []


def test_streamed_files_report_bad_input_like_in_memory_ones(tmp_path: Path) -> None:
    (tmp_path / "b.de").write_bytes(b"gut\n\xff kaputt\n")
    (tmp_path / "b.en").write_text("good\nbroken\n")
    with pytest.raises(UsageError, match=rf"^{tmp_path / 'b.de'}:2: not valid UTF-8"):
        list(ParallelText(tmp_path / "b.de", tmp_path / "b.en"))
    (tmp_path / "c.de").write_text("eins\nzwei\ndrei\n")
    (tmp_path / "c.en").write_text("one\ntwo\n")
    with pytest.raises(UsageError, match=rf"{tmp_path / 'c.de'} has 3 lines, {tmp_path / 'c.en'} has 2$"):
        list(ParallelText(tmp_path / "c.de", tmp_path / "c.en"))
