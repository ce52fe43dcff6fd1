"""The attention figures are drawn on the longest examples of the first validation batch."""

from __future__ import annotations

import torch

from datamodules.batching import PAD, Seq2SeqBatch
from lit_models.figures import longest_examples


def test_longest_examples_pick_the_longest_sources_in_batch_order_on_ties():
    src = torch.tensor([[5, 6, PAD, PAD], [5, 6, 7, 8], [9, PAD, PAD, PAD], [7, 7, 7, 8]])
    tgt = torch.arange(16).view(4, 4)
    picked = longest_examples(Seq2SeqBatch(src=src, tgt=tgt), 2)
    assert isinstance(picked, Seq2SeqBatch)
    assert picked.src.tolist() == [[5, 6, 7, 8], [7, 7, 7, 8]]
    assert picked.tgt.tolist() == [tgt[1].tolist(), tgt[3].tolist()]
    assert longest_examples(Seq2SeqBatch(src=src, tgt=tgt), 1).src.tolist() == [[5, 6, 7, 8]]
