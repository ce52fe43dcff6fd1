"""Smoke test of ``python -m benchmarks run --quick``: every section runs on tiny sizes (not a measurement)."""

import json
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def test_quick_benchmarks_run_and_report(tmp_path, monkeypatch, capsys):
    """attnlab + torch.nn.Transformer through the real command; then Marian if the bench extra is installed."""
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.__main__ import main
    from benchmarks.runner import SECTIONS, Options, run

    out = tmp_path / "quick.json"
    sections = [s for s in SECTIONS if s != "compile"]  # compile: its own tests (test_compiled.py)
    assert main(["run", "--quick", "--threads", "1", "--systems", "attnlab", "torch", "--sections", *sections,
                 "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["ceiling"]["fp32"] > 0 and res["ceiling"]["bf16"] > 0
    train = {(r["precision"], r["system"]): r for r in res["training"]}
    assert set(train) == {(p, s) for p in ("fp32", "bf16") for s in ("attnlab", "torch")}
    assert all(r["tokens_per_s"] > 0 and r["gflop_per_step"] > 0 and math.isfinite(r["first_loss"])
               for r in train.values())
    assert {(r["beam"], r["system"]) for r in res["decoding"]} == {(1, "attnlab"), (4, "attnlab")}
    assert all(r["out_len"] == 8 for r in res["decoding"]), "EOS is suppressed: every row runs to the limit"
    assert {r["path"] for r in res["attention"] if "peak_mib" in r} == {"sdpa", "explicit"}
    assert all(r["vmap_ms"] > 0 and r["folded_ms"] > 0 for r in res["attention_vmap"]) and res["attention_vmap"]
    assert {r["impl"] for r in res["optimizer"]} == {"default", "foreach", "fused"}
    assert res["recurrent"]["attnlab_us"] > 0 and res["recurrent"]["bare_us"] > 0
    assert {r["attention"] for r in res["recurrent_training"] if r["ms"] > 0} == {"additive", "none"}
    assert res["profiles"] and all(ops for ops in res["profiles"].values())
    assert any("bf16-mixed" in g["goal"] for g in res["goals"])
    printed = capsys.readouterr().out
    assert "### training" in printed and "### goals" in printed and "attnlab÷this" in printed
    assert "vmap÷folded" in printed

    pytest.importorskip("transformers")  # the Marian part only: the bench extra
    res = run(Options(quick=True, threads=1, sections=("training", "decoding"), systems=("attnlab", "marian"),
                      precisions=("fp32",)))
    assert {r["system"] for r in res["training"]} == {"attnlab", "marian"}
    assert {(r["beam"], r["system"]) for r in res["decoding"]} >= {(1, "marian"), (4, "marian")}
    assert all(r["out_len"] == 8 for r in res["decoding"])
    assert any("Marian.generate" in g["goal"] for g in res["goals"])
