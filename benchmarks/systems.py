"""The three systems compared at the same size: attnlab, torch.nn.Transformer, HF MarianMTModel.

Each system is wrapped as :class:`System`: a module, ``loss(src, tgt)`` (one teacher-forced
pass with the label-smoothed cross-entropy attnlab trains with) and ``decode(src, beam, length)``.
All are random-init, Post-Norm, ReLU FFN, sinusoidal positions, embeddings scaled by √d and
one shared vocabulary with every embedding tied to the output projection (as Marian ships).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnlab_core.tokens import BOS, EOS, PAD
from benchmarks.common import Size, no_eos_bias
from lit_models.blocks.decoding import beam_search, greedy
from lit_models.blocks.encoder_decoder import TokenEmbedding
from lit_models.builders import build_positions, build_transformer
from lit_models.scoring.metrics import label_smoothed_loss
from lit_models.specs import TransformerSpec
from lit_models.training.optim import adamw

DROPOUT = 0.1
LABEL_SMOOTHING = 0.1
LENGTH_PENALTY = 0.6
ADAMW = dict(lr=1e-4, betas=(0.9, 0.98), eps=1e-9, weight_decay=1e-2)


def fused_adamw(params: Iterable[nn.Parameter]) -> torch.optim.Optimizer:
    """attnlab's ``configure_optimizers`` (``lit_models.training.optim``), and the Hugging Face Trainer's default
    (``optim="adamw_torch_fused"`` since torch 2.8): fused AdamW."""
    return adamw(params, **ADAMW)


def default_adamw(params: Iterable[nn.Parameter]) -> torch.optim.Optimizer:
    """``torch.optim.AdamW`` as a plain torch user builds it (torch picks the implementation)."""
    return torch.optim.AdamW(params, **ADAMW)


@dataclass
class System:
    """A model under test: training loss and decoding entry points."""

    name: str
    module: nn.Module
    loss: Callable[[Tensor, Tensor], Tensor]
    decode: Callable[[Tensor, int, int], Tensor]
    optimizer: Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer] = fused_adamw


def _smoothed(logits: Tensor, tgt: Tensor) -> Tensor:
    return label_smoothed_loss(logits, tgt[:, 1:], eps=LABEL_SMOOTHING)


def spec(size: Size) -> TransformerSpec:
    """The benchmarked Transformer: the paper's base choices (Post-Norm, sinusoids, 1/sqrt(d_k)) at ``size``."""
    return TransformerSpec(d_model=size.d_model, heads=size.heads, d_ff=size.d_ff, encoder_layers=size.layers,
                           decoder_layers=size.layers, dropout=DROPOUT, attn_dropout=0.0, norm="post",
                           positions="sinusoidal", attn_scale="sqrt_dk", max_positions=512, tying="all")


def build_attnlab(size: Size) -> System:
    """``lit_models.builders.build_transformer`` — the net ``TransformerSeq2Seq`` trains."""
    net = build_transformer(spec(size), src_vocab_size=size.vocab, tgt_vocab_size=size.vocab)
    no_eos_bias(net.generator)

    def loss(src: Tensor, tgt: Tensor) -> Tensor:
        logits, _ = net.teacher_forward(net.encode(src), tgt[:, :-1])  # what forcing.teacher runs
        return _smoothed(logits, tgt)

    @torch.no_grad()
    def decode(src: Tensor, beam: int, length: int) -> Tensor:
        state = net.encode(src)
        max_len = torch.full((src.size(0),), length, dtype=torch.long, device=src.device)
        if beam == 1:
            return greedy(net, state, max_len=max_len, bos=BOS, eos=EOS, pad=PAD)
        return beam_search(net, state, beam_size=beam, max_len=max_len, bos=BOS, eos=EOS, pad=PAD,
                           length_penalty=LENGTH_PENALTY).tokens[:, 0]

    return System("attnlab", net, loss, decode)


class TorchSeq2Seq(nn.Module):
    """torch.nn.Transformer between the same embeddings, positions and tied output layer as attnlab."""

    def __init__(self, size: Size) -> None:
        super().__init__()
        self.embed = TokenEmbedding(vocab_size=size.vocab, d_model=size.d_model)
        self.positions = build_positions(spec(size), causal=False)
        self.drop = nn.Dropout(DROPOUT)
        self.core = nn.Transformer(
            d_model=size.d_model, nhead=size.heads, num_encoder_layers=size.layers,
            num_decoder_layers=size.layers, dim_feedforward=size.d_ff, dropout=DROPOUT, batch_first=True,
        )
        self.generator = nn.Linear(size.d_model, size.vocab)
        self.generator.weight = self.embed.table.weight

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """src (B, S), tgt_in (B, T) -> logits (B, T, V)."""
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), device=src.device)
        pad = src == PAD  # (B, S), True = ignore (torch's polarity)
        out = self.core(
            self.drop(self.positions(self.embed(src))), self.drop(self.positions(self.embed(tgt_in))),
            tgt_mask=causal, src_key_padding_mask=pad, memory_key_padding_mask=pad, tgt_is_causal=True,
        )
        return self.generator(out)


def build_torch(size: Size) -> System:
    """torch.nn.Transformer (training only: it has no incremental decoder)."""
    net = TorchSeq2Seq(size)

    def loss(src: Tensor, tgt: Tensor) -> Tensor:
        return _smoothed(net(src, tgt[:, :-1]), tgt)

    def decode(src: Tensor, beam: int, length: int) -> Tensor:
        raise NotImplementedError("torch.nn.Transformer has no KV-cached decoder")

    return System("torch", net, loss, decode, default_adamw)


def marian_model(size: Size) -> nn.Module:
    """A random-init ``MarianMTModel`` of the same shape (needs the ``bench`` extra)."""
    from transformers import MarianConfig, MarianMTModel

    config = MarianConfig(
        vocab_size=size.vocab, d_model=size.d_model, encoder_layers=size.layers, decoder_layers=size.layers,
        encoder_attention_heads=size.heads, decoder_attention_heads=size.heads, encoder_ffn_dim=size.d_ff,
        decoder_ffn_dim=size.d_ff, activation_function="relu", dropout=DROPOUT, attention_dropout=0.0,
        activation_dropout=0.0, max_position_embeddings=512, pad_token_id=PAD, eos_token_id=EOS,
        bos_token_id=BOS, decoder_start_token_id=BOS, forced_eos_token_id=EOS, scale_embedding=True,
        share_encoder_decoder_embeddings=True, tie_word_embeddings=True,
    )
    model = MarianMTModel(config)
    with torch.no_grad():
        model.final_logits_bias[..., EOS] = -1e4
    return model


def build_marian(size: Size) -> System:
    """Hugging Face ``MarianMTModel`` (SDPA attention, its own KV cache in ``generate``)."""
    model = marian_model(size)

    def loss(src: Tensor, tgt: Tensor) -> Tensor:
        mask = (src != PAD).long()
        logits = model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt[:, :-1]).logits
        return _smoothed(logits, tgt)

    @torch.no_grad()
    def decode(src: Tensor, beam: int, length: int) -> Tensor:
        beam_kw = dict(length_penalty=LENGTH_PENALTY, early_stopping=True) if beam > 1 else {}
        return model.generate(input_ids=src, attention_mask=(src != PAD).long(), num_beams=beam, do_sample=False,
                              max_new_tokens=length, **beam_kw)

    return System("marian", model, loss, decode)


BUILDERS: dict[str, Callable[[Size], System]] = {"attnlab": build_attnlab, "torch": build_torch, "marian": build_marian}
