"""Section 5: per-step overhead of the recurrent decoder's ``step()`` vs a bare ``nn.LSTMCell`` loop.

``AttentionalDecoder`` (lstm cell, attention "none") ``.step`` (embedding, LSTM cell, deep output,
logits, state dict bookkeeping) against a hand-written loop doing the same arithmetic with
``nn.Embedding``, ``nn.LSTMCell`` and two ``nn.Linear`` — the difference is the price of the
uniform ``step(prev, state)`` protocol. A cell-only loop (no embedding, no output layer) is
reported too. Inference mode (no grad), dropout 0.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from benchmarks.common import interleaved_times
from lit_models.blocks.recurrent_decoder import AttentionalDecoder
from lit_models.registries import ATTENTION_ARMS, CELLS


class BareLSTMDecoder(nn.Module):
    """Embedding -> LSTMCell -> tanh(W_d [h; e]) -> logits, with the decoder's shapes."""

    def __init__(self, *, vocab: int, embed: int, hidden: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed)
        self.cell = nn.LSTMCell(embed, hidden)
        self.deep_out = nn.Linear(hidden + embed, hidden)
        self.out = nn.Linear(hidden, vocab)

    def run(self, tokens: Tensor, h: Tensor, c: Tensor) -> Tensor:
        """tokens (B, T) -> last logits (B, V), one step per token."""
        logits = h
        for t in range(tokens.size(1)):
            e = self.embedding(tokens[:, t])
            h, c = self.cell(e, (h, c))
            logits = self.out(torch.tanh(self.deep_out(torch.cat([h, e], -1))))
        return logits


@torch.no_grad()
def bench_recurrent_step(*, batch: int, steps: int, vocab: int, embed: int, hidden: int, rounds: int,
                         warmup: int) -> dict:
    """{"attnlab_us", "bare_us", "cell_only_us", "overhead"} per decoding step (microseconds)."""
    torch.manual_seed(0)
    dec = AttentionalDecoder(cell=CELLS["lstm"], vocab_size=vocab, embed_dim=embed, hidden_size=hidden,
                             memory_size=hidden, attention=ATTENTION_ARMS["none"]).eval()
    bare = BareLSTMDecoder(vocab=vocab, embed=embed, hidden=hidden).eval()
    tokens = torch.randint(4, vocab, (batch, steps))
    memory, mask = torch.randn(batch, 8, hidden), torch.ones(batch, 8, dtype=torch.bool)
    h0, c0 = torch.zeros(batch, hidden), torch.zeros(batch, hidden)
    x = torch.randn(batch, embed)

    def ours() -> None:
        state = dec.init_state(memory, mask, memory[:, 0])
        for t in range(steps):
            _, state = dec.step(tokens[:, t], state)

    def cell_only() -> None:
        h, c = h0, c0
        for _ in range(steps):
            h, c = bare.cell(x, (h, c))

    fns = {"attnlab": ours, "bare": lambda: bare.run(tokens, h0, c0), "cell_only": cell_only}
    secs = interleaved_times(fns, warmup=warmup, rounds=rounds, steps=1)
    per_step = {k: v / steps * 1e6 for k, v in secs.items()}
    return {"attnlab_us": per_step["attnlab"], "bare_us": per_step["bare"], "cell_only_us": per_step["cell_only"],
            "overhead": per_step["attnlab"] / per_step["bare"], "batch": batch, "hidden": hidden, "vocab": vocab}


def bench_recurrent_training(*, batch: int, src_len: int, tgt_len: int, vocab: int, width: int, rounds: int,
                             warmup: int) -> list[dict]:
    """Milliseconds per teacher-forced training step (forward, cross-entropy, backward, Adam) of the recurrent
    encoder-decoder at bible_gru_attention.yaml's widths (bidirectional GRU, embed = hidden = ``width``), with
    additive attention and without; dropout 0.1 as the config. Random tokens: the arithmetic, not the data."""
    from lit_models.families.recurrent_seq2seq import RecurrentSeq2Seq

    torch.manual_seed(0)
    src, tgt = torch.randint(4, vocab, (batch, src_len)), torch.randint(4, vocab, (batch, tgt_len + 1))
    fns = {}
    for attention in ("additive", "none"):
        net = RecurrentSeq2Seq(src_vocab_size=vocab, tgt_vocab_size=vocab, cell="gru", attention=attention,
                               embed_dim=width, hidden_size=width, bidirectional=True, dropout=0.1).net.train()
        fns[attention] = _training_step(net, src, tgt, torch.optim.Adam(net.parameters(), lr=1e-3))
    secs = interleaved_times(fns, warmup=warmup, rounds=rounds, steps=1)
    return [{"attention": a, "ms": s * 1e3, "batch": batch, "src_len": src_len, "tgt_len": tgt_len, "vocab": vocab,
             "width": width} for a, s in secs.items()]


def _training_step(net: nn.Module, src: Tensor, tgt: Tensor, opt: torch.optim.Optimizer):
    def step() -> None:
        logits, _ = net.teacher_forward(net.encode(src), tgt[:, :-1])
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step
