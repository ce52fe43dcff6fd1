"""The fine-tune at the extended lengths on prompt -> answer tasks (``PromptAnswerTasks.finetune_steps``): a fit is
the zero-fine-tune fit of the same seed, weight for weight, until its last K steps; those train on prompts up to
``finetune_max_len`` with the RoPE scaling in force; the training pairs do not change; and the answer's perplexity
by length bucket (``test/ppl_by_len``) is exp of the mean NLL, computed here token by token from log-softmax."""

from __future__ import annotations

import math
from pathlib import Path

import lightning as L
import pytest
import torch

from attnlab_core.batches import FinetunePairs
from attnlab_core.tokens import PAD
from datamodules.lm_tasks import PromptAnswerTasks
from lit_models.blocks.positions import RotaryEmbedding
from lit_models.families.causal_lm import CausalLM
from lit_models.scoring.metrics import LengthBucketPerplexity, token_nll
from tests.cli.trees import in_sandbox

MAX_LEN, LONG = 4, 12


def _data(**options) -> PromptAnswerTasks:
    return PromptAnswerTasks(task="reverse", vocab_size=12, min_len=1, max_len=MAX_LEN, test_max_len=LONG,
                             train_size=40, val_size=4, test_size=4, batch_size=8, seed=3, **options)


class _Record(L.Callback):
    """Per optimizer step: the weights after it, and the batch's (fine-tune?, longest prompt); per rotation in a
    training forward: whether the scaling acted."""

    def __init__(self) -> None:
        self.weights, self.batches, self.rotations = [], [], []

    def on_fit_start(self, trainer, module) -> None:
        for rope in (m for m in module.modules() if isinstance(m, RotaryEmbedding)):
            rope.register_forward_hook(lambda mod, args, out: self.rotations.append(mod.fine_tuning)
                                       if mod.training else None)

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        self.batches.append((batch.finetune, int((batch.src != PAD).sum(1).max())))

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        self.weights.append({k: v.detach().clone() for k, v in module.state_dict().items()})


def _fit(data: PromptAnswerTasks) -> _Record:
    record = _Record()
    L.seed_everything(11, verbose=False)
    model = CausalLM(tgt_vocab_size=12, d_model=16, heads=2, d_ff=32, layers=1, positions="rope", dropout=0.1,
                     rope_scaling="linear", rope_factor=4.0, warmup_steps=1)
    trainer = L.Trainer(max_epochs=2, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
                        callbacks=[record])
    trainer.fit(model, datamodule=data)
    return record


def test_a_fit_is_the_zero_fine_tune_fit_until_its_last_k_steps():
    k = 3
    off, on = _fit(_data()), _fit(_data(finetune_steps=k))
    steps = len(off.weights)
    assert steps == len(on.weights) == 10  # 2 epochs of 5 batches
    for a, b in zip(off.weights[: steps - k], on.weights[: steps - k], strict=True):
        assert all(torch.equal(a[n], b[n]) for n in a)
    assert not all(torch.equal(off.weights[-1][n], on.weights[-1][n]) for n in off.weights[-1])
    assert [f for f, _ in off.batches] == [False] * steps
    assert [f for f, _ in on.batches] == [False] * (steps - k) + [True] * k
    assert off.batches[: steps - k] == on.batches[: steps - k]
    assert all(n <= MAX_LEN for _, n in on.batches[: steps - k])
    assert max(n for _, n in on.batches[steps - k:]) > MAX_LEN  # 24 prompts of 1..12: some beyond max_len
    per_step = len(off.rotations) // steps  # q and k of the prompt's and the answer's forward
    assert per_step >= 2 and off.rotations == [False] * steps * per_step
    assert on.rotations == [False] * (steps - k) * per_step + [True] * k * per_step


def test_the_fine_tune_leaves_the_splits_and_draws_prompts_up_to_its_length():
    plain, tuned = _data(), _data(finetune_steps=2, finetune_max_len=8)
    for split in ("train", "val", "test"):
        assert plain.split(split) == tuned.split(split)
    lengths = {len(src) for src, _ in tuned.finetune_pairs}
    assert len(tuned.finetune_pairs) == 40 and max(lengths) == 8 and min(lengths) == 1
    assert all(tgt == src[::-1] for src, tgt in tuned.finetune_pairs)
    batch = FinetunePairs(*plain.train_dataloader().collate_fn(plain.split("train")[:2]))
    src, tgt = batch  # still a pair
    assert batch.finetune and not plain.train_dataloader().collate_fn(plain.split("train")[:2]).finetune


def test_ppl_by_len_is_exp_of_the_mean_nll_per_bucket():
    torch.manual_seed(0)
    lengths = torch.tensor([2, 5, 7, 3])  # buckets 1-5, 1-5, 6-10, 1-5
    labels = torch.full((4, 8), PAD)
    for row, n in enumerate(lengths.tolist()):
        labels[row, : n + 1] = torch.randint(4, 10, (n + 1,))  # answer and EOS
    logits = torch.randn(4, 8, 10)
    metric = LengthBucketPerplexity()
    metric.update(token_nll(logits, labels), lengths)
    got = metric.compute()
    logp = torch.log_softmax(logits.double(), -1)
    expected = {}
    for key, rows in (("len_001_005", [0, 1, 3]), ("len_006_010", [2])):
        nll = [-logp[r, t, labels[r, t]].item() for r in rows for t in range(int(lengths[r]) + 1)]
        expected[key] = math.exp(sum(nll) / len(nll))
    assert set(got) == set(expected)
    for key, value in expected.items():
        assert float(got[key]) == pytest.approx(value, rel=1e-5)


@pytest.fixture()
def sandbox(tmp_path, monkeypatch):
    return in_sandbox(tmp_path, monkeypatch)


@pytest.mark.parametrize(("options", "expected"), [
    (["--data.finetune_steps=-1"], "finetune_steps=-1 is not allowed: it must be an integer >= 0"),
    (["--data.finetune_steps=2", "--data.finetune_max_len=4"],
     "finetune_max_len=4 is not allowed: the fine-tune's prompts must reach beyond max_len=4"),
    (["--data.finetune_steps=50"], "finetune_steps=50 is not allowed: the run trains 5 batches"),
])
def test_the_cli_refuses_bad_fine_tune_values_in_one_line(sandbox, capsys, options, expected):
    import attnlab_run.cli  # noqa: F401  (Lightning's console handler binds the real stderr; see test_bad_input)
    from tests.cli.trees import one_line

    config = Path(__file__).parents[2] / "ablations" / "configs" / "lm_reverse.yaml"
    argv = ["fit", "--config", str(config), "--run.root=runs", "--run.name=r", "--trainer.max_epochs=1",
            "--data.min_len=1", f"--data.max_len={MAX_LEN}", f"--data.test_max_len={LONG}", "--data.train_size=40",
            "--data.batch_size=8", "--model.rope_scaling=linear", "--model.rope_factor=4", *options]
    line = one_line(capsys, argv, sandbox)
    assert expected in line, line
