"""Decoder-only Transformer LightningModule: prompt -> answer tasks and plain-text language modelling.

One module, two kinds of batch (the batch's type decides, as data, which loss and metrics apply):

- :class:`~attnlab_core.batches.Seq2SeqBatch` (``datamodules.lm_tasks``): the sequence is
  ``prompt · BOS · answer · EOS``; the loss covers the answer and EOS only (the prompt is context,
  never a target). Training follows ``forcing``; validation and test decode free-running through
  ``blocks.decoding`` with the KV cache, exactly like the encoder-decoder families, so the metrics
  are the same keys (``val/loss``, ``val/exact_match``, ``test/acc_by_len/...``, BLEU, chrF).
- :class:`~attnlab_core.batches.TextBatch` (``datamodules.wikitext``): windows of running text;
  next-token loss on every scored position. Evaluation logs ``{split}/loss`` (mean NLL per token,
  no label smoothing), ``{split}/ppl`` and ``{split}/ppl_by_ctx/ctx_NNNNN``: perplexity with NNNNN
  tokens of context per window (Press et al. 2022, §4: train at L, evaluate at L, 2L, 4L); at test, with
  running text that offers it (``protocols.UnigramBaseline``), ``test/ppl_unigram``: the training text's
  unigram model on the same targets, the floor a model reaches by learning only the token frequencies.

Decoding cost, at test on prompt -> answer batches: ``test/decode_tokens_per_s`` (tokens decoded, batch rows
times steps, over the wall time of the free-running decode, the KV cache included; a device sync ends each
timing) and ``test/kv_cache_bytes_per_token`` (what the cache grows by per token and sequence,
``CausalTransformer.cache_bytes_per_token``: multi-query and grouped-query attention shrink it).
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric

from attnlab_core.batches import Seq2SeqBatch, TextBatch
from attnlab_core.tokens import BOS, EOS, PAD
from lit_models.blocks.positions import scaling_in_training
from lit_models.builders import build_causal_lm
from lit_models.families.seq2seq import Seq2SeqModule
from lit_models.protocols import UnigramBaseline
from lit_models.scoring.metrics import Ratio, label_smoothed_loss, token_nll
from lit_models.specs.transformer import CAUSAL_LM_OPTIONS


class ContextPerplexity(Metric):
    """Summed NLL and token count per context length, summed over batches and DDP ranks.

    The context lengths are not known in advance, so each update appends ``(context, nll, count)``
    rows (a ``cat`` state); ``compute`` groups them. One row per batch keeps the state small.
    """

    full_state_update = False

    def __init__(self) -> None:
        super().__init__()
        self.add_state("rows", default=[], dist_reduce_fx="cat")

    def update(self, context: int, nll_sum: Tensor, count: Tensor) -> None:
        """context: the windows' context length; nll_sum, count: summed NLL and scored tokens of the batch."""
        row = torch.stack([nll_sum.new_tensor(float(context)), nll_sum.detach().float(), count.float()])
        self.rows.append(row[None])  # (1, 3)

    def compute(self) -> dict[str, Tensor]:
        rows = torch.cat(self.rows) if isinstance(self.rows, list) else self.rows  # (N, 3)
        out = {}
        for ctx in torch.unique(rows[:, 0]).tolist():
            sel = rows[rows[:, 0] == ctx]
            out[f"ctx_{int(ctx):05d}"] = torch.exp(sel[:, 1].sum() / sel[:, 2].sum().clamp_min(1.0))
        return out


class CausalLM(Seq2SeqModule):
    """Decoder-only Transformer (Radford et al. 2018) with every Transformer axis as one argument.

    Args:
        tgt_vocab_size: vocabulary size (linked from the datamodule).
        options: the architecture (``specs.TransformerSpec``'s fields with ``layers`` N causal layers and
            no encoder), then ``decoder_training.DecoderTraining``'s knobs. ``forcing`` is the feed of the
            answer: text windows are always teacher-forced (there is no answer to free-run), and the
            evaluation NLL of text is never label-smoothed.
    """

    option_groups = (CAUSAL_LM_OPTIONS,)

    def __init__(self, *, tgt_vocab_size: int, **options: Any) -> None:
        groups = self.options(**options)
        arch, training = groups
        super().__init__(training)
        self.save_hyperparameters()
        self.save_options(groups)
        self.net = build_causal_lm(arch, vocab_size=tgt_vocab_size)
        self.text_metrics = torch.nn.ModuleDict(
            {s: torch.nn.ModuleDict({"loss": Ratio(), "ppl_by_ctx": ContextPerplexity()}) for s in ("val", "test")}
        )
        self.evaluated: dict[str, str] = {}  # split -> "text" | "seq2seq", the kind of batch seen
        self.metrics["test"]["decode_tokens_per_s"] = Ratio()  # tokens decoded / seconds (module docstring)
        self.cache_bytes = 0  # test/kv_cache_bytes_per_token, read from a cache built as the test's decoding builds it

    # ------------------------------------------------------------------ text
    def _text_nll(self, batch: TextBatch) -> tuple[Tensor, Tensor]:
        """Summed next-token NLL (float32) over the scored targets, and their count."""
        logits = self.net.lm_logits(batch.tokens[:, :-1])  # (B, T, V)
        labels = batch.targets()  # (B, T), PAD where not scored
        return token_nll(logits, labels).sum(), (labels != PAD).sum()

    def training_loss(self, batch: Seq2SeqBatch | TextBatch, step: int) -> tuple[Tensor, dict[str, Tensor]]:
        """Running text: label-smoothed next-token loss over every scored target; prompts: the base's. Either with the
        RoPE scaling in force on a fine-tune batch (``TextBatch.finetune``, ``FinetunePairs``)."""
        with scaling_in_training(self.net, batch.finetune):
            if not isinstance(batch, TextBatch):
                return super().training_loss(batch, step)
            logits = self.net.lm_logits(batch.tokens[:, :-1])
        loss = label_smoothed_loss(logits, batch.targets(), eps=self.hparams.label_smoothing)
        return loss, {"train/loss": loss}

    def batch_tokens(self, batch: Seq2SeqBatch | TextBatch) -> int:
        return int(batch.tokens[:, :-1].numel()) if isinstance(batch, TextBatch) else super().batch_tokens(batch)

    def training_step(self, batch: Seq2SeqBatch | TextBatch, batch_idx: int) -> Tensor | None:
        if not isinstance(batch, TextBatch):
            return super().training_step(batch, batch_idx)
        loss, logs = self.training_loss(batch, self.global_step)
        if (checked := self._checked(loss)) is not loss:
            return checked  # diverged
        self.tokens_seen += self.batch_tokens(batch)
        self.log("train/loss", loss, prog_bar=True, batch_size=batch.tokens.size(0))
        return loss

    def _evaluate(self, batch: Seq2SeqBatch | TextBatch, split: str) -> None:
        if not isinstance(batch, TextBatch):
            self.evaluated[split] = "seq2seq"
            return super()._evaluate(batch, split)
        self.evaluated[split] = "text"
        nll, count = self._text_nll(batch)
        m = self.text_metrics[split]
        m["loss"].update(nll, count)
        m["ppl_by_ctx"].update(batch.context, nll, count)

    def generate(self, src: Tensor) -> Tensor:
        """As the base's; at test, also timed into ``test/decode_tokens_per_s``."""
        if self._trainer is None or not self.trainer.testing:
            return super().generate(src)
        self.cache_bytes = self.net.cache_bytes_per_token(self.net.encode(src[:1, :1]))  # as decoding builds it
        start = time.perf_counter()
        pred = super().generate(src)
        if pred.is_cuda:
            torch.cuda.synchronize(pred.device)
        self.metrics["test"]["decode_tokens_per_s"].update(pred.new_tensor(float(pred.numel())),
                                                           time.perf_counter() - start)
        return pred

    def _log_metrics(self, split: str) -> None:
        if self.evaluated.get(split) != "text":
            if split == "test" and self.cache_bytes:
                self.log("test/kv_cache_bytes_per_token", float(self.cache_bytes))
            return super()._log_metrics(split)
        m = self.text_metrics[split]
        loss = m["loss"].compute()
        flat = {f"{split}/loss": loss, f"{split}/ppl": torch.exp(loss), f"{split}/bits_per_token": loss / math.log(2)}
        flat.update({f"{split}/ppl_by_ctx/{k}": v for k, v in m["ppl_by_ctx"].compute().items()})
        data = self.trainer.datamodule if self._trainer is not None else None
        if split == "test" and isinstance(data, UnigramBaseline):
            flat[f"{split}/ppl_unigram"] = loss.new_tensor(data.unigram_perplexity(split))
        for metric in m.values():
            metric.reset()
        self.log_dict(flat)

    def validation_step(self, batch: Seq2SeqBatch | TextBatch, batch_idx: int) -> None:
        if isinstance(batch, TextBatch):  # no free-running outputs to draw for running text
            return self._evaluate(batch, "val")
        return super().validation_step(batch, batch_idx)

    # ---------------------------------------------------------------- figures
    @torch.no_grad()
    def figure_maps(self) -> tuple[dict[str, Tensor], list[list[str]], list[list[str]]]:
        """Self-attention over the whole sequence ``prompt · <s> · output`` of each figure example.

        Returns: ``self/layer{i}`` -> (N, H, L, L), and the L token labels (keys, then queries).
        """
        src = self.figure_batch.src[:1].to(self.device)
        src = src[:, : int((src != PAD).sum())]  # one unpadded example: slots = positions
        _, tgt_in = self._generate_with_inputs(src)  # (1, T)
        maps = self.net.sequence_attention(src, tgt_in)
        detok = self._detokenizer()
        labels = [SPECIAL_LABELS.get(i) or detok([i]) for i in src[0].tolist() + tgt_in[0].tolist()]
        return maps, [labels], [labels]


SPECIAL_LABELS = {BOS: "<s>", EOS: "</s>", PAD: "<pad>"}
