"""Recurrent encoders (parity with torch, peephole equations) and the attentional decoder."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import get_args

import pytest
import torch
from torch import Tensor, nn

from datamodules.batching import BOS, EOS, PAD
from lit_models.axes import Attention, Cell
from lit_models.blocks.recurrent import (
    PeepholeLSTM,
    PeepholeLSTMCell,
    RecurrentEncoder,
    SequenceRegressor,
)
from lit_models.blocks.recurrent_decoder import AttentionalDecoder
from lit_models.registries import ATTENTION_ARMS, CELLS

TORCH_RNNS: dict[str, type[nn.RNNBase]] = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}
LENGTHS = torch.tensor([5, 3, 1, 4])


@pytest.fixture(autouse=True, scope="module")
def _single_thread() -> Iterator[None]:
    """Tiny tensors gain nothing from intra-op threads; on a busy machine they cost 5-10x."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _mask(lengths: Tensor, s: int) -> Tensor:
    return torch.arange(s).unsqueeze(0) < lengths.unsqueeze(1)  # (B, S)


def _padded_inputs(e: int = 3) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(0)
    mask = _mask(LENGTHS, 5)
    x = torch.randn(len(LENGTHS), 5, e, generator=g)
    return x.masked_fill(~mask.unsqueeze(-1), 7.0), mask  # padding holds garbage, not zeros


def _reference_final(final: Tensor | tuple[Tensor, Tensor], layers: int) -> Tensor:
    """torch (L·dirs, 1, H) h_n -> (L, dirs·H) for one sequence."""
    h = final[0] if isinstance(final, tuple) else final
    return h.view(layers, -1, h.size(-1)).reshape(layers, -1)  # (L, dirs, H) -> (L, dirs·H)


def _assert_matches_alone(enc: RecurrentEncoder, ref: nn.Module, x: Tensor, mask: Tensor, layers: int) -> None:
    out = enc(x, mask)
    assert (out.outputs[~mask] == 0).all()
    for b, n in enumerate(LENGTHS.tolist()):
        ref_out, ref_final = ref(x[b : b + 1, :n])
        torch.testing.assert_close(out.outputs[b, :n], ref_out[0])
        torch.testing.assert_close(out.final.h[b], _reference_final(ref_final, layers))
        if isinstance(ref_final, tuple):
            assert out.final.c is not None
            torch.testing.assert_close(out.final.c[b], _reference_final(ref_final[1], layers))
    torch.testing.assert_close(out.summary, out.final.h[:, -1])


def test_cell_registry_covers_axis() -> None:
    assert set(CELLS) == set(get_args(Cell))


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
def test_torch_encoders_match_reference(cell: str, bidirectional: bool) -> None:
    torch.manual_seed(0)
    enc = RecurrentEncoder(cell=CELLS[cell], input_size=3, hidden_size=4, num_layers=2, bidirectional=bidirectional,
                           dropout=0.0)
    ref = TORCH_RNNS[cell](3, 4, num_layers=2, batch_first=True, bidirectional=bidirectional)
    ref.load_state_dict(enc.layer.rnn.state_dict())
    x, mask = _padded_inputs()
    _assert_matches_alone(enc, ref, x, mask, layers=2)
    full = torch.ones_like(mask)  # no padding: one batched reference call
    ref_out, _ = ref(x)
    torch.testing.assert_close(enc(x, full).outputs, ref_out)


def _naive_peephole(cell: PeepholeLSTMCell, xs: Tensor) -> tuple[Tensor, Tensor]:
    """Peephole LSTM equations (Gers et al. 2002), one vector at a time, gate by gate. xs (T, I) -> h_T, c_T."""
    hsz = cell.hidden_size
    w_x = {k: cell.weight_ih[i * hsz : (i + 1) * hsz] for i, k in enumerate("ifgo")}
    w_h = {k: cell.weight_hh[i * hsz : (i + 1) * hsz] for i, k in enumerate("ifgo")}
    bias = {k: cell.bias[i * hsz : (i + 1) * hsz] for i, k in enumerate("ifgo")}
    w_ci, w_cf, w_co = cell.peephole
    h, c = torch.zeros(hsz), torch.zeros(hsz)
    for x in xs:
        i = torch.sigmoid(w_x["i"] @ x + w_h["i"] @ h + w_ci * c + bias["i"])
        f = torch.sigmoid(w_x["f"] @ x + w_h["f"] @ h + w_cf * c + bias["f"])
        c = f * c + i * torch.tanh(w_x["g"] @ x + w_h["g"] @ h + bias["g"])
        o = torch.sigmoid(w_x["o"] @ x + w_h["o"] @ h + w_co * c + bias["o"])
        h = o * torch.tanh(c)
    return h, c


def test_peephole_cell_matches_equations() -> None:
    torch.manual_seed(0)
    cell = PeepholeLSTMCell(input_size=3, hidden_size=4)
    with torch.no_grad():
        cell.peephole.mul_(5.0)  # make the peepholes matter
    xs = torch.randn(2, 6, 3)
    h, c = torch.zeros(2, 4), torch.zeros(2, 4)
    for t in range(6):
        h, c = cell(xs[:, t], (h, c))
    for b in range(2):
        ref_h, ref_c = _naive_peephole(cell, xs[b])
        torch.testing.assert_close(h[b], ref_h)
        torch.testing.assert_close(c[b], ref_c)


def _lstm_from_peephole(layer: PeepholeLSTM, bidirectional: bool) -> nn.LSTM:
    """An nn.LSTM with the peephole layer's weights (bias_ih = bias, bias_hh = 0)."""
    ref = nn.LSTM(3, 4, num_layers=2, batch_first=True, bidirectional=bidirectional)
    with torch.no_grad():
        for l, directions in enumerate(layer.layers):
            for d, cell in enumerate(directions):
                sfx = f"_l{l}" + ("_reverse" if d else "")
                getattr(ref, "weight_ih" + sfx).copy_(cell.weight_ih)
                getattr(ref, "weight_hh" + sfx).copy_(cell.weight_hh)
                getattr(ref, "bias_ih" + sfx).copy_(cell.bias)
                getattr(ref, "bias_hh" + sfx).zero_()
    return ref


@pytest.mark.parametrize("bidirectional", [False, True])
def test_peephole_encoder_equals_lstm_without_peepholes_and_differs_with(bidirectional: bool) -> None:
    torch.manual_seed(0)
    enc = RecurrentEncoder(cell=CELLS["lstm_peephole"], input_size=3, hidden_size=4, num_layers=2,
                           bidirectional=bidirectional, dropout=0.0)
    ref = _lstm_from_peephole(enc.layer, bidirectional)
    x, mask = _padded_inputs()
    with_peepholes = enc(x, mask).outputs
    with torch.no_grad():
        for directions in enc.layer.layers:
            for cell in directions:
                cell.peephole.zero_()
    _assert_matches_alone(enc, ref, x, mask, layers=2)  # padding handled like pack_padded_sequence
    assert (with_peepholes - enc(x, mask).outputs).abs().max() > 1e-3


def test_empty_rows_give_zero_state() -> None:
    x, mask = _padded_inputs()
    mask[2] = False
    for cell in get_args(Cell):
        out = RecurrentEncoder(cell=CELLS[cell], input_size=3, hidden_size=4, num_layers=1, bidirectional=True,
                               dropout=0.0)(x, mask)
        assert torch.isfinite(out.outputs).all() and (out.final.h[2] == 0).all() and (out.outputs[2] == 0).all()


def test_sequence_regressor_reads_last_state() -> None:
    torch.manual_seed(0)
    model = SequenceRegressor(cell=CELLS["lstm_peephole"], input_size=2, hidden_size=5, num_layers=2)
    x = torch.randn(3, 6, 2)
    y = model(x)
    assert y.shape == (3,)
    torch.testing.assert_close(y, model.head(model.encoder(x, torch.ones(3, 6, dtype=torch.bool)).summary)[:, 0])
    padded = torch.cat([x, torch.full((3, 2, 2), 9.0)], dim=1)
    torch.testing.assert_close(model(padded, torch.arange(8).expand(3, 8) < 6), y)


# --------------------------------------------------------------------------- decoder

V, E, H = 11, 6, 8
PAIRS = list(itertools.product(get_args(Cell), get_args(Attention)))


def _decoder(cell: Cell, attention: Attention, *, seed: int = 0, **kw: str) -> AttentionalDecoder:
    torch.manual_seed(seed)
    return AttentionalDecoder(cell=CELLS[cell], vocab_size=V, embed_dim=E, hidden_size=H, memory_size=H,
                              attention=ATTENTION_ARMS[attention], num_layers=2, dropout=0.0, **kw)


def _memory(seed: int = 1) -> tuple[Tensor, Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    mask = _mask(torch.tensor([4, 2, 3]), 4)
    return torch.randn(3, 4, H, generator=g), mask, torch.randn(3, H, generator=g)


TGT_IN = torch.tensor([[BOS, 5, 6, 7, EOS], [BOS, 4, EOS, PAD, PAD], [BOS, 9, 9, 8, EOS]])


@pytest.mark.parametrize(("cell", "attention"), PAIRS)
def test_every_pair_builds_steps_and_backprops(cell: Cell, attention: Attention) -> None:
    dec = _decoder(cell, attention)
    state = dec.init_state(*_memory())
    assert set(state) == {"h", "c", "memory", "keys", "mask", "attn", "attn_log_prob", "attn_entropy", "attn_total",
                          "attn_expect"}
    assert state["h"].shape == (3, 2, H)
    assert all(t.size(0) == 3 for t in state.values())
    logits, weights, final = dec.teacher_forward(state, TGT_IN)
    assert logits.shape == (3, 5, V) and weights.shape == (3, 5, 4) and torch.isfinite(logits).all()
    assert (weights[~state["mask"].unsqueeze(1).expand(-1, 5, -1)] == 0).all()
    (logits.logsumexp(-1).sum() + final["attn_log_prob"].sum()).backward()
    grads = [p.grad for p in dec.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize(("cell", "attention"), PAIRS)
def test_teacher_forward_equals_stepping(cell: Cell, attention: Attention) -> None:
    dec = _decoder(cell, attention).eval()
    state = dec.init_state(*_memory())
    logits, weights, final = dec.teacher_forward(state, TGT_IN)
    for t in range(TGT_IN.size(1)):
        step_logits, state = dec.step(TGT_IN[:, t], state)
        torch.testing.assert_close(logits[:, t], step_logits)
        torch.testing.assert_close(weights[:, t], state["attn"])
    for key in final:
        torch.testing.assert_close(final[key], state[key])


def _objective(logits: Tensor, final: dict[str, Tensor]) -> Tensor:
    """Every output the training loss can read: logits, the REINFORCE sums and the weights' total (eq. 14)."""
    return (logits.logsumexp(-1).sum() + final["attn_log_prob"].sum() + final["attn_entropy"].sum()
            + (final["attn_total"] ** 2).sum())


@pytest.mark.parametrize(("cell", "attention"), [(c, a) for c in ("gru", "lstm_peephole") for a in get_args(Attention)])
def test_teacher_forward_equals_stepping_in_training_with_gradients(cell: Cell, attention: Attention) -> None:
    """The fused teacher-forced loop against ``step`` in training mode (the hard arm samples: the same generator seed
    must draw the same locations) with a memory row that has no valid position: outputs, final state and every
    parameter's gradient."""
    memory, mask, final = _memory()
    mask = mask.clone()
    mask[1] = False  # an empty row: zero weights, zero context, zero log-prob and entropy
    results = []
    for fused in (True, False):
        dec = _decoder(cell, attention).train()
        dec.alignment.generator = torch.Generator().manual_seed(7)
        state = dec.init_state(memory, mask, final)
        if fused:
            logits, weights, state = dec.teacher_forward(state, TGT_IN)
        else:
            steps = []
            for t in range(TGT_IN.size(1)):
                step_logits, state = dec.step(TGT_IN[:, t], state)
                steps.append((step_logits, state["attn"]))
            logits, weights = torch.stack([x for x, _ in steps], 1), torch.stack([w for _, w in steps], 1)
        _objective(logits, state).backward()
        results.append((logits, weights, state, {n: p.grad for n, p in dec.named_parameters() if p.grad is not None}))
    (fl, fw, fs, fg), (sl, sw, ss, sg) = results
    torch.testing.assert_close(fl, sl)
    torch.testing.assert_close(fw, sw)
    assert (fw[1] == 0).all()
    for key in fs:
        torch.testing.assert_close(fs[key], ss[key])
    assert fg.keys() == sg.keys() and fg
    for name in fg:
        torch.testing.assert_close(fg[name], sg[name], msg=name)


@pytest.mark.parametrize("attention", ["additive", "dot", "general"])
def test_attention_scores_previous_top_state(attention: Attention) -> None:
    """α_t = softmax(score(s_{t-1}, h)) with s_{t-1} the top layer before the step (Bahdanau eq. 6)."""
    dec = _decoder("lstm", attention).eval()
    memory, mask, final = _memory()
    state = dec.init_state(memory, mask, final)
    for t in range(3):
        scores = dec.alignment.scorer(state["h"][:, -1], memory).masked_fill(~mask, float("-inf"))
        _, state = dec.step(TGT_IN[:, t], state)
        torch.testing.assert_close(state["attn"], torch.softmax(scores, -1))


@pytest.mark.parametrize("attention", get_args(Attention))
@pytest.mark.parametrize("cell", ["gru", "lstm_peephole"])
def test_reordered_state_steps_like_reordered_batch(cell: Cell, attention: Attention) -> None:
    dec = _decoder(cell, attention).eval()
    state = dec.init_state(*_memory())
    index = torch.tensor([2, 0, 0, 1])
    prev = TGT_IN[:, 1]
    _, state = dec.step(TGT_IN[:, 0], state)
    logits, stepped = dec.step(prev, state)
    moved = {k: v.index_select(0, index) for k, v in state.items()}
    moved_logits, moved_stepped = dec.step(prev.index_select(0, index), moved)
    torch.testing.assert_close(moved_logits, logits.index_select(0, index))
    for key in stepped:
        torch.testing.assert_close(moved_stepped[key], stepped[key].index_select(0, index))


@pytest.mark.parametrize("cell", get_args(Cell))
def test_no_attention_ignores_memory_but_not_encoder_final(cell: Cell) -> None:
    dec = _decoder(cell, "none").eval()
    memory, mask, final = _memory()
    base = dec.teacher_forward(dec.init_state(memory, mask, final), TGT_IN).logits
    other_memory = dec.teacher_forward(dec.init_state(torch.randn_like(memory), mask, final), TGT_IN).logits
    other_final = dec.teacher_forward(dec.init_state(memory, mask, torch.randn_like(final)), TGT_IN).logits
    torch.testing.assert_close(other_memory, base)
    assert (other_final - base).abs().max() > 1e-4
    soft = _decoder(cell, "additive").eval()  # sanity: an attention arm does read the memory
    a = soft.teacher_forward(soft.init_state(memory, mask, final), TGT_IN).logits
    b = soft.teacher_forward(soft.init_state(torch.randn_like(memory), mask, final), TGT_IN).logits
    assert (a - b).abs().max() > 1e-4


def test_hard_attention_arms() -> None:
    memory, mask, final = _memory()
    soft = _decoder("lstm", "additive").eval()
    expect = _decoder("lstm", "hard", seed=1, hard_eval="expectation").eval()
    expect.load_state_dict(soft.state_dict())  # same parameters: "hard" only changes the mode
    soft_out = soft.teacher_forward(soft.init_state(memory, mask, final), TGT_IN)
    exp_out = expect.teacher_forward(expect.init_state(memory, mask, final), TGT_IN)
    torch.testing.assert_close(exp_out.logits, soft_out.logits)
    argmax = _decoder("lstm", "hard", seed=1, hard_eval="argmax").eval()
    argmax.load_state_dict(soft.state_dict())
    arg_out = argmax.teacher_forward(argmax.init_state(memory, mask, final), TGT_IN)
    assert ((arg_out.weights == 0) | (arg_out.weights == 1)).all()
    assert (arg_out.weights.argmax(-1) == soft_out.weights.argmax(-1)).all()
    assert (arg_out.logits - soft_out.logits).abs().max() > 1e-4
    assert (soft_out.state["attn_log_prob"] == 0).all() and (soft_out.state["attn_entropy"] == 0).all()

    train = argmax.train()
    out = train.teacher_forward(train.init_state(memory, mask, final), TGT_IN)
    assert ((out.weights == 0) | (out.weights == 1)).all()
    scored = (TGT_IN != PAD) & (TGT_IN != EOS)  # steps fed PAD / EOS add no log-prob
    accumulated = []
    state = train.init_state(memory, mask, final)
    for t in range(TGT_IN.size(1)):
        _, state = train.step(TGT_IN[:, t], state)
        accumulated.append(state["attn_log_prob"].clone())
    increments = torch.diff(torch.stack(accumulated, 1), dim=1, prepend=torch.zeros(3, 1))
    assert (increments[~scored] == 0).all() and (increments[scored] < 0).all()


@pytest.mark.parametrize("mix", [0.0, 1.0])
def test_soft_mix_in_teacher_forcing_is_the_soft_expectation_per_sequence(mix: float) -> None:
    """Xu et al. §4.1: with ``soft_mix`` = 1 every sequence of a training batch attends by expectation, so the
    sampling arm's teacher-forced pass is the additive (soft) arm's with the same parameters, with no REINFORCE
    terms; with 0 it samples one-hot locations (and scores log α)."""
    memory, mask, final = _memory()
    soft = _decoder("gru", "additive").train()
    hard = _decoder("gru", "hard", seed=1, soft_mix=mix).train()
    hard.load_state_dict(soft.state_dict())
    hard.alignment.generator = torch.Generator().manual_seed(7)
    ref = soft.teacher_forward(soft.init_state(memory, mask, final), TGT_IN)
    out = hard.teacher_forward(hard.init_state(memory, mask, final), TGT_IN)
    if mix == 1.0:
        torch.testing.assert_close(out.logits, ref.logits)
        torch.testing.assert_close(out.weights, ref.weights)
        assert (out.state["attn_log_prob"] == 0).all() and (out.state["attn_entropy"] == 0).all()
    else:
        assert ((out.weights == 0) | (out.weights == 1)).all() and (out.state["attn_log_prob"] < 0).all()


def test_decoder_overfits_tiny_copy_batch() -> None:
    """Encoder + additive-attention GRU decoder learn to copy 4 fixed sequences."""
    torch.manual_seed(0)
    src = torch.randint(4, V, (4, 5))
    tgt = torch.cat([torch.full((4, 1), BOS), src, torch.full((4, 1), EOS)], dim=1)
    embed = nn.Embedding(V, E)
    enc = RecurrentEncoder(cell=CELLS["gru"], input_size=E, hidden_size=H, num_layers=1, bidirectional=True,
                           dropout=0.0)
    dec = AttentionalDecoder(cell=CELLS["gru"], vocab_size=V, embed_dim=E, hidden_size=H, memory_size=2 * H,
                             attention=ATTENTION_ARMS["additive"], dropout=0.0)
    params = [*embed.parameters(), *enc.parameters(), *dec.parameters()]
    opt = torch.optim.Adam(params, lr=0.05)
    mask = torch.ones_like(src, dtype=torch.bool)
    for _ in range(300):  # converges in ~40 steps
        out = enc(embed(src), mask)
        logits = dec.teacher_forward(dec.init_state(out.outputs, mask, out.summary), tgt[:, :-1]).logits
        loss = nn.functional.cross_entropy(logits.reshape(-1, V), tgt[:, 1:].reshape(-1))
        if loss.item() < 0.05 and torch.equal(logits.argmax(-1), tgt[:, 1:]):
            break
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05
    assert torch.equal(logits.argmax(-1), tgt[:, 1:])
