"""Recurrent seq2seq LightningModule: RNN/GRU/LSTM/peephole encoder-decoders with none / additive /
dot / general / hard attention, on the shared seq2seq base (loss, forcing, decoding, metrics, figures).

Hard attention (Xu et al. 2015 §4.1) is trained with REINFORCE (Williams 1992): the reward of a
sequence is the mean log-likelihood of its gold tokens, r = (1/n) Σ_t log p(y_t | ...); the
estimator is (r − b) ∇ Σ_t log α_t[s_t], plus an entropy bonus λ_H Σ_t H(α_t)
(``lit_models.reinforce``, shared with the captioner). The term is read from the decoder state
(``attn_log_prob``, ``attn_entropy``), which soft arms leave at zero, so there is no branch on
the attention kind.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from lit_models.axes import Attention, Baseline, Cell
from lit_models.blocks.alignment import HardEval
from lit_models.builders import build_recurrent_seq2seq
from lit_models.reinforce import ReinforceTerm
from lit_models.seq2seq import Seq2SeqModule


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
        training: ``decoder_training.DecoderTraining``'s knobs (scheduled sampling per_step, Bengio 2015).
    """

    training_defaults = {"scheduled_mode": "per_step", "lr": 3e-3, "lr_schedule": "constant", "warmup_steps": 100}

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
        **training: Any,
    ) -> None:
        super().__init__(self.training_spec(**training))
        self.save_hyperparameters()
        self.net = build_recurrent_seq2seq(
            src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, cell=cell, attention=attention,
            embed_dim=embed_dim, hidden_size=hidden_size, num_layers=num_layers, bidirectional=bidirectional,
            dropout=dropout, hard_eval=hard_eval,
        )
        self.reinforce = ReinforceTerm(
            baseline=baseline, value_size=self.net.encoder.output_size, momentum=baseline_momentum,
            reinforce_weight=reinforce_weight, entropy_weight=entropy_weight,
        )

    def auxiliary_loss(self, logits: Tensor, labels: Tensor, state: dict[str, Tensor]) -> Tensor:
        """REINFORCE term with baseline and entropy bonus (``lit_models.reinforce``); zero for soft arms."""
        out = self.reinforce(logits, labels, state)
        self.log("train/reward", out.reward.mean(), batch_size=labels.size(0))
        return out.loss
