"""Caption metrics: corpus BLEU-1..4 with several references (sacrebleu's) and CIDEr-D (implemented here).

BLEU (Papineni et al. 2002, §2.1 modified n-gram precision p_n, §2.2.2 brevity penalty, §2.3
BLEU = BP · exp(Σ_n w_n log p_n), w_n = 1/N) is sacrebleu's corpus BLEU with ``max_ngram_order`` N,
no tokenization (captions are space-separated tokens) and no smoothing. The effective reference length
of a candidate is its closest reference's, the *shorter* one on a tie (as coco-caption and NLTK), and a
corpus with no match of some order scores 0 (coco-caption instead adds 1e-15 / 1e-9 to every count, so
it reports a small positive number there).

CIDEr-D (Vedantam, Zitnick & Parikh 2015, "CIDEr: Consensus-based Image Description Evaluation",
§3 eq. 2–5 and §4.2 "CIDEr-D"): for each n-gram order n = 1..4 a caption is a TF-IDF vector

    g_k(s) = h_k(s) · log(|I| / max(1, Σ_p min(1, Σ_q h_k(s_pq))))          (eq. 2, IDF over images)

where h_k counts n-gram k and the IDF counts the images whose *references* contain k. Then

    CIDEr-D_n(c, S) = 10/m Σ_j exp(−(l(c) − l(s_j))² / 2σ²) · min(g(c), g(s_j)) · g(s_j) / (‖g(c)‖ ‖g(s_j)‖)
    CIDEr-D(c, S)   = (1/4) Σ_n CIDEr-D_n(c, S)                               (σ = 6; corpus score = mean)

As in the reference implementation (coco-caption's ``cider_scorer``) the term frequency is the raw
count (the paper divides by the caption's n-gram total; cosine similarity is unchanged by that, the
clipping is not), the IDF is computed on the evaluated corpus' references, and a zero vector has
similarity 0. Consequences worth knowing: a corpus of a single image scores 0 (every IDF is
log 1 = 0), and a perfect caption scores 10 only if its n-grams are rare across the corpus.
Captions are compared as given: space-separated, already lower-cased tokens.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torchmetrics import Metric

from lit_models.scoring.metrics import CorpusSacreBLEU, TextCorpusMetric

NgramCounts = list[Counter]
"""Per order n = 1..N: Counter of n-gram tuples."""


def ngram_counts(tokens: Sequence[str], n_max: int) -> NgramCounts:
    """Counts of every n-gram, n = 1..n_max, of one tokenised caption."""
    return [Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)) for n in range(1, n_max + 1)]


def _tfidf(counts: NgramCounts, log_df: list[dict], log_images: float) -> list[dict]:
    """g^n: raw count × (log |I| − log df) for each n-gram of each order."""
    return [{g: c * (log_images - log_df[n].get(g, 0.0)) for g, c in counts[n].items()} for n in range(len(counts))]


def _similarity(cand: dict, ref: dict, length_delta: int, sigma: float) -> float:
    """Clipped cosine of two TF-IDF vectors of one order, times the Gaussian length penalty."""
    norm_c = math.sqrt(sum(v * v for v in cand.values()))
    norm_r = math.sqrt(sum(v * v for v in ref.values()))
    if norm_c == 0.0 or norm_r == 0.0:
        return 0.0
    dot = sum(min(v, ref.get(g, 0.0)) * ref.get(g, 0.0) for g, v in cand.items())
    return dot / (norm_c * norm_r) * math.exp(-(length_delta**2) / (2 * sigma**2))


def cider_d_scores(
    candidates: Sequence[str], references: Sequence[Sequence[str]], *, n_max: int = 4, sigma: float = 6.0
) -> list[float]:
    """CIDEr-D of each candidate against its references (Vedantam et al. 2015, §4.2).

    Args:
        candidates: I captions (space-separated tokens), one per image.
        references: I lists of reference captions.
        n_max: N, the largest n-gram order (paper: 4). sigma: σ of the length penalty (paper: 6).

    Returns:
        I per-image scores; the corpus CIDEr-D is their mean.
    """
    if len(candidates) != len(references):
        raise ValueError(f"{len(candidates)} candidates but {len(references)} reference lists")
    refs = [[r.split() for r in rs] for rs in references]
    ref_counts = [[ngram_counts(r, n_max) for r in rs] for rs in refs]
    df: list[Counter] = [Counter() for _ in range(n_max)]
    for per_image in ref_counts:
        for n in range(n_max):
            df[n].update(set().union(*(c[n] for c in per_image)) if per_image else set())
    log_df = [{g: math.log(max(1.0, float(v))) for g, v in df[n].items()} for n in range(n_max)]
    log_images = math.log(float(max(len(candidates), 1)))
    scores = []
    for cand, rs, rcs in zip(candidates, refs, ref_counts, strict=True):
        tokens = cand.split()
        g_c = _tfidf(ngram_counts(tokens, n_max), log_df, log_images)
        total = [0.0] * n_max
        for r, rc in zip(rs, rcs, strict=True):
            g_r = _tfidf(rc, log_df, log_images)
            for n in range(n_max):
                total[n] += _similarity(g_c[n], g_r[n], len(tokens) - len(r), sigma)
        scores.append(10.0 * sum(total) / n_max / max(len(rs), 1))
    return scores


class CIDErD(TextCorpusMetric):
    """Corpus CIDEr-D (mean of :func:`cider_d_scores`); the IDF needs the whole corpus, which the base keeps."""

    def __init__(self, *, n_max: int = 4, sigma: float = 6.0) -> None:
        super().__init__()
        self.n_max, self.sigma = n_max, sigma

    def score(self, hyps: list[str], refs: list[list[str]]) -> float:
        scores = cider_d_scores(hyps, refs, n_max=self.n_max, sigma=self.sigma)
        return sum(scores) / len(scores)


def build_caption_metrics() -> nn.ModuleDict:
    """BLEU-1..4 (Papineni et al. 2002, several references; sacrebleu's, on space-separated tokens) and CIDEr-D."""
    metrics: dict[str, Metric] = {f"bleu{n}": CorpusSacreBLEU(tokenize="none", max_ngram_order=n) for n in range(1, 5)}
    metrics["cider_d"] = CIDErD()
    return nn.ModuleDict(metrics)


def box_cell_overlap(boxes: Tensor, grid_size: int) -> Tensor:
    """Share of each grid cell covered by each box.

    Args:
        boxes: (B, K, 4) (x0, y0, x1, y1) in [0, 1] image coordinates.
        grid_size: G; cells are flattened row-major (cell i = row i // G, column i % G).

    Returns:
        (B, K, S = G²) in [0, 1]: area(cell ∩ box) / area(cell).
    """
    edges = torch.arange(grid_size + 1, device=boxes.device, dtype=boxes.dtype) / grid_size  # (G + 1,)
    lo, hi = edges[:-1], edges[1:]  # (G,)

    def cover(a: Tensor, b: Tensor) -> Tensor:  # (B, K) interval -> (B, K, G) share of each cell
        return ((torch.minimum(b[..., None], hi) - torch.maximum(a[..., None], lo)).clamp_min(0) * grid_size)

    ox, oy = cover(boxes[..., 0], boxes[..., 2]), cover(boxes[..., 1], boxes[..., 3])  # (B, K, G)
    return (oy[..., :, None] * ox[..., None, :]).flatten(-2)  # (B, K, G, G) -> (B, K, S)


def localisation(weights: Tensor, objects: Tensor, region: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Attention mass inside the region of the object each word names, and the uniform level.

    Args:
        weights: (B, T, S) attention weights of the steps predicting labels 0..T-1.
        objects: (B, T) long, the object (index into K) named by each label; -1 for none.
        region: (B, K, S) cell coverage of each object (:func:`box_cell_overlap`).

    Returns:
        (Σ mass, Σ uniform-attention mass, number of naming words): mass = Σ_s w_ts · region_ks;
        the uniform level is mean_s region_ks (what α = 1/S would score).
    """
    named = objects >= 0  # (B, T)
    idx = objects.clamp_min(0).unsqueeze(-1).expand(-1, -1, region.size(-1))  # (B, T, S)
    target = region.gather(1, idx)  # (B, T, S) region of the named object
    mass = (weights.float() * target).sum(-1)  # (B, T)
    uniform = target.mean(-1)  # (B, T)
    return (mass * named).sum(), (uniform * named).sum(), named.sum()
