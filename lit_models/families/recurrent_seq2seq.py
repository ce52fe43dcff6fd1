"""Recurrent seq2seq LightningModule: RNN/GRU/LSTM/peephole encoder-decoders with none / additive /
dot / general / hard attention, on the shared seq2seq base (loss, forcing, decoding, metrics, figures).

Hard attention (Xu et al. 2015 §4.1) is trained with REINFORCE (Williams 1992): the reward of a
sequence is the mean log-likelihood of its gold tokens, r = (1/n) Σ_t log p(y_t | ...); the
estimator is (r − b) ∇ Σ_t log α_t[s_t], plus an entropy bonus λ_H Σ_t H(α_t)
(``lit_models.training.reinforce``, shared with the captioner). The term is read from the decoder state
(``attn_log_prob``, ``attn_entropy``), which soft arms leave at zero, so there is no branch on
the attention kind.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from attnlab_core.options import with_defaults
from lit_models.builders import build_recurrent_seq2seq
from lit_models.families.seq2seq import Seq2SeqModule
from lit_models.specs import RecurrentSeq2SeqSpec
from lit_models.training.reinforce import ReinforceOptions


class RecurrentSeq2Seq(Seq2SeqModule):
    """Recurrent encoder-decoder with optional attention (Sutskever 2014; Cho 2014; Bahdanau 2015; Luong 2015).

    Args:
        src_vocab_size: source vocabulary size (linked from the datamodule).
        tgt_vocab_size: target vocabulary size (linked from the datamodule).
        options: the architecture (``specs.RecurrentSeq2SeqSpec``: cell, attention, embed_dim, ...), the
            REINFORCE term of hard attention (``reinforce.ReinforceOptions``), then
            ``decoder_training.DecoderTraining``'s knobs (scheduled sampling per_step, Bengio 2015).
    """

    option_groups = (with_defaults(RecurrentSeq2SeqSpec), with_defaults(ReinforceOptions))
    training_defaults = {"scheduled_mode": "per_step", "lr": 3e-3, "lr_schedule": "constant", "warmup_steps": 100}

    def __init__(self, *, src_vocab_size: int, tgt_vocab_size: int, **options: Any) -> None:
        groups = self.options(**options)
        arch, reinforce, training = groups
        super().__init__(training)
        self.save_hyperparameters()
        self.save_options(groups)
        self.net = build_recurrent_seq2seq(arch, src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size)
        self.reinforce = reinforce.term(value_size=arch.encoder.output_size)

    def auxiliary_loss(self, logits: Tensor, labels: Tensor, state: dict[str, Tensor]) -> Tensor:
        """REINFORCE term with baseline and entropy bonus (``lit_models.training.reinforce``); zero for soft arms."""
        out = self.reinforce(logits, labels, state)
        self.log("train/reward", out.reward.mean(), batch_size=labels.size(0))
        return out.loss
