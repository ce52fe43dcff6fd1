"""Every reported metric against an independent reference on randomized corpora with edge cases.

Caption BLEU-1..4 and CIDEr-D against coco-caption (``pycocoevalcap``: its Bleu and Cider scorers are
pure Python, no Java), translation BLEU / chrF against sacrebleu's corpus functions, accuracy,
macro-F1 and MSE against their plain formulas. Each assertion message carries the largest
difference seen.
"""

from __future__ import annotations

import random

import lightning as L
import pytest
import sacrebleu
import torch

from lit_models.scoring.caption_metrics import build_caption_metrics, cider_d_scores
from lit_models.scoring.metrics import build_seq2seq_metrics

bleu_scorer = pytest.importorskip("pycocoevalcap.bleu.bleu_scorer")
cider = pytest.importorskip("pycocoevalcap.cider.cider")

WORDS = "a b c d e f g".split()
SEEDS = range(12)


def _sentence(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def caption_corpus(seed: int) -> tuple[list[str], list[list[str]]]:
    """Random corpus over 7 words (so n-grams match), with the edge cases every few images: an empty
    candidate, a single reference, a candidate identical to a reference, a brevity tie (references
    one word shorter and one longer than the candidate, in random order)."""
    rng = random.Random(seed)
    cands, refs = [], []
    for i in range(rng.randint(2, 9)):
        rs = [_sentence(rng, 1, 9) for _ in range(rng.randint(1, 5))]
        cand = _sentence(rng, 0, 9)
        kind = (seed + i) % 5
        if kind == 0:
            cand = ""
        elif kind == 1:
            rs = rs[:1]
        elif kind == 2:
            cand = rng.choice(rs)
        elif kind == 3:
            n = max(len(cand.split()), 1)
            cand = cand or "a"
            rs = [_sentence(rng, n - 1, n - 1) or "b", _sentence(rng, n + 1, n + 1)]
            rng.shuffle(rs)
        cands.append(cand)
        refs.append(rs)
    return cands, refs


def _coco_bleu(cands: list[str], refs: list[list[str]]) -> tuple[list[float], list[int]]:
    """coco-caption corpus BLEU-1..4 ('closest' reference length) and its corpus match counts."""
    scorer = bleu_scorer.BleuScorer(n=4)
    for c, rs in zip(cands, refs, strict=True):
        scorer += (c, rs)
    scores, _ = scorer.compute_score(option="closest", verbose=0)
    correct = [sum(comps["correct"][k] for comps in scorer.ctest) for k in range(4)]
    return scores, correct


def test_caption_bleu_matches_coco_caption() -> None:
    """Where every order up to n has a match, BLEU-n agrees with coco-caption to 1e-6. Where one has
    none, BLEU-n is 0 by definition; coco-caption adds 1e-15 / 1e-9 to each count and reports a small
    positive number instead (at most (1e-6)^(1/4) ≈ 0.03), so there ours must be 0 and coco's small."""
    worst, zero_cases = 0.0, 0
    for seed in SEEDS:
        cands, refs = caption_corpus(seed)
        coco, correct = _coco_bleu(cands, refs)
        for n in range(1, 5):
            metric = build_caption_metrics()[f"bleu{n}"]
            half = len(cands) // 2  # two updates: the state accumulates over batches
            metric.update(cands[:half], refs[:half])
            metric.update(cands[half:], refs[half:])
            ours = float(metric.compute())
            if min(correct[:n]) > 0:
                worst = max(worst, abs(ours - coco[n - 1]))
                assert ours == pytest.approx(coco[n - 1], abs=1e-6), (seed, n, ours, coco[n - 1])
            else:
                zero_cases += 1
                assert ours == 0.0 and coco[n - 1] < 0.04, (seed, n, ours, coco[n - 1])
    assert worst < 1e-6, f"largest |BLEU - coco-caption| {worst:.2e}"
    assert zero_cases < 4 * len(SEEDS) / 2, "the random corpora should mostly have matches"


@pytest.mark.parametrize("order", [["a b c d e", "a b c"], ["a b c", "a b c d e"]],
                         ids=["longer_first", "shorter_first"])
def test_caption_bleu_tie_agrees_with_coco_caption(order: list[str]) -> None:
    coco, _ = _coco_bleu(["a b c d"], [order])
    metric = build_caption_metrics()["bleu1"]
    metric.update(["a b c d"], [order])
    diff = abs(float(metric.compute()) - coco[0])
    assert diff < 1e-6, f"|BLEU-1 - coco-caption| = {diff:.2e}"


def test_cider_d_matches_coco_caption() -> None:
    """pycocoevalcap's ``Cider`` is CIDEr-D (clipping and the Gaussian length penalty, σ = 6)."""
    worst = 0.0
    for seed in SEEDS:
        cands, refs = caption_corpus(seed)
        _, coco = cider.Cider().compute_score({i: rs for i, rs in enumerate(refs)},
                                              {i: [c] for i, c in enumerate(cands)})
        ours = cider_d_scores(cands, refs)
        diffs = [abs(a - float(b)) for a, b in zip(ours, coco, strict=True)]
        worst = max(worst, *diffs)
        assert max(diffs) < 1e-9, (seed, ours, list(coco))
    assert worst < 1e-9, f"largest |CIDEr-D - coco-caption| per image {worst:.2e}"


# ------------------------------------------------------------------------------------------- translation
PUNCT = ["the", "cat", "sat", "on", "mat", "Dog", "runs", ",", ".", "!", "don't", "12.5", "a-b", "(x)"]


def translation_corpus(seed: int) -> tuple[list[str], list[str]]:
    """Hypotheses / single references with punctuation, case, an empty hypothesis and an identical one."""
    rng = random.Random(seed)
    hyps, refs = [], []
    for i in range(rng.randint(1, 8)):
        ref = " ".join(rng.choice(PUNCT) for _ in range(rng.randint(1, 12)))
        hyp = " ".join(rng.choice(PUNCT) for _ in range(rng.randint(1, 12)))
        hyp = {0: "", 1: ref}.get((seed + i) % 4, hyp)
        hyps.append(hyp)
        refs.append(ref)
    return hyps, refs


def test_translation_bleu_and_chrf_match_sacrebleu_corpus_functions() -> None:
    """``val/bleu`` (13a, no smoothing) and ``val/chrf`` (chrF, β = 2, no word n-grams) equal sacrebleu's
    ``corpus_bleu`` / ``corpus_chrf`` on the 0–100 scale."""
    worst = {"bleu": 0.0, "chrf": 0.0}
    for seed in SEEDS:
        hyps, refs = translation_corpus(seed)
        metrics = build_seq2seq_metrics()
        ours = {k: 100 * float(metrics[k](hyps, [[r] for r in refs])) for k in worst}
        oracle = {"bleu": sacrebleu.corpus_bleu(hyps, [refs], tokenize="13a", smooth_method="none").score,
                  "chrf": sacrebleu.corpus_chrf(hyps, [refs], char_order=6, word_order=0, beta=2).score}
        for k in worst:
            worst[k] = max(worst[k], abs(ours[k] - oracle[k]))
    assert worst["bleu"] < 1e-3 and worst["chrf"] < 1e-2, f"largest |ours - sacrebleu| (0-100 scale): {worst}"


# ------------------------------------------------------------------------------------ classification, MSE
def _plain_macro_f1(preds: list[int], labels: list[int]) -> float:
    """Mean over the classes that occur (in predictions or labels) of 2TP / (2TP + FP + FN)."""
    classes = sorted(set(preds) | set(labels))
    f1 = []
    for c in classes:
        tp = sum(p == c == y for p, y in zip(preds, labels, strict=True))
        fp = sum(p == c != y for p, y in zip(preds, labels, strict=True))
        fn = sum(y == c != p for p, y in zip(preds, labels, strict=True))
        f1.append(2 * tp / (2 * tp + fp + fn))
    return sum(f1) / len(f1)


def test_classifier_accuracy_and_macro_f1_match_the_plain_formulas() -> None:
    """The classifier's own metric objects, fed in uneven batches; edge cases: a class that never
    occurs, all right, all wrong, one example."""
    from lit_models.families.classifier import SentimentClassifier

    worst = {"acc": 0.0, "f1": 0.0}
    for seed in SEEDS:
        rng = random.Random(seed)
        n = [1, 7, 40][seed % 3]
        labels = [rng.randrange(3) for _ in range(n)]  # class 3 of 4 never occurs
        preds = {0: list(labels), 1: [(y + 1) % 3 for y in labels]}.get(seed % 4, [rng.randrange(4) for _ in labels])
        model = SentimentClassifier(src_vocab_size=10, num_classes=4, embed_dim=4, hidden_size=4, attn_size=4)
        m = model.metrics["val"]
        for lo in range(0, n, 6):
            for name in ("acc", "f1"):
                m[name].update(torch.tensor(preds[lo : lo + 6]), torch.tensor(labels[lo : lo + 6]))
        plain = {"acc": sum(p == y for p, y in zip(preds, labels, strict=True)) / n,
                 "f1": _plain_macro_f1(preds, labels)}
        for k in worst:
            worst[k] = max(worst[k], abs(float(m[k].compute()) - plain[k]))
    assert max(worst.values()) < 1e-6, f"largest |ours - plain formula|: {worst}"


def test_regressor_mse_is_the_mean_over_examples_with_uneven_batches() -> None:
    """``val/mse`` over batches of 5, 5, 5, 2 examples equals mean((ŷ − y)²) over all 17 examples."""
    from datamodules.batching import RegressionBatch
    from lit_models.families.regressor import AddingRegressor

    torch.manual_seed(0)
    model = AddingRegressor(hidden_size=8).eval()
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(17, 6, 2, generator=g), torch.randn(17, generator=g)
    batches = [RegressionBatch(x[i : i + 5], y[i : i + 5]) for i in range(0, 17, 5)]
    trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, enable_checkpointing=False)
    loader = torch.utils.data.DataLoader(batches, batch_size=None)  # the batches as they are
    (out,) = trainer.validate(model, dataloaders=loader, verbose=False)
    with torch.no_grad():
        plain = float(((model.net(x) - y) ** 2).mean())
    diff = abs(out["val/mse"] - plain)
    assert diff < 1e-6, f"|val/mse - plain mean| = {diff:.2e} ({out['val/mse']} vs {plain})"
