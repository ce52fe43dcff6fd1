"""BLEU by source-length bucket equals sacrebleu's corpus BLEU computed on each bucket separately,
however the test set is split into batches; the seq2seq test loop logs it as test/bleu_by_len/*."""

from __future__ import annotations

import random

import lightning as L
import pytest
import torch
from sacrebleu.metrics import BLEU

from datamodules.toy_language import generate_pairs
from datamodules.translation import TranslationData
from lit_models.families.seq2seq import TransformerSeq2Seq
from lit_models.scoring.bleu_by_length import BLEUByLength, CountByLength


def _corpus(n: int = 120) -> tuple[list[str], list[str], list[int]]:
    """References from the generated pair, hypotheses with words dropped and swapped, source lengths."""
    rng = random.Random(0)
    pairs = generate_pairs(n=n, seed=3, min_words=4, max_words=40)
    hyps, refs, lengths = [], [], []
    for p in pairs:
        words = p.tgt.split()
        keep = [w for w in words if rng.random() > 0.15]
        if len(keep) > 3 and rng.random() < 0.5:
            i = rng.randrange(len(keep) - 1)
            keep[i], keep[i + 1] = keep[i + 1], keep[i]
        hyps.append(" ".join(keep))
        refs.append(p.tgt)
        lengths.append(len(p.src.split()))
    return hyps, refs, lengths


def _sacrebleu_by_bucket(hyps, refs, lengths, *, width, buckets) -> dict[str, float]:
    groups: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        groups.setdefault(min((n - 1) // width, buckets - 1), []).append(i)
    out = {}
    for b, rows in groups.items():
        score = BLEU(tokenize="13a", smooth_method="none").corpus_score([hyps[i] for i in rows],
                                                                       [[refs[i] for i in rows]]).score
        out[f"len_{b * width + 1:03d}_{(b + 1) * width:03d}"] = score / 100
    return out


@pytest.mark.parametrize(("width", "buckets", "batch"), [(5, 16, 7), (10, 3, 32), (5, 16, 120)])
def test_matches_sacrebleu_per_bucket(width: int, buckets: int, batch: int) -> None:
    hyps, refs, lengths = _corpus()
    metric = BLEUByLength(width=width, buckets=buckets)
    for start in range(0, len(hyps), batch):
        end = start + batch
        metric.update(hyps[start:end], [[r] for r in refs[start:end]], torch.tensor(lengths[start:end]))
    got = {k: float(v) for k, v in metric.compute().items()}
    want = _sacrebleu_by_bucket(hyps, refs, lengths, width=width, buckets=buckets)
    assert sorted(got) == sorted(want) and len(want) >= 3
    for key, value in want.items():
        assert got[key] == pytest.approx(value, abs=1e-4), key
    assert len(set(round(v, 3) for v in want.values())) > 1  # buckets really differ: not one global score
    metric.reset()
    metric.update(hyps[:1], [[refs[0]]], torch.tensor(lengths[:1]))
    assert len(metric.compute()) == 1


def test_perfect_bucket_scores_one_and_empty_buckets_are_absent() -> None:
    metric = BLEUByLength()
    metric.update(["a b c d e", "x y z w v u"], [["a b c d e"], ["p q r s t o"]], torch.tensor([3, 12]))
    out = metric.compute()
    assert sorted(out) == ["len_001_005", "len_011_015"]
    assert float(out["len_001_005"]) == pytest.approx(1.0) and float(out["len_011_015"]) == 0.0


def test_seq2seq_test_loop_logs_bleu_by_source_length(tmp_path) -> None:
    dm = TranslationData(source="synthetic", data_dir=str(tmp_path), train_size=16, val_size=8, test_size=40,
                         batch_size=16, shared_vocab=True)
    model = TransformerSeq2Seq(src_vocab_size=dm.src_vocab_size, tgt_vocab_size=dm.tgt_vocab_size, d_model=16,
                               heads=2, d_ff=32, encoder_layers=1, decoder_layers=1, tying="all")
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False, accelerator="cpu")
    trainer.test(model, datamodule=dm)
    logged = {k for k in trainer.callback_metrics if k.startswith("test/bleu_by_len/")}
    lengths = {len(s.split()) for s, _ in dm.raw_splits()["test"]}
    want = {f"test/bleu_by_len/len_{(n - 1) // 5 * 5 + 1:03d}_{(n - 1) // 5 * 5 + 5:03d}" for n in lengths}
    assert logged == want and len(want) >= 3
    counts = {k.removeprefix("test/count_by_len/"): float(v) for k, v in trainer.callback_metrics.items()
              if k.startswith("test/count_by_len/")}
    assert {f"test/bleu_by_len/{k}" for k in counts} == want  # one count beside each bucket's BLEU
    assert sum(counts.values()) == len(dm.raw_splits()["test"])  # every test sentence counted exactly once


def test_count_by_length_counts_each_source_in_its_bucket() -> None:
    metric = CountByLength(width=5, buckets=3)
    metric.update(torch.tensor([1, 5, 6, 10, 11, 40]))  # 40 falls in the last bucket, which holds every longer one
    assert {k: float(v) for k, v in metric.compute().items()} == {"len_001_005": 2.0, "len_006_010": 2.0,
                                                                   "len_011_015": 2.0}
