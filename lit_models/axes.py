"""Every ablation axis of attnlab.

Each axis is a ``typing.Literal`` (a few are numbers or flags, typed in the spec and listed below); the
same words are used in code, YAML, CLI paths, W&B configs, sweep files, report columns and test ids.
Registries that resolve an axis are keyed by exactly ``typing.get_args(Axis)`` (a test checks the coverage).

Numeric and flag axes of the Transformer (``specs.TransformerSpec``), with no words to resolve:

- ``heads``, ``d_model``, ``d_ff``, layers: sizes (Vaswani et al. 2017, Table 3).
- ``kv_heads``: key/value heads G dividing ``heads``: 1 = multi-query (Shazeer 2019), ``heads`` (or null) =
  multi-head, between = grouped-query attention (Ainslie et al. 2023).
- ``qk_norm``: LayerNorm on each head's queries and keys before the score (Dehghani et al. 2023).
- ``rope_factor``: the scale s of ``RopeScaling`` (L'/L).
"""

from typing import Literal

Norm = Literal["post", "pre"]
"""Residual LayerNorm placement: post = LN(x + F(x)) (Vaswani 2017); pre = x + F(LN(x)) + final LN."""

Positions = Literal["sinusoidal", "learned", "rope", "alibi", "none"]
"""Position information: sinusoids (Vaswani §3.5), learned absolute table, rotary q/k (Su 2021), linear score
bias (ALiBi, Press 2022), nothing."""

RopeScaling = Literal["none", "linear", "ntk", "yarn"]
"""RoPE beyond the training length: none, position interpolation (Chen 2023), NTK-aware base, YaRN (Peng 2023)."""

AttnScale = Literal["sqrt_dk", "none", "dk"]
"""Dot-product scaling: 1/sqrt(d_k) (Vaswani eq. 1), no scaling, or 1/d_k (a common mistake, kept to show why)."""

Forcing = Literal["teacher", "student", "scheduled"]
"""What the decoder is fed during training: gold tokens, its own predictions, or a scheduled mix (Bengio 2015)."""

ScheduledMode = Literal["two_pass", "per_step"]
"""How scheduled sampling mixes gold and own tokens: two passes (Mihaylova & Liu 2019) or a per-step loop (Bengio)."""

ScheduledDecay = Literal["linear", "exponential", "inverse_sigmoid"]
"""Decay of the gold-token probability in scheduled sampling (Bengio et al. 2015, §2.4)."""

LRSchedule = Literal["noam", "constant", "cosine"]
"""Learning-rate schedule: Vaswani eq. 3 warm-up then 1/sqrt(step), constant (after warm-up), cosine."""

Tying = Literal["none", "decoder", "all"]
"""Weight tying: none; decoder input embedding = output projection; all three (shared vocabulary)."""

Cell = Literal["rnn", "gru", "lstm", "lstm_peephole"]
"""Recurrent cell: Elman RNN, GRU (Cho 2014), LSTM (Hochreiter 1997), LSTM with peepholes (Gers 2000)."""

Attention = Literal["none", "additive", "dot", "general", "hard"]
"""Decoder attention: none (fixed vector), additive (Bahdanau), dot / general (Luong), hard (sampled, REINFORCE)."""

Baseline = Literal["moving_average", "learned"]
"""REINFORCE baseline for hard attention: an exponential moving average of the reward, or a learned value."""

Pooling = Literal["last", "mean", "max", "attention", "cls"]
"""Sequence -> vector for classification: final state(s), mean, max, additive attention (Yang 2016), [CLS] token."""

EncoderFamily = Literal["recurrent", "transformer"]
"""Text encoder of the classifier: a (bi)recurrent net or a Transformer encoder stack."""

VisionBackbone = Literal["small_cnn", "resnet18", "resnet34", "resnet50", "resnet101"]
"""Captioner image encoder: a small CoordConv CNN (CPU runs) or a torchvision ResNet cut before pooling (He 2016)."""
