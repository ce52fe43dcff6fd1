"""Character-level language modelling on WikiText-2 / WikiText-103 (raw), the World English Bible, or
any local text file: one ``text_sources.TEXT_SOURCES`` entry per ``source`` reads the raw text of each split
from a frozen ``sources.TextSpec`` (downloads, layouts and splits are described there).

Tokens are characters: the ``vocab_size - 4`` most frequent characters of the training text (ties by
code point), every other character is UNK; ids 0..3 are the special ids. Batches are :class:`TextBatch`.

Windows (each is ``context + 1`` tokens: ``context`` inputs, targets shifted by one):

- training: non-overlapping windows of the training text (shuffled each epoch); with ``finetune_steps=K``, the
  run's last K batches take ``finetune_context`` tokens from each of their windows' starts (a short fine-tune at
  the extended length, Chen et al. 2023 §3.2; ``datamodules.finetune``), marked ``TextBatch.finetune``;
- evaluation, ``eval_stride=None``: **non-overlapping** windows; consecutive windows share one token
  (the last target of a window is the first input of the next), so every token after the first is
  predicted exactly once, with 0 .. context-1 tokens of context (Press et al. 2022, §4 main protocol);
- evaluation, ``eval_stride=s`` (0 < s <= context): **sliding** windows every s tokens, scoring only
  their last s targets (all targets of the first window), so every token is predicted once with at
  least context - s tokens of context (Press et al. 2022, Appendix B "sliding window evaluation").

Validation uses the training context; test uses every length in ``eval_contexts`` (default L, 2L, 4L),
logged per context as ``test/ppl_by_ctx/ctx_NNNNN``. ``unigram_perplexity(split)`` is the floor a model that
learned only the token frequencies reaches: add-one (Laplace) smoothed unigram probabilities of the training
text, scored on the same targets as the first evaluation context (logged as ``test/ppl_unigram``).
A tail shorter than a window is not scored.
``train_size`` caps the training windows per epoch (a fixed seeded subset); ``val_size`` / ``test_size``
keep the first windows of each context (the same text for every context's first windows).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import DataLoader

from attnlab_core.batches import TextBatch
from attnlab_core.errors import UsageError
from datamodules.batching import N_SPECIAL, PAD, UNK, OneVocabulary, SplitDataModule, distributed_world, require
from datamodules.finetune import tail_loader
from datamodules.sources import TextSpec
from datamodules.text_sources import TEXT_SOURCES, Texts, TextSource


def windows(length: int, *, context: int, stride: int | None) -> list[tuple[int, int]]:
    """``(start, score_from)`` of every window of ``context + 1`` tokens over a stream of ``length`` tokens.

    ``stride=None``: non-overlapping (start every ``context`` tokens, everything scored); else sliding
    (start every ``stride`` tokens, the last ``stride`` targets scored, all of the first window's).
    """
    step = context if stride is None else stride
    starts = range(0, length - context, step)
    return [(s, 0 if stride is None or s == 0 else context - stride) for s in starts]


def unigram_perplexity(train: Tensor, scored: Tensor, *, vocab_size: int) -> float:
    """exp of the mean negative log-probability of ``scored`` under add-one smoothed unigram counts of
    ``train`` over ``vocab_size`` ids (every id, the specials included, gets a count of one more)."""
    counts = torch.bincount(train.long(), minlength=vocab_size).double() + 1.0
    logp = counts.log() - counts.sum().log()
    return float(torch.exp(-logp[scored.long()].mean()))


def char_vocabulary(text: str, *, size: int) -> np.ndarray:
    """Sorted code points of the ``size`` most frequent characters (ties: lower code point first)."""
    codes, counts = np.unique(_code_points(text), return_counts=True)
    order = np.lexsort((codes, -counts))[:size]
    return np.sort(codes[order])


def _code_points(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


def encode_chars(text: str, vocab: np.ndarray) -> Tensor:
    """Characters -> (N,) long ids: ``N_SPECIAL + rank in vocab``, UNK for characters outside it."""
    codes = _code_points(text)
    idx = np.searchsorted(vocab, codes).clip(max=max(len(vocab) - 1, 0))
    known = vocab[idx] == codes if len(vocab) else np.zeros_like(codes, dtype=bool)
    return torch.from_numpy(np.where(known, idx + N_SPECIAL, UNK).astype(np.int64))


class TextLM(OneVocabulary, SplitDataModule):
    """Character-level LM data: WikiText-2/103 raw, the WEB Bible or a local text file (see the module
    docstring). Split sizes count windows: ``train_size`` per epoch (None: every window of the training
    text), ``test_size`` per context.

    Args:
        source: wikitext2 | wikitext103 | web | file.
        path: the UTF-8 text file for source=file.
        sword_path: source=web: the SWORD library (None: ``$SWORD_PATH``, else /usr/share/sword).
        data_dir: download / extraction cache.
        vocab_size: ids including the 4 special ones; the most frequent vocab_size - 4 characters.
        context: training context length L (tokens per window, before the shifted target).
        eval_contexts: test context lengths; default [L, 2L, 4L].
        eval_stride: None for non-overlapping evaluation windows, else the sliding-window stride.
        finetune_steps: the run's last N training batches (optimizer steps without gradient accumulation) are a
            fine-tune at the extended length: windows of ``finetune_context`` tokens, trained on with the model's
            RoPE scaling in force (Chen et al. 2023 §3.2); 0 = none, the run unchanged.
        finetune_context: the fine-tune's context L' (> context); default the longest of eval_contexts (4L).
    """

    split_defaults = {"batch_size": 32}

    def __init__(
        self, *, source: TextSource = "wikitext2", path: str | None = None, sword_path: str | None = None,
        data_dir: str = "data",
        vocab_size: int = 200, context: int = 128, eval_contexts: list[int] | None = None,
        eval_stride: int | None = None, finetune_steps: int = 0, finetune_context: int | None = None, **split: Any,
    ) -> None:
        super().__init__(split=self.split_spec(**split))
        self.vocab_size, self.context = vocab_size, context
        self.eval_contexts = list(eval_contexts) if eval_contexts else [context, 2 * context, 4 * context]
        self.eval_stride = eval_stride
        self.finetune_steps = finetune_steps
        self.finetune_context = max(self.eval_contexts) if finetune_context is None else finetune_context
        require([
            (source in get_args(TextSource), f"unknown source {source!r}"),
            (vocab_size > N_SPECIAL, f"vocab_size must be > {N_SPECIAL}, got {vocab_size}"),
            (context >= 1 and min(self.eval_contexts) >= 1, "context and eval_contexts must be >= 1"),
            (eval_stride is None or 0 < eval_stride <= min(self.eval_contexts),
             f"eval_stride must be in 1..min(eval_contexts), got {eval_stride}"),
            (finetune_steps >= 0, f"finetune_steps={finetune_steps} is not allowed: it must be an integer >= 0"),
            (finetune_steps == 0 or self.finetune_context > context,
             f"finetune_context={self.finetune_context} is not allowed: the fine-tune's windows must be longer than "
             f"context={context}"),
        ])
        self.use_source(TEXT_SOURCES, source, TextSpec(data_dir=Path(data_dir), path=path, sword_path=sword_path))
        self.save_hyperparameters()
        self.streams: dict[str, Tensor] = {}

    # ------------------------------------------------------------------- text
    def prepare_data(self) -> None:
        """Fetch what the source reads, once (WikiText's archive; nothing for a local file or the Bible)."""
        if self.corpus.prepare is not None:
            self.corpus.prepare(self.spec)

    def texts(self) -> Texts:
        """Split name -> raw text."""
        return self.corpus.read(self.spec)

    def setup(self, stage: str) -> None:
        if self.streams:
            return
        texts = self.texts()
        vocab = char_vocabulary(texts["train"], size=self.vocab_size - N_SPECIAL)
        for name, text in texts.items():
            self.streams[name] = encode_chars(text, vocab)
        self.itos = {N_SPECIAL + i: chr(c) for i, c in enumerate(vocab.tolist())}
        for name, stream in self.streams.items():
            if len(stream) <= max(self._lengths(name)):
                raise UsageError(f"the {name} text has {len(stream)} characters, fewer than one window needs")
        if stage == "fit" and self.finetune_steps:  # the run's length against the tail, before any loop starts
            self._train_loader(self.streams["train"]).sampler.tail_span()

    def unigram_perplexity(self, split: str) -> float:
        """Perplexity of the add-one smoothed unigram model of the training text on ``split``'s scored
        targets at the first evaluation context (the tokens the model's ``{split}/ppl`` scores there)."""
        stream = self.streams[split]
        context = self.context if split == "val" else self.eval_contexts[0]
        starts = windows(len(stream), context=context, stride=self.eval_stride)[: self.sizes[split]]
        return unigram_perplexity(self.streams["train"], stream[1: starts[-1][0] + context + 1],
                                  vocab_size=self.vocab_size)

    def decode_tokens(self, ids: Sequence[int] | Tensor) -> str:
        """Ids -> the characters they stand for (PAD dropped, unknown ids as U+FFFD)."""
        return "".join(self.itos.get(int(i), "\ufffd") for i in ids if int(i) != PAD)

    # ---------------------------------------------------------------- loaders
    def _lengths(self, split: str) -> list[int]:
        """The context lengths of the windows ``split`` is cut into."""
        if split == "test":
            return self.eval_contexts
        return [self.context, self.finetune_context] if split == "train" and self.finetune_steps else [self.context]

    def _train_loader(self, stream: Tensor) -> DataLoader:
        """Shuffled non-overlapping windows of ``context`` tokens (a seeded subset of ``train_size``); the run's last
        ``finetune_steps`` batches take ``finetune_context`` tokens from the same starts (the last possible start
        for a window that would run past the text)."""
        starts = torch.tensor([s for s, _ in windows(len(stream), context=self.context, stride=None)])
        keep = self.sizes.train_subset(len(starts), self.seed)
        if keep is not None:
            starts = starts[keep]
        last = len(stream) - self.finetune_context - 1

        def collate(keys: list[tuple[int, bool]]) -> TextBatch:
            finetune = keys[0][1]
            items = [(min(int(starts[i]), last) if finetune else int(starts[i]), 0) for i, _ in keys]
            return _collate(stream, items, self.finetune_context if finetune else self.context, finetune=finetune)

        return tail_loader(len(starts), data=self, tail=self.finetune_steps, collate=collate)

    def _loader(self, split: str) -> DataLoader:
        stream = self.streams["test" if split == "predict" else split]
        if split == "train":
            return self._train_loader(stream)
        contexts = [self.context] if split == "val" else self.eval_contexts
        batches = eval_batches(len(stream), contexts=contexts, stride=self.eval_stride, batch_size=self.batch_size,
                               limit=self.sizes["test" if split == "predict" else split])
        return DataLoader(batches, batch_size=None, num_workers=self.num_workers,
                          collate_fn=lambda b: _collate(stream, b[1], b[0]))


def eval_batches(length: int, *, contexts: list[int], stride: int | None, batch_size: int,
                 limit: int | None = None) -> list[tuple[int, list[tuple[int, int]]]]:
    """This rank's evaluation batches ``(context, [(start, score_from), ...])``: every window (the first
    ``limit``) of every context on exactly one DDP rank (window i goes to rank i mod W), never padded."""
    world, rank = distributed_world()
    out = []
    for ctx in contexts:
        mine = windows(length, context=ctx, stride=stride)[:limit][rank::world]
        out += [(ctx, mine[i: i + batch_size]) for i in range(0, len(mine), batch_size)]
    return out


def _collate(stream: Tensor, items: list[tuple[int, int]], context: int, *, finetune: bool = False) -> TextBatch:
    tokens = torch.stack([stream[s: s + context + 1] for s, _ in items])  # (B, C + 1)
    return TextBatch(tokens=tokens, score_from=torch.tensor([f for _, f in items]), context=context,
                     finetune=finetune)
