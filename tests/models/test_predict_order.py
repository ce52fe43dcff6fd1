"""DDP ``predict`` writes the examples in dataset order, each once (issue #43, item 7).

Lightning's DistributedSampler deals the examples round robin (rank r gets r, r + W, ...) and pads the
last round with repeats, so concatenating the ranks' rows rank by rank permutes them and repeats some.
Simulated here: two ranks' writers each see their own batches, with the dataset indices Lightning hands
``write_on_batch_end``; the gather is the ranks' rows as ``all_gather_object`` would return them.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import torch.distributed as dist

from lit_models import predictions
from lit_models.callbacks.predictions import PredictionWriter

N, WORLD, BATCH = 7, 2, 2


def rank_writer(rank: int, path) -> PredictionWriter:
    """The writer of ``rank`` after predicting its share (DistributedSampler order, padded to equal length)."""
    share = [(rank + WORLD * i) % N for i in range(-(-N // WORLD))]
    writer = PredictionWriter(path=path)
    for start in range(0, len(share), BATCH):
        indices = share[start:start + BATCH]
        trainer = SimpleNamespace(datamodule=None)
        writer.write_on_batch_end(trainer, None, [f"hyp{i}" for i in indices], indices, None, start // BATCH, 0)
    return writer


def test_ddp_predictions_come_out_in_dataset_order_once_each(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(predictions, "example_rows",
                        lambda datamodule, batch, preds: [{"source": None, "hypothesis": p} for p in preds])
    writers = [rank_writer(r, tmp_path / "predictions.jsonl") for r in range(WORLD)]
    monkeypatch.setattr(dist, "all_gather_object", lambda out, rows: out.__setitem__(
        slice(None), [w.contribution() for w in writers]))
    trainer = SimpleNamespace(world_size=WORLD, is_global_zero=True, loggers=[], datamodule=None)
    writers[0].on_predict_end(trainer, None)
    lines = (tmp_path / "predictions.jsonl").read_text().splitlines()
    assert [json.loads(line)["hypothesis"] for line in lines] == [f"hyp{i}" for i in range(N)]
