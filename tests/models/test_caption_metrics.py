"""Caption metrics against hand-computed values: CIDEr-D (Vedantam et al. 2015), multi-reference
BLEU (torchmetrics), box/cell overlap and the localisation score."""

from __future__ import annotations

import math

import pytest
import torch

from lit_models.scoring.caption_metrics import (
    CIDErD,
    box_cell_overlap,
    build_caption_metrics,
    cider_d_scores,
    localisation,
)


def test_cider_identical_captions_with_distinct_ngrams_score_ten() -> None:
    """Every n-gram appears in one image only (idf > 0) and the candidate equals the reference:
    each order's clipped cosine is 1 and the length penalty 1, so CIDEr-D = 10 · mean_n 1 = 10."""
    cands = ["a b c d", "e f g h", "i j k l"]
    scores = cider_d_scores(cands, [[c] for c in cands])
    assert scores == pytest.approx([10.0, 10.0, 10.0])


def test_cider_disjoint_captions_score_zero() -> None:
    assert cider_d_scores(["x y z w", "p q r s"], [["a b c d"], ["e f g h"]]) == [0.0, 0.0]


def test_cider_single_image_corpus_scores_zero() -> None:
    """With one image every idf is log(1/1) = 0: the reference implementation's known property."""
    assert cider_d_scores(["a b c d"], [["a b c d"]]) == [0.0]


def test_cider_worked_example() -> None:
    """Two images, references 'a b' and 'a c', candidates equal to them.

    Unigram 'a' is in both images: idf log(2/2) = 0; 'b' / 'c': idf log 2. So g1(cand) =
    g1(ref) = {b: log 2} -> cosine 1. Bigrams 'a b' / 'a c': idf log 2 -> cosine 1. Orders 3 and
    4 have no n-grams: 0. CIDEr-D = 10 · (1 + 1 + 0 + 0) / 4 = 5 for each image."""
    assert cider_d_scores(["a b", "a c"], [["a b"], ["a c"]]) == pytest.approx([5.0, 5.0])


def test_cider_clipping_length_penalty_and_reference_average() -> None:
    """Image 1: candidate 'b b' against references ['b', 'c']; image 2: 'd' / ['d'].

    idf: b, c -> log 2 (image 1 only), d -> log 2; bigram 'b b' is in no reference (idf log 2, but
    the reference vector is 0 -> similarity 0). Unigram, reference 'b': g(c) = {b: 2L}, g(r) =
    {b: L} (L = log 2); clipped dot = min(2L, L)·L = L², norms 2L and L -> 1/2; length delta 1 ->
    × exp(-1/72). Reference 'c': dot 0. CIDEr-D = 10 · (0.5·e^(-1/72) + 0) / 4 / 2 references."""
    scores = cider_d_scores(["b b", "d"], [["b", "c"], ["d"]])
    assert scores[0] == pytest.approx(10 * 0.5 * math.exp(-1 / 72) / 4 / 2)
    assert scores[1] == pytest.approx(10 * 1.0 / 4)


def test_cider_metric_accumulates_the_corpus() -> None:
    metric = CIDErD()
    metric.update(["a b"], [["a b"]])
    metric.update(["a c"], [["a c"]])
    assert float(metric.compute()) == pytest.approx(5.0)
    metric.reset()
    assert float(metric.compute()) == 0.0


def test_bleu_multi_reference_known_values() -> None:
    """Papineni et al.'s 'the the the ...' example: clipped unigram precision 2/7 against the
    reference with two 'the'; with a second reference the closest length sets the brevity penalty."""
    m = build_caption_metrics()
    cand = ["the the the the the the the"]
    refs = [["the cat is on the mat", "there is a cat on the mat"]]
    m["bleu1"].update(cand, refs)
    assert float(m["bleu1"].compute()) == pytest.approx(2 / 7)  # c = 7 > closest r = 7: BP = 1
    m2 = build_caption_metrics()
    m2["bleu1"].update(["the the the the"], [["the cat is on the mat"]])
    assert float(m2["bleu1"].compute()) == pytest.approx(0.5 * math.exp(1 - 6 / 4))
    m2["bleu4"].update(["a b c d e"], [["x y", "a b c d e"]])
    assert float(m2["bleu4"].compute()) == pytest.approx(1.0)


@pytest.mark.parametrize("references", [["a b c d e", "a b c"], ["a b c", "a b c d e"]],
                         ids=["longer_first", "shorter_first"])
def test_bleu_brevity_tie_takes_the_shorter_reference(references: list[str]) -> None:
    """A 4-word candidate is as close to a 5-word as to a 3-word reference: the effective reference
    length is the shorter (coco-caption, NLTK, sacrebleu), so BP = 1 whatever the order, and
    'a b c d' has every unigram in a reference: BLEU-1 = 1 (the longer reference would give e^(1-5/4))."""
    m = build_caption_metrics()
    m["bleu1"].update(["a b c d"], [references])
    assert float(m["bleu1"].compute()) == pytest.approx(1.0)


def test_box_cell_overlap_exact() -> None:
    """Grid 2: the box [0.25, 0.75]² covers a quarter of each of the four cells; [0, 0.5]² is cell 0."""
    boxes = torch.tensor([[[0.25, 0.25, 0.75, 0.75], [0.0, 0.0, 0.5, 0.5], [0.5, 0.0, 1.0, 0.5]]])
    cover = box_cell_overlap(boxes, 2)[0]  # (K, 4), cells row-major
    torch.testing.assert_close(cover[0], torch.full((4,), 0.25))
    torch.testing.assert_close(cover[1], torch.tensor([1.0, 0.0, 0.0, 0.0]))
    torch.testing.assert_close(cover[2], torch.tensor([0.0, 1.0, 0.0, 0.0]))  # top-right = column 1


def test_localisation_inside_outside_and_uniform() -> None:
    boxes = torch.tensor([[[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 1.0, 1.0]]])  # cells 0 and 3 of a 2 x 2 grid
    region = box_cell_overlap(boxes, 2)
    weights = torch.tensor([[[1.0, 0, 0, 0], [0, 0, 0, 1.0], [0.25] * 4, [1.0, 0, 0, 0]]])  # (1, T=4, S=4)
    objects = torch.tensor([[0, 0, 1, -1]])  # word 0 names object 0 (inside), 1 names 0 (outside), 2 uniform
    mass, uniform, named = localisation(weights, objects, region)
    assert int(named) == 3
    assert float(mass) == pytest.approx(1.0 + 0.0 + 0.25)
    assert float(uniform) == pytest.approx(0.25 * 3)


def _rank_scores(rank: int, port: int, cands: list, refs: list, out) -> None:
    """One gloo rank: update with every other example, compute the corpus metrics."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        metrics = build_caption_metrics()
        for m in metrics.values():
            m.update(cands[rank::2], refs[rank::2])
        out.put((rank, {k: float(m.compute()) for k, m in metrics.items()}))
    finally:
        dist.destroy_process_group()


def test_two_gloo_ranks_score_the_single_process_corpus() -> None:
    """Text metrics keep their pairs and gather them across ranks at compute(): 2 gloo ranks, each holding half
    the corpus (an odd split, one rank's references fewer), give exactly the one-process BLEU-1..4 and CIDEr-D."""
    import socket

    import torch.multiprocessing as mp

    cands = ["a b c d", "a b", "c d e f g", "a c e", "b d x"]
    refs = [["a b c d e", "a b c"], ["a b"], ["c d e f", "c d e f g h", "d e"], ["a b c e"], ["b d f", "f d b"]]
    whole = build_caption_metrics()
    for m in whole.values():
        m.update(cands, refs)
    want = {k: float(m.compute()) for k, m in whole.items()}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_rank_scores, args=(r, port, cands, refs, out)) for r in range(2)]
    for p in procs:
        p.start()
    got = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    assert got[0] == got[1] == pytest.approx(want, abs=1e-12), (got, want)
    assert 0 < want["bleu1"] < 1 and want["cider_d"] > 0
