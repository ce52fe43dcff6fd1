"""Losses, metrics and learning-rate / teacher-forcing schedules of the Transformer seq2seq family: each against
its paper formula or a hand computation."""

import itertools
from typing import get_args

import pytest
import torch
import torch.nn.functional as F

from datamodules.batching import EOS, PAD
from lit_models.axes import ScheduledDecay
from lit_models.policies.forcing import gold_probability
from lit_models.policies.schedules import noam, paper_noam_lr
from lit_models.scoring.metrics import LengthBucketAccuracy, label_smoothed_loss, sequences_equal, smoothed_distribution
from tests.models.test_transformer_model import _one_thread, tiny  # noqa: E402, F401 (autouse fixture, model)


# ------------------------------------------------------------------------------------ losses & metrics
def test_smoothed_distribution_k4_eps01():
    dist = smoothed_distribution(torch.tensor([2, 0]), num_classes=4, eps=0.1)
    expected = torch.tensor([[0.025, 0.025, 0.925, 0.025], [0.925, 0.025, 0.025, 0.025]])
    torch.testing.assert_close(dist, expected)


def test_label_smoothed_loss_equals_hand_cross_entropy():
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 7)
    labels = torch.randint(1, 7, (3, 5))
    labels[1, 3:] = PAD
    labels[2, 1:] = PAD
    keep = labels.flatten() != PAD
    dist = smoothed_distribution(labels.flatten()[keep], num_classes=7, eps=0.1)
    expected = -(dist * torch.log_softmax(logits.flatten(0, 1)[keep], -1)).sum(-1).mean()
    torch.testing.assert_close(label_smoothed_loss(logits, labels, eps=0.1), expected)
    plain = F.cross_entropy(logits.flatten(0, 1)[keep], labels.flatten()[keep])
    torch.testing.assert_close(label_smoothed_loss(logits, labels, eps=0.0), plain)


def test_length_bucket_accuracy():
    metric = LengthBucketAccuracy()
    metric.update(torch.tensor([True, False, True, True]), torch.tensor([1, 5, 6, 12]))
    metric.update(torch.tensor([False, True]), torch.tensor([10, 1000]))
    got = {k: float(v) for k, v in metric.compute().items()}
    assert got == {"len_001_005": 0.5, "len_006_010": 0.5, "len_011_015": 1.0, "len_316_320": 1.0}


def test_sequences_equal_ignores_pad_width():
    pred = torch.tensor([[5, 6, EOS], [5, EOS, PAD], [7, 7, EOS]])
    gold = torch.tensor([[5, 6, EOS, PAD, PAD], [5, 6, EOS, PAD, PAD], [7, 7, EOS, PAD, PAD]])
    assert sequences_equal(pred, gold).tolist() == [True, False, True]
    assert sequences_equal(gold, pred).tolist() == [True, False, True]
    longer = torch.tensor([[5, 6, EOS, 4]])
    assert sequences_equal(longer, gold[:1]).tolist() == [False]


# ------------------------------------------------------------------------------------------ schedules
@pytest.mark.parametrize("step", [1, 100, 4000, 10000, 100000])
def test_noam_times_peak_lr_is_the_paper_formula(step):
    d_model, warmup = 512, 4000
    peak = d_model**-0.5 * warmup**-0.5
    assert peak * noam(step, warmup=warmup, total=0) == pytest.approx(
        paper_noam_lr(step, d_model=d_model, warmup=warmup), rel=1e-9)


def test_noam_peaks_at_warmup():
    values = {s: noam(s, warmup=4000, total=0) for s in range(1, 20001, 50)}
    assert noam(4000, warmup=4000, total=0) == 1.0
    assert max(values.values()) <= 1.0
    assert noam(3999, warmup=4000, total=0) < 1.0 and noam(4001, warmup=4000, total=0) < 1.0
    assert noam(0, warmup=4000, total=0) == noam(1, warmup=4000, total=0) > 0  # step counts from 1


def test_module_scheduler_steps_noam_per_optimizer_step():
    m = tiny(lr=1e-3, warmup_steps=10)
    conf = m.configure_optimizers()
    opt, sched = conf["optimizer"], conf["lr_scheduler"]["scheduler"]
    assert conf["lr_scheduler"]["interval"] == "step"
    for k in range(25):
        assert opt.param_groups[0]["lr"] == pytest.approx(1e-3 * noam(k + 1, warmup=10, total=1)), k
        opt.step()
        sched.step()


@pytest.mark.parametrize("decay", get_args(ScheduledDecay))
def test_gold_probability_endpoints(decay):
    steps, floor = 2000, 0.05
    p = [gold_probability(decay, step=i, steps=steps, floor=floor) for i in range(0, 3 * steps, 10)]
    if decay == "inverse_sigmoid":
        # Bengio's k / (k + exp(i / k)) is k / (k + 1) at i = 0, not exactly 1 (k ≈ 190 for 2000 steps).
        assert 0.99 < p[0] < 1.0
        assert gold_probability(decay, step=steps // 2, steps=steps, floor=0.0) == pytest.approx(0.5, abs=1e-3)
    else:
        assert p[0] == 1.0
    assert all(a >= b for a, b in itertools.pairwise(p)), "p(gold) must not increase"
    assert p[1] < p[0] and min(p) == pytest.approx(floor) and all(x >= floor for x in p)
    assert gold_probability(decay, step=-5, steps=steps, floor=floor) == p[0]
    end = {"linear": 0.0, "exponential": 0.01}.get(decay)
    if end is not None:
        assert gold_probability(decay, step=steps, steps=steps, floor=0.0) == pytest.approx(end, abs=1e-12)


@pytest.mark.parametrize("decay", get_args(ScheduledDecay))
def test_scheduled_module_p_gold_follows_the_decay(decay):
    """The module reads its own hyper-parameters and the trainer's global step, at every step."""
    from types import SimpleNamespace

    m = tiny(forcing="scheduled", scheduled_decay=decay, scheduled_steps=100, scheduled_floor=0.2)
    steps = [0, 10, 25, 50, 79, 80, 100, 500]
    got = []
    for step in steps:
        m._trainer = SimpleNamespace(global_step=step)
        got.append(m.p_gold())
    assert got == [gold_probability(decay, step=s, steps=100, floor=0.2) for s in steps], got
    assert len(set(got)) >= 4 and got[-1] == pytest.approx(0.2), got  # it moves, down to the floor
    if decay == "linear":  # Bengio et al. 2015 eq. (linear): max(floor, 1 - step / steps)
        assert got == pytest.approx([1.0, 0.9, 0.75, 0.5, 0.21, 0.2, 0.2, 0.2]), got


