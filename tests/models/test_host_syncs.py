"""No host sync in the families' training objective (issue #43, item 9).

A GPU training step that reads a tensor's value on the host (``.item()``, ``bool()``, ``int()``, ``float()``,
``.tolist()``) waits for the device to finish everything queued before it. The project's code in
``training_loss`` (the objective: forward, loss, REINFORCE term) must not do it; the training step's one
deliberate read is the finiteness check (divergence must stop the step that produced it). Counted here by
wrapping those methods of ``torch.Tensor`` and keeping the calls made from the project's own files; torch's
``pack_padded_sequence`` reads its lengths on the host by design and is not ours.
"""

from __future__ import annotations

import collections
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from datamodules.synthetic import SyntheticSeq2Seq
from lit_models.families.recurrent_seq2seq import RecurrentSeq2Seq
from tests.models.test_stacking import causal, classifier, seq2seq

REPO = Path(__file__).resolve().parents[2]
READS = ("item", "__bool__", "__int__", "__float__", "tolist")


@contextmanager
def host_reads() -> Iterator[collections.Counter]:
    """Counts, by ``file:line``, the host reads of tensors made from the project's files (not its tests)."""
    seen: collections.Counter = collections.Counter()
    saved = {name: getattr(torch.Tensor, name) for name in READS}

    def counted(name: str):
        def read(self, *args, **kwargs):
            caller = traceback.extract_stack(limit=2)[0]
            path = Path(caller.filename).resolve()
            if (path.is_relative_to(REPO) and not path.is_relative_to(REPO / "tests")
                    and "site-packages" not in path.parts):  # CI's venv lives inside the repository
                seen[f"{name} {path.relative_to(REPO)}:{caller.lineno}"] += 1
            return saved[name](self, *args, **kwargs)
        return read

    for name in READS:
        setattr(torch.Tensor, name, counted(name))
    try:
        yield seen
    finally:
        for name, method in saved.items():
            setattr(torch.Tensor, name, method)


def recurrent(attention: str):
    dm = SyntheticSeq2Seq(vocab_size=16, min_len=2, max_len=6, train_size=16, val_size=8, test_size=8, batch_size=8)
    return dm, RecurrentSeq2Seq(src_vocab_size=dm.src_vocab_size, tgt_vocab_size=dm.tgt_vocab_size, cell="gru",
                                hidden_size=8, embed_dim=8, attention=attention)


FAMILIES = {
    "encoder-decoder": seq2seq,
    "classifier": classifier,
    "recurrent additive": lambda: recurrent("additive"),
    "recurrent none": lambda: recurrent("none"),
    "recurrent hard (REINFORCE)": lambda: recurrent("hard"),
    "decoder-only": causal,
}


@pytest.mark.parametrize("build", list(FAMILIES.values()), ids=list(FAMILIES))
def test_training_objective_reads_nothing_on_the_host(build) -> None:
    dm, model = build()
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    model.log = lambda *args, **kwargs: None  # Lightning's logging is not the objective's
    model.training_loss(batch, 0)  # first call: lazy state (the REINFORCE baseline's first value)
    with host_reads() as seen:
        model.training_loss(batch, 1)
    assert not seen, dict(seen)


def test_gradient_probe_reads_the_host_once_per_step() -> None:
    """``GradientNorms`` logs a norm per layer group and through the softmax for each of its steps: the norms are
    summed on the device and copied to the host in one read, however many parameters and groups there are; and
    each logged value is the L2 norm of its group's gradients, computed here independently."""
    from types import SimpleNamespace

    from lit_models.callbacks.grad_probes import GradientNorms, parameter_group
    from lit_models.families.seq2seq import TransformerSeq2Seq

    torch.manual_seed(0)
    model = TransformerSeq2Seq(src_vocab_size=12, tgt_vocab_size=12, d_model=16, heads=2, d_ff=32, encoder_layers=2,
                               decoder_layers=2, dropout=0.0)
    src, tgt = torch.randint(4, 12, (3, 5)), torch.randint(4, 12, (3, 6))
    model.net(src, tgt).logsumexp(-1).sum().backward()
    logged: dict[str, float] = {}
    model.log = lambda name, value, **kwargs: logged.__setitem__(name, value)
    trainer = SimpleNamespace(global_step=0, is_global_zero=True, precision_plugin=None)
    with host_reads() as seen:
        GradientNorms(steps=5).on_before_optimizer_step(trainer, model, optimizer=None)
    assert sum(seen.values()) == 1, dict(seen)
    groups: dict[str, list[torch.Tensor]] = {}
    for name, p in model.named_parameters():
        if p.grad is not None:
            groups.setdefault(parameter_group(name), []).append(p.grad.flatten())
    for group, grads in groups.items():
        assert logged[f"train/grad_norm/{group}"] == pytest.approx(float(torch.cat(grads).norm()), rel=1e-5)
    total = float(torch.cat([g for grads in groups.values() for g in grads]).norm())
    assert logged["train/grad_norm/total"] == pytest.approx(total, rel=1e-5)
    assert {"train/grad_qk/encoder.layers.1", "train/grad_qk/decoder.layers.1", "train/grad_qk/total"} <= set(logged)
    assert all(isinstance(v, float) for v in logged.values())
