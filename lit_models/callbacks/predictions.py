"""``attnlab predict``: ``<run>/predict/predictions.jsonl``, one JSON object per example with the
source, the model's hypothesis, the reference where the data has one and a score, plus the same
rows as a W&B table.

The score is the sentence chrF (0-1, sacrebleu's ``sentence_chrf``; Popović 2015) of a text output
against its reference, and 1.0 / 0.0 for a class label that matches / does not; null without a
reference.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import BasePredictionWriter
from lightning.pytorch.loggers import WandbLogger

from attnlab_core.atomic import atomic_write


class PredictionWriter(BasePredictionWriter):
    """Collects every predicted example (all ranks) and writes the JSONL file and W&B table on rank 0.

    Args:
        path: the JSONL file (``RunPaths.predictions``).
    """

    def __init__(self, *, path: Path) -> None:
        super().__init__(write_interval="batch")
        self.path = Path(path)
        self.rows: list[dict[str, Any]] = []
        self.indices: list[int | None] = []

    def on_predict_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.rows, self.indices = [], []

    def write_on_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, prediction: Any,
                           batch_indices: Any, batch: Any, batch_idx: int, dataloader_idx: int) -> None:
        rows = example_rows(trainer.datamodule, batch, list(prediction))
        self.rows += rows
        self.indices += list(batch_indices) if batch_indices is not None else [None] * len(rows)

    def contribution(self) -> list[tuple[int | None, dict[str, Any]]]:
        """What this rank adds to the gather: each row with its dataset index (None where Lightning gave none)."""
        return list(zip(self.indices, self.rows, strict=True))

    def on_predict_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        rows = self.rows
        if trainer.world_size > 1:
            import torch.distributed as dist

            gathered: list[Any] = [None] * trainer.world_size
            dist.all_gather_object(gathered, self.contribution())
            rows = in_dataset_order([pair for part in gathered for pair in part])
        if not trainer.is_global_zero:
            return
        text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        atomic_write(self.path, text.encode("utf-8"))
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger) and rows:
                columns = ["source", "hypothesis", "reference", "score"]
                logger.log_table(key="predict/predictions", columns=columns,
                                 data=[[row.get(c) for c in columns] for row in rows])


def in_dataset_order(pairs: list[tuple[int | None, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The ranks' (dataset index, row) pairs as rows in dataset order, each index once: the DistributedSampler
    deals indices round robin and pads the last round with repeats. Without indices, the order as gathered."""
    if any(index is None for index, _ in pairs):
        return [row for _, row in pairs]
    return [row for _, row in sorted(dict(reversed(pairs)).items())]


def example_rows(datamodule: Any, batch: Any, predictions: list[Any]) -> list[dict[str, Any]]:
    """One row per example of ``batch``: source, hypothesis, reference (None when unknown), score."""
    sources, references = _sources(datamodule, batch), _references(datamodule, batch)
    rows = []
    for i, hypothesis in enumerate(predictions):
        source = sources[i] if i < len(sources) else None
        reference = references[i] if i < len(references) else None
        rows.append({"source": source, "hypothesis": hypothesis, "reference": reference,
                     "score": score(hypothesis, reference)})
    return rows


def score(hypothesis: Any, reference: Any) -> float | None:
    """Sentence chrF (0-1) for text with spaces, exact match (1.0 / 0.0) for labels; None without a reference."""
    if reference is None:
        return None
    if isinstance(hypothesis, str) and isinstance(reference, str) and (" " in reference or " " in hypothesis):
        from sacrebleu.metrics import CHRF

        return CHRF().sentence_score(hypothesis, [reference]).score / 100.0
    return float(str(hypothesis) == str(reference))


def _decode(datamodule: Any, ids: Any, *, source: bool) -> str:
    fn = getattr(datamodule, "decode_source", None) if source else None
    fn = fn or getattr(datamodule, "decode_tokens", None)
    return fn(ids) if fn is not None else " ".join(map(str, ids.tolist()))


def _sources(datamodule: Any, batch: Any) -> list[Any]:
    """Decoded source texts (token ids); images and signals have no text: None each."""
    src = getattr(batch, "src", getattr(batch, "tokens", None))
    if src is None and isinstance(batch, (tuple, list)) and batch and not hasattr(batch, "_fields"):
        src = batch[0]
    if src is None or src.is_floating_point():
        return []
    return [_decode(datamodule, row, source=True) for row in src]


def _references(datamodule: Any, batch: Any) -> list[Any]:
    """Reference texts (targets) or class names (labels), where the batch carries them."""
    tgt = getattr(batch, "tgt", None)
    if tgt is not None:
        return [_decode(datamodule, row, source=False) for row in tgt]
    labels = getattr(batch, "labels", None)
    if labels is None and isinstance(batch, (tuple, list)) and len(batch) == 2 and not hasattr(batch, "_fields"):
        labels = batch[1]
    if labels is None or labels.is_floating_point():
        return []
    names = getattr(datamodule, "class_names", None)
    return [names[int(y)] if names else int(y) for y in labels]
