"""Greedy, beam search and sampling: invariants, exhaustive optima and teacher-forced rescoring."""

import itertools
import math
from typing import NamedTuple, get_args

import pytest
import torch
from torch import Tensor, nn

from lit_models.blocks.decoding import (
    STRATEGIES,
    DecodeConfig,
    StepDecoder,
    Strategy,
    beam_search,
    decode,
    expand_state,
    gnmt_penalty,
    greedy,
    max_lengths,
    reorder_state,
    sample,
)

PAD, BOS, EOS = 0, 1, 2
SPECIAL = dict(bos=BOS, eos=EOS, pad=PAD)


class GRUToy(nn.Module):
    """Random GRU decoder; its state nests a KV-cache-like history growing along dim 1 and a long leaf."""

    def __init__(self, vocab: int = 7, hidden: int = 8, seed: int = 0) -> None:
        super().__init__()
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.emb, self.cell = nn.Embedding(vocab, hidden), nn.GRUCell(hidden, hidden)
            self.out = nn.Linear(2 * hidden, vocab)
            self.out.weight.data.mul_(4.0)  # peakier, source-dependent distributions

    def encode(self, src: Tensor) -> dict:
        mem = torch.tanh(self.emb(src))  # (B, S, H)
        steps = torch.zeros(src.shape[0], dtype=torch.long)
        return {"h": mem.mean(1), "cache": {"history": mem[:, :0], "steps": steps}, "mem": (mem,)}

    def step(self, prev: Tensor, state: dict) -> tuple[Tensor, dict]:
        h = self.cell(self.emb(prev), state["h"])  # (B, H)
        history = torch.cat([state["cache"]["history"], h.unsqueeze(1)], 1)  # (B, t, H)
        logits = self.out(torch.cat([h, history.mean(1) + state["mem"][0].mean(1)], -1))
        cache = {"history": history, "steps": state["cache"]["steps"] + 1}
        return logits, {"h": h, "cache": cache, "mem": state["mem"]}


class MarkovToy:
    """logits = table[prev] + per-example bias; optionally NaN for example 0 at step 1."""

    def __init__(self, table: Tensor, nan_at_step1: bool = False) -> None:
        self.table, self.nan_at_step1, self.calls = table, nan_at_step1, 0

    def encode(self, bias: Tensor) -> dict:
        b = bias.shape[0]
        return {"bias": bias, "id": torch.arange(b), "t": torch.zeros(b, dtype=torch.long)}

    def step(self, prev: Tensor, state: dict) -> tuple[Tensor, dict]:
        self.calls += 1
        logits = self.table[prev] + state["bias"]
        if self.nan_at_step1:
            logits[:, 3] = math.nan
            logits[(state["id"] == 0) & (state["t"] == 1)] = math.nan
        return logits, {**state, "t": state["t"] + 1}


def _table(vocab: int, favour: dict[int, float], seed: int = 0) -> Tensor:
    table = torch.randn(vocab, vocab, generator=torch.Generator().manual_seed(seed))
    for tok, value in favour.items():
        table[:, tok] = value
    return table


def _src(b: int, seed: int = 1, vocab: int = 7) -> Tensor:
    return torch.randint(3, vocab, (b, 5), generator=torch.Generator().manual_seed(seed))


def rows(tokens: Tensor) -> list[tuple[int, ...]]:
    """(N, L) -> the EOS-terminated prefix of each row."""
    return [tuple(r[: r.index(EOS) + 1]) if EOS in r else tuple(r) for r in tokens.tolist()]


def assert_well_formed(tokens: Tensor, max_len: Tensor) -> None:
    """Exactly one EOS per row, within max_len; nothing before it is PAD or BOS; only PAD after."""
    for row, limit in zip(tokens.tolist(), max_len.tolist(), strict=True):
        assert row.count(EOS) == 1 and row.index(EOS) < limit, row
        end = row.index(EOS)
        assert all(t not in (PAD, BOS) for t in row[:end]) and all(t == PAD for t in row[end + 1 :]), row


def teacher_forced_log_prob(decoder: StepDecoder, state: dict, tokens: Tensor) -> Tensor:
    """(N, L) EOS-terminated rows, state of batch N -> (N,) sum_t log_softmax(logits_t)[y_t] up to EOS."""
    prev, total = torch.full((tokens.shape[0],), BOS), torch.zeros(tokens.shape[0])
    alive = torch.ones(tokens.shape[0], dtype=torch.bool)
    for t in range(tokens.shape[1]):
        logits, state = decoder.step(prev, state)
        logp = torch.log_softmax(logits.float(), -1).gather(1, tokens[:, t : t + 1]).squeeze(1)
        total, alive, prev = total + torch.where(alive, logp, 0.0), alive & (tokens[:, t] != EOS), tokens[:, t]
    return total


def exhaustive(decoder: StepDecoder, state1: dict, *, vocab: int, max_len: int, alpha: float) -> list:
    """Every EOS-terminated sequence of length <= max_len for one example, best GNMT score first."""
    seqs = [p + (EOS,) for n in range(max_len) for p in itertools.product(range(3, vocab), repeat=n)]
    tokens = torch.tensor([s + (PAD,) * (max_len - len(s)) for s in seqs])
    logp = teacher_forced_log_prob(decoder, expand_state(state1, len(seqs)), tokens)
    scored = [(lp / gnmt_penalty(len(s), alpha), s) for lp, s in zip(logp.tolist(), seqs, strict=True)]
    return sorted(scored, key=lambda x: -x[0])


def test_expand_and_reorder_nested_state_with_growing_leaf():
    net = GRUToy()
    state = net.encode(_src(3))
    wide = expand_state(state, 4)
    assert wide["cache"]["steps"].dtype == torch.long
    for b, j in itertools.product(range(3), range(4)):
        torch.testing.assert_close(wide["mem"][0][b * 4 + j], state["mem"][0][b])
    _, grown = net.step(torch.full((12,), BOS), wide)
    _, grown = net.step(torch.arange(12) % 4 + 3, grown)  # history is now (12, 2, H)
    index = torch.tensor([11, 0, 5, 5])
    picked = reorder_state(grown, index)
    assert picked["cache"]["history"].shape == (4, 2, 8)
    torch.testing.assert_close(picked["cache"]["history"], grown["cache"]["history"][index])
    torch.testing.assert_close(picked["mem"][0], grown["mem"][0][index])
    assert reorder_state({"n": 3, "x": torch.arange(2)}, torch.tensor([1]))["n"] == 3


class _Pair(NamedTuple):
    h: Tensor
    c: Tensor


def test_state_containers_keep_their_types_and_non_tensor_leaves():
    """The state walk (no private torch pytree) keeps NamedTuples, tuples, lists and dicts, leaves the rest."""
    state = {"rnn": _Pair(torch.arange(2), torch.arange(2) * 10), "mem": [torch.arange(2), (torch.arange(2), "x")],
             "n": 3, "none": None}
    picked = reorder_state(state, torch.tensor([1, 1, 0]))
    assert isinstance(picked["rnn"], _Pair) and isinstance(picked["mem"], list) and isinstance(picked["mem"][1], tuple)
    assert picked["rnn"].c.tolist() == [10, 10, 0] and picked["mem"][1][0].tolist() == [1, 1, 0]
    assert (picked["n"], picked["none"], picked["mem"][1][1]) == (3, None, "x")
    assert expand_state(state, 2)["rnn"].h.tolist() == [0, 0, 1, 1]


def test_max_lengths_floor_and_at_least_one():
    got = max_lengths(torch.tensor([0, 1, 5, 10]), a=1.5, b=-2)
    assert got.tolist() == [1, 1, 5, 13] and got.dtype == torch.long
    assert max_lengths(torch.tensor([7]), a=0.0, b=0).tolist() == [1]


def test_beam_size_one_equals_greedy():
    net, src = GRUToy(), _src(6)
    max_len = torch.tensor([3, 8, 5, 8, 1, 6])
    expected = greedy(net, net.encode(src), max_len=max_len, **SPECIAL)
    assert_well_formed(expected, max_len)
    got = beam_search(net, net.encode(src), beam_size=1, max_len=max_len, length_penalty=0.0, **SPECIAL)
    assert rows(got.tokens[:, 0]) == rows(expected)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_large_beam_finds_exhaustive_optimum_and_ranking(alpha):
    net, src, max_len = GRUToy(vocab=6), _src(3, vocab=6), torch.tensor([4, 3, 4])
    got = beam_search(net, net.encode(src), beam_size=40, max_len=max_len, length_penalty=alpha, n_best=5,
                      **SPECIAL)
    for b in range(3):
        state1 = reorder_state(net.encode(src), torch.tensor([b]))
        best = exhaustive(net, state1, vocab=6, max_len=int(max_len[b]), alpha=alpha)[:5]
        assert rows(got.tokens[b]) == [s for _, s in best]
        torch.testing.assert_close(got.scores[b], torch.tensor([s for s, _ in best]), atol=1e-5, rtol=1e-5)


def test_length_penalty_stopping_rule_keeps_searching_for_longer_winner():
    # P(EOS | BOS) = .55 beats P(A | BOS) = .45, but A B C EOS wins under alpha = 1:
    # log(.45) / lp(4) = -0.53 > log(.55) / lp(1) = -0.60, although its log-prob is already lower after A.
    table = torch.full((7, 7), -30.0)
    table[BOS, EOS], table[BOS, 3] = math.log(0.55), math.log(0.45)
    table[3, 4] = table[4, 5] = table[5, EOS] = 0.0
    net = MarkovToy(table)
    state, max_len = net.encode(torch.zeros(1, 7)), torch.tensor([10])
    assert rows(greedy(net, state, max_len=max_len, **SPECIAL)) == [(EOS,)]
    plain = beam_search(net, state, beam_size=1, max_len=max_len, length_penalty=0.0, **SPECIAL)
    assert rows(plain.tokens[:, 0]) == [(EOS,)]
    got = beam_search(net, state, beam_size=1, max_len=max_len, length_penalty=1.0, **SPECIAL)
    assert rows(got.tokens[:, 0]) == [(3, 4, 5, EOS)]
    torch.testing.assert_close(got.scores[0, 0], got.log_probs[0, 0] / 1.5)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_scores_equal_teacher_forced_log_prob_and_nbest_sorted_distinct(alpha):
    net, src, max_len = GRUToy(), _src(4), torch.tensor([6, 4, 9, 7])
    got = beam_search(net, net.encode(src), beam_size=4, max_len=max_len, length_penalty=alpha, n_best=3,
                      **SPECIAL)
    assert got.tokens.shape[:2] == (4, 3) and got.scores.shape == got.log_probs.shape == (4, 3)
    for b in range(4):
        hyps = got.tokens[b]
        assert_well_formed(hyps, max_len[b].expand(3))
        assert len(set(rows(hyps))) == 3 and bool((got.scores[b][:-1] >= got.scores[b][1:]).all())
        state = expand_state(reorder_state(net.encode(src), torch.tensor([b])), 3)
        torch.testing.assert_close(got.log_probs[b], teacher_forced_log_prob(net, state, hyps))
        lengths = torch.tensor([len(r) for r in rows(hyps)], dtype=torch.float)
        torch.testing.assert_close(got.scores[b], got.log_probs[b] / gnmt_penalty(lengths, alpha))


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_results_invariant_to_decode_batch(strategy):
    net, src, extra = GRUToy(), _src(4), _src(5, seed=9)
    src_len, extra_len = torch.tensor([3, 5, 2, 6]), torch.tensor([9, 1, 4, 7, 2])
    config = DecodeConfig(strategy=strategy, beam_size=3, max_len_b=2)

    def run(s: Tensor, lengths: Tensor) -> list:
        return rows(decode(net, net.encode(s), src_lengths=lengths, config=config, **SPECIAL))

    together = run(src, src_len)
    alone = [run(src[i : i + 1], src_len[i : i + 1])[0] for i in range(4)]
    mixed = run(torch.cat([extra[:2], src, extra[2:]]), torch.cat([extra_len[:2], src_len, extra_len[2:]]))
    assert together == alone == mixed[2:6]


def test_beam_scores_invariant_to_decode_batch():
    net, src, max_len = GRUToy(), _src(4), torch.tensor([5, 7, 3, 6])
    kw = dict(beam_size=3, length_penalty=0.6, n_best=3, **SPECIAL)
    together = beam_search(net, net.encode(src), max_len=max_len, **kw)
    for i in range(4):
        alone = beam_search(net, net.encode(src[i : i + 1]), max_len=max_len[i : i + 1], **kw)
        assert rows(alone.tokens[0]) == rows(together.tokens[i])
        torch.testing.assert_close(alone.scores[0], together.scores[i])


def test_eos_forced_at_max_len_and_blocked_before_min_len():
    max_len = torch.tensor([1, 4, 6])
    never = MarkovToy(_table(7, {EOS: -20.0}))
    state = never.encode(torch.zeros(3, 7))
    for tokens in (greedy(never, state, max_len=max_len, **SPECIAL),
                   beam_search(never, state, beam_size=2, max_len=max_len, **SPECIAL).tokens[:, 0],
                   sample(never, state, max_len=max_len, **SPECIAL)[0]):
        assert_well_formed(tokens, max_len)
        assert [len(r) for r in rows(tokens)] == max_len.tolist()
    eager = MarkovToy(_table(7, {EOS: 20.0}))
    state = eager.encode(torch.zeros(3, 7))
    got = beam_search(eager, state, beam_size=2, max_len=max_len, min_len=3, n_best=2, **SPECIAL)
    assert [[len(r) for r in rows(h)] for h in got.tokens] == [[1, 1], [3, 3], [3, 3]]  # max_len wins
    assert eager.calls == 3  # stopped once every example was done (t = 2), not at max(max_len) = 6


def test_greedy_stops_when_every_row_finished():
    eager = MarkovToy(_table(7, {EOS: 20.0}))
    tokens = greedy(eager, eager.encode(torch.zeros(2, 7)), max_len=torch.tensor([50, 50]), **SPECIAL)
    assert eager.calls == 1 and tokens.tolist() == [[EOS], [EOS]]


def test_pad_and_bos_never_emitted():
    net = MarkovToy(_table(7, {PAD: 30.0, BOS: 30.0}))
    state, max_len = net.encode(torch.zeros(3, 7)), torch.tensor([4, 6, 2])
    assert_well_formed(greedy(net, state, max_len=max_len, **SPECIAL), max_len)
    beams = beam_search(net, state, beam_size=3, max_len=max_len, n_best=3, **SPECIAL)
    for b in range(3):
        assert_well_formed(beams.tokens[b], max_len[b].expand(3))
    gen = torch.Generator().manual_seed(0)
    assert_well_formed(sample(net, state, max_len=max_len, generator=gen, **SPECIAL)[0], max_len)


def test_sample_top1_equals_greedy_and_reports_model_log_prob():
    net, src, max_len = GRUToy(), _src(6), torch.tensor([3, 8, 5, 8, 1, 6])
    tokens, _ = sample(net, net.encode(src), max_len=max_len, top_k=1, temperature=2.0, **SPECIAL)
    assert rows(tokens) == rows(greedy(net, net.encode(src), max_len=max_len, **SPECIAL))
    gen = torch.Generator().manual_seed(3)
    tokens, logp = sample(net, net.encode(src), max_len=max_len, generator=gen, **SPECIAL)
    assert_well_formed(tokens, max_len)
    torch.testing.assert_close(logp, teacher_forced_log_prob(net, net.encode(src), tokens))


@pytest.mark.parametrize(("temperature", "top_k"), [(1.0, 0), (0.5, 0), (2.0, 3)])
def test_sample_first_token_frequencies_match_softmax(temperature, top_k):
    logits = torch.tensor([3.0, 3.0, 0.2, -0.5, 1.0, 0.4, -1.0])  # PAD and BOS most likely: never drawn
    net, n = MarkovToy(logits.expand(7, 7).clone()), 20_000
    gen = torch.Generator().manual_seed(0)
    tokens, _ = sample(net, net.encode(torch.zeros(n, 7)), max_len=torch.full((n,), 2), temperature=temperature,
                       top_k=top_k, generator=gen, **SPECIAL)
    counts = torch.bincount(tokens[:, 0], minlength=7).double()
    allowed = logits.clone()
    allowed[[PAD, BOS]] = -math.inf
    if top_k:
        allowed[allowed < allowed.topk(top_k).values[-1]] = -math.inf
    p = torch.softmax(allowed.double() / temperature, 0)
    assert counts[p == 0].sum() == 0
    chi2 = ((counts - n * p)[p > 0] ** 2 / (n * p[p > 0])).sum()
    assert chi2 < 30.0, (chi2, counts / n, p)  # df <= 4: P(chi2 > 30) < 1e-5


def test_nan_logits_do_not_crash_and_are_never_chosen():
    max_len = torch.tensor([5, 5, 3])
    for strategy in get_args(Strategy):
        net = MarkovToy(_table(7, {}), nan_at_step1=True)
        state = net.encode(torch.zeros(3, 7))
        config = DecodeConfig(strategy=strategy, beam_size=3, max_len_a=1.0, max_len_b=0)
        tokens = decode(net, state, src_lengths=max_len, config=config, **SPECIAL)
        assert_well_formed(tokens, max_len)
        assert not bool((tokens == 3).any()), strategy  # token 3 always has a NaN logit
    got = beam_search(net, state, beam_size=3, max_len=max_len, n_best=3, **SPECIAL)
    assert not bool(got.scores.isnan().any()) and bool(torch.isfinite(got.scores[1:]).all())


@pytest.mark.parametrize("bad", [
    dict(strategy="nucleus"), dict(beam_size=0), dict(n_best=0), dict(n_best=5, beam_size=4),
    dict(length_penalty=-0.1), dict(length_penalty=math.nan), dict(max_len_a=-1.0), dict(max_len_b=-1),
    dict(temperature=0.0), dict(top_k=-1),
])
def test_decode_config_rejects_bad_values(bad):
    with pytest.raises(ValueError, match=r"^DecodeConfig: [^\n]+$"):
        DecodeConfig(**bad)


def test_registry_covers_strategies_and_decode_dispatches():
    assert set(STRATEGIES) == set(get_args(Strategy))
    net, src, src_len = GRUToy(), _src(3), torch.tensor([2, 5, 4])
    max_len = max_lengths(src_len, a=1.0, b=2)
    config = DecodeConfig(strategy="beam", beam_size=3, n_best=2, max_len_b=2)
    got = decode(net, net.encode(src), src_lengths=src_len, config=config, **SPECIAL)
    expected = beam_search(net, net.encode(src), beam_size=3, max_len=max_len, n_best=2, **SPECIAL)
    assert rows(got) == rows(expected.tokens[:, 0])
    config = DecodeConfig(strategy="sample", temperature=0.7, max_len_b=2)
    got = decode(net, net.encode(src), src_lengths=src_len, config=config, generator=torch.Generator().manual_seed(5),
                 **SPECIAL)
    expected, _ = sample(net, net.encode(src), max_len=max_len, temperature=0.7,
                         generator=torch.Generator().manual_seed(5), **SPECIAL)
    assert rows(got) == rows(expected) and isinstance(net, StepDecoder)
