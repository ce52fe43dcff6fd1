"""Recurrent seq2seq LightningModule: RNN/GRU/LSTM/peephole encoder-decoders with none / additive /
dot / general / hard attention, on the shared seq2seq base (loss, forcing, decoding, metrics, figures).

Hard attention (Xu et al. 2015 §4.1) is trained with REINFORCE (Williams 1992): the reward of a
sequence is the mean log-likelihood of its gold tokens, r = (1/n) Σ_t log p(y_t | ...); the
estimator is (r − b) ∇ Σ_t log α_t[s_t], plus an entropy bonus λ_H Σ_t H(α_t). The term is read
from the decoder state (``attn_log_prob``, ``attn_entropy``), which soft arms leave at zero, so
there is no branch on the attention kind.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from datamodules.batching import PAD
from lit_models.axes import Attention, Baseline, Cell, Forcing, LRSchedule, ScheduledDecay
from lit_models.blocks.alignment import HardEval
from lit_models.builders import build_recurrent_seq2seq
from lit_models.forcing import ScheduledMode
from lit_models.seq2seq import Seq2SeqModule


def sequence_reward(logits: Tensor, labels: Tensor) -> Tensor:
    """Mean gold-token log-likelihood per sequence: logits (B, T, V), labels (B, T) -> (B,)."""
    logp = -F.cross_entropy(logits.float().transpose(1, 2), labels, ignore_index=PAD, reduction="none")  # (B, T)
    return logp.sum(1) / (labels != PAD).sum(1).clamp_min(1)


class RecurrentSeq2Seq(Seq2SeqModule):
    """Recurrent encoder-decoder with optional attention (Sutskever 2014; Cho 2014; Bahdanau 2015; Luong 2015).

    Args:
        src_vocab_size: source vocabulary size (linked from the datamodule).
        tgt_vocab_size: target vocabulary size (linked from the datamodule).
        cell: recurrent cell (rnn | gru | lstm | lstm_peephole).
        attention: decoder attention (none | additive | dot | general | hard).
        embed_dim: token embedding size.
        hidden_size: hidden size per direction (decoder: hidden_size).
        num_layers: stacked layers in encoder and decoder.
        bidirectional: bidirectional encoder (Bahdanau) or not (Sutskever/Cho).
        dropout: dropout on embeddings, between layers and before the output layer.
        hard_eval: hard attention at evaluation: argmax position, or the expectation (soft).
        reinforce_weight: weight of the REINFORCE term (hard attention).
        entropy_weight: weight of the attention-entropy bonus (hard attention).
        baseline: REINFORCE baseline (moving_average | learned).
        baseline_momentum: momentum of the moving-average baseline.
        forcing: training-time feed (teacher | student | scheduled).
        scheduled_decay: decay of p(gold) for forcing=scheduled.
        scheduled_steps: horizon of the decay, in optimizer steps.
        scheduled_floor: lower bound of p(gold).
        scheduled_mode: per_step (Bengio 2015, default here) or two_pass.
        label_smoothing: ε_ls of the loss.
        lr: peak learning rate.
        lr_schedule: noam | constant | cosine.
        warmup_steps: linear warm-up steps.
        weight_decay: AdamW decoupled weight decay.
    """

    def __init__(
        self,
        *,
        src_vocab_size: int,
        tgt_vocab_size: int,
        cell: Cell = "gru",
        attention: Attention = "additive",
        embed_dim: int = 64,
        hidden_size: int = 128,
        num_layers: int = 1,
        bidirectional: bool = True,
        dropout: float = 0.1,
        hard_eval: HardEval = "argmax",
        reinforce_weight: float = 1.0,
        entropy_weight: float = 0.01,
        baseline: Baseline = "moving_average",
        baseline_momentum: float = 0.9,
        forcing: Forcing = "teacher",
        scheduled_decay: ScheduledDecay = "inverse_sigmoid",
        scheduled_steps: int = 2000,
        scheduled_floor: float = 0.0,
        scheduled_mode: ScheduledMode = "per_step",
        label_smoothing: float = 0.0,
        lr: float = 3e-3,
        lr_schedule: LRSchedule = "constant",
        warmup_steps: int = 100,
        weight_decay: float = 0.0,
    ) -> None:
        super().__init__(
            forcing=forcing, scheduled_decay=scheduled_decay, scheduled_steps=scheduled_steps,
            scheduled_floor=scheduled_floor, scheduled_mode=scheduled_mode, label_smoothing=label_smoothing,
            lr=lr, lr_schedule=lr_schedule, warmup_steps=warmup_steps, weight_decay=weight_decay,
        )
        self.save_hyperparameters()
        self.net = build_recurrent_seq2seq(
            src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, cell=cell, attention=attention,
            embed_dim=embed_dim, hidden_size=hidden_size, num_layers=num_layers, bidirectional=bidirectional,
            dropout=dropout, hard_eval=hard_eval,
        )
        self.value = nn.Linear(self.net.encoder.output_size, 1) if baseline == "learned" else None
        self.reward_average: float | None = None

    def _baseline(self, state: dict[str, Tensor], reward: Tensor) -> tuple[Tensor, Tensor]:
        """(b (B,), baseline loss) — learned: a value of the mean memory; else the moving average."""
        if self.value is not None:
            mask = state["mask"].unsqueeze(-1).float()  # (B, S, 1)
            pooled = (state["memory"].detach() * mask).sum(1) / mask.sum(1).clamp_min(1.0)
            b = self.value(pooled).squeeze(-1)
            return b, F.mse_loss(b, reward)
        mean = reward.mean()
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(mean)  # every rank keeps the same average (pitfalls §3.7)
            mean = mean / torch.distributed.get_world_size()
        m = self.hparams.baseline_momentum
        previous = float(mean) if self.reward_average is None else self.reward_average
        self.reward_average = m * previous + (1 - m) * float(mean)
        return reward.new_full(reward.shape, self.reward_average), reward.new_zeros(())

    def auxiliary_loss(self, logits: Tensor, labels: Tensor, state: dict[str, Tensor]) -> Tensor:
        """REINFORCE term with baseline and entropy bonus; exactly zero for soft arms' log-probs."""
        reward = sequence_reward(logits.detach(), labels)
        b, baseline_loss = self._baseline(state, reward)
        advantage = (reward - b).detach()
        hp = self.hparams
        policy = -(advantage * state["attn_log_prob"]).mean()
        bonus = -state["attn_entropy"].mean()
        self.log("train/reward", reward.mean(), batch_size=labels.size(0))
        return hp.reinforce_weight * policy + hp.entropy_weight * bonus + baseline_loss

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        super().on_save_checkpoint(checkpoint)
        checkpoint["reward_average"] = self.reward_average

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        super().on_load_checkpoint(checkpoint)
        self.reward_average = checkpoint.get("reward_average")
