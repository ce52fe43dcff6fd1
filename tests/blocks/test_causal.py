"""Decoder-only stack: parity with nn.TransformerEncoder under a causal mask, KV-cache decoding equal to
the full pass for every positions arm, padding invariance, and the shared decoding strategies on it."""

from typing import get_args

import pytest
import torch
from torch import nn

from attnlab_core.tokens import BOS, EOS, PAD
from lit_models.axes import Norm, Positions
from lit_models.blocks.causal import CausalLayer, attention_mask, left_pad
from lit_models.blocks.decoding import beam_search, greedy, sample
from lit_models.blocks.positions import PositionScheme
from lit_models.builders import build_causal_lm
from lit_models.registries import PRE_NORM
from lit_models.specs import TransformerSpec

D, H, FF, V = 32, 4, 64, 19


def _copy_layer(ours: CausalLayer, ref: nn.TransformerEncoderLayer) -> None:
    ours.self_attn.in_proj.weight.data.copy_(ref.self_attn.in_proj_weight)
    ours.self_attn.in_proj.bias.data.copy_(ref.self_attn.in_proj_bias)
    ours.self_attn.out_proj.load_state_dict(ref.self_attn.out_proj.state_dict())
    ours.ffn.w1.load_state_dict(ref.linear1.state_dict())
    ours.ffn.w2.load_state_dict(ref.linear2.state_dict())
    ours.res_attn.norm.load_state_dict(ref.norm1.state_dict())
    ours.res_ffn.norm.load_state_dict(ref.norm2.state_dict())


@pytest.mark.parametrize("norm", get_args(Norm))
def test_causal_stack_matches_nn_transformer_encoder_with_causal_mask(norm):
    torch.manual_seed(0)
    ref_layer = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=norm == "pre")
    ref = nn.TransformerEncoder(ref_layer, 2, norm=nn.LayerNorm(D) if PRE_NORM[norm] else None,
                                enable_nested_tensor=False)
    net = build_causal_lm(TransformerSpec(d_model=D, heads=H, d_ff=FF, decoder_layers=2, dropout=0.0,
                                          attn_dropout=0.0, norm=norm, positions="none", attn_scale="sqrt_dk",
                                          max_positions=64, tying="none"), vocab_size=V)
    for ours, theirs in zip(net.layers, ref.layers, strict=True):
        _copy_layer(ours, theirs)
    if PRE_NORM[norm]:
        net.final_norm.load_state_dict(ref.norm.state_dict())
    net.eval(), ref.eval()
    ids = torch.randint(4, V, (3, 9))
    x = net.embed(ids)  # positions "none": the stack sees the scaled embeddings only
    mask = nn.Transformer.generate_square_subsequent_mask(9)
    with torch.no_grad():
        expected = net.generator(ref(x, mask=mask, is_causal=True))
        got = net.lm_logits(ids)
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
        # the cached path (prefill 4 tokens, then the rest) is the same function
        state = net.encode(ids[:, :4])
        cached, _ = net.teacher_forward(state, ids[:, 4:])
    torch.testing.assert_close(cached, expected[:, 4:], atol=1e-5, rtol=1e-5)


def _net(positions: Positions, norm: Norm = "pre") -> nn.Module:
    torch.manual_seed(1)
    return build_causal_lm(TransformerSpec(d_model=D, heads=H, d_ff=FF, decoder_layers=2, dropout=0.0,
                                           attn_dropout=0.0, norm=norm, positions=positions, attn_scale="sqrt_dk",
                                           max_positions=64), vocab_size=V).eval()


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    prompt = torch.randint(4, V, (4, 7), generator=g)
    prompt[1, 5:], prompt[2, 2:], prompt[3, 6:] = PAD, PAD, PAD  # different prompt lengths
    tgt_in = torch.randint(4, V, (4, 6), generator=g)
    tgt_in[:, 0] = BOS
    tgt_in[2, 4:] = PAD  # a shorter answer (right padding)
    return prompt, tgt_in


@pytest.mark.parametrize("positions", get_args(Positions))
def test_kv_cache_steps_equal_the_full_pass(positions):
    net = _net(positions)
    prompt, tgt_in = _batch()
    with torch.no_grad():
        full = net(prompt, tgt_in)  # (B, T, V) one causal pass
        state, steps = net.encode(prompt), []
        for t in range(tgt_in.size(1)):
            logits, state = net.step(tgt_in[:, t], state)
            steps.append(logits)
    keep = tgt_in != PAD
    torch.testing.assert_close(torch.stack(steps, 1)[keep], full[keep], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("positions", get_args(Positions))
def test_outputs_do_not_depend_on_the_batch_padding(positions):
    """Each row alone (no padding at all) gives the same answer logits as inside the padded batch."""
    net = _net(positions)
    prompt, tgt_in = _batch()
    with torch.no_grad():
        batched = net(prompt, tgt_in)
        for i in range(prompt.size(0)):
            n, m = int((prompt[i] != PAD).sum()), int((tgt_in[i] != PAD).sum())
            alone = net(prompt[i: i + 1, :n], tgt_in[i: i + 1, :m])
            torch.testing.assert_close(batched[i, :m], alone[0], atol=1e-5, rtol=1e-4)
            # and the prompt-answer split is only a cache boundary: one plain LM pass agrees
            whole = net.lm_logits(torch.cat([prompt[i: i + 1, :n], tgt_in[i: i + 1, :m]], 1))[:, n:]
            torch.testing.assert_close(whole[0], alone[0], atol=1e-5, rtol=1e-4)


def test_positions_arms_differ():
    prompt, tgt_in = _batch()
    with torch.no_grad():
        outs = {p: _net(p)(prompt, tgt_in) for p in get_args(Positions)}
    names = list(outs)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not torch.allclose(outs[a], outs[b], atol=1e-4), (a, b)


def test_left_pad_and_mask_never_leave_an_empty_row():
    ids = torch.tensor([[5, 6, 0, 0], [7, 0, 0, 0], [4, 5, 6, 7]])
    assert left_pad(ids).tolist() == [[0, 0, 5, 6], [0, 0, 0, 7], [4, 5, 6, 7]]
    mask = attention_mask(left_pad(ids) != PAD, 4)  # (B, 1, T, S)
    assert mask.any(-1).all()  # every query row (PAD rows too) may attend to something
    assert not mask[0, 0, 3, :2].any() and mask[0, 0, 3, 2:].all()  # real queries never see PAD keys
    assert not mask[2, 0].triu(1).any()  # causal


def test_learned_table_refuses_positions_beyond_it():
    net = build_causal_lm(TransformerSpec(d_model=D, heads=H, d_ff=FF, decoder_layers=1, dropout=0.0,
                                          attn_dropout=0.0, norm="pre", positions="learned", attn_scale="sqrt_dk",
                                          max_positions=8), vocab_size=V)
    with pytest.raises(ValueError, match="max_len=8"):
        net.lm_logits(torch.randint(4, V, (1, 9)))


def test_learned_table_takes_a_padded_batch_whose_rows_fit():
    """Slots (padded prompt + padded answer) may outnumber the table while every row's own positions fit: the
    longest prompt has a short answer, the longest answer a short prompt. Those rows run, each as it does alone;
    one more real token in the first row's answer passes the table and is refused."""
    net = build_causal_lm(TransformerSpec(d_model=D, heads=H, d_ff=FF, decoder_layers=1, dropout=0.0,
                                          attn_dropout=0.0, norm="pre", positions="learned", attn_scale="sqrt_dk",
                                          max_positions=8), vocab_size=V).eval()
    prompt = torch.tensor([[5, 6, 7, 8, 9], [5, 6, PAD, PAD, PAD]])  # 5 + 5 slots > 8 positions
    tgt_in = torch.tensor([[BOS, 7, PAD, PAD, PAD], [BOS, 7, 8, 9, 10]])  # positions up to 6 in both rows
    with torch.no_grad():
        both = net(prompt, tgt_in)
        alone = [net(prompt[i: i + 1, :n], tgt_in[i: i + 1, :m]) for i, (n, m) in enumerate(((5, 2), (2, 5)))]
    torch.testing.assert_close(both[0, :2], alone[0][0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(both[1], alone[1][0], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="max_len=8"):
        net(prompt, torch.tensor([[BOS, 7, 8, 9, PAD], [BOS, 7, 8, 9, 10]]))  # the first row reaches position 8


def test_greedy_beam_and_sampling_drive_the_cached_decoder():
    net = _net("rope")
    prompt, _ = _batch()
    max_len = torch.full((prompt.size(0),), 6)
    kw = dict(max_len=max_len, bos=BOS, eos=EOS, pad=PAD)
    with torch.no_grad():
        g = greedy(net, net.encode(prompt), **kw)
        b = beam_search(net, net.encode(prompt), beam_size=1, length_penalty=0.0, **kw).tokens[:, 0]
        wide = beam_search(net, net.encode(prompt), beam_size=4, length_penalty=0.0, **kw)
        cold, _ = sample(net, net.encode(prompt), temperature=1e-4, top_k=3, generator=torch.Generator().manual_seed(0),
                         **kw)
        one = torch.cat([greedy(net, net.encode(prompt[i: i + 1, : int((prompt[i] != PAD).sum())]), max_len=max_len[:1],
                                bos=BOS, eos=EOS, pad=PAD)[:, : g.size(1)] for i in range(prompt.size(0))])
    assert torch.equal(b, g)  # beam 1 without length penalty is greedy
    assert torch.equal(cold, g)  # T -> 0 sampling is greedy
    assert torch.equal(torch.nn.functional.pad(one, (0, g.size(1) - one.size(1)), value=PAD), g)  # batch size 1
    scores = wide.log_probs[:, 0]
    greedy_lp = _sequence_log_prob(net, prompt, g)
    assert (scores >= greedy_lp - 1e-4).all()  # the beam finds at least the greedy sequence's probability


def _sequence_log_prob(net: nn.Module, prompt: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    tgt_in = torch.cat([torch.full_like(out[:, :1], BOS), out[:, :-1]], 1)
    with torch.no_grad():
        logp = net(prompt, tgt_in).log_softmax(-1).gather(2, out.unsqueeze(-1)).squeeze(-1)
    return logp.masked_fill(out == PAD, 0.0).sum(1)


def test_none_scheme_is_the_base_class():
    assert type(_net("none").positions) is PositionScheme
