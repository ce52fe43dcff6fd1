"""Character-level text LM data: WikiText downloaded (checksummed, cached) from a loopback server in the
published layout, evaluation windows that score every token exactly once, and perplexity by context
length on the fixture through the Lightning test loop."""

from __future__ import annotations

import hashlib
import io
import math
import zipfile
from pathlib import Path

import lightning as L
import pytest
import torch

from attnlab_core.errors import UsageError
from datamodules import text_sources, wikitext
from datamodules.batching import UNK
from datamodules.download import Resource
from datamodules.wikitext import TextLM, char_vocabulary, encode_chars, eval_batches, windows
from lit_models.families.causal_lm import CausalLM

FIXTURE = Path(__file__).parents[1] / "fixtures" / "lm" / "tiny.txt"


def _wikitext_zip(name: str, texts: dict[str, str]) -> bytes:
    """An archive in the published layout: <name>/wiki.{train,valid,test}.raw."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for split, text in texts.items():
            zf.writestr(f"{name}/wiki.{split}.raw", text)
    return buf.getvalue()


def _publish(http_server, monkeypatch, source: str) -> bytes:
    text = FIXTURE.read_text()
    data = _wikitext_zip(text_sources.WIKITEXT_DIR[source], {"train": text, "valid": text[:1500], "test": text[-1500:]})
    name = text_sources.WIKITEXT[source].name
    http_server.files[f"/{name}"] = data
    monkeypatch.setitem(text_sources.WIKITEXT, source, Resource(url=f"{http_server.url}/{name}",
                                                            checksum="md5:" + hashlib.md5(data).hexdigest()))
    return data


@pytest.mark.parametrize("source", ["wikitext2", "wikitext103"])
def test_wikitext_is_downloaded_once_checksummed_and_read_in_the_published_layout(
        http_server, monkeypatch, tmp_path, source):
    _publish(http_server, monkeypatch, source)
    dm = TextLM(source=source, data_dir=str(tmp_path), context=16, vocab_size=40)
    dm.prepare_data()
    dm.prepare_data()  # cached: no second request
    assert len(http_server.requests) == 1
    dm.setup("fit")
    text = FIXTURE.read_text()
    assert len(dm.streams["train"]) == len(text) and len(dm.streams["test"]) == 1500
    assert dm.decode_tokens(dm.streams["test"][:40].tolist()) == text[-1500:][:40]


def test_corrupt_download_is_refused(http_server, monkeypatch, tmp_path):
    _publish(http_server, monkeypatch, "wikitext2")
    http_server.files["/wikitext-2-raw-v1.zip"] = b"not the archive"
    with pytest.raises(UsageError, match="checksum mismatch"):
        TextLM(source="wikitext2", data_dir=str(tmp_path)).prepare_data()


def test_vocabulary_keeps_the_most_frequent_characters():
    vocab = char_vocabulary("aaabbc", size=2)
    assert [chr(c) for c in vocab] == ["a", "b"]
    assert encode_chars("abcz", vocab).tolist() == [4, 5, UNK, UNK]


@pytest.mark.parametrize("stride", [None, 1, 3, 8])
def test_every_token_after_the_first_is_scored_exactly_once(stride):
    length, context = 50, 8
    scored = torch.zeros(length, dtype=torch.long)
    for start, score_from in windows(length, context=context, stride=stride):
        scored[start + 1 + score_from: start + context + 1] += 1
        if stride is not None and start:
            assert score_from == context - stride  # at least context - stride tokens of context
    last = max(s for s, _ in windows(length, context=context, stride=stride)) + context
    assert scored[0] == 0 and (scored[1: last + 1] == 1).all() and length - 1 - last < (stride or context)


def test_eval_batches_are_sharded_exactly_once(monkeypatch):
    whole = eval_batches(100, contexts=[4, 8], stride=None, batch_size=3)
    shards = []
    for rank in (0, 1):
        monkeypatch.setattr(wikitext, "distributed_world", lambda r=rank: (2, r))
        shards += eval_batches(100, contexts=[4, 8], stride=None, batch_size=3)
    flat = sorted((c, w) for c, items in whole for w in items)
    assert sorted((c, w) for c, items in shards for w in items) == flat
    assert all(len({c for c, _ in [b]}) == 1 for b in shards)  # one context per batch


def test_perplexity_by_context_length_on_the_fixture(tmp_path):
    dm = TextLM(source="file", path=str(FIXTURE), context=16, eval_contexts=[16, 32, 64], vocab_size=40,
                batch_size=4)
    model = CausalLM(tgt_vocab_size=40, d_model=16, heads=2, d_ff=32, layers=1, positions="alibi", dropout=0.0)
    trainer = L.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=tmp_path)
    metrics = trainer.test(model, datamodule=dm, verbose=False)[0]
    assert {"test/ppl_by_ctx/ctx_00016", "test/ppl_by_ctx/ctx_00032", "test/ppl_by_ctx/ctx_00064"} <= set(metrics)
    # an independent sum over the same windows: exp(mean NLL of every scored target)
    stream = dm.streams["test"]
    for ctx in (16, 32, 64):
        nll, n = 0.0, 0
        for start, _ in windows(len(stream), context=ctx, stride=None):
            window = stream[start: start + ctx + 1][None]
            with torch.no_grad():
                logp = model.net.lm_logits(window[:, :-1]).log_softmax(-1)
            nll -= float(logp.gather(2, window[:, 1:, None]).sum())
            n += ctx
        assert metrics[f"test/ppl_by_ctx/ctx_{ctx:05d}"] == pytest.approx(math.exp(nll / n), rel=1e-4)
    assert "test/exact_match" not in metrics  # running text has no free-running answers
    assert metrics["test/ppl_unigram"] == pytest.approx(dm.unigram_perplexity("test"), rel=1e-6)


@pytest.mark.parametrize("stride", [None, 5])
def test_unigram_baseline_matches_a_direct_count_on_the_scored_targets(stride):
    """Add-one unigram perplexity, counted by hand over the training characters and summed over exactly the
    targets the first context's windows score (every token after the first, up to the last window's end)."""
    dm = TextLM(source="file", path=str(FIXTURE), context=16, eval_contexts=[16, 32], vocab_size=40, batch_size=4,
                eval_stride=stride, test_size=7)
    dm.setup("test")
    train, test = dm.streams["train"].tolist(), dm.streams["test"].tolist()
    scored = [t for s, f in windows(len(test), context=16, stride=stride)[:7] for t in test[s + 1 + f: s + 17]]
    total = len(train) + 40
    nll = -sum(math.log((train.count(t) + 1) / total) for t in scored)
    assert dm.unigram_perplexity("test") == pytest.approx(math.exp(nll / len(scored)), rel=1e-9)
    assert 1.0 < dm.unigram_perplexity("test") < 40.0  # below uniform over the vocabulary, above certainty


def test_bad_arguments_are_one_line_errors(tmp_path):
    with pytest.raises(UsageError, match="source=file needs --data.path"):
        TextLM(source="file")
    with pytest.raises(UsageError, match="eval_stride"):
        TextLM(source="file", path="x", context=8, eval_stride=9)
    with pytest.raises(UsageError, match="no such file"):
        TextLM(source="file", path=str(tmp_path / "missing.txt")).setup("fit")


def test_train_size_keeps_the_seeded_subset_of_the_training_windows():
    capped = TextLM(source="file", path=str(FIXTURE), context=16, vocab_size=40, batch_size=4, seed=5, train_size=7)
    capped.setup("fit")
    stream = capped.streams["train"]
    every = [start for start, _ in windows(len(stream), context=16, stride=None)]
    kept = [every[i] for i in capped.sizes.train_subset(len(every), 5)]
    assert len(kept) == 7 < len(every)
    rows = sorted(tuple(row.tolist()) for batch in capped.train_dataloader() for row in batch.tokens)
    assert rows == sorted(tuple(stream[s: s + 17].tolist()) for s in kept)  # each kept window once an epoch
