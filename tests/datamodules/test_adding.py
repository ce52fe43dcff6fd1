"""AddingProblem: marker placement, targets, determinism, mean-predictor baseline."""

from __future__ import annotations

import pytest
import torch

from datamodules.adding import AddingProblem
from datamodules.batching import RegressionBatch


def make(**kw: object) -> AddingProblem:
    base = {"seq_len": 21, "train_size": 300, "val_size": 100, "test_size": 4000, "batch_size": 50}
    return AddingProblem(**{**base, **kw})  # type: ignore[arg-type]


def test_markers_two_per_row_in_the_right_halves_and_targets_are_marked_sums() -> None:
    dm = make()
    x, y = dm.split("test").tensors
    values, markers = x[..., 0], x[..., 1]
    half = 21 // 2
    assert x.shape == (4000, 21, 2) and y.shape == (4000,)
    assert bool(((markers == 0) | (markers == 1)).all())
    assert bool((markers[:, :half].sum(1) == 1).all())
    assert bool((markers[:, half:].sum(1) == 1).all())
    assert torch.allclose((values * markers).sum(1), y)
    assert bool(((values >= 0) & (values <= 1)).all())


def test_mean_predictor_mse_is_one_sixth() -> None:
    dm = make()
    y = torch.cat([b.y for b in dm.test_dataloader()])
    mse = ((y - 1.0) ** 2).mean().item()  # the true mean of U1 + U2 is 1
    assert mse == pytest.approx(1 / 6, abs=0.015)


def test_batches_and_input_size() -> None:
    dm = make()
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    assert isinstance(batch, RegressionBatch)
    assert batch.x.shape == (50, 21, dm.input_size) and batch.y.shape == (50,)
    assert batch.x.dtype == torch.float32 and batch.y.dtype == torch.float32


def test_deterministic_and_splits_differ() -> None:
    a, b = make(seed=3), make(seed=3, train_size=777)
    torch.manual_seed(0)
    assert torch.equal(a.split("val").tensors[0], b.split("val").tensors[0])
    assert torch.equal(a.split("test").tensors[1], b.split("test").tensors[1])
    assert not torch.equal(a.split("val").tensors[1], a.split("test").tensors[1][:100])
    assert not torch.equal(make(seed=4).split("val").tensors[1], a.split("val").tensors[1])


@pytest.mark.parametrize(
    "kw, name",
    [({"seq_len": 1}, "seq_len"), ({"train_size": 0}, "train_size"), ({"batch_size": 0}, "batch_size")],
)
def test_invalid_args_raise_naming_the_arg(kw: dict[str, object], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        make(**kw)
