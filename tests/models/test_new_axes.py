"""The axes of issue #47 (qk_norm, kv_heads, rope_scaling) reach every Transformer family from its flat CLI
arguments: each arm builds and runs a forward pass for the encoder-decoder, the classifier's Transformer encoder
and the causal LM, the built network holds what the arm asks, and bad values are one-line UsageErrors."""

import pytest
import torch

from attnlab_core.errors import UsageError
from attnlab_core.tokens import BOS
from lit_models.blocks.attention import MultiHeadAttention
from lit_models.blocks.positions import RotaryPositions
from lit_models.families.causal_lm import CausalLM
from lit_models.families.classifier import SentimentClassifier
from lit_models.families.seq2seq import TransformerSeq2Seq
from lit_models.registries import ROPE_SCALINGS

SIZES = dict(d_model=16, heads=4, d_ff=32, dropout=0.0, positions="rope")
ARMS = [dict(qk_norm=True), dict(kv_heads=1), dict(kv_heads=2, ffn_absorbs_kv=True),
        *[dict(rope_scaling=s, rope_factor=2.0, rope_train_len=8) for s in ROPE_SCALINGS],
        dict(rope_scaling="linear", rope_factor=4.0, rope_scaling_train=True)]


def _family(name: str, arm: dict):
    torch.manual_seed(0)
    arm = {**SIZES, **arm}
    if name == "seq2seq":
        return TransformerSeq2Seq(src_vocab_size=12, tgt_vocab_size=12, encoder_layers=1, decoder_layers=1,
                                  **arm)
    if name == "classifier":
        return SentimentClassifier(src_vocab_size=12, encoder="transformer", num_layers=1, pooling="mean",
                                   **arm)
    return CausalLM(tgt_vocab_size=12, layers=1, **arm)


def _forward(model, name: str) -> torch.Tensor:
    src = torch.randint(4, 12, (2, 5))
    tgt = torch.randint(4, 12, (2, 4))
    tgt[:, 0] = BOS
    if name == "classifier":
        return model(src).logits
    return model.net(src, tgt)


@pytest.mark.parametrize("name", ["seq2seq", "classifier", "causal"])
@pytest.mark.parametrize("arm", ARMS, ids=lambda a: ",".join(f"{k}={v}" for k, v in a.items()))
def test_every_arm_builds_and_runs_in_every_family(name, arm):
    model = _family(name, arm).eval()
    out = _forward(model, name)
    assert torch.isfinite(out).all()
    for key, value in arm.items():
        assert model.hparams[key] == value  # saved flat, as dashboards group by it
    attn = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    assert attn and all(m.kv_heads == arm.get("kv_heads", 4) for m in attn)
    assert all(isinstance(m.q_norm, torch.nn.LayerNorm) == arm.get("qk_norm", False) for m in attn)
    rope = [m for m in model.modules() if isinstance(m, RotaryPositions)]
    assert rope and all(type(r.rope.scaling) is ROPE_SCALINGS[arm.get("rope_scaling", "none")] for r in rope)
    assert all(r.rope.scaling.in_training == arm.get("rope_scaling_train", False) for r in rope)


@pytest.mark.parametrize("name", ["seq2seq", "classifier", "causal"])
def test_the_arms_change_the_network(name):
    base = _forward(_family(name, {}).eval(), name)
    torch.manual_seed(1)
    for arm in (dict(rope_scaling="linear", rope_factor=4.0), dict(rope_scaling="ntk", rope_factor=4.0)):
        assert not torch.allclose(_forward(_family(name, arm).eval(), name), base, atol=1e-5), arm


@pytest.mark.parametrize(("arm", "message"), [
    (dict(kv_heads=3), "kv_heads=3 is not allowed: it must be a positive divisor of heads=4"),
    (dict(kv_heads=0), "kv_heads=0 is not allowed"),
    (dict(rope_scaling="linear", positions="alibi"), "rope_scaling=linear needs positions=rope"),
    (dict(rope_scaling="linear", rope_factor=0.5), "rope_factor=0.5 is not allowed"),
    (dict(rope_scaling="yarn", rope_factor=2.0), "rope_scaling=yarn needs rope_train_len"),
    (dict(position_options={"scaling": 2.0}), "has no option 'scaling'"),
])
def test_bad_values_are_one_line_usage_errors(arm, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        _family("causal", arm)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("kv_heads", "precision", "size"),
                         [(1, "32-true", 4), (4, "32-true", 4), (4, "bf16-mixed", 2)])
def test_causal_lm_test_logs_decode_speed_and_cache_bytes(kv_heads, precision, size):
    """test/kv_cache_bytes_per_token = layers x 2 (keys, values) x G x d_k x the cache's element size (4 bytes, 2 under
    bf16 autocast, whose cache is bf16 while the weights stay fp32); decoding is timed at test only."""
    import lightning as L

    from datamodules.lm_tasks import PromptAnswerTasks

    model = _family("causal", dict(kv_heads=kv_heads))
    dm = PromptAnswerTasks(task="recall", vocab_size=12, min_len=2, max_len=4, test_max_len=4, train_size=8, val_size=8,
                           test_size=8, batch_size=8)
    trainer = L.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
                        devices=1, precision=precision)
    (metrics,) = trainer.test(model, datamodule=dm, verbose=False)
    assert metrics["test/kv_cache_bytes_per_token"] == 1 * 2 * kv_heads * 4 * size
    assert metrics["test/decode_tokens_per_s"] > 0
    trainer.validate(model, datamodule=dm, verbose=False)
    assert "val/decode_tokens_per_s" not in trainer.callback_metrics


def test_evaluation_only_rope_scaling_trains_the_same_weights():
    """sweeps/rope_scaling.yaml's premise: with rope_scaling_train false, the arms of one seed train the same
    weights (the scaling acts in evaluation mode only: validation differs, training does not)."""
    import lightning as L

    from datamodules.lm_tasks import PromptAnswerTasks

    weights = {}
    for scaling in ("none", "yarn"):
        L.seed_everything(3, verbose=False)
        model = _family("causal", dict(rope_scaling=scaling, rope_factor=4.0, rope_train_len=8))
        dm = PromptAnswerTasks(task="reverse", vocab_size=12, min_len=2, max_len=6, train_size=64, val_size=16,
                               test_size=8, batch_size=16)
        trainer = L.Trainer(max_steps=6, val_check_interval=2, logger=False, enable_checkpointing=False,
                            enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                            accelerator="cpu", devices=1)
        trainer.fit(model, datamodule=dm)
        weights[scaling] = (model.state_dict(), float(trainer.callback_metrics["val/loss"]))
    (none, val_none), (yarn, val_yarn) = weights["none"], weights["yarn"]
    assert all(torch.equal(none[k], yarn[k]) for k in none)
    assert val_none != val_yarn  # ... while validation saw the scaled angles
