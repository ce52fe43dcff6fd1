"""Seq2seq LightningModules: a shared base (loss, forcing, decoding, metrics) and the Transformer.

The modules are thin: the network comes from ``builders``, the training-time feed from
``forcing``, free-running outputs from ``blocks.decoding`` — so every family is trained and
judged the same way. Validation and test always decode free-running.
"""

from __future__ import annotations

import torch
from torch import Tensor

from datamodules.batching import BOS, EOS, PAD, Seq2SeqBatch, ids_to_text
from lit_models.axes import AttnScale, Forcing, LRSchedule, Norm, Positions, ScheduledDecay, Tying
from lit_models.bleu_by_length import BLEUByLength
from lit_models.blocks.decoding import DecodeConfig, decode
from lit_models.builders import build_transformer
from lit_models.evaluation import EvaluationModule
from lit_models.figures import longest_examples
from lit_models.forcing import ForcingPolicy, ScheduledMode
from lit_models.metrics import (
    build_seq2seq_metrics,
    label_smoothed_loss,
    metric_signatures,
    positions_matched,
    sequences_equal,
)
from lit_models.schedules import LR_SCHEDULES

FIGURE_EXAMPLES = 1


class Seq2SeqModule(EvaluationModule):
    """Shared training/evaluation logic of every seq2seq family (subclasses set ``self.net``).

    ``self.net`` implements ``encode(src) -> state``, ``step(prev, state) -> (logits, state)``,
    ``teacher_forward(state, tgt_in) -> (logits, state)`` and ``attention_maps(src, tgt_in)``.
    ``self.decoding`` (a ``DecodeConfig``) is set by the CLI's ``--decode.*`` options and is
    deliberately not a hyper-parameter: a checkpoint never overrides it.
    """

    figure_examples = FIGURE_EXAMPLES

    def __init__(
        self,
        *,
        forcing: Forcing,
        scheduled_decay: ScheduledDecay,
        scheduled_steps: int,
        scheduled_floor: float,
        scheduled_mode: ScheduledMode,
        label_smoothing: float,
        lr: float,
        lr_schedule: LRSchedule,
        warmup_steps: int,
        weight_decay: float,
    ) -> None:
        super().__init__()
        self.forcing = ForcingPolicy(forcing=forcing, scheduled_mode=scheduled_mode, decay=scheduled_decay,
                                     steps=scheduled_steps, floor=scheduled_floor)
        self.decoding = DecodeConfig()
        self.metrics = torch.nn.ModuleDict({s: build_seq2seq_metrics() for s in ("val", "test")})
        self.metrics["test"]["bleu_by_len"] = BLEUByLength()  # test/bleu_by_len/len_006_010: BLEU by source length
        self.tokens_seen = 0
        self.signatures_logged = False

    @property
    def label_smoothing(self) -> float:
        """ε_ls of the training loss (``protocols.SmoothedLoss``: the probes score the decoder with it too)."""
        return float(self.hparams.label_smoothing)

    # ----------------------------------------------------------------- training
    def p_gold(self) -> float:
        """Probability of feeding gold tokens at this step (the forcing policy's schedule)."""
        return self.forcing.p_gold(self.global_step)

    def training_step(self, batch: Seq2SeqBatch, batch_idx: int) -> Tensor | None:
        src, tgt = batch.src, batch.tgt
        tgt_in, labels = tgt[:, :-1], tgt[:, 1:]
        logits, state, p = self.forcing(self.net, self.net.encode(src), tgt_in, step=self.global_step)
        loss = label_smoothed_loss(logits, labels, eps=self.hparams.label_smoothing)
        total = loss + self.auxiliary_loss(logits, labels, state)
        if not torch.isfinite(total):
            return self._diverge()
        self.tokens_seen += int((labels != PAD).sum()) + int(self.source_lengths(src).sum())
        self.log("train/loss", loss, prog_bar=True, batch_size=src.size(0))
        self.log("train/p_gold", p, batch_size=src.size(0))
        return total

    def source_lengths(self, src: Tensor) -> Tensor:
        """(B,) source lengths: tokens before PAD. Sets the decode limit a·|src| + b and counts
        ``tokens_seen``; modules with non-token sources (images) override it."""
        return (src != PAD).sum(1)

    def auxiliary_loss(self, logits: Tensor, labels: Tensor, state: object) -> Tensor:
        """Extra training terms computed from the final decoder state (none for the Transformer)."""
        return logits.new_zeros(())

    def configure_optimizers(self) -> dict:
        hp = self.hparams
        opt = torch.optim.AdamW(self.parameters(), lr=hp.lr, betas=(0.9, 0.98), eps=1e-9,
                                weight_decay=hp.weight_decay)
        total = max(1, int(self.trainer.estimated_stepping_batches)) if self._trainer else 1
        fn = LR_SCHEDULES[hp.lr_schedule]
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: fn(s + 1, warmup=hp.warmup_steps, total=total)
        )
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    # --------------------------------------------------------------- evaluation
    def generate(self, src: Tensor) -> Tensor:
        """Free-running outputs (B, L) for src (B, S), ending in EOS then PAD."""
        state = self.net.encode(src)
        lengths = self.source_lengths(src)
        return decode(self.net, state, src_lengths=lengths, config=self.decoding, bos=BOS, eos=EOS, pad=PAD)

    def _evaluate(self, batch: Seq2SeqBatch, split: str) -> None:
        src, tgt = batch
        tgt_in, labels = tgt[:, :-1], tgt[:, 1:]
        logits, _ = self.net.teacher_forward(self.net.encode(src), tgt_in)
        loss = label_smoothed_loss(logits, labels, eps=self.hparams.label_smoothing)
        keep = labels != PAD
        m = self.metrics[split]
        m["loss"].update(loss.detach() * keep.sum(), keep.sum())
        m["token_acc"].update((logits.argmax(-1) == labels) & keep, keep.sum())
        pred = self.generate(src)
        correct = sequences_equal(pred, labels)
        m["exact_match"].update(correct, correct.numel())
        m["acc_by_len"].update(correct, keep.sum(1) - 1)
        m["token_acc_by_len"].update(positions_matched(pred, labels), keep.sum(1) - 1)
        detok = self._detokenizer()
        hyps, refs = [detok(p) for p in pred.tolist()], [[detok(g)] for g in labels.tolist()]
        m["bleu"].update(hyps, refs)
        m["chrf"].update(hyps, refs)
        if "bleu_by_len" in m:
            m["bleu_by_len"].update(hyps, refs, self.source_lengths(src))

    def _detokenizer(self):
        dm = self.trainer.datamodule if self._trainer is not None else None
        return dm.decode_tokens if dm is not None else ids_to_text

    def _after_split(self, split: str, values: dict[str, Tensor]) -> None:
        if not self.signatures_logged:  # how BLEU / chrF were computed, next to the hyper-parameters
            for logger in self.loggers:
                logger.log_hyperparams(metric_signatures())
            self.signatures_logged = True

    def _figure_head(self, batch: Seq2SeqBatch) -> Seq2SeqBatch:
        """The longest examples of the first validation batch: figures show a long alignment."""
        return longest_examples(batch, self.figure_examples)

    def predict_step(self, batch: Seq2SeqBatch, batch_idx: int) -> list[str]:
        detok = self._detokenizer()
        return [detok(p) for p in self.generate(batch.src).tolist()]

    # ------------------------------------------------------------------ figures
    @torch.no_grad()
    def figure_maps(self) -> tuple[dict[str, Tensor], list[list[str]], list[list[str]]]:
        """Attention maps of the fixed figure examples on their free-running outputs.

        Returns: name -> (N, H, T, S) weights, source token labels, output token labels.
        """
        src = self.figure_batch.src.to(self.device)
        pred = self.generate(src)  # (N, L)
        tgt_in = torch.cat([torch.full_like(pred[:, :1], BOS), pred[:, :-1]], dim=1)
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
        d_model: model width (paper base: 512).
        heads: attention heads h; d_k = d_model / h.
        d_ff: feed-forward inner width (paper: 4·d_model).
        encoder_layers: N encoder layers.
        decoder_layers: N decoder layers.
        dropout: dropout on sublayer outputs and embeddings (P_drop).
        attn_dropout: dropout on attention weights.
        norm: residual LayerNorm placement (post | pre).
        positions: position information (sinusoidal | learned | rope | none).
        attn_scale: dot-product scaling (sqrt_dk | none | dk).
        max_positions: rows of the learned position table (only used by positions=learned).
        tying: weight tying (none | decoder | all).
        forcing: training-time feed (teacher | student | scheduled).
        scheduled_decay: decay of p(gold) for forcing=scheduled.
        scheduled_steps: horizon of the decay, in optimizer steps.
        scheduled_floor: lower bound of p(gold).
        scheduled_mode: two_pass (Mihaylova & Liu 2019) or per_step (Bengio 2015) scheduled sampling.
        label_smoothing: ε_ls of the loss (paper: 0.1).
        lr: peak learning rate.
        lr_schedule: noam | constant | cosine.
        warmup_steps: linear warm-up steps (paper: 4000).
        weight_decay: AdamW decoupled weight decay (paper: 0).
    """

    def __init__(
        self,
        *,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 128,
        heads: int = 4,
        d_ff: int = 512,
        encoder_layers: int = 2,
        decoder_layers: int = 2,
        dropout: float = 0.1,
        attn_dropout: float = 0.0,
        norm: Norm = "post",
        positions: Positions = "sinusoidal",
        attn_scale: AttnScale = "sqrt_dk",
        max_positions: int = 256,
        tying: Tying = "decoder",
        forcing: Forcing = "teacher",
        scheduled_decay: ScheduledDecay = "inverse_sigmoid",
        scheduled_steps: int = 2000,
        scheduled_floor: float = 0.0,
        scheduled_mode: ScheduledMode = "two_pass",
        label_smoothing: float = 0.1,
        lr: float = 1e-3,
        lr_schedule: LRSchedule = "noam",
        warmup_steps: int = 400,
        weight_decay: float = 0.0,
    ) -> None:
        super().__init__(
            forcing=forcing, scheduled_decay=scheduled_decay, scheduled_steps=scheduled_steps,
            scheduled_floor=scheduled_floor, scheduled_mode=scheduled_mode, label_smoothing=label_smoothing,
            lr=lr, lr_schedule=lr_schedule, warmup_steps=warmup_steps, weight_decay=weight_decay,
        )
        self.save_hyperparameters()
        self.net = build_transformer(
            src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, d_model=d_model, heads=heads,
            d_ff=d_ff, encoder_layers=encoder_layers, decoder_layers=decoder_layers, dropout=dropout,
            attn_dropout=attn_dropout, norm=norm, positions=positions, attn_scale=attn_scale,
            max_len=max_positions, tying=tying,
        )


def count_parameters(module: torch.nn.Module) -> int:
    """Number of distinct trainable parameters (tied matrices counted once)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
