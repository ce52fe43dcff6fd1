"""The fine-tune at the extended length in one fit (``TextLM.finetune_steps``): the training forward of a fine-tune
batch rotates q and k by the interpolated angles (m/s)·θ_i of Chen et al. 2023 (eq. 4, computed here from the
formula), a plain batch by m·θ_i; a fit is the zero-fine-tune fit of the same seed, weight for weight, until its
last K steps, and a fit without the fine-tune is the fit on the plain shuffled loader it replaced."""

from __future__ import annotations

import math
from pathlib import Path

import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler

from attnlab_core.batches import TextBatch
from datamodules.wikitext import TextLM, _collate
from lit_models.blocks.positions import RotaryEmbedding
from lit_models.families.causal_lm import CausalLM

FIXTURE = Path(__file__).parents[1] / "fixtures" / "lm" / "tiny.txt"
CONTEXT, LONG, S, D_HEAD, BASE = 16, 64, 4.0, 8, 10000.0


def _model(**options) -> CausalLM:
    return CausalLM(tgt_vocab_size=40, d_model=16, heads=2, d_ff=32, layers=1, positions="rope",
                    rope_scaling="linear", rope_factor=S, rope_train_len=CONTEXT, **options)


def _data(**options) -> TextLM:
    return TextLM(source="file", path=str(FIXTURE), context=CONTEXT, eval_contexts=[CONTEXT, LONG], vocab_size=40,
                  train_size=30, val_size=4, test_size=4, batch_size=4, seed=5, **options)


def _rotated(x: torch.Tensor, offset: int, scale: float) -> torch.Tensor:
    """Su et al. 2021 eq. 34 with Chen et al. eq. 4's positions m/s: pair i of position m turned by (m/s)·θ_i."""
    out = torch.empty_like(x, dtype=torch.float64)
    for m in range(x.size(-2)):
        for i in range(D_HEAD // 2):
            angle = (offset + m) / scale * BASE ** (-2 * i / D_HEAD)
            a, b = x[..., m, 2 * i].double(), x[..., m, 2 * i + 1].double()
            out[..., m, 2 * i] = a * math.cos(angle) - b * math.sin(angle)
            out[..., m, 2 * i + 1] = a * math.sin(angle) + b * math.cos(angle)
    return out


@pytest.mark.parametrize("finetune", [False, True])
def test_a_fine_tune_batch_trains_with_the_interpolated_angles(finetune):
    torch.manual_seed(0)
    model = _model().train()
    calls = []
    for rope in (m for m in model.modules() if isinstance(m, RotaryEmbedding)):
        rope.register_forward_hook(lambda mod, args, out: calls.append((args[0].detach(), args[1], out.detach())))
    context = LONG if finetune else CONTEXT
    tokens = torch.randint(4, 40, (2, context + 1))
    batch = TextBatch(tokens=tokens, score_from=torch.zeros(2, dtype=torch.long), context=context, finetune=finetune)
    loss, _ = model.training_loss(batch, 0)
    loss.backward()  # the fine-tune trains: its loss has gradients
    assert calls and all(x.size(-2) == context for x, _, _ in calls)
    for x, offset, out in calls:  # q and k of every layer
        expected = _rotated(x, offset, S if finetune else 1.0)
        torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=0)
    assert not any(r.fine_tuning for r in model.modules() if isinstance(r, RotaryEmbedding))  # not left on


class _Record(L.Callback):
    """Per optimizer step: a copy of the weights after it and the batch's (context, finetune); per rotation in
    a training forward (q and k of each layer): its length and whether the scaling acted."""

    def __init__(self) -> None:
        self.weights, self.batches, self.rotations = [], [], []

    def on_fit_start(self, trainer, module) -> None:
        for rope in (m for m in module.modules() if isinstance(m, RotaryEmbedding)):
            rope.register_forward_hook(lambda mod, args, out: self.rotations.append(
                (args[0].size(-2), mod.fine_tuning)) if mod.training else None)

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        self.batches.append((batch.context, batch.finetune))

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        self.weights.append({k: v.detach().clone() for k, v in module.state_dict().items()})


class _PlainLoader(TextLM):
    """The training loader before the fine-tune existed: a DataLoader over the window indices, shuffled by a
    DistributedSampler(seed), windows of context + 1 tokens."""

    def train_dataloader(self) -> DataLoader:
        stream = self.streams["train"]
        starts = torch.arange(0, len(stream) - self.context, self.context)
        keep = self.sizes.train_subset(len(starts), self.seed)
        starts = starts if keep is None else starts[keep]
        sampler = DistributedSampler(range(len(starts)), num_replicas=1, rank=0, shuffle=True, seed=self.seed)
        return DataLoader(range(len(starts)), batch_size=self.batch_size, sampler=sampler,
                          collate_fn=lambda idx: _collate(stream, [(int(starts[i]), 0) for i in idx], self.context))


def _fit(data: TextLM, record: _Record) -> None:
    L.seed_everything(11, verbose=False)
    model = _model(dropout=0.1)  # dropout draws from the generator: the fits must draw alike too
    trainer = L.Trainer(max_epochs=2, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
                        callbacks=[record])
    trainer.fit(model, datamodule=data)


def test_a_fit_is_the_zero_fine_tune_fit_until_its_last_k_steps():
    k = 3
    plain, off, on = _Record(), _Record(), _Record()
    _fit(_PlainLoader(source="file", path=str(FIXTURE), context=CONTEXT, eval_contexts=[CONTEXT, LONG],
                      vocab_size=40, train_size=30, val_size=4, test_size=4, batch_size=4, seed=5), plain)
    _fit(_data(), off)
    _fit(_data(finetune_steps=k), on)
    steps = len(off.weights)
    assert steps == len(plain.weights) == len(on.weights) == 16  # 2 epochs of 8 batches
    for a, b in zip(plain.weights, off.weights, strict=True):  # fine-tune off: the plain loader's fit
        assert all(torch.equal(a[n], b[n]) for n in a)
    for a, b in zip(off.weights[: steps - k], on.weights[: steps - k], strict=True):
        assert all(torch.equal(a[n], b[n]) for n in a)
    assert not all(torch.equal(off.weights[-1][n], on.weights[-1][n]) for n in off.weights[-1])
    assert on.batches == [(CONTEXT, False)] * (steps - k) + [(LONG, True)] * k
    assert off.batches == [(CONTEXT, False)] * steps
    rotations = 2 * 1  # q and k of the one layer, per step
    assert on.rotations == [(CONTEXT, False)] * (steps - k) * rotations + [(LONG, True)] * k * rotations
    assert off.rotations == [(CONTEXT, False)] * steps * rotations


@pytest.fixture()
def sandbox(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_MODE", "disabled")
    for name in ("ATTNLAB_RUN_DIR", "WANDB_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.mark.parametrize(("options", "expected"), [
    (["--data.finetune_steps=-1"], "finetune_steps=-1 is not allowed: it must be an integer >= 0"),
    (["--data.finetune_steps=2", f"--data.finetune_context={CONTEXT}"],
     f"finetune_context={CONTEXT} is not allowed: the fine-tune's windows must be longer than context={CONTEXT}"),
    (["--data.finetune_steps=50"], "finetune_steps=50 is not allowed: the run trains 8 batches"),
    (["--data.finetune_steps=2", "--trainer.max_epochs=-1"], "finetune_steps=2 needs a run of known length"),
])
def test_the_cli_refuses_bad_fine_tune_values_in_one_line(sandbox, capsys, options, expected):
    import attnlab_run.cli  # noqa: F401  (Lightning's console handler binds the real stderr; see test_bad_input)
    from tests.cli.trees import one_line

    config = Path(__file__).parents[2] / "ablations" / "configs" / "lm_wikitext2.yaml"
    argv = ["fit", "--config", str(config), "--run.root=runs", "--run.name=r", "--trainer.max_epochs=1",
            "--data.source=file", f"--data.path={FIXTURE}", f"--data.context={CONTEXT}",
            f"--data.eval_contexts=[{CONTEXT},{LONG}]", "--data.vocab_size=40", "--data.train_size=30",
            "--data.batch_size=4", "--model.positions=rope", "--model.rope_scaling=linear", "--model.rope_factor=4",
            *options]
    line = one_line(capsys, argv, sandbox)
    assert expected in line, line
