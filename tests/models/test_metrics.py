"""The seq2seq text metrics agree with sacrebleu itself, so the logged signatures describe them."""

import pytest
from sacrebleu.metrics import BLEU, CHRF

from lit_models.scoring.metrics import build_seq2seq_metrics, metric_signatures

HYPS = ["the cat sat on the mat.", "a dog runs fast in the park", "hello there", "completely different"]
REFS = ["the cat is on the mat.", "the dog runs quickly in a park", "hello there friend", "nothing shared here"]


def test_bleu_and_chrf_match_sacrebleu():
    metrics = build_seq2seq_metrics()
    bleu = float(metrics["bleu"](HYPS, [[r] for r in REFS])) * 100
    chrf = float(metrics["chrf"](HYPS, [[r] for r in REFS])) * 100
    assert bleu == pytest.approx(BLEU(tokenize="13a", smooth_method="none").corpus_score(HYPS, [REFS]).score, abs=1e-3)
    assert chrf == pytest.approx(CHRF(word_order=0).corpus_score(HYPS, [REFS]).score, abs=0.01)


def test_sacrebleu_metrics_reject_unpaired_references_and_score_an_empty_corpus_zero():
    metrics = build_seq2seq_metrics()
    with pytest.raises(ValueError, match="2 hypotheses but 1 reference lists"):
        metrics["bleu"].update(["a b", "c"], [["a b"]])
    metrics["bleu"].update([], [])
    assert float(metrics["bleu"].compute()) == 0.0


def test_signatures_name_the_settings():
    sig = metric_signatures()
    assert "tok:13a" in sig["bleu_signature"] and "smooth:none" in sig["bleu_signature"]
    assert "nrefs:1" in sig["bleu_signature"] and "nw:0" in sig["chrf_signature"]


def test_positions_matched_grades_a_free_running_output():
    import torch

    from lit_models.scoring.metrics import positions_matched

    gold = torch.tensor([[5, 6, 7, 2], [5, 6, 2, 0]])  # EOS = 2, PAD = 0
    pred = torch.tensor([[5, 6, 9, 2, 0], [5, 6, 2, 0, 0]])
    assert positions_matched(pred, gold).tolist() == [0.75, 1.0]
    shifted = torch.tensor([[6, 7, 2, 0]])  # dropped the first token: only the aligned prefix counts
    assert positions_matched(shifted, gold[:1]).tolist() == [0.0]
