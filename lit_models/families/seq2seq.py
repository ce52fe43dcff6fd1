"""Seq2seq LightningModules: a shared base (token sources, seq2seq metrics, heatmap figures) and the Transformer.

The modules are thin: the network comes from ``builders``; training, optimisation and the free-running
decoding of validation and test from ``decoder_training.DecoderTrainingModule`` (the forcing policy, the
label-smoothed loss, ``blocks.decoding``), so every family is trained and judged the same way.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from attnlab_core.batches import Seq2SeqBatch
from attnlab_core.tokens import PAD
from lit_models.builders import build_transformer
from lit_models.callbacks.figures import longest_examples
from lit_models.scoring.bleu_by_length import BLEUByLength, CountByLength
from lit_models.scoring.metrics import (
    build_seq2seq_metrics,
    metric_signatures,
    positions_matched,
    sequences_equal,
    token_nll,
)
from lit_models.specs.transformer import ENCODER_DECODER_OPTIONS
from lit_models.training.decoder_training import DecoderTraining, DecoderTrainingModule

FIGURE_EXAMPLES = 1


class Seq2SeqModule(DecoderTrainingModule):
    """Token-to-token families: exact match, accuracy by length, BLEU/chrF, and attention heatmaps.

    Training, optimisation and decoding are ``DecoderTrainingModule``'s; ``self.net`` also implements
    ``attention_maps(src, tgt_in)`` (the heatmaps of ``figures``: ``protocols.HasAttentionMaps``).
    """

    figure_examples = FIGURE_EXAMPLES

    def __init__(self, training: DecoderTraining) -> None:
        super().__init__(training)
        self.metrics = torch.nn.ModuleDict({s: build_seq2seq_metrics() for s in ("val", "test")})
        self.metrics["test"]["bleu_by_len"] = BLEUByLength()  # test/bleu_by_len/len_006_010: BLEU by source length
        self.metrics["test"]["count_by_len"] = CountByLength()  # test/count_by_len/len_006_010: sentences there
        self.signatures_logged = False

    def source_lengths(self, src: Tensor) -> Tensor:
        """(B,) source lengths: tokens before PAD."""
        return (src != PAD).sum(1)

    # --------------------------------------------------------------- evaluation
    def _evaluate(self, batch: Seq2SeqBatch, split: str) -> None:
        src, tgt = batch
        tgt_in, labels = tgt[:, :-1], tgt[:, 1:]
        logits, _ = self.net.teacher_forward(self.net.encode(src), tgt_in)
        keep = labels != PAD
        m = self.metrics[split]
        self._update_loss(m["loss"], logits, labels)
        m["token_acc"].update((logits.argmax(-1) == labels) & keep, keep.sum())
        pred = self.generate(src)
        correct = sequences_equal(pred, labels)
        m["exact_match"].update(correct, correct.numel())
        m["acc_by_len"].update(correct, keep.sum(1) - 1)
        m["token_acc_by_len"].update(positions_matched(pred, labels), keep.sum(1) - 1)
        m["ppl_by_len"].update(token_nll(logits, labels), keep.sum(1) - 1)
        detok = self._detokenizer()
        hyps, refs = [detok(p) for p in pred.tolist()], [[detok(g)] for g in labels.tolist()]
        m["bleu"].update(hyps, refs)
        m["chrf"].update(hyps, refs)
        if "bleu_by_len" in m:
            m["bleu_by_len"].update(hyps, refs, self.source_lengths(src))
            m["count_by_len"].update(self.source_lengths(src))

    def _after_split(self, split: str, values: dict[str, Tensor]) -> None:
        if not self.signatures_logged:  # how BLEU / chrF were computed, next to the hyper-parameters
            for logger in self.loggers:
                logger.log_hyperparams(metric_signatures())
            self.signatures_logged = True

    def _figure_head(self, batch: Seq2SeqBatch) -> Seq2SeqBatch:
        """The longest examples of the first validation batch: figures show a long alignment."""
        return longest_examples(batch, self.figure_examples)

    # ------------------------------------------------------------------ figures
    @torch.no_grad()
    def figure_maps(self) -> tuple[dict[str, Tensor], list[list[str]], list[list[str]]]:
        """Attention maps of the fixed figure examples on their free-running outputs.

        Returns: name -> (N, H, T, S) weights, source token labels, output token labels.
        """
        src = self.figure_batch.src.to(self.device)
        pred, tgt_in = self._generate_with_inputs(src)  # (N, L) each
        maps = self.net.attention_maps(src, tgt_in)
        src_labels = [self._token_labels(s, side="src") for s in src.tolist()]
        out_labels = [self._token_labels(p, side="tgt") + ["</s>"] for p in pred.tolist()]
        return maps, src_labels, out_labels

    def _token_labels(self, ids: list[int], *, side: str) -> list[str]:
        """One tick label per token: the datamodule's pieces (subword vocabularies), else its words."""
        dm = self.trainer.datamodule if self._trainer is not None else None
        if dm is not None and hasattr(dm, "token_labels"):
            return dm.token_labels(ids, side=side)
        return self._detokenizer()(ids).split()


class TransformerSeq2Seq(Seq2SeqModule):
    """Transformer encoder-decoder (Vaswani et al. 2017) with every ablation axis as one argument.

    Args:
        src_vocab_size: source vocabulary size (linked from the datamodule).
        tgt_vocab_size: target vocabulary size (linked from the datamodule).
        options: the architecture (``specs.TransformerSpec``'s fields: d_model, heads, ..., tying), then
            ``decoder_training.DecoderTraining``'s knobs (forcing, label_smoothing, lr, ...).
    """

    option_groups = (ENCODER_DECODER_OPTIONS,)
    training_defaults = {"label_smoothing": 0.1}

    def __init__(self, *, src_vocab_size: int, tgt_vocab_size: int, **options: Any) -> None:
        groups = self.options(**options)
        arch, training = groups
        super().__init__(training)
        self.save_hyperparameters()
        self.save_options(groups)
        self.net = build_transformer(arch, src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size)


def count_parameters(module: torch.nn.Module) -> int:
    """Number of distinct trainable parameters (tied matrices counted once)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
