"""``Ratio`` sums its numerator and denominator over batches: a count ratio (accuracy, token-weighted loss) and
a rate over seconds (test/decode_tokens_per_s). A denominator under 1 (decoding that took 0.25 s) is divided
by as it is: rounding it up to 1 reported every arm's decode rate as its token count."""

import torch

from lit_models.scoring.metrics import Ratio


def test_a_rate_over_less_than_a_second_is_not_the_count():
    rate = Ratio()
    rate.update(torch.tensor(30.0), 0.1)
    rate.update(torch.tensor(10.0), 0.15)
    assert torch.isclose(rate.compute(), torch.tensor(160.0))


def test_counts_and_nothing_counted():
    acc = Ratio()
    assert acc.compute() == 0  # nothing counted yet: 0, not NaN
    acc.update(torch.tensor([1.0, 0.0, 1.0]), 3)
    assert torch.isclose(acc.compute(), torch.tensor(2 / 3))
