"""Stacked seeds keep sharing storage after their trainers move the modules (issue #43, item 1).

``attnlab_run.lockstep.Lockstep`` is built while the seeds' modules are on the CPU in float32; each seed's
Lightning trainer then moves its module to its device (``Module.to``, which replaces each parameter's
``.data``). On a GPU that is the move to CUDA; on CPU ``.to(torch.float64)`` takes the same code path. The
seeds must still train as one stacked model: every parameter a view of its slice of the stacked tensor,
the vectorised step computed where the modules now are, and a seed's own optimizer step moving its slice.
"""

from __future__ import annotations

import threading

import torch
from torch import nn

from attnlab_core.batches import Seq2SeqBatch
from attnlab_run.lockstep import Lockstep
from lit_models.families.seq2seq import TransformerSeq2Seq

TINY = {"d_model": 16, "heads": 2, "d_ff": 32, "dropout": 0.0, "encoder_layers": 1, "decoder_layers": 1}


def seeds() -> list[nn.Module]:
    out = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        out.append(TransformerSeq2Seq(src_vocab_size=12, tgt_vocab_size=12, **TINY))
    return out


def meet(lockstep: Lockstep, batch: Seq2SeqBatch) -> list[torch.Tensor]:
    """Each seed asks for step 0 from its own thread (as its trainer does); their objectives."""
    out: list[torch.Tensor] = [torch.empty(())] * lockstep.stack.k
    errors: list[BaseException] = []

    def ask(k: int) -> None:
        try:
            value, _ = lockstep.stack.modules[k].training_loss(batch, 0)
            value.backward()
            out[k] = value.detach()
        except BaseException as err:  # noqa: BLE001 - reported by the assertion below
            errors.append(err)

    threads = [threading.Thread(target=ask, args=(k,)) for k in range(lockstep.stack.k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    return out


def shares(module: nn.Module, lockstep: Lockstep, k: int) -> bool:
    stacked = lockstep.stack.params
    return all(p.untyped_storage().data_ptr() == stacked[f"family.{n}"].untyped_storage().data_ptr()
               for n, p in module.named_parameters())


def test_params_still_share_the_stacked_storage_after_the_trainer_moves_the_modules() -> None:
    modules = seeds()
    lockstep = Lockstep(modules)
    for m in modules:
        m.to(torch.float64)  # what the trainer's move does (Module._apply replaces .data)
    src = torch.tensor([[4, 5, 6, 2], [7, 8, 2, 0]])
    batch = Seq2SeqBatch(src=src, tgt=torch.tensor([[1, 6, 5, 4, 2], [1, 8, 7, 2, 0]]))
    values = meet(lockstep, batch)
    assert all(v.dtype == torch.float64 and torch.isfinite(v) for v in values)
    for k, m in enumerate(modules):
        assert shares(m, lockstep, k), f"seed {k}'s parameters are no longer views of the stacked tensors"
        assert all(p.dtype == torch.float64 and p.grad is not None for p in m.parameters())
    before = lockstep.stack.params["family.net.generator.bias"][1].clone()
    with torch.no_grad():
        for p in modules[1].parameters():
            p.sub_(0.1 * p.grad)  # seed 1's own optimizer step
    after = lockstep.stack.params["family.net.generator.bias"][1]
    assert not torch.equal(before, after), "a seed's own step must move its slice of the stack"
