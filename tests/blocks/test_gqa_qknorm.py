"""Grouped-query / multi-query attention and QK-norm in the blocks: kv_heads = heads is the old multi-head
attention bit for bit, GQA and QK-norm match naive per-head computations written from their equations,
the KV cache holds kv_heads heads, and cached decoding stays exact (incremental = full pass, beam 1 = greedy)."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from attnlab_core.tokens import BOS, EOS, PAD
from lit_models.blocks.attention import AttentionOptions, MultiHeadAttention
from lit_models.blocks.causal import CausalLayer, CausalTransformer
from lit_models.blocks.decoding import beam_search, greedy
from lit_models.blocks.encoder_decoder import Decoder, Encoder, EncoderDecoder, TokenEmbedding
from lit_models.blocks.positions import RotaryPositions, SchemeSizes
from lit_models.blocks.transformer import DecoderLayer, EncoderLayer, LayerOptions

D, H, DH, FF, V = 32, 4, 8, 48, 19


def _mha(kv_heads=H, qk_norm=False, seed=0) -> MultiHeadAttention:
    torch.manual_seed(seed)
    return MultiHeadAttention(AttentionOptions(heads=H, d_head=DH, scale=DH**-0.5, attn_dropout=0.0, kv_heads=kv_heads,
                                               qk_norm=qk_norm))


def _vaswani(mha: MultiHeadAttention, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Multi-head self-attention as the block computed it before kv_heads existed: the fused matrix cut in
    three equal blocks, h heads each, SDPA, W^O."""
    b, t, _ = x.shape
    q, k, v = (z.view(b, t, H, DH).transpose(1, 2) for z in mha.in_proj(x).chunk(3, dim=-1))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=mha.scale)
    return mha.out_proj(out.transpose(1, 2).reshape(b, t, D))


def test_kv_heads_equal_to_heads_is_multi_head_attention_bit_for_bit():
    mha = _mha(kv_heads=H)
    assert mha.in_proj.weight.shape == (3 * D, D)
    assert set(mha.state_dict()) == set(_mha().state_dict()) == {"in_proj.weight", "in_proj.bias",
                                                                   "out_proj.weight", "out_proj.bias"}
    x = torch.randn(3, 6, D)
    mask = torch.ones(3, 1, 1, 6, dtype=torch.bool)
    mask[1, ..., 4:] = False
    q, k, v = mha.project_qkv(x)
    assert torch.equal(mha.attend(q, k, v, mask=mask)[0], _vaswani(mha, x, mask))


@pytest.mark.parametrize("kv_heads", [1, 2])
def test_grouped_query_attention_matches_a_per_head_loop(kv_heads):
    """Ainslie et al. 2023: query head j uses key/value head j // (h / G); W^K, W^V have G·d_k rows."""
    mha = _mha(kv_heads=kv_heads)
    assert mha.in_proj.weight.shape == (D + 2 * kv_heads * DH, D)
    x = torch.randn(2, 5, D)
    w, bias = mha.in_proj.weight, mha.in_proj.bias
    wq, wk, wv = w[:D], w[D: D + kv_heads * DH], w[D + kv_heads * DH:]
    bq, bk, bv = bias[:D], bias[D: D + kv_heads * DH], bias[D + kv_heads * DH:]
    heads = []
    for j in range(H):
        g = j // (H // kv_heads)
        qj = x @ wq[j * DH: (j + 1) * DH].T + bq[j * DH: (j + 1) * DH]
        kj = x @ wk[g * DH: (g + 1) * DH].T + bk[g * DH: (g + 1) * DH]
        vj = x @ wv[g * DH: (g + 1) * DH].T + bv[g * DH: (g + 1) * DH]
        heads.append(torch.softmax(qj @ kj.transpose(-1, -2) / math.sqrt(DH), -1) @ vj)
    expected = mha.out_proj(torch.cat(heads, -1))
    q, k, v = mha.project_qkv(x)
    assert k.shape == v.shape == (2, kv_heads, 5, DH)
    for need in (False, True):
        torch.testing.assert_close(mha.attend(q, k, v, mask=None, need_weights=need)[0], expected,
                                   atol=1e-5, rtol=1e-5)


def test_qk_norm_matches_a_naive_per_head_layer_norm():
    """Dehghani et al. 2023 §3.1.1: logits = scale · LN(q_h)·LN(k_h) per head, LN over d_k (gain and bias shared)."""
    mha = _mha(qk_norm=True)
    with torch.no_grad():  # non-trivial gains and biases, so a missing affine would show
        for ln in (mha.q_norm, mha.k_norm):
            ln.weight.uniform_(0.5, 2.0)
            ln.bias.uniform_(-0.5, 0.5)
    x = torch.randn(2, 5, D)

    def layer_norm(z: torch.Tensor, ln: nn.LayerNorm) -> torch.Tensor:
        mean = z.mean(-1, keepdim=True)
        var = ((z - mean) ** 2).mean(-1, keepdim=True)
        return (z - mean) / torch.sqrt(var + ln.eps) * ln.weight + ln.bias

    qa, ka, va = mha.in_proj(x).chunk(3, dim=-1)
    heads = []
    for j in range(H):
        cut = slice(j * DH, (j + 1) * DH)
        logits = layer_norm(qa[..., cut], mha.q_norm) @ layer_norm(ka[..., cut], mha.k_norm).transpose(-1, -2)
        heads.append(torch.softmax(logits * mha.scale, -1) @ va[..., cut])
    q, k, v = mha.project_qkv(x)
    torch.testing.assert_close(mha.attend(q, k, v, mask=None)[0], mha.out_proj(torch.cat(heads, -1)),
                               atol=1e-5, rtol=1e-5)
    off = _mha(qk_norm=False)
    assert set(mha.state_dict()) - set(off.state_dict()) == {"q_norm.weight", "q_norm.bias", "k_norm.weight",
                                                              "k_norm.bias"}


def test_qk_norm_bounds_the_logits_whatever_the_weight_scale():
    """With QK-norm (unit gains) |logit| <= scale · d_k (Cauchy-Schwarz on two vectors of norm sqrt(d_k));
    without it the logits grow with the square of the weights' scale."""
    x = torch.randn(2, 6, D)
    taps = {}
    for qk_norm in (False, True):
        mha = _mha(qk_norm=qk_norm)
        with torch.no_grad():
            mha.in_proj.weight.mul_(30.0)
        seen = []
        mha.logit_tap = seen.append
        mha.attend(*mha.project_qkv(x), mask=None)
        taps[qk_norm] = float(seen[0])
    assert taps[True] <= DH**-0.5 * DH + 1e-4
    assert taps[False] > 10 * taps[True]


def _options(kv_heads, qk_norm=False) -> LayerOptions:
    return LayerOptions(heads=H, d_head=DH, d_ff=FF, dropout=0.0, attn_dropout=0.0, scale=DH**-0.5, pre_norm=True,
                        kv_heads=kv_heads, qk_norm=qk_norm)


def _causal(kv_heads, qk_norm=False) -> CausalTransformer:
    torch.manual_seed(0)
    pos = RotaryPositions(SchemeSizes(d_model=D, heads=H, d_head=DH, max_len=64, causal=True))
    embed = TokenEmbedding(vocab_size=V, d_model=D)
    layers = [CausalLayer(_options(kv_heads, qk_norm), positions=pos) for _ in range(2)]
    return CausalTransformer(embed=embed, positions=pos, layers=layers, final_norm=nn.LayerNorm(D),
                             generator=nn.Linear(D, V), dropout=0.0).eval()


def _seq2seq(kv_heads, qk_norm=False) -> EncoderDecoder:
    torch.manual_seed(0)
    src_pos = RotaryPositions(SchemeSizes(d_model=D, heads=H, d_head=DH, max_len=64, causal=False))
    tgt_pos = RotaryPositions(SchemeSizes(d_model=D, heads=H, d_head=DH, max_len=64, causal=True))
    return EncoderDecoder(
        src_embed=TokenEmbedding(vocab_size=V, d_model=D), tgt_embed=TokenEmbedding(vocab_size=V, d_model=D),
        src_positions=src_pos, tgt_positions=tgt_pos,
        encoder=Encoder(layers=[EncoderLayer(_options(kv_heads, qk_norm), positions=src_pos)],
                        final_norm=nn.LayerNorm(D)),
        decoder=Decoder(layers=[DecoderLayer(_options(kv_heads, qk_norm), positions=tgt_pos) for _ in range(2)],
                        final_norm=nn.LayerNorm(D)),
        generator=nn.Linear(D, V), dropout=0.0).eval()


def _as_multi_head(net: nn.Module, build) -> nn.Module:
    """An MHA net (kv_heads = h) computing what the GQA ``net`` computes: each W^K, W^V row block of a
    key/value head copied to the h/G query heads of its group."""
    state = {}
    for name, value in net.state_dict().items():
        if name.endswith(("in_proj.weight", "in_proj.bias")) and value.size(0) < 3 * D:
            q, kv = value[:D], value[D:]
            k, v = kv.chunk(2)
            groups = k.size(0) // DH
            k, v = (z.unflatten(0, (groups, DH)).repeat_interleave(H // groups, 0).flatten(0, 1) for z in (k, v))
            value = torch.cat([q, k, v])
        state[name] = value
    mha = build(H)
    mha.load_state_dict(state)
    return mha


def _batch():
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(4, V, (3, 7), generator=g)
    prompt[1, 5:] = PAD
    tgt_in = torch.randint(4, V, (3, 6), generator=g)
    tgt_in[:, 0] = BOS
    return prompt, tgt_in


@pytest.mark.parametrize("build", [_causal, _seq2seq], ids=["causal", "seq2seq"])
@pytest.mark.parametrize("kv_heads,qk_norm", [(1, False), (2, False), (2, True), (4, True)])
def test_incremental_decoding_equals_the_full_pass_and_the_cache_holds_kv_heads(build, kv_heads, qk_norm):
    net = build(kv_heads, qk_norm)
    prompt, tgt_in = _batch()
    with torch.no_grad():
        full = net(prompt, tgt_in)
        state, steps = net.encode(prompt), []
        for t in range(tgt_in.size(1)):
            logits, state = net.step(tgt_in[:, t], state)
            steps.append(logits)
    torch.testing.assert_close(torch.stack(steps, 1), full, atol=1e-5, rtol=1e-4)
    for layer in state["layers"]:
        for cached in layer.values():
            assert cached.size(1) == kv_heads  # (B, G, t, d_k): the cache shrinks by h / G


@pytest.mark.parametrize("build", [_causal, _seq2seq], ids=["causal", "seq2seq"])
@pytest.mark.parametrize("kv_heads", [1, 2])
def test_beam_one_is_greedy_and_cache_bytes_scale_with_kv_heads(build, kv_heads):
    net = build(kv_heads)
    prompt, _ = _batch()
    kw = dict(max_len=torch.full((prompt.size(0),), 6), bos=BOS, eos=EOS, pad=PAD)
    with torch.no_grad():
        g = greedy(net, net.encode(prompt), **kw)
        b = beam_search(net, net.encode(prompt), beam_size=1, length_penalty=0.0, **kw).tokens[:, 0]
        wide = beam_search(net, net.encode(prompt), beam_size=3, length_penalty=0.0, **kw)
    assert torch.equal(b, g)
    mha = _as_multi_head(net, build)  # the same function with every key/value head written out h/G times
    with torch.no_grad():
        same = beam_search(mha, mha.encode(prompt), beam_size=3, length_penalty=0.0, **kw)
    assert torch.equal(wide.tokens, same.tokens)
    torch.testing.assert_close(wide.log_probs, same.log_probs, atol=1e-5, rtol=1e-5)

    def cache_bytes(n) -> int:
        with torch.no_grad():
            state = n.encode(prompt)
            state = n.step(torch.full((prompt.size(0),), BOS), state)[1]
        return sum(t.numel() * t.element_size() for layer in state["layers"] for t in layer.values())

    assert cache_bytes(net) * H == cache_bytes(build(H)) * kv_heads
    if build is _causal:  # the figure the causal LM logs at test: the measured growth of its cache per token
        with torch.no_grad():
            state = net.encode(prompt)
            before = cache_bytes(net)
            grown = sum(t.numel() * t.element_size() for layer in state["layers"] for t in layer.values())
        assert before - grown == prompt.size(0) * net.cache_bytes_per_token(state)


def test_cache_bytes_per_token_reads_the_cache_dtype_under_bf16_autocast():
    """The weights stay float32 under autocast, the cache is bf16: 2 bytes an element, half the float32 figure."""
    net, prompt = _causal(2), torch.tensor([[5, 6, 7], [8, 9, PAD]])
    with torch.no_grad():
        full = net.cache_bytes_per_token(net.encode(prompt))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            state = net.encode(prompt)
    assert state["layers"][0]["k"].dtype == torch.bfloat16
    assert net.cache_bytes_per_token(state) * 2 == full == 2 * 2 * 2 * DH * 4


class _Ops(TorchDispatchMode):
    """The aten ops a block runs."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("queries", [6, 1], ids=["full", "cached_step"])
def test_grouped_keys_and_values_are_not_copied_to_every_head(queries):
    """The fused path hands SDPA the G key/value heads (``enable_gqa``): no op copies them to H heads, in a full
    pass or in a cached decoding step (one query against six cached keys); the output equals the repeated one."""
    mha = _mha(kv_heads=2).eval()
    x = torch.randn(2, 6, D)
    q, k, v = mha.project_qkv(x)
    q = q[:, :, -queries:]
    with torch.no_grad(), _Ops() as seen:
        out = mha.attend(q, k, v, mask=None)[0]
    copies = [op for op in seen.ops if "clone" in op or "repeat" in op or "index_select" in op or "expand" in op]
    assert copies == []
    heads = F.scaled_dot_product_attention(q, k.repeat_interleave(H // 2, 1), v.repeat_interleave(H // 2, 1),
                                           scale=mha.scale)
    torch.testing.assert_close(out, mha.out_proj(heads.transpose(1, 2).reshape(2, queries, D)))
