"""SentimentData: the synthetic language's rule, determinism and balance; IMDB / SST-2 / file readers;
one-line errors for bad labels, bad bytes and empty splits; SentencePiece through prepare_data."""

from __future__ import annotations

import io
import random
import zipfile
from pathlib import Path

import pytest
import torch

import datamodules.sentiment_sources as sentiment
from attnlab_core.errors import UsageError
from datamodules.batching import PAD
from datamodules.download import Resource
from datamodules.sentiment import NEGATIVE, POSITIVE, SentimentData, generate_sentiment, synthetic_label

FIXTURES = Path(__file__).parents[1] / "fixtures" / "sentiment"
SMALL = {"train_size": 200, "val_size": 40, "test_size": 40, "batch_size": 16}


@pytest.mark.parametrize(("text", "label"), [
    ("the movie was good", 1), ("not good at all", 0), ("never bad", 1), ("not the bad one", 0),
    ("bad plot but great cast", 0), ("great plot not bad cast", 1), ("a not dull but awful film", 1),
])
def test_synthetic_rule(text: str, label: int) -> None:
    assert synthetic_label(text.split()) == label


def test_generated_examples_follow_the_rule_are_balanced_and_in_range() -> None:
    data = generate_sentiment(n=2000, min_words=5, max_words=9, max_phrases=3, filler=["the", "film"],
                              rng=random.Random(0))
    for text, label in data:
        words = text.split()
        assert label == synthetic_label(words)
        polar = sum(w in POSITIVE or w in NEGATIVE for w in words)
        assert 1 <= polar <= 3 and 5 + polar <= len(words) <= 9 + 2 * polar
    assert 0.4 < sum(y for _, y in data) / len(data) < 0.6
    first_phrase_not_alone = sum(sum(w in POSITIVE or w in NEGATIVE for w in t.split()) > 1 for t, _ in data)
    assert first_phrase_not_alone > 0.5 * len(data)  # distractors are common


def test_synthetic_deterministic_independent_of_global_rng_and_split_distinct() -> None:
    torch.manual_seed(0)
    random.seed(0)
    a = SentimentData(**SMALL).raw_splits()
    torch.manual_seed(1)
    random.seed(1)
    b = SentimentData(**SMALL).raw_splits()
    assert a == b
    assert a["val"] != a["test"] and a["train"][:40] != a["val"]
    assert SentimentData(**{**SMALL, "seed": 2}).raw_splits()["val"] != a["val"]
    assert SentimentData(**{**SMALL, "train_size": 300}).raw_splits()["test"] == a["test"]


def test_vocab_known_at_init_ids_in_range_and_decoding() -> None:
    dm = SentimentData(**SMALL, vocab_size=80)
    assert dm.src_vocab_size == 80 and dm.num_classes == 2
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    assert batch.tokens.shape[0] == 16 and batch.labels.shape == (16,)
    assert int(batch.tokens.max()) < 80 and int(batch.tokens.min()) >= PAD
    text, _ = dm.raw_splits()["val"][0]
    val = next(iter(dm.val_dataloader()))
    assert dm.decode_tokens(val.tokens[0]) == text


def test_bad_arguments_are_one_line_usage_errors() -> None:
    with pytest.raises(UsageError, match="vocab_size must be >= "):
        SentimentData(vocab_size=10)
    with pytest.raises(UsageError, match="train_path"):
        SentimentData(source="files")
    with pytest.raises(UsageError, match="labels must be"):
        SentimentData(labels=["a", "a"])


def files_dm(tmp_path: Path, **kw: object) -> SentimentData:
    """The fixture files; vocab_size 40 fits the 10 training texts left after val (41 ids)."""
    args = {"source": "files", "train_path": str(FIXTURES / "train.tsv"), "test_path": str(FIXTURES / "test.jsonl"),
            "data_dir": str(tmp_path), "labels": ["neg", "pos"], "val_size": 2, "batch_size": 4, "vocab_size": 40}
    return SentimentData(**{**args, **kw})  # type: ignore[arg-type]


def test_files_source_reads_tsv_and_jsonl_and_holds_out_val(tmp_path: Path) -> None:
    dm = files_dm(tmp_path)
    dm.prepare_data()
    dm.setup("fit")
    splits = dm.raw_splits()
    assert (len(splits["train"]), len(splits["val"]), len(splits["test"])) == (10, 2, 4)
    assert {y for _, y in splits["train"] + splits["val"]} == {0, 1}
    assert dm.class_names == ["neg", "pos"]
    assert next(iter(dm.test_dataloader())).tokens.shape[0] == 4


def test_label_outside_the_declared_set_names_value_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("text,label\nnice film,pos\nodd one,neutral\n")
    dm = files_dm(tmp_path, train_path=str(bad))
    with pytest.raises(UsageError, match=rf"^{bad}:3: label 'neutral' is not one of the declared labels"):
        dm.setup("fit")


def test_non_utf8_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"text": "ok", "label": "pos"}\n{"text": "caf\xe9", "label": "neg"}\n')
    with pytest.raises(UsageError, match=rf"^{bad}:2: not valid UTF-8"):
        files_dm(tmp_path, test_path=str(bad)).setup("test")


def test_empty_split_names_the_split(tmp_path: Path) -> None:
    empty = tmp_path / "empty.tsv"
    empty.write_text("text\tlabel\n")
    with pytest.raises(UsageError, match=r"the test split is empty"):
        files_dm(tmp_path, test_path=str(empty)).setup("test")


def test_imdb_layout(tmp_path: Path) -> None:
    for split in ("train", "test"):
        for polarity, text in (("pos", "Loved it.<br /><br />Great"), ("neg", "Hated it<br/>dull")):
            folder = tmp_path / "imdb" / "aclImdb" / split / polarity
            folder.mkdir(parents=True)
            for i in range(12):
                (folder / f"{i}_7.txt").write_text(f"{text} {i}")
    dm = SentimentData(source="imdb", data_dir=str(tmp_path), val_size=4, vocab_size=20, batch_size=8)  # 22 ids
    dm.setup("fit")
    splits = dm.raw_splits()
    assert (len(splits["train"]), len(splits["val"]), len(splits["test"])) == (20, 4, 24)
    assert all("<br" not in t for t, _ in splits["train"])
    assert {y for t, y in splits["test"] if t.startswith("Loved")} == {1}


def test_sst2_downloaded_from_published_zip_with_sentencepiece(tmp_path: Path, http_server, monkeypatch) -> None:
    buf = io.BytesIO()
    rows = [f"a {'fine' if i % 2 else 'poor'} film number {i} \t{i % 2}" for i in range(40)]
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("SST-2/train.tsv", "sentence\tlabel\n" + "\n".join(rows) + "\n")
        zf.writestr("SST-2/dev.tsv", "sentence\tlabel\n" + "\n".join(rows[:6]) + "\n")
    http_server.files["/SST-2.zip"] = buf.getvalue()
    import hashlib

    monkeypatch.setattr(sentiment, "SST2", Resource(url=f"{http_server.url}/SST-2.zip",
                                                    checksum="md5:" + hashlib.md5(buf.getvalue()).hexdigest()))
    dm = SentimentData(source="sst2", data_dir=str(tmp_path), tokenizer="unigram", vocab_size=30, val_size=5)
    dm.prepare_data()
    assert len(list((tmp_path / "tokenizers").glob("sentiment-sst2-unigram30-*.model"))) == 1
    fresh = SentimentData(source="sst2", data_dir=str(tmp_path), tokenizer="unigram", vocab_size=30, val_size=5)
    fresh.setup("fit")  # another "rank": loads the cached model, reads the extracted copy
    assert len(http_server.requests) == 1
    assert [len(fresh.raw_splits()[s]) for s in ("train", "val", "test")] == [35, 5, 6]
    ids = fresh.datasets["test"][0][0]
    assert fresh.decode_tokens(ids) == fresh.raw_splits()["test"][0][0].strip()


def test_cli_prints_a_bad_label_found_during_fit_as_one_line(tmp_path: Path, capsys) -> None:
    from attnlab_run.cli import main

    bad = tmp_path / "bad.csv"
    bad.write_text("text,label\nnice film,pos\nodd one,neutral\n")
    config = Path(__file__).parents[2] / "ablations" / "configs" / "sentiment_lstm_attention.yaml"
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", str(config), "--trainer.fast_dev_run=1", f"--run.root={tmp_path}",
              "--data.init_args.source=files", f"--data.init_args.train_path={bad}",
              f"--data.init_args.test_path={FIXTURES / 'test.jsonl'}", '--data.init_args.labels=["neg","pos"]',
              f"--data.init_args.data_dir={tmp_path}"])
    assert exit_info.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == f"attnlab: error: {bad}:3: label 'neutral' is not one of the declared labels ['neg', 'pos']"
