"""What every family with a token decoder shares: forcing, the label-smoothed loss, optimisation, decoding.

``DecoderTrainingModule`` sits between ``EvaluationModule`` (validation/test plumbing) and the
families whose network is a decoder of the step protocol (``blocks.step_protocol``): the seq2seq
families (``seq2seq.Seq2SeqModule``: Transformer, recurrent, causal LM) and the image captioner
(``captioner.ShowAttendTell``). It holds only what all of them do the same way:

- training: the forcing policy's feed (``forcing.ForcingPolicy``: teacher / student / scheduled;
  Williams & Zipser 1989, Bengio et al. 2015) and its p(gold), a label-smoothed cross-entropy
  (Szegedy et al. 2016) plus the family's ``auxiliary_loss``, divergence as a recorded outcome;
- AdamW (Loshchilov & Hutter 2019) with the ``lr_schedule`` of ``schedules``, stepped per batch;
- free-running outputs through ``blocks.decoding`` (``generate``, ``predict_step``), with the
  ``--decode.*`` options the CLI sets on ``self.decoding``.

What is scored and drawn (``_evaluate``, metrics, figures) stays with each family.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric

from attnlab_core.batches import ids_to_text
from attnlab_core.tokens import BOS, EOS, PAD
from lit_models.axes import Forcing, ScheduledDecay
from lit_models.blocks.decoding import DecodeConfig, decode
from lit_models.evaluation import EvaluationModule
from lit_models.forcing import ForcingPolicy, ScheduledMode
from lit_models.metrics import label_smoothed_loss
from lit_models.optim import module_adamw
from lit_models.schedules import LR_SCHEDULES


class DecoderTrainingModule(EvaluationModule):
    """Training, optimisation and free-running decoding of a ``self.net`` with a step-protocol decoder.

    ``self.net`` implements ``encode(src) -> state``, ``step(prev, state) -> (logits, state)`` and
    ``teacher_forward(state, tgt_in) -> (logits, state)``; batches have ``src`` and ``tgt``
    (``[BOS, y.., EOS, PAD..]``). Subclasses call ``save_hyperparameters()`` with ``label_smoothing``,
    ``lr``, ``lr_schedule``, ``warmup_steps`` and ``weight_decay`` among their arguments (the loss and
    the optimiser read them from ``self.hparams``), set ``self.net`` and ``self.metrics``, and
    implement ``source_lengths`` and ``_evaluate``. ``self.decoding`` (a ``DecodeConfig``) is
    deliberately not a hyper-parameter: a checkpoint never overrides it.

    Args:
        forcing, scheduled_decay, scheduled_steps, scheduled_floor, scheduled_mode: the training-time
            feed and its p(gold) schedule (``forcing.ForcingPolicy``).
    """

    def __init__(
        self,
        *,
        forcing: Forcing,
        scheduled_decay: ScheduledDecay,
        scheduled_steps: int,
        scheduled_floor: float,
        scheduled_mode: ScheduledMode,
    ) -> None:
        super().__init__()
        self.forcing = ForcingPolicy(forcing=forcing, scheduled_mode=scheduled_mode, decay=scheduled_decay,
                                     steps=scheduled_steps, floor=scheduled_floor)
        self.decoding = DecodeConfig()
        self.tokens_seen = 0

    @property
    def label_smoothing(self) -> float:
        """ε_ls of the training loss (``protocols.SmoothedLoss``: the probes score the decoder with it too)."""
        return float(self.hparams.label_smoothing)

    # ----------------------------------------------------------------- training
    def p_gold(self) -> float:
        """Probability of feeding gold tokens at this step (the forcing policy's schedule)."""
        return self.forcing.p_gold(self.global_step)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor | None:
        src, tgt = batch.src, batch.tgt
        tgt_in, labels = tgt[:, :-1], tgt[:, 1:]
        logits, state, p = self.forcing(self.net, self.net.encode(src), tgt_in, step=self.global_step)
        loss = label_smoothed_loss(logits, labels, eps=self.label_smoothing)
        total = loss + self.auxiliary_loss(logits, labels, state)
        if not torch.isfinite(total):
            return self._diverge()
        self.tokens_seen += int((labels != PAD).sum()) + int(self.source_lengths(src).sum())
        self.log("train/loss", loss, prog_bar=True, batch_size=src.size(0))
        self.log("train/p_gold", p, batch_size=src.size(0))
        return total

    def source_lengths(self, src: Tensor) -> Tensor:
        """(B,) source lengths: the decode limit is a·|src| + b, and ``tokens_seen`` counts them."""
        raise NotImplementedError

    def auxiliary_loss(self, logits: Tensor, labels: Tensor, state: object) -> Tensor:
        """Extra training terms computed from the final decoder state (default: none)."""
        return logits.new_zeros(())

    def configure_optimizers(self) -> dict:
        hp = self.hparams
        opt = module_adamw(self, lr=hp.lr, betas=(0.9, 0.98), eps=1e-9, weight_decay=hp.weight_decay)
        total = max(1, int(self.trainer.estimated_stepping_batches)) if self._trainer else 1
        fn = LR_SCHEDULES[hp.lr_schedule]
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: fn(s + 1, warmup=hp.warmup_steps, total=total)
        )
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    # --------------------------------------------------------------- evaluation
    def _update_loss(self, metric: Metric, logits: Tensor, labels: Tensor) -> None:
        """Add the teacher-forced, label-smoothed loss of a batch to ``metric`` (a token-weighted ratio)."""
        keep = labels != PAD
        loss = label_smoothed_loss(logits, labels, eps=self.label_smoothing)
        metric.update(loss.detach() * keep.sum(), keep.sum())

    def generate(self, src: Tensor) -> Tensor:
        """Free-running outputs (B, L) for src (B, ...), ending in EOS then PAD."""
        state = self.net.encode(src)
        lengths = self.source_lengths(src)
        return decode(self.net, state, src_lengths=lengths, config=self.decoding, bos=BOS, eos=EOS, pad=PAD)

    def _generate_with_inputs(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """Free-running outputs (B, L) and the decoder inputs that produced them, ``[BOS, out[:-1]]`` (B, L)."""
        pred = self.generate(src)
        return pred, torch.cat([torch.full_like(pred[:, :1], BOS), pred[:, :-1]], dim=1)

    def _detokenizer(self) -> Callable[[list[int]], str]:
        dm = self.trainer.datamodule if self._trainer is not None else None
        return dm.decode_tokens if dm is not None else ids_to_text

    def predict_step(self, batch: Any, batch_idx: int) -> list[str]:
        detok = self._detokenizer()
        return [detok(p) for p in self.generate(batch.src).tolist()]
