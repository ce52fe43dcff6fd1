"""The capabilities callbacks (probes, figures) read from modules, networks, batches and data.

Each callback checks ``isinstance(x, Protocol)`` and skips what lacks the capability; the
docstring of each protocol names the families that implement it.

Members are methods, properties or plain attributes only. Python >= 3.12 checks a runtime
protocol's members with ``inspect.getattr_static``, which does not see the submodules that
``nn.Module`` keeps in ``_modules`` (``self.net``, ``self.in_proj``): a protocol naming one
would match nothing there. Those capabilities are reached through their declared owner type
instead: ``evaluation.EvaluationModule.net`` and ``blocks.attention.MultiHeadAttention.in_proj``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from torch import Tensor

if TYPE_CHECKING:
    from matplotlib.figure import Figure


# ---------------------------------------------------------------------- networks (``module.net``)
@runtime_checkable
class AttentionMapsNet(Protocol):
    """A network whose attention weights can be read on a teacher-forced pass: every encoder-decoder
    (Transformer, recurrent, the captioner's ``CaptionNet``) and the causal LM; not the classifier or RAM.

    Map names say what attends to what: ``enc_self/layer1``, ``dec_self/layer2``, ``cross/layer1``
    (the causal LM: ``self/layerN``); rows are queries.
    """

    def attention_maps(self, src: Tensor, tgt_in: Tensor) -> dict[str, Tensor]:
        """src (B, S), tgt_in (B, T) -> name -> (B, H, T_q, T_k) weights (rows sum to 1, or all zero
        for an arm without attention)."""
        ...


@runtime_checkable
class StepwiseNet(Protocol):
    """A network decoded one token at a time: the seq2seq families, the captioner and the causal LM
    (the decoder step protocol of ``blocks.step_protocol``, with its ``encode``)."""

    def encode(self, src: Tensor) -> Any:
        """src (B, S) (images for the captioner) -> the decoder's initial state."""
        ...

    def step(self, prev_tokens: Tensor, state: Any) -> tuple[Tensor, Any]:
        """prev_tokens (B,) -> logits (B, V), new state."""
        ...


# ------------------------------------------------------------------------------ LightningModules
@runtime_checkable
class SmoothedLoss(Protocol):
    """A module trained on a label-smoothed cross-entropy (every ``DecoderTrainingModule``: the seq2seq
    families and the captioner): probes that score its decoder use the same ε, so what they compare
    is like with like."""

    @property
    def label_smoothing(self) -> float:
        """ε_ls of the training loss (0 = plain cross-entropy)."""
        ...


@runtime_checkable
class PlotsFigures(Protocol):
    """A module that draws its own figures of its fixed validation examples (captioner, RAM)."""

    figure_batch: Any

    def figure_plots(self, epoch: int) -> dict[str, Figure]:
        """name -> figure (saved as ``figures/<name>.png``)."""
        ...


@runtime_checkable
class HasAttentionMaps(Protocol):
    """A module whose attention maps of its fixed validation examples are drawn as token-by-token heatmaps
    (every ``Seq2SeqModule``: Transformer, recurrent, causal LM; not the captioner, whose sources are
    images: it draws overlays, ``PlotsFigures``)."""

    figure_batch: Any

    def figure_maps(self) -> tuple[dict[str, Tensor], list[list[str]], list[list[str]]]:
        """name -> (N, H, T, S) weights, source token labels, output token labels."""
        ...


# --------------------------------------------------------------------------------- batches and data
@runtime_checkable
class SourceTargetBatch(Protocol):
    """A batch with token sources and targets (``Seq2SeqBatch``; the captioner's batch, whose src
    are images): what the fixed-batch probes keep."""

    src: Tensor
    tgt: Tensor


@runtime_checkable
class NamesTask(Protocol):
    """A datamodule that names its synthetic task (``SyntheticSeq2Seq``: copy / reverse / sort), from
    which the alignment probe knows which source position each target reads."""

    task: str


@runtime_checkable
class UnigramBaseline(Protocol):
    """Running-text data that can score a unigram model of its training text on a split's evaluated targets
    (``datamodules.wikitext.TextLM``): the causal LM logs it beside its own perplexity as ``test/ppl_unigram``."""

    def unigram_perplexity(self, split: str) -> float:
        """Perplexity of the training text's smoothed unigram model on ``split``'s scored targets."""
        ...
