"""Show, Attend and Tell (Xu et al. 2015): image captioning with soft, hard or no attention.

A CNN grid encoder (``blocks.vision``) gives S annotation vectors a_i; the recurrent attentional
decoder of the seq2seq family (``blocks.recurrent_decoder.AttentionalDecoder``) attends over
them, initialised from their mean, with the gating scalar β (§4.2.1) and a deep output layer.
Training minimises (all terms divided by the number of caption tokens N in the batch)

    L = Σ_tokens −log p(y_t | ...)  +  λ Σ_captions Σ_i (1 − Σ_t α_ti)²      (Xu et al. eq. 14)
        + REINFORCE for hard attention (``lit_models.training.reinforce``; Xu et al. eq. 12–13)

``attention``: ``additive`` is the paper's deterministic "soft" attention (§4.2), ``hard`` its
stochastic attention (§4.1; one sampled cell per word in training, the argmax — or with
``hard_eval=expectation`` the soft expectation — when evaluating), ``none`` the bottleneck
baseline: the mean feature only initialises the LSTM. No term branches on the kind: the decoder
state carries Σ_t α_t (zero without attention, which the penalty skips) and the hard log-probs
(zero for soft arms, which REINFORCE then ignores).

With ``hard_soft_mix`` = p a training caption of the hard arm uses the soft expectation instead of
samples with probability p (Xu et al. §4.1: 0.5), which trains the scorer through both paths.

Deviations: the penalty is normalised by N with the likelihood (the paper sums both); ResNet or a
small CNN instead of VGG.

Validation and test decode free-running (``--decode.*``; the source length is 0, so the caption
length limit is ``--decode.max_len_b``) and log BLEU-1..4 (every reference), CIDEr-D, the
teacher-forced loss, and — when the data tags words with object boxes (the shapes default) —
``localisation``: the share of a word's attention mass inside the object it names, next to
``localisation_uniform``, what uniform attention would score.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from attnlab_core.options import with_defaults
from attnlab_core.tokens import PAD
from lit_models.builders import build_captioner
from lit_models.scoring.caption_metrics import box_cell_overlap, build_caption_metrics, localisation
from lit_models.scoring.metrics import Ratio
from lit_models.specs import CaptionerSpec
from lit_models.training.decoder_training import DecoderTrainingModule
from lit_models.training.evaluation import drop_nan
from lit_models.training.reinforce import ReinforceOptions


class Share(Ratio):
    """Σ numerator / Σ denominator over batches and ranks; NaN when nothing was counted."""

    def compute(self) -> Tensor:
        return self.correct / self.total.where(self.total > 0, torch.nan)  # no host sync


def doubly_stochastic_penalty(attn_total: Tensor) -> Tensor:
    """Σ_i (1 − Σ_t α_ti)² per caption (Xu et al. eq. 14); 0 for rows without attention mass.

    Args:
        attn_total: (B, S) Σ_t α_t over the caption's steps (the decoder state's ``attn_total``).
    Returns:
        (B,) penalties.
    """
    attended = (attn_total.sum(-1) > 0).to(attn_total.dtype)  # (B,) attention "none" has no mass
    return ((1.0 - attn_total) ** 2).sum(-1) * attended


class ShowAttendTell(DecoderTrainingModule):
    """Image captioner (Xu et al. 2015) on the shared decoder base (forcing, loss, optimiser, decoding).

    Not a seq2seq module: its sources are images, its metrics coco-caption's, its figures per-word
    overlays on the image (``protocols.PlotsFigures``), not token heatmaps.

    Args:
        tgt_vocab_size: caption vocabulary size (linked from the datamodule).
        options: the architecture (``specs.CaptionerSpec``: encoder, weights, ..., attention, cell, gate,
            the penalty's λ ``doubly_stochastic``, hard_eval, hard_soft_mix), the REINFORCE term of hard
            attention (``reinforce.ReinforceOptions``), then ``decoder_training.DecoderTraining``'s knobs.
    """

    option_groups = (with_defaults(CaptionerSpec), with_defaults(ReinforceOptions))
    training_defaults = {"scheduled_mode": "per_step", "lr_schedule": "constant", "warmup_steps": 100}
    figure_examples = 3  # the first images of the first validation batch (no token length to rank by)

    def __init__(self, *, tgt_vocab_size: int, **options: Any) -> None:
        groups = self.options(**options)
        arch, reinforce, training = groups
        super().__init__(training)
        self.save_hyperparameters()
        self.save_options(groups)
        self.net = build_captioner(arch, tgt_vocab_size=tgt_vocab_size)
        self.reinforce = reinforce.term(value_size=self.net.encoder.feature_size)
        self.metrics = nn.ModuleDict({s: self._split_metrics() for s in ("val", "test")})

    @staticmethod
    def _split_metrics() -> nn.ModuleDict:
        metrics = build_caption_metrics()
        for name in ("loss", "localisation", "localisation_uniform"):
            metrics[name] = Share()
        return metrics

    # ----------------------------------------------------------------- training
    def source_lengths(self, src: Tensor) -> Tensor:
        """Images have no token length: 0, so the decode limit is ``max_len_b`` words."""
        return torch.zeros(src.size(0), dtype=torch.long, device=src.device)

    def auxiliary_loss(self, logits: Tensor, labels: Tensor, state: dict[str, Tensor]) -> Tensor:
        """Doubly stochastic penalty (per token) + REINFORCE (zero for soft arms' log-probs)."""
        tokens = (labels != PAD).sum().clamp_min(1)
        penalty = doubly_stochastic_penalty(state["attn_total"]).sum() / tokens
        out = self.reinforce(logits, labels, state)
        b = labels.size(0)
        self.log("train/doubly_stochastic", penalty, batch_size=b)
        self.log("train/reward", out.reward.mean(), batch_size=b)
        return self.hparams.doubly_stochastic * penalty + out.loss

    # --------------------------------------------------------------- evaluation
    def _evaluate(self, batch, split: str) -> None:
        tgt_in, labels = batch.tgt[:, :-1], batch.tgt[:, 1:]
        out = self.net.decoder.teacher_forward(self.net.encode(batch.src), tgt_in)
        m = self.metrics[split]
        self._update_loss(m["loss"], out.logits, labels)
        region = box_cell_overlap(batch.boxes, self.net.encoder.grid_size)  # (B, K, S)
        mass, uniform, named = localisation(out.weights, batch.objects, region)
        m["localisation"].update(mass, named)
        m["localisation_uniform"].update(uniform, named)
        detok = self._detokenizer()
        texts = [detok(p) for p in self.generate(batch.src).tolist()]
        for name in ("bleu1", "bleu2", "bleu3", "bleu4", "cider_d"):
            m[name].update(texts, batch.refs)

    def _split_values(self, split: str) -> dict[str, Tensor]:
        """Every metric, except the localisation pair when no word named a boxed object (NaN)."""
        return drop_nan(super()._split_values(split))

    # ------------------------------------------------------------------ figures
    @torch.no_grad()
    def figure_plots(self, epoch: int) -> dict[str, object]:
        """Per-word attention overlays of the fixed figure images on their generated captions."""
        from lit_models.callbacks.figures import plot_caption_attention

        images = self.figure_batch.src.to(self.device)
        pred, tgt_in = self._generate_with_inputs(images)  # (N, L) each
        weights = self.net.attention_maps(images, tgt_in)["cross/layer1"][:, 0]  # (N, L, S)
        g = self.net.encoder.grid_size
        detok = self._detokenizer()
        kind = self.hparams.attention
        out = {}
        for i in range(images.size(0)):
            words = detok(pred[i]).split() + ["</s>"]
            out[f"caption_{kind}_ex{i}"] = plot_caption_attention(
                images[i].cpu(), weights[i, : len(words)].view(-1, g, g).cpu(), words=words,
                title=f"{kind} attention · example {i} · epoch {epoch}",
            )
        return out
