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

The knobs of all this live in ``DecoderTraining``: ``Feeding`` (forcing, its schedule, the loss) plus
``optim.Optimisation``, taken as ``optim`` describes. A family's other groups (its architecture's arguments,
e.g. ``specs.transformer.ENCODER_DECODER_OPTIONS``) come before them in ``option_groups``
(``attnlab_core.options.TakesOptions``); ``self.options(**options)`` builds every group.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor
from torchmetrics import Metric

from attnlab_core.batches import ids_to_text
from attnlab_core.options import with_defaults
from attnlab_core.tokens import BOS, EOS, PAD
from lit_models.axes import Forcing, ScheduledDecay, ScheduledMode
from lit_models.blocks.decoding import DecodeConfig, decode
from lit_models.policies.forcing import ForcingPolicy
from lit_models.scoring.metrics import label_smoothed_loss
from lit_models.training.evaluation import EvaluationModule
from lit_models.training.optim import Optimisation, scheduled_adamw
from lit_models.validation import RangeChecked


@dataclass(frozen=True, kw_only=True)
class Feeding(RangeChecked):
    """What a token decoder is fed in training, and how its loss is smoothed.

    Args:
        forcing: training-time feed (teacher | student | scheduled; ``forcing.ForcingPolicy``).
        scheduled_decay: decay of p(gold) for forcing=scheduled (Bengio et al. 2015, §2.4).
        scheduled_steps: horizon of the decay, in optimizer steps.
        scheduled_floor: lower bound of p(gold).
        scheduled_mode: two_pass (Mihaylova & Liu 2019, for parallel decoders) or per_step (Bengio et al.
            2015, for recurrent decoders) scheduled sampling.
        label_smoothing: ε_ls of the training loss (Szegedy et al. 2016; Vaswani et al. 2017: 0.1), in [0, 1)
            (``validation.RANGES``, checked when built: ``RangeChecked``).
    """

    forcing: Forcing = "teacher"
    scheduled_decay: ScheduledDecay = "inverse_sigmoid"
    scheduled_steps: int = 2000
    scheduled_floor: float = 0.0
    scheduled_mode: ScheduledMode = "two_pass"
    label_smoothing: float = 0.0


@dataclass(frozen=True, kw_only=True)
class DecoderTraining(Optimisation, Feeding):
    """How a token decoder is trained: the feed and its p(gold) schedule, the loss (``Feeding``), then the
    optimiser (``optim.Optimisation``, the knobs every family shares); fields in that order.

    The CLI shows these flat under each family (``--model.forcing``, ``--model.lr``, ...) with the
    family's defaults (``DecoderTrainingModule.training_defaults``).
    """

    @classmethod
    def with_defaults(cls, **defaults: Any) -> Callable[..., DecoderTraining]:
        """``attnlab_core.options.with_defaults`` of this spec: the constructor a family's ``**training``
        goes to, its signature carrying the family's defaults (what the CLI shows)."""
        return with_defaults(cls, **defaults)


class DecoderTrainingModule(EvaluationModule):
    """Training, optimisation and free-running decoding of a ``self.net`` with a step-protocol decoder.

    ``self.net`` implements ``encode(src) -> state``, ``step(prev, state) -> (logits, state)`` and
    ``teacher_forward(state, tgt_in) -> (logits, state)``; batches have ``src`` and ``tgt``
    (``[BOS, y.., EOS, PAD..]``). A family declares its data-given sizes and ``**options``, builds its
    groups with ``self.options(**options)`` (the last is its ``DecoderTraining``, passed up), calls
    ``save_options(groups)``, sets ``self.net`` and ``self.metrics``, and implements ``source_lengths``
    and ``_evaluate``. Every option is a hyper-parameter (the loss and the optimiser read the training
    knobs from ``self.hparams``). ``self.decoding`` (a ``DecodeConfig``) is deliberately not one: a checkpoint
    never overrides it.
    """

    training_defaults: ClassVar[dict[str, Any]] = {}
    """The family's defaults that differ from ``DecoderTraining``'s."""
    training_spec: ClassVar[Callable[..., DecoderTraining]] = staticmethod(DecoderTraining.with_defaults())
    """``DecoderTraining.with_defaults(**training_defaults)``, set for each subclass."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Give each family its ``training_spec`` (the last group of its ``options``)."""
        cls.training_spec = staticmethod(DecoderTraining.with_defaults(**cls.training_defaults))
        super().__init_subclass__(**kwargs)

    @classmethod
    def all_option_groups(cls) -> tuple[Callable[..., Any], ...]:
        """The family's ``option_groups`` (its architecture, ...), then its training knobs."""
        return (*cls.option_groups, cls.training_spec)

    def __init__(self, training: DecoderTraining) -> None:
        super().__init__()
        self.save_hyperparameters(asdict(training))
        self.forcing = ForcingPolicy(forcing=training.forcing, scheduled_mode=training.scheduled_mode,
                                     decay=training.scheduled_decay, steps=training.scheduled_steps,
                                     floor=training.scheduled_floor)
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

    def training_loss(self, batch: Any, step: int) -> tuple[Tensor, dict[str, Tensor]]:
        """The objective minimised at optimizer step ``step`` and the tensors logged with it.

        A function of the parameters and the batch only (no logging, no Python branch on values):
        ``stacking`` maps it over stacked seeds with ``torch.func.vmap``.
        """
        tgt_in, labels = batch.tgt[:, :-1], batch.tgt[:, 1:]
        logits, state, _ = self.forcing(self.net, self.net.encode(batch.src), tgt_in, step=step)
        loss = label_smoothed_loss(logits, labels, eps=self.label_smoothing)
        return loss + self.auxiliary_loss(logits, labels, state), {"train/loss": loss}

    def batch_tokens(self, batch: Any) -> int:
        """Tokens a training batch adds to ``tokens_seen``: its labels and its sources."""
        return int((batch.tgt[:, 1:] != PAD).sum()) + int(self.source_lengths(batch.src).sum())

    def training_step(self, batch: Any, batch_idx: int) -> Tensor | None:
        total, logs = self.training_loss(batch, self.global_step)
        if (checked := self._checked(total)) is not total:
            return checked  # diverged
        self.tokens_seen += self.batch_tokens(batch)
        size = batch.src.size(0)
        self.log("train/loss", logs["train/loss"], prog_bar=True, batch_size=size)
        self.log("train/p_gold", self.p_gold(), batch_size=size)
        return total

    def source_lengths(self, src: Tensor) -> Tensor:
        """(B,) source lengths: the decode limit is a·|src| + b, and ``tokens_seen`` counts them."""
        raise NotImplementedError

    def auxiliary_loss(self, logits: Tensor, labels: Tensor, state: object) -> Tensor:
        """Extra training terms computed from the final decoder state (default: none)."""
        return logits.new_zeros(())

    def configure_optimizers(self) -> dict:
        return scheduled_adamw(self, betas=(0.9, 0.98), eps=1e-9)

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
