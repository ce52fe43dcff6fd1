"""TransformerSeq2Seq: registries, no dead flags, KV cache, padding/batch invariance, decoding, sizes, overfit."""

import inspect
import itertools
import math
import warnings
from typing import get_args

import pytest
import torch
import torch.nn.functional as F

from datamodules.batching import BOS, EOS, PAD, collate_pairs
from lit_models.axes import AttnScale, Forcing, LRSchedule, Norm, Positions, ScheduledDecay, ScheduledMode, Tying
from lit_models.blocks.decoding import DecodeConfig, decode
from lit_models.builders import build_transformer
from lit_models.families.seq2seq import TransformerSeq2Seq, count_parameters
from lit_models.policies.forcing import build_forcing
from lit_models.registries import ATTN_SCALES, DECAYS, LR_SCHEDULES, POSITIONS, PRE_NORM, SCHEDULED_MODES
from lit_models.scoring.metrics import sequences_equal
from lit_models.specs import TransformerSpec

# A hand-built reverse batch: 8 sources of length 4..6 over content ids 4..11 (0..3 are special).
SEQS = [[4, 5, 6, 7], [8, 9, 10, 11, 4], [11, 7, 5, 9, 6, 8], [6, 6, 10, 4], [9, 4, 11, 8, 7],
        [5, 10, 7, 11, 4, 9], [7, 8, 4, 10], [10, 11, 9, 5, 6]]
BATCH = collate_pairs([(s, s[::-1]) for s in SEQS])
TINY = dict(src_vocab_size=12, tgt_vocab_size=12, d_model=32, heads=4, d_ff=64, encoder_layers=1, decoder_layers=1,
            dropout=0.0)
ARMS = {"norm": get_args(Norm), "positions": get_args(Positions), "attn_scale": get_args(AttnScale),
        "tying": get_args(Tying), "forcing": get_args(Forcing)}
DEFAULTS = {axis: inspect.signature(TransformerSeq2Seq).parameters[axis].default for axis in ARMS}

@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models run fastest single-threaded on a shared 2-core machine."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*self.log.*")  # training_step without a Trainer
        yield
    torch.set_num_threads(old)


def tiny(seed: int = 0, **over) -> TransformerSeq2Seq:
    torch.manual_seed(seed)
    return TransformerSeq2Seq(**{**TINY, **over})


def random_sources(n: int, *, seed: int, lo: int = 2, hi: int = 7) -> torch.Tensor:
    """(n, hi) right-padded random sources with lengths in [lo, hi]."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(lo, hi + 1, (n,), generator=g)
    src = torch.randint(4, 12, (n, hi), generator=g)
    return src.masked_fill(torch.arange(hi)[None] >= lengths[:, None], PAD)


# ---------------------------------------------------------------------------------------------- registries
@pytest.mark.parametrize(
    ("registry", "axis"),
    [(ATTN_SCALES, AttnScale), (PRE_NORM, Norm), (POSITIONS, Positions),
     (LR_SCHEDULES, LRSchedule), (DECAYS, ScheduledDecay), (SCHEDULED_MODES, ScheduledMode)],
    ids=["ATTN_SCALES", "PRE_NORM", "POSITIONS", "LR_SCHEDULES", "DECAYS", "SCHEDULED_MODES"],
)
def test_registry_covers_its_literal(registry, axis):
    assert set(registry) == set(get_args(axis))
    assert len(registry) == len(get_args(axis))


def test_build_forcing_covers_forcing_axis_with_distinct_policies():
    policies = {f: build_forcing(f, scheduled_mode="two_pass") for f in get_args(Forcing)}
    assert all(callable(p) for p in policies.values())
    assert len({id(p) for p in policies.values()}) == len(get_args(Forcing))
    assert build_forcing("scheduled", scheduled_mode="per_step") is not policies["scheduled"]
    with pytest.raises(KeyError):
        build_forcing("professor", scheduled_mode="two_pass")


def test_axis_defaults_are_arms():
    for axis, default in DEFAULTS.items():
        assert default in ARMS[axis], axis


# ------------------------------------------------------------------------------------------ no dead flags
def _pairs(axis):
    for a, b in itertools.combinations(ARMS[axis], 2):
        yield pytest.param(axis, a, b, id=f"{axis}-{a}-{b}")


def _copy_shared(src: torch.nn.Module, dst: torch.nn.Module) -> None:
    """Copy every parameter/buffer of ``src`` whose name and shape exist in ``dst``."""
    own = dst.state_dict()
    dst.load_state_dict({k: v for k, v in src.state_dict().items() if k in own and own[k].shape == v.shape},
                        strict=False)


@pytest.mark.parametrize(("axis", "a", "b"), [p for axis in ("norm", "positions", "attn_scale") for p in _pairs(axis)])
def test_model_arms_change_the_output(axis, a, b):
    """Same seed and the same values for every shared weight: the outputs still differ."""
    ma, mb = tiny(**{axis: a}).eval(), tiny(**{axis: b}).eval()
    _copy_shared(ma, mb)
    src, tgt_in = BATCH.src, BATCH.tgt[:, :-1]
    with torch.no_grad():
        out_a, out_b = ma.net(src, tgt_in), mb.net(src, tgt_in)
    assert not torch.allclose(out_a, out_b, atol=1e-4), f"{axis}: {a} and {b} give the same output"


def test_tying_arms_share_parameters_and_change_training():
    """From identical values, tied matrices receive summed gradients, so training trajectories differ."""
    models = {arm: tiny(tying=arm) for arm in ARMS["tying"]}
    counts = {arm: count_parameters(m) for arm, m in models.items()}
    assert counts["none"] > counts["decoder"] > counts["all"], counts
    net = models["all"].net
    assert net.generator.weight is net.tgt_embed.table.weight is net.src_embed.table.weight
    assert models["decoder"].net.src_embed is not models["decoder"].net.tgt_embed
    losses = {}
    for arm, m in models.items():
        _copy_shared(models["all"], m)  # all three matrices start equal in every arm
        opt = torch.optim.Adam(m.parameters(), lr=3e-3)
        for _ in range(3):
            loss = m.training_step(BATCH, 0)
            opt.zero_grad()
            loss.backward()
            opt.step()
        losses[arm] = m.training_step(BATCH, 0).item()
    for a, b in itertools.combinations(ARMS["tying"], 2):
        assert not math.isclose(losses[a], losses[b], rel_tol=1e-5), losses


def test_tying_all_needs_one_vocabulary():
    with pytest.raises(ValueError, match=r"src_vocab_size=12.*tgt_vocab_size=13"):
        tiny(tying="all", tgt_vocab_size=13)


def test_forcing_arms_change_training_step_logits():
    """Untrained model: teacher, student and scheduled (p < 1) feed different tokens, so logits differ."""
    src, tgt_in = BATCH.src, BATCH.tgt[:, :-1]
    logits = {}
    for arm in ARMS["forcing"]:
        m = tiny(forcing=arm)
        p = 0.5 if arm == "scheduled" else m.p_gold()
        torch.manual_seed(1)  # the scheduled coin
        logits[arm], _ = m.forcing.feed(m.net, m.net.encode(src), tgt_in, p_gold=p)
    for a, b in itertools.combinations(ARMS["forcing"], 2):
        torch.testing.assert_close(logits[a][:, 0], logits[b][:, 0])  # BOS is always fed first
        assert not torch.allclose(logits[a], logits[b], atol=1e-4), (a, b)


def test_forcing_policy_limits():
    """scheduled with p=1 is teacher forcing; per-step scheduled with p=0 is student forcing."""
    m = tiny()
    state, tgt_in = m.net.encode(BATCH.src), BATCH.tgt[:, :-1]
    teacher, _ = build_forcing("teacher", scheduled_mode="two_pass")(m.net, state, tgt_in, p_gold=1.0)
    student, _ = build_forcing("student", scheduled_mode="two_pass")(m.net, state, tgt_in, p_gold=0.0)
    for mode in get_args(ScheduledMode):
        mixed, _ = build_forcing("scheduled", scheduled_mode=mode)(m.net, state, tgt_in, p_gold=1.0)
        torch.testing.assert_close(mixed, teacher, atol=1e-5, rtol=1e-5)
    per_step, _ = build_forcing("scheduled", scheduled_mode="per_step")(m.net, state, tgt_in, p_gold=0.0)
    torch.testing.assert_close(per_step, student, atol=1e-5, rtol=1e-5)
    assert tiny(forcing="teacher").p_gold() == 1.0 and tiny(forcing="student").p_gold() == 0.0


# ------------------------------------------------------------------------------ incremental == full pass
@pytest.mark.parametrize("norm", get_args(Norm))
@pytest.mark.parametrize("positions", get_args(Positions))
def test_kv_cache_steps_equal_teacher_forced_pass(positions, norm):
    net = tiny(positions=positions, norm=norm, encoder_layers=2, decoder_layers=2).net.eval()
    src = random_sources(4, seed=1)
    tgt_in = torch.cat([torch.full((4, 1), BOS), torch.randint(4, 12, (4, 6))], dim=1)
    with torch.no_grad():
        full, _ = net.teacher_forward(net.encode(src), tgt_in)  # (B, T, V)
        state, steps = net.encode(src), []
        for t in range(tgt_in.size(1)):
            logits, state = net.step(tgt_in[:, t], state)
            steps.append(logits)
    assert state["layers"][0]["self_k"].size(2) == tgt_in.size(1)
    torch.testing.assert_close(torch.stack(steps, dim=1), full, atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------------------- padding
@pytest.mark.parametrize("norm", get_args(Norm))
@pytest.mark.parametrize("positions", get_args(Positions))
def test_padding_invariance(positions, norm):
    net = tiny(positions=positions, norm=norm).net.eval()
    src = random_sources(4, seed=2)
    tgt_in = torch.cat([torch.full((4, 1), BOS), torch.randint(4, 12, (4, 5))], dim=1)
    with torch.no_grad():
        base = net(src, tgt_in)
        more_src_pad = net(F.pad(src, (0, 3), value=PAD), tgt_in)
        s = src.size(1)
        for key in ("mem_k", "mem_v"):  # the encoder memory of real positions is unchanged too
            padded = net.encode(F.pad(src, (0, 3), value=PAD))["layers"][0][key][:, :, :s]
            torch.testing.assert_close(padded, net.encode(src)["layers"][0][key], atol=1e-5, rtol=1e-5)
        more_tgt_pad = net(src, F.pad(tgt_in, (0, 3), value=PAD))[:, : tgt_in.size(1)]
        alone = torch.cat([net(s[None, : int((s != PAD).sum())], tgt_in[i : i + 1]) for i, s in enumerate(src)])
        # an all-padding source row neither yields NaN nor changes its neighbours
        with_empty = net(torch.cat([src, torch.full_like(src[:1], PAD)]), torch.cat([tgt_in, tgt_in[:1]]))
    torch.testing.assert_close(more_src_pad, base, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(more_tgt_pad, base, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(alone, base, atol=1e-5, rtol=1e-5)
    assert torch.isfinite(with_empty).all()
    torch.testing.assert_close(with_empty[:4], base, atol=1e-5, rtol=1e-5)


def test_learned_positions_limit_is_the_max_positions_flag():
    m = tiny(positions="learned", max_positions=6).eval()
    with torch.no_grad():
        assert m.net(BATCH.src, BATCH.tgt[:, :6]).shape == (8, 6, 12)
        with pytest.raises(ValueError, match="max_positions"):
            m.net(F.pad(BATCH.src, (0, 1), value=PAD), BATCH.tgt[:, :6])  # source longer than 6
        with pytest.raises(ValueError, match="max_positions"):
            m.net(BATCH.src, BATCH.tgt)  # 8 decoder inputs


def test_attention_maps_are_masked_distributions():
    net = tiny().net.eval()
    src = random_sources(3, seed=3)
    tgt_in = torch.cat([torch.full((3, 1), BOS), torch.randint(4, 12, (3, 4))], dim=1)
    maps = net.attention_maps(src, tgt_in)
    assert set(maps) == {"enc_self/layer1", "dec_self/layer1", "cross/layer1"}
    real = (src != PAD)[:, None, None, :]
    for name in ("enc_self/layer1", "cross/layer1"):
        w = maps[name]
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))
        assert (w.masked_select(~real.expand_as(w)) == 0).all(), name
    assert (maps["dec_self/layer1"].triu(diagonal=1) == 0).all()


# ---------------------------------------------------------------------------------------- decoding
def _decode(net, src: torch.Tensor, config: DecodeConfig) -> torch.Tensor:
    return decode(net, net.encode(src), src_lengths=(src != PAD).sum(1), config=config, bos=BOS, eos=EOS, pad=PAD)


@pytest.mark.parametrize("norm", get_args(Norm))
def test_beam_one_equals_greedy_through_decode(norm):
    net = tiny(norm=norm).net.eval()
    src = random_sources(12, seed=4)
    greedy = _decode(net, src, DecodeConfig(strategy="greedy"))
    beam1 = _decode(net, src, DecodeConfig(strategy="beam", beam_size=1, length_penalty=0.0))
    assert sequences_equal(beam1, greedy).all(), (beam1, greedy)


@pytest.mark.parametrize("config", [DecodeConfig(strategy="greedy"), DecodeConfig(strategy="beam", beam_size=4)],
                         ids=["greedy", "beam4"])
def test_decoded_outputs_independent_of_decode_batch_size(config):
    net = tiny().net.eval()
    src = random_sources(6, seed=5)
    together = _decode(net, src, config)
    for i in range(src.size(0)):
        one = _decode(net, src[i : i + 1, : int((src[i] != PAD).sum())], config)
        assert sequences_equal(one, together[i : i + 1]).all(), (i, one, together[i])


# ------------------------------------------------------------------------------------------ sizes
def test_transformer_base_parameter_count():
    d, h, d_ff, n, vocab = 512, 8, 2048, 6, 37000
    with torch.device("meta"):
        net = build_transformer(TransformerSpec(d_model=d, heads=h, d_ff=d_ff, encoder_layers=n, decoder_layers=n,
                                                dropout=0.1, attn_dropout=0.0, norm="post", positions="sinusoidal",
                                                attn_scale="sqrt_dk", max_positions=512, tying="all"),
                                src_vocab_size=vocab, tgt_vocab_size=vocab)
    count = sum(p.numel() for p in net.parameters())  # parameters() yields each tied tensor once
    attn, ffn, ln = 4 * d * d + 4 * d, 2 * d * d_ff + d_ff + d, 2 * d
    expected = vocab * d + vocab + n * (attn + ffn + 2 * ln) + n * (2 * attn + ffn + 3 * ln)
    assert count == expected, f"transformer_base has {count:,} parameters, expected {expected:,}"
    assert 60_000_000 < count < 66_000_000, f"transformer_base has {count:,} parameters (paper: 65M)"
    assert count_parameters(net) == count


# ----------------------------------------------------------------------------------------- overfit
def _overfit_cases():
    for axis, arms in ARMS.items():
        for arm in arms:
            yield pytest.param(axis, arm, id=f"{axis}-{arm}")


@pytest.mark.parametrize(("axis", "arm"), list(_overfit_cases()))
def test_overfit_one_batch(axis, arm):
    """Every arm learns: training loss < 0.3x its initial value within 150 Adam steps; teacher-forced
    arms must then reproduce the batch exactly with greedy decoding."""
    m = tiny(**{axis: arm}, label_smoothing=0.0)
    teacher = m.hparams.forcing == "teacher"
    if arm == "scheduled":
        m.p_gold = lambda: 0.5  # no Trainer here, so global_step stays 0 and p(gold) would stay ~1
    opt = torch.optim.Adam(m.parameters(), lr=3e-3)
    first = value = None
    exact = False
    for step in range(150):
        loss = m.training_step(BATCH, 0)
        value = loss.item()
        first = value if first is None else first
        if value < 0.3 * first:
            if not teacher:
                break
            if value < 0.05 * first and step % 5 == 0:
                with torch.no_grad():
                    exact = bool(sequences_equal(m.eval().generate(BATCH.src), BATCH.tgt[:, 1:]).all())
                m.train()
                if exact:
                    break
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert value < 0.3 * first, f"{axis}={arm}: loss {value:.3f} from {first:.3f} after {step} steps"
    if teacher:
        assert exact, f"{axis}={arm}: greedy decode does not reproduce the batch after {step} steps"

