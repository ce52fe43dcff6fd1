"""TranslationData: Multi30k served from a local server in its published layout (download, verify,
cache, refuse corrupt archives), local parallel files (prefix pairs, TSV, JSONL), line-count
mismatches, SentencePiece shared/separate, detokenized decoding."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnlab_core.errors import UsageError
from datamodules.batching import BOS, EOS
from datamodules.translation import TokenBudgetBatchSampler, TranslationData
from tests.datamodules.served import multi30k_archive, serve_multi30k

FIXTURES = Path(__file__).parents[1] / "fixtures" / "multi30k"
ARCHIVES = {"train": "training.tar.gz", "val": "validation.tar.gz", "test": "mmt16_task1_test.tar.gz"}


@pytest.fixture
def multi30k_server(http_server, monkeypatch):
    serve_multi30k(http_server, monkeypatch, ARCHIVES)
    return http_server


def make(tmp_path: Path, **kw: object) -> TranslationData:
    args = {"data_dir": str(tmp_path), "vocab_size": 60, "batch_size": 4}
    return TranslationData(**{**args, **kw})  # type: ignore[arg-type]


def test_multi30k_downloads_verifies_caches_and_trains_spm_once(tmp_path: Path, multi30k_server) -> None:
    dm = make(tmp_path)
    dm.prepare_data()
    assert len(multi30k_server.requests) == 3
    assert len(list((tmp_path / "tokenizers").glob("multi30k-deen-shared-bpe60-*.model"))) == 1
    rank1 = make(tmp_path)  # another process: everything comes from the cache
    rank1.prepare_data()
    rank1.setup("fit")
    assert len(multi30k_server.requests) == 3
    assert [len(rank1.raw_splits()[s]) for s in ("train", "val", "test")] == [24, 4, 4]
    assert rank1.src_vocab_size == rank1.tgt_vocab_size == 60
    batch = next(iter(rank1.val_dataloader()))
    assert batch.tgt[0, 0] == BOS and (batch.tgt == EOS).sum() == 4
    assert rank1.decode_tokens(batch.tgt[0, 1:]) == "A man is playing guitar in the park."
    assert rank1.decode_source(batch.src[1]) == "Zwei Kinder essen Eis."
    labels = rank1.token_labels(batch.tgt[0], side="tgt")
    assert "".join(labels).replace("▁", " ").strip() == "A man is playing guitar in the park."


def test_corrupted_archive_is_refused_and_nothing_is_cached(tmp_path: Path, multi30k_server) -> None:
    multi30k_server.files["/validation.tar.gz"] = multi30k_archive("test")  # right layout, wrong bytes
    with pytest.raises(UsageError, match="validation.tar.gz: checksum mismatch"):
        make(tmp_path).prepare_data()
    downloads = tmp_path / "downloads"
    assert not [p for p in downloads.iterdir() if p.name.startswith("validation")]
    assert not (tmp_path / "multi30k" / "val").exists()
    assert not (tmp_path / "tokenizers").exists()


def test_prefix_files_and_line_count_mismatch(tmp_path: Path) -> None:
    prefix = {f"{s}_path": str(FIXTURES / s) for s in ("train", "val", "test")}
    dm = make(tmp_path, source="files", tokenizer="unigram", **prefix)
    dm.prepare_data()
    dm.setup("test")
    assert len(dm.datasets["test"]) == 4
    (tmp_path / "bad.de").write_text("eins\nzwei\ndrei\n")
    (tmp_path / "bad.en").write_text("one\ntwo\n")
    bad = make(tmp_path, source="files", **{**prefix, "val_path": str(tmp_path / "bad")})
    with pytest.raises(UsageError, match=rf"{tmp_path / 'bad.de'} has 3 lines, {tmp_path / 'bad.en'} has 2$"):
        bad.prepare_data()


def test_tsv_and_jsonl_tables_with_separate_word_vocabularies(tmp_path: Path) -> None:
    de = (FIXTURES / "train.de").read_text().splitlines()
    en = (FIXTURES / "train.en").read_text().splitlines()
    (tmp_path / "train.tsv").write_text("src\ttgt\n" + "".join(f"{s}\t{t}\n" for s, t in zip(de, en, strict=True)))
    (tmp_path / "val.jsonl").write_text('{"src": "Ein Hund.", "tgt": "A dog."}\n')
    dm = make(tmp_path, source="files", train_path=str(tmp_path / "train.tsv"), val_path=str(tmp_path / "val.jsonl"),
              test_path=str(tmp_path / "val.jsonl"), tokenizer="word", shared_vocab=False, vocab_size=40)
    dm.prepare_data()
    dm.setup("fit")
    src_tok, tgt_tok = dm.tokenizers
    assert src_tok is not tgt_tok and "hund" in src_tok.itos and "dog" in tgt_tok.itos
    assert dm.decode_tokens(dm.datasets["val"][0][1]) == "a dog ."


def test_train_length_filter_spares_evaluation(tmp_path: Path) -> None:
    prefix = {f"{s}_path": str(FIXTURES / s) for s in ("train", "val", "test")}
    dm = make(tmp_path, source="files", tokenizer="word", max_len=9, **prefix)
    dm.setup("fit")
    assert 0 < len(dm.datasets["train"]) < 24
    assert len(dm.datasets["val"]) == 4


def test_prepared_corpora_explain_how_to_get_them(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="de-en.tgz at .* prepare-iwslt14.sh without its BPE step"):
        make(tmp_path, source="iwslt14").prepare_data()
    root = tmp_path / "wmt14"
    root.mkdir()
    for split, fixture in (("train", "train"), ("valid", "val"), ("test", "test")):
        for lang in ("de", "en"):
            (root / f"{split}.{lang}").write_text((FIXTURES / f"{fixture}.{lang}").read_text())
    dm = make(tmp_path, source="wmt14", tokenizer="word")
    dm.prepare_data()  # wmt14 is memory-mapped by default: prepare_data encodes the training split
    dm.setup("fit")
    assert len(dm.datasets["val"]) == 4


def test_too_large_vocab_is_one_line(tmp_path: Path) -> None:
    prefix = {f"{s}_path": str(FIXTURES / s) for s in ("train", "val", "test")}
    with pytest.raises(UsageError, match=r"vocab_size=8000 is too large .*at most \d+"):
        make(tmp_path, source="files", vocab_size=8000, **prefix).prepare_data()
    assert not (tmp_path / "tokenizers").exists() or not list((tmp_path / "tokenizers").iterdir())


LENGTHS = [3, 17, 5, 9, 30, 2, 11, 8, 8, 14, 6, 21, 4, 12, 7, 19, 10, 5, 3, 40]


def test_token_budget_batches_respect_budget_and_bucket_lengths() -> None:
    sampler = TokenBudgetBatchSampler(LENGTHS, max_tokens=36, train=False, seed=0, num_replicas=1, rank=0)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(len(LENGTHS)))
    for b in batches:
        assert len(b) == 1 or max(LENGTHS[i] for i in b) * len(b) <= 36
    spread = [max(LENGTHS[i] for i in b) - min(LENGTHS[i] for i in b) for b in batches]
    assert max(spread) <= 5  # neighbours in length share a batch


def test_token_budget_eval_shards_count_every_example_once() -> None:
    shards = [list(TokenBudgetBatchSampler(LENGTHS, max_tokens=24, train=False, seed=0, num_replicas=3, rank=r))
              for r in range(3)]
    assert sorted(i for shard in shards for b in shard for i in b) == list(range(len(LENGTHS)))


def test_token_budget_train_is_seeded_per_epoch_and_even_across_ranks() -> None:
    def rank_batches(rank: int, epoch: int) -> list[list[int]]:
        s = TokenBudgetBatchSampler(LENGTHS, max_tokens=24, train=True, seed=5, num_replicas=3, rank=rank)
        s.sampler.set_epoch(epoch)  # what Lightning calls (loader.batch_sampler.sampler.set_epoch)
        return list(s)

    per_rank = [rank_batches(r, 0) for r in range(3)]
    assert len({len(b) for b in per_rank}) == 1
    assert {i for shard in per_rank for b in shard for i in b} == set(range(len(LENGTHS)))
    assert rank_batches(0, 0) == rank_batches(0, 0) and rank_batches(0, 0) != rank_batches(0, 1)


def test_datamodule_max_tokens_loader(tmp_path: Path) -> None:
    prefix = {f"{s}_path": str(FIXTURES / s) for s in ("train", "val", "test")}
    dm = make(tmp_path, source="files", tokenizer="word", max_tokens=40, **prefix)
    dm.setup("fit")
    batches = list(dm.val_dataloader())
    assert sum(b.src.size(0) for b in batches) == 4
    assert all(b.tgt.numel() <= 40 or b.tgt.size(0) == 1 for b in batches)


def test_attention_figure_labels_are_the_subword_pieces(tmp_path: Path) -> None:
    """With SentencePiece, figure ticks must be one piece per attended position, not detokenized words."""
    import lightning as L

    from datamodules.batching import collate_pairs
    from lit_models.families.seq2seq import TransformerSeq2Seq

    prefix = {f"{s}_path": str(FIXTURES / s) for s in ("train", "val", "test")}
    dm = make(tmp_path, source="files", tokenizer="bpe", shared_vocab=False, **prefix)
    dm.prepare_data()
    dm.setup("test")
    model = TransformerSeq2Seq(src_vocab_size=60, tgt_vocab_size=60, d_model=16, heads=2, d_ff=32,
                               encoder_layers=1, decoder_layers=1)
    model.figure_batch = collate_pairs(dm.datasets["test"][:1])
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False, max_epochs=0)
    trainer.datamodule = dm
    model.trainer = trainer
    _, src_labels, _ = model.figure_maps()
    src_ids = dm.datasets["test"][0][0]
    assert src_labels[0] == [dm.tokenizers[0].piece(i) for i in src_ids]
    assert len(src_labels[0]) == len(src_ids) > len(dm.decode_source(src_ids).split())
