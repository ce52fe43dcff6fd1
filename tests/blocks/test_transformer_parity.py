"""Parity of our attention and encoder-decoder with torch.nn references, after copying weights."""

import pytest
import torch
from torch import nn

from lit_models.blocks.attention import AttentionOptions, MultiHeadAttention
from lit_models.blocks.encoder_decoder import Decoder, Encoder
from lit_models.blocks.transformer import DecoderLayer, EncoderLayer, LayerOptions
from lit_models.registries import PRE_NORM

D, H, FF = 32, 4, 64


def _copy_mha(ours: MultiHeadAttention, ref: nn.MultiheadAttention) -> None:
    ours.in_proj.weight.data.copy_(ref.in_proj_weight)
    ours.in_proj.bias.data.copy_(ref.in_proj_bias)
    ours.out_proj.load_state_dict(ref.out_proj.state_dict())


def _copy_ffn_norms(ours, ref, res_names) -> None:
    ours.ffn.w1.load_state_dict(ref.linear1.state_dict())
    ours.ffn.w2.load_state_dict(ref.linear2.state_dict())
    for i, name in enumerate(res_names, start=1):
        getattr(ours, name).norm.load_state_dict(getattr(ref, f"norm{i}").state_dict())


def test_multihead_matches_torch_with_padding_mask():
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(D, H, batch_first=True)
    ours = MultiHeadAttention(AttentionOptions(heads=H, kv_heads=H, d_head=D // H, scale=(D // H) ** -0.5,
                                                attn_dropout=0.0))
    _copy_mha(ours, ref)
    x, mem = torch.randn(3, 5, D), torch.randn(3, 7, D)
    pad = torch.zeros(3, 7, dtype=torch.bool)
    pad[1, 4:] = True
    pad[2, 6:] = True
    expected, w_ref = ref(x, mem, mem, key_padding_mask=pad, average_attn_weights=False)
    q = ours.project_q(x)
    k, v = ours.project_kv(mem)
    for need in (False, True):
        got, w = ours.attend(q, k, v, mask=~pad[:, None, None, :], need_weights=need)
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, w_ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_encoder_decoder_matches_nn_transformer(norm):
    torch.manual_seed(0)
    n = 2
    ref = nn.Transformer(D, H, n, n, FF, dropout=0.0, batch_first=True, norm_first=norm == "pre")
    if norm == "post":  # nn.Transformer always adds final norms; the paper's Post-Norm has none
        ref.encoder.norm, ref.decoder.norm = None, None
    options = LayerOptions(heads=H, kv_heads=H, d_head=D // H, d_ff=FF, dropout=0.0, attn_dropout=0.0,
                           scale=(D // H) ** -0.5, pre_norm=PRE_NORM[norm])
    final = (lambda: nn.LayerNorm(D)) if PRE_NORM[norm] else (lambda: None)
    enc = Encoder(layers=[EncoderLayer(options) for _ in range(n)], final_norm=final())
    dec = Decoder(layers=[DecoderLayer(options) for _ in range(n)], final_norm=final())
    for o, r in zip(enc.layers, ref.encoder.layers, strict=True):
        _copy_mha(o.self_attn, r.self_attn)
        _copy_ffn_norms(o, r, ["res_attn", "res_ffn"])
    for o, r in zip(dec.layers, ref.decoder.layers, strict=True):
        _copy_mha(o.self_attn, r.self_attn)
        _copy_mha(o.cross_attn, r.multihead_attn)
        _copy_ffn_norms(o, r, ["res_self", "res_cross", "res_ffn"])
    if norm == "pre":
        enc.final_norm.load_state_dict(ref.encoder.norm.state_dict())
        dec.final_norm.load_state_dict(ref.decoder.norm.state_dict())
    ref.eval(), enc.eval(), dec.eval()
    src, tgt = torch.randn(3, 6, D), torch.randn(3, 5, D)
    pad = torch.zeros(3, 6, dtype=torch.bool)
    pad[0, 3:] = True
    causal = nn.Transformer.generate_square_subsequent_mask(5)
    with torch.no_grad():
        expected = ref(src, tgt, tgt_mask=causal, src_key_padding_mask=pad, memory_key_padding_mask=pad)
        memory, _ = enc(src, mask=~pad[:, None, None, :])
        got, _, _ = dec(tgt, caches=dec.init_cache(memory), mem_mask=~pad[:, None, None, :],
                        incremental=False)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
