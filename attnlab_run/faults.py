"""Fault tolerance, the checkpoint side: atomic checkpoint writes, RNG states in checkpoints and an
always-current ``last.ckpt``, so a stopped run resumes exactly (preemption itself: :mod:`attnlab_run.preemption`).

How the pieces fit Lightning 2.6 (``loops/fit_loop.py``):

- :class:`RngState` restores the generators where the uninterrupted run would draw next, and on
  train start puts the loops where an uninterrupted run would be: :func:`finish_restored_epoch_end`
  (an ``on_train_epoch_end`` checkpoint under ``max_steps``) and :func:`skip_trained_batches` (a
  mid-epoch checkpoint: the resumed epoch skips the batches already trained).
- :class:`LastCheckpoint` refreshes ``last.ckpt`` after every validation, every N steps if asked
  and at the end of training, never at an epoch's last batch (:func:`at_epoch_end_batch`).
- Checkpoints are written through :class:`AtomicCheckpointIO`: a temporary file in the same
  directory, fsync, then ``os.replace`` — a crash during a save leaves the previous file intact.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.fabric.plugins import TorchCheckpointIO
from lightning.pytorch.trainer.states import TrainerFn

from attnlab_core.atomic import atomic_write

log = logging.getLogger(__name__)


class AtomicCheckpointIO(TorchCheckpointIO):
    """``torch.save`` to a temporary file beside the target, fsync, then ``os.replace``.

    Readers (``--ckpt_path last``, the report) see either the previous complete file or the new
    complete file, never a partial one, even if the process is killed mid-save.
    """

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | Path, storage_options: Any = None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options, got {storage_options!r}")
        atomic_torch_save(checkpoint, Path(path))

    def load_checkpoint(self, path: str | Path, map_location: Any = None, weights_only: bool | None = None) -> dict:
        """Resume loads with ``weights_only=True`` unless a caller explicitly asks otherwise."""
        return super().load_checkpoint(path, map_location=map_location,
                                       weights_only=True if weights_only is None else weights_only)


def atomic_torch_save(obj: Any, path: Path) -> None:
    """Write ``obj`` with ``torch.save`` so that ``path`` is replaced all at once or not at all."""
    atomic_write(path, lambda f: torch.save(obj, f))


class RngState(L.Callback):
    """Saves the Python, NumPy, torch (CPU and CUDA) generators with every checkpoint and restores them
    where the uninterrupted run would continue drawing.

    Lightning restores model, optimizer, scheduler and loop counters but no RNG state; without
    this a resumed run draws other dropout masks / scheduled-sampling coins / hard-attention
    samples. The state is applied at the first ``on_train_epoch_start`` (a checkpoint from the end
    of an epoch) or ``on_train_batch_start`` (a mid-epoch checkpoint) after loading, not at load
    time: the resumed process draws from the global generator in between (sanity-check and
    dataloader-iterator seeds) where the uninterrupted run did not. Stored as tensors and tuples
    of ints, so the checkpoint still loads with ``weights_only=True``.

    At an epoch start the uninterrupted run creates that epoch's train iterator *after* the state
    it saved: the iterator draws the loader's base seed, and a ``RandomSampler`` without its own
    generator its permutation seed, from the global generator. A resumed Lightning 2.6 process made
    its iterator in ``FitLoop.setup_data``, before the restore, and reuses it for that epoch
    (``_TrainingEpochLoop.on_run_start`` skips ``iter()`` while resuming), so the resumed epoch was
    shuffled (and its dropout drawn) one stream position off. :meth:`on_train_epoch_start` therefore
    builds the iterator again right after the restore (:func:`renew_train_iterator`).
    """

    def __init__(self) -> None:
        self._pending: dict[str, Any] | None = None

    def state_dict(self) -> dict[str, Any]:
        if self._pending is not None:  # loaded, not yet applied: nothing has drawn from it yet
            return self._pending
        kind, keys, pos, has_gauss, gauss = np.random.get_state()
        state: dict[str, Any] = {
            "python": random.getstate(),
            "numpy": {"kind": str(kind), "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
                      "pos": int(pos), "has_gauss": int(has_gauss), "gauss": float(gauss)},
            "torch": torch.get_rng_state(),
        }
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._pending = state_dict

    def apply(self, state: dict[str, Any]) -> None:
        """Set every generator to ``state`` (a :meth:`state_dict`)."""
        version, internal, gauss = state["python"]
        random.setstate((version, tuple(internal), gauss))
        n = state["numpy"]
        np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
        torch.set_rng_state(state["torch"])
        cuda = state.get("cuda")
        if cuda is not None and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda)

    def _apply_pending(self, rank: int) -> None:
        """Restore the saved state; under DDP the checkpoint holds rank 0's, so ranks > 0 branch off
        it (as StochasticModule.on_fit_start offsets their seeds) instead of all drawing rank 0's stream."""
        if self._pending is None:
            return
        self.apply(self._pending)
        self._pending = None
        if rank > 0:
            seed = int(torch.randint(0, 2**31 - 1, (1,))) + 1_000_003 * rank
            random.seed(seed), np.random.seed(seed % 2**32), torch.manual_seed(seed)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        finish_restored_epoch_end(trainer)
        skip_trained_batches(trainer)

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._pending is not None:
            self._apply_pending(trainer.global_rank)
            renew_train_iterator(trainer)

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        self._apply_pending(trainer.global_rank)


def renew_train_iterator(trainer: L.Trainer) -> None:
    """Build this epoch's train iterator again if Lightning would reuse the one it made before a restore.

    Mirrors the condition of Lightning 2.6's ``_TrainingEpochLoop.on_run_start``: an epoch after the
    first gets a fresh ``iter()`` unless the loop is resuming or restarting. A loader with its own
    ``state_dict`` (e.g. ``torchdata``'s ``StatefulDataLoader``) keeps the iterator Lightning
    restored its position into.
    """
    fit_loop = trainer.fit_loop
    lightning_renews = trainer.current_epoch > 0 and not fit_loop.is_resuming and not fit_loop.epoch_loop.restarting
    loaders = fit_loop._combined_loader.flattened if fit_loop._combined_loader is not None else []
    stateful = any(callable(getattr(loader, "load_state_dict", None)) for loader in loaders)
    if not lightning_renews and not stateful and fit_loop._data_fetcher is not None:
        iter(fit_loop._data_fetcher)


def finish_restored_epoch_end(trainer: L.Trainer) -> bool:
    """Resume a checkpoint saved at ``on_train_epoch_end`` under ``max_steps`` as the next epoch's start;
    True if it was one.

    Lightning 2.6 resumes such a checkpoint correctly only in epoch-based training: there the fit loop
    is not "restarting" (its epoch finished), counts the epoch completed and starts the next one.
    With ``max_steps`` set it always restarts (``FitLoop.restarting``), takes the stage "restarted on
    epoch end", and runs the next epoch without ``increment_ready`` / ``on_train_epoch_start`` and with
    the finished epoch's batch counters, so that epoch trains no batch and the run ends one epoch
    short (#24: SIGTERM at step 100 of 50-batch epochs ended at 250 instead of 300). This puts the
    loops where the epoch-based path puts them, before the first epoch starts.
    """
    fit_loop = trainer.fit_loop
    if not (fit_loop.restarted_on_epoch_end and trainer.max_steps != -1):
        return False
    fit_loop.epoch_progress.increment_completed()
    fit_loop._restarting = False  # the FitLoop setter would force True under max_steps
    fit_loop.epoch_loop.restarting = False  # and its children (the validation loop)
    for loop in (fit_loop, fit_loop.epoch_loop, fit_loop.epoch_loop.val_loop):
        loop.reset_restart_stage()
    return True


def skip_trained_batches(trainer: L.Trainer) -> int:
    """On a mid-epoch resume, move this epoch's train iterator past the batches the checkpoint already
    trained on; returns how many were skipped.

    Lightning 2.6 restores the position of loaders with a ``state_dict`` only; a plain ``DataLoader``
    restarts its epoch from the first batch while the loop counts on from the saved batch, so the
    resumed epoch saw its first k batches twice and never its last k. Our train samplers draw their
    order from (seed, epoch) alone (``datamodules/batching.py``), so the iterator is rebuilt for the
    saved epoch (``set_epoch`` before ``iter()``: Lightning sets it only after it built the iterator)
    and k batches are drawn and dropped, which makes the resumed epoch the uninterrupted one. The
    skipped batches are loaded (a data-loading cost, no training). A loader whose order comes from
    the global generator (a ``RandomSampler`` without its own generator) still gets the right number of
    batches, but not the same ones.
    """
    fit_loop = trainer.fit_loop
    fetcher, combined = fit_loop._data_fetcher, fit_loop._combined_loader
    if not fit_loop.restarted_mid_epoch or fetcher is None or combined is None:
        return 0
    loaders = combined.flattened
    if any(callable(getattr(loader, "load_state_dict", None)) for loader in loaders):
        return 0  # Lightning restored the position itself
    done = int(fit_loop.epoch_loop.batch_progress.current.processed)
    if trainer.num_training_batches == float("inf") or not 0 < done < trainer.num_training_batches:
        return 0
    for loader in loaders:
        batch_sampler = getattr(loader, "batch_sampler", None)
        for sampler in (getattr(loader, "sampler", None), getattr(batch_sampler, "sampler", None)):
            if callable(getattr(sampler, "set_epoch", None)):
                sampler.set_epoch(fit_loop.epoch_progress.current.processed)
    iter(fetcher)
    for _ in range(done):
        next(fetcher.iterator)
    return done


class LastCheckpoint(L.Callback):
    """Keeps ``<run>/checkpoints/last.ckpt`` current: after every validation (and every training epoch),
    every ``every_n_steps`` optimizer steps if > 0, and when training ends.

    Lightning 2.6.6's ``ModelCheckpoint(save_last=True)`` refreshes ``last.ckpt`` only at steps where
    it also saved a top-k checkpoint, so after an epoch that did not improve the monitored metric
    ``last.ckpt`` is stale and ``--ckpt_path last`` would silently rewind to the best epoch.

    The every-N-steps save skips an epoch's last batch (see :func:`at_epoch_end_batch`); that step
    is saved after its validation or at ``on_train_epoch_end``, states Lightning resumes correctly.

    Args:
        path: the ``last.ckpt`` file (a stable, run-specific path independent of the W&B run id).
        every_n_steps: also save every N optimizer steps (0: only at validation / epoch / train end).
    """

    def __init__(self, *, path: Path, every_n_steps: int = 0) -> None:
        self.path = Path(path)
        self.every_n_steps = every_n_steps
        self._saved_step = -1

    def _save(self, trainer: L.Trainer) -> None:
        if (trainer.sanity_checking or trainer.fast_dev_run or trainer.state.fn != TrainerFn.FITTING
                or trainer.global_step == self._saved_step):
            return
        trainer.save_checkpoint(str(self.path), weights_only=False)  # the whole training state
        self._saved_step = trainer.global_step

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        if self.every_n_steps > 0 and trainer.global_step % self.every_n_steps == 0 and not at_epoch_end_batch(trainer):
            self._save(trainer)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._save(trainer)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._save(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._save(trainer)


def at_epoch_end_batch(trainer: L.Trainer) -> bool:
    """Whether the batch that just ran is its epoch's last: no checkpoint may be written at its
    ``on_train_batch_end``.

    Lightning 2.6.6 misreads such a checkpoint on resume (open upstream, Lightning-AI/pytorch-lightning
    #19815): ``FitLoop.reset`` counts the saved epoch as done, but its restart stage stays "mid
    epoch" for the next epoch, which then runs without ``increment_ready/started`` and without
    ``on_train_epoch_start``. The resumed process's own checkpoints then say that epoch never began,
    so a second resume replays it (the SIGKILL acceptance test took 128 steps instead of 96). A
    checkpoint written after the epoch-end validation or at ``on_train_epoch_end`` resumes exactly.
    """
    return bool(trainer.fit_loop.epoch_loop.batch_progress.is_last_batch)
