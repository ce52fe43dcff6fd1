"""The data contract both sides import: batch types, id rendering and image normalisation.

Datamodules build these batches; LightningModules, callbacks and benchmarks read them. Plain torch,
no Lightning, so ``lit_models`` never needs to import ``datamodules`` (DESIGN.md's revisions: "data contracts
live in the core").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from attnlab_core.tokens import BOS, EOS, PAD, UNK

IMAGE_MEAN = (0.485, 0.456, 0.406)  # ImageNet statistics, what torchvision's pretrained weights expect
IMAGE_STD = (0.229, 0.224, 0.225)


class Seq2SeqBatch(NamedTuple):
    """A padded batch of source/target pairs.

    Attributes:
        src: (B, S) source ids, right-padded with PAD (no BOS/EOS).
        tgt: (B, T) target ids ``[BOS, y_1 .. y_n, EOS, PAD ...]``; decoder input is
            ``tgt[:, :-1]`` and labels are ``tgt[:, 1:]``.
    """

    src: Tensor
    tgt: Tensor
    finetune = False  # a class attribute, not a field: ``src, tgt = batch`` stays a pair


class FinetunePairs(Seq2SeqBatch):
    """A training batch of the fine-tune at the extended lengths (``datamodules.finetune``, prompt -> answer
    tasks): the model trains on it with its RoPE scaling in force, as on a ``TextBatch`` whose ``finetune`` is
    set. The same two fields; only the type (and so ``finetune``) differs, which survives the move to a device."""

    __slots__ = ()
    finetune = True


class RegressionBatch(NamedTuple):
    """A batch of real-valued sequences with one scalar target each.

    Attributes:
        x: (B, T, C) float inputs.
        y: (B,) float targets.
    """

    x: Tensor
    y: Tensor


class TextBatch(NamedTuple):
    """Windows of running text, all with the same context.

    Attributes:
        tokens: (B, C + 1) ids; inputs are ``tokens[:, :-1]``, targets ``tokens[:, 1:]``.
        score_from: (B,) long; targets before this index are context only (not scored).
        context: C, the window's context length (the metric key of ``ppl_by_ctx``).
        finetune: a training batch of the fine-tune at the extended length (``datamodules.finetune``): the model
            trains on it with its RoPE scaling in force.
    """

    tokens: Tensor
    score_from: Tensor
    context: int
    finetune: bool = False

    def targets(self) -> Tensor:
        """(B, C) next-token targets with PAD where not scored."""
        labels = self.tokens[:, 1:]
        index = torch.arange(labels.size(1), device=labels.device)[None, :]
        return labels.masked_fill(index < self.score_from[:, None], PAD)


def ids_to_text(ids: Sequence[int] | Tensor, *, itos: Sequence[str] | None = None) -> str:
    """Render token ids as space-separated text, for BLEU and figure labels.

    Stops at the first EOS and drops PAD and BOS. UNK is kept (as ``itos[UNK]`` or ``"<unk>"``) so an
    unknown output never silently disappears from a hypothesis; an id past the end of ``itos`` (a word
    vocabulary of a small corpus is smaller than the model's ``vocab_size``) is rendered as UNK too.

    Args:
        ids: (L,) token ids, e.g. one row of a decoded batch.
        itos: id -> token string table; ``None`` renders content id ``i`` as ``"t{i}"``.
    """
    seq = ids.tolist() if isinstance(ids, Tensor) else list(ids)
    words: list[str] = []
    for i in seq:
        if i == EOS:
            break
        if i in (PAD, BOS):
            continue
        if itos is not None:
            words.append(itos[i] if i < len(itos) else itos[UNK])  # a word vocabulary smaller than the model's
        else:
            words.append("<unk>" if i == UNK else f"t{i}")
    return " ".join(words)


class DigitBatch(NamedTuple):
    """images (B, 1, H, W) float in [0, 1]; labels (B,) long; boxes (B, 4) long (x0, y0, x1, y1) of the digit."""

    images: Tensor
    labels: Tensor
    boxes: Tensor
