"""Tokenization: reading files with file:line errors, word vocabularies, SentencePiece trained once,
cached by content hash, written atomically, special ids 0..3, too-large vocabularies refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import sentencepiece as spm

from attnlab_core.errors import UsageError
from datamodules.batching import BOS, EOS, PAD, UNK
from datamodules.tokenization import (
    SPECIAL_PIECES,
    WordVocab,
    load_tokenizer,
    prepare_tokenizer,
    read_lines,
    read_records,
    read_text,
    train_sentencepiece,
)

CORPUS = [f"the {a} cat sat on the {b} mat number {i}" for i, (a, b) in
          enumerate(zip(["big", "small", "red", "old"] * 50, ["blue", "green", "new", "flat"] * 50, strict=True))]


def test_read_text_reports_file_and_line_of_bad_utf8(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine\nalso fine\nbad \xff byte\n")
    with pytest.raises(UsageError, match=rf"^{path}:3: not valid UTF-8 \(byte 0xff\)"):
        read_text(path)
    with pytest.raises(UsageError, match="no such file"):
        read_text(tmp_path / "missing.txt")


def test_read_lines_splits_on_newline_only(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    path.write_text("a\u2028b\r\nc\n", encoding="utf-8")
    assert read_lines(path) == ["a\u2028b", "c"]


def test_read_records_tsv_csv_jsonl_and_errors(tmp_path: Path) -> None:
    (tmp_path / "a.tsv").write_text('text\tlabel\nsay "hi"\t1\n\nbye\t0\n')
    assert read_records(tmp_path / "a.tsv", fields=("text", "label")) == [(2, ['say "hi"', "1"]), (4, ["bye", "0"])]
    (tmp_path / "a.csv").write_text('label,text\n1,"a, b"\n')
    assert read_records(tmp_path / "a.csv", fields=("text", "label")) == [(2, ["a, b", "1"])]
    (tmp_path / "a.jsonl").write_text('{"text": "x", "label": 1}\n{"text": "y"}\n')
    with pytest.raises(UsageError, match=r"a\.jsonl:2: no key 'label'"):
        read_records(tmp_path / "a.jsonl", fields=("text", "label"))
    (tmp_path / "b.tsv").write_text("sentence\tlabel\nx\t1\textra\n")
    with pytest.raises(UsageError, match=r"b\.tsv:2: expected 2 columns, got 3"):
        read_records(tmp_path / "b.tsv", fields=("sentence", "label"))
    with pytest.raises(UsageError, match=r"b\.tsv:1: no column 'text'"):
        read_records(tmp_path / "b.tsv", fields=("text", "label"))


def test_word_vocab_frequency_order_unk_and_decode() -> None:
    vocab = WordVocab.build(["b a a", "c b a", "d"], vocab_size=7)
    assert vocab.itos == [*SPECIAL_PIECES, "a", "b", "c"]  # c and d tie: alphabetical, cut at 7
    assert vocab.encode("A b zzz") == [4, 5, UNK]
    assert vocab.decode([BOS, 4, 5, EOS, 6, PAD]) == "a b"


def test_sentencepiece_special_ids_size_and_detokenization(tmp_path: Path) -> None:
    path = train_sentencepiece(CORPUS, cache_dir=tmp_path, name="t", model_type="bpe", vocab_size=48)
    sp = spm.SentencePieceProcessor(model_file=str(path))
    assert [sp.id_to_piece(i) for i in (PAD, BOS, EOS, UNK)] == list(SPECIAL_PIECES)
    tok = load_tokenizer("bpe", CORPUS, cache_dir=tmp_path, name="t", vocab_size=48)
    assert tok.size == 48
    ids = tok.encode("the red cat sat")
    assert min(ids) >= 4 and tok.decode([BOS, *ids, EOS, 7]) == "the red cat sat"


@pytest.mark.parametrize("model_type", ["bpe", "unigram"])
def test_trained_once_and_cached_by_corpus_and_settings(tmp_path: Path, monkeypatch, model_type: str) -> None:
    first = train_sentencepiece(CORPUS, cache_dir=tmp_path, name="t", model_type=model_type, vocab_size=40)

    def no_training(**_: object) -> None:
        raise AssertionError("retrained although the model is cached")

    monkeypatch.setattr(spm.SentencePieceTrainer, "train", no_training)
    assert train_sentencepiece(CORPUS, cache_dir=tmp_path, name="t", model_type=model_type, vocab_size=40) == first
    prepare_tokenizer(model_type, CORPUS, cache_dir=tmp_path, name="t", vocab_size=40)  # no-op as well
    monkeypatch.undo()
    other = train_sentencepiece(CORPUS[:-1], cache_dir=tmp_path, name="t", model_type=model_type, vocab_size=40)
    bigger = train_sentencepiece(CORPUS, cache_dir=tmp_path, name="t", model_type=model_type, vocab_size=44)
    assert len({first, other, bigger}) == 3
    assert not [p for p in tmp_path.iterdir() if p.suffix != ".model"]  # no temp files left behind


def test_too_large_vocab_is_one_line_with_sizes_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"vocab_size=5000 is too large .* supports at most \d+") as err:
        train_sentencepiece(CORPUS, cache_dir=tmp_path, name="tiny", model_type="unigram", vocab_size=5000)
    assert "\n" not in str(err.value)
    assert not tmp_path.exists() or list(tmp_path.iterdir()) == []


def test_word_vocab_must_fill_vocab_size_or_is_refused_in_one_line(tmp_path: Path) -> None:
    """A word vocabulary has exactly vocab_size ids, like a SentencePiece model: with fewer distinct
    words in the training text, the refusal names the option, the text and the largest value allowed."""
    distinct = len({w for t in CORPUS for w in t.split()})  # 14 words + 200 numbers
    most = distinct + 4
    assert load_tokenizer("word", CORPUS, cache_dir=tmp_path, name="t", vocab_size=most).size == most
    assert load_tokenizer("word", CORPUS, cache_dir=tmp_path, name="t", vocab_size=most - 1).size == most - 1
    with pytest.raises(UsageError) as err:
        load_tokenizer("word", CORPUS, cache_dir=tmp_path, name="t", vocab_size=8000, origin="the training file x.tsv")
    assert str(err.value) == (f"--data.vocab_size=8000 is too large for the training file x.tsv: it has {distinct} "
                              f"distinct words + 4 special tokens = {most} ids; give --data.vocab_size={most} or less")
    with pytest.raises(UsageError, match=rf"^--data.vocab_size={most + 1} is too large for the t training corpus: "):
        load_tokenizer("word", CORPUS, cache_dir=tmp_path, name="t", vocab_size=most + 1)
    assert list(tmp_path.iterdir()) == []  # a word vocabulary is never cached


def test_too_large_sentencepiece_vocab_names_the_option_and_the_maximum(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^--data.vocab_size=5000 is too large for the training file x.tsv: "
                                         r"SentencePiece \(bpe\) supports at most (\d+); give --data.vocab_size=\1 or"):
        prepare_tokenizer("bpe", CORPUS, cache_dir=tmp_path, name="t", vocab_size=5000,
                          origin="the training file x.tsv")


def test_too_small_sentencepiece_vocab_names_the_option_and_the_minimum(tmp_path: Path) -> None:
    """Issue #45: SentencePiece's RuntimeError for a vocabulary smaller than the text's characters is one line."""
    with pytest.raises(UsageError, match=r"^--data.vocab_size=5 is too small for the training file x.tsv: "
                                         r"SentencePiece \(bpe\) needs a piece for each of its (\d+) characters and "
                                         r"special tokens; give --data.vocab_size=\1 or more$"):
        prepare_tokenizer("bpe", CORPUS, cache_dir=tmp_path, name="t", vocab_size=5, origin="the training file x.tsv")
    assert not list(tmp_path.rglob("*.model"))


def test_loading_before_prepare_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="prepare_data"):
        load_tokenizer("unigram", CORPUS, cache_dir=tmp_path, name="t", vocab_size=40)
