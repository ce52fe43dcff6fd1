"""``datamodules.batching.pad_sequences`` against torch's own ``pad_sequence`` (an independent reference)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn.utils.rnn import pad_sequence

from datamodules.batching import PAD, pad_sequences


def reference(seqs: list[list[int]], pad: int) -> torch.Tensor:
    out = pad_sequence([torch.tensor(s, dtype=torch.long) for s in seqs], batch_first=True, padding_value=pad)
    return out if out.shape[1] else torch.full((len(seqs), 1), pad, dtype=torch.long)


@pytest.mark.parametrize("pad", [PAD, -1])
@pytest.mark.parametrize("kind", [list, tuple, torch.tensor, np.array])
def test_every_input_kind_pads_as_torch_does(kind, pad: int) -> None:
    seqs = [[5, 6, 7], [8], [9, 10, 11, 12, 13], []]
    given = [kind(s) if kind is not torch.tensor else torch.tensor(s, dtype=torch.long) for s in seqs]
    out = pad_sequences(given, pad=pad)
    assert out.dtype == torch.long and torch.equal(out, reference(seqs, pad))


def test_edge_shapes_keep_one_column_at_least() -> None:
    assert pad_sequences([]).shape == (0, 1)
    assert torch.equal(pad_sequences([[], []], pad=-1), torch.full((2, 1), -1))
    big = [[2**40, 3]]
    assert pad_sequences(big)[0, 0].item() == 2**40, "ids keep 64 bits"
