"""CausalLM through the real CLI: fit then test on the best checkpoint for both configs (run directory,
metric names, figures), and DDP evaluation that counts every example / window exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from attnlab_run.cli import main
from attnlab_run.evaluations import evaluation_records

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "ablations" / "configs"
FIXTURE = REPO / "tests" / "fixtures" / "lm" / "tiny.txt"
TINY_MODEL = ["--model.init_args.d_model=16", "--model.init_args.heads=2", "--model.init_args.d_ff=32",
              "--model.init_args.layers=1"]
REVERSE = ["--data.init_args.train_size=64", "--data.init_args.val_size=16", "--data.init_args.test_size=64",
           "--data.init_args.batch_size=16"]
TEXT = ["--data.init_args.source=file", f"--data.init_args.path={FIXTURE}", "--data.init_args.context=16",
        "--data.init_args.eval_contexts=[16,32,64]", "--data.init_args.vocab_size=40",
        "--data.init_args.train_size=32", "--data.init_args.batch_size=5"]


@pytest.fixture(autouse=True)
def _no_stray_run_dir_env():
    """main() exports ATTNLAB_RUN_DIR for DDP children; do not leak it into later tests."""
    before = os.environ.get("ATTNLAB_RUN_DIR")
    yield
    os.environ.pop("ATTNLAB_RUN_DIR", None)
    if before is not None:
        os.environ["ATTNLAB_RUN_DIR"] = before


def _fit_then_test(config: str, extra: list[str], root: Path) -> Path:
    common = ["--config", str(CONFIGS / config), f"--run.root={root}", "--run.name=r", "--trainer.max_epochs=1",
              "--trainer.enable_progress_bar=false", *TINY_MODEL, *extra]
    main(["fit", *common])
    main(["test", *common, "--ckpt_path=best"])
    return root / Path(config).stem / "r"


def test_lm_reverse_fit_then_test_on_the_best_checkpoint(tmp_path):
    run = _fit_then_test("lm_reverse.yaml", REVERSE, tmp_path)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["model"] == "CausalLM"
    (evaluation,) = evaluation_records(run).values()  # the test is its own record beside the fit's metrics
    metrics = {**summary["metrics"], **evaluation["metrics"]}
    assert {"val/loss", "val/exact_match", "test/exact_match", "test/bleu"} <= set(metrics)
    beyond = [k for k in metrics if k.startswith("test/acc_by_len/len_") and int(k.split("_")[-2]) > 10]
    assert beyond, "no accuracy bucket beyond the training lengths (1-10)"
    assert list((run / "test").glob("test-*/metrics.csv")) and (run / "config.yaml").is_file()
    assert (run / "figures" / "self_ex0.png").is_file()  # attention over prompt · <s> · output
    assert any(k.startswith("val/attn_entropy/self/") for k in metrics)  # the shared probes found the maps


def test_lm_wikitext2_config_on_a_local_file_logs_perplexity_by_context(tmp_path):
    run = _fit_then_test("lm_wikitext2.yaml", TEXT, tmp_path)
    summary = json.loads((run / "summary.json").read_text())
    (evaluation,) = evaluation_records(run).values()  # the test is its own record beside the fit's metrics
    metrics = {**summary["metrics"], **evaluation["metrics"]}
    assert {"val/loss", "val/ppl", "test/ppl"} <= set(metrics)
    assert {f"test/ppl_by_ctx/ctx_{c:05d}" for c in (16, 32, 64)} <= set(metrics)
    assert not any(k.endswith("exact_match") for k in metrics)


def _attnlab() -> list[str]:
    script = Path(sys.executable).with_name("attnlab")
    return [str(script)] if script.is_file() else [sys.executable, str(REPO / "attnlab_run" / "cli.py")]


def _test_metrics(root: Path) -> dict[str, float]:
    runs = sorted(p.parent for p in root.glob("*/*/summary.json"))
    assert len(runs) == 1, runs
    return json.loads((runs[0] / "summary.json").read_text())["metrics"]


@pytest.mark.ddp
@pytest.mark.parametrize("config, extra, keys", [
    ("lm_reverse.yaml", [*REVERSE, "--data.init_args.test_size=23", "--data.init_args.batch_size=4"],
     ("test/exact_match", "test/token_acc", "test/loss", "test/acc_by_len/")),
    ("lm_wikitext2.yaml", [*TEXT, "--data.init_args.test_size=7"], ("test/loss", "test/ppl_by_ctx/")),
], ids=["prompt_answer", "text"])
def test_two_process_test_counts_every_example_once(tmp_path, config, extra, keys):
    """An odd number of test examples / windows: 2 gloo ranks give exactly the 1-process metrics."""
    cfg = yaml.safe_load((CONFIGS / config).read_text())
    cfg["trainer"].update(enable_progress_bar=False)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    common = ["test", "--config", str(path), "--run.experiment=ddp", *TINY_MODEL, *extra]
    main([*common, f"--run.root={tmp_path / 'one'}"])
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    env.pop("ATTNLAB_RUN_DIR", None)
    cmd = [*_attnlab(), *common, f"--run.root={tmp_path / 'two'}", "--trainer.devices=2", "--trainer.strategy=ddp"]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    one, two = _test_metrics(tmp_path / "one"), _test_metrics(tmp_path / "two")
    compared = [k for k in one if k.startswith(keys)]
    assert len(compared) >= len(keys)
    for key in compared:
        assert two[key] == pytest.approx(one[key], rel=1e-5, abs=1e-6), key
