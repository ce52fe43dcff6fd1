"""The report from a directory of small fake runs (the run-directory contract written by hand):
table with mean ± std and n, diverged/failed arms shown as such, plots, and verdicts."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402

from ablations.commands import report_main  # noqa: E402
from ablations.questions import QUESTIONS, Stat, beats_all, clearly_better  # noqa: E402
from ablations.report import write_report  # noqa: E402
from ablations.results import experiment_dirs, load_experiment, stat  # noqa: E402

ACC = {"sqrt_dk": 0.9, "none": 0.5, "dk": 0.7}


def fake_run(exp: Path, scale: str, seed: int, *, status: str = "finished", acc: float = 0.5) -> Path:
    """One run directory as the CLI writes it (status None: a trial that died before writing a summary)."""
    run = exp / f"attn_scale={scale},seed={seed}"
    (run / "figures").mkdir(parents=True)
    config = {"seed_everything": seed, "model": {"class_path": "lit_models.seq2seq.TransformerSeq2Seq",
                                                 "init_args": {"attn_scale": scale, "d_model": 256}},
              "data": {"class_path": "datamodules.synthetic.SyntheticSeq2Seq", "init_args": {"max_len": 12}}}
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    rows = ["epoch,step,train/loss,train/grad_norm/encoder.layers.0,val/exact_match,val/loss,"
            "val/attn_entropy/cross/layer1"]
    for step in range(0, 40, 10):
        rows.append(f"0,{step},{2 - step / 40},{1 + seed / 10},,,")
        rows.append(f"0,{step + 9},,,{acc * (step + 10) / 40 + seed / 100},{2 - acc},{1 - acc}")
    (run / "metrics.csv").write_text("\n".join(rows) + "\n")
    metrics = {"val/exact_match": acc + seed / 100, "val/loss": 2 - acc, "val/attn_entropy/cross/layer1": 1 - acc,
               "test/acc_by_len/len_001_005": acc, "test/acc_by_len/len_011_015": acc / 2,
               "test/token_acc_by_len/len_011_015": 0.9}
    if status == "diverged":
        metrics["val/loss"] = math.nan
    if status is not None:
        (run / "summary.json").write_text(json.dumps({"status": status, "metrics": metrics, "seed": seed}))
    else:
        (run / "trial.json").write_text(json.dumps({"status": "failed", "returncode": 1,
                                                    "params": {"model.attn_scale": scale, "seed_everything": seed}}))
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.imshow([[acc, 1 - acc], [1 - acc, acc]])
    fig.savefig(run / "figures" / "cross_layer1_ex0.png")
    plt.close(fig)
    return run


@pytest.fixture()
def runs_dir(tmp_path: Path) -> Path:
    exp = tmp_path / "runs" / "scaling"
    for seed in (1, 2, 3):
        fake_run(exp, "sqrt_dk", seed, acc=ACC["sqrt_dk"])
        fake_run(exp, "none", seed, status="diverged" if seed == 3 else "finished", acc=ACC["none"])
        fake_run(exp, "dk", seed, status=None)  # every dk trial failed
    return tmp_path / "runs"


def test_report_table_plots_and_verdict(runs_dir: Path):
    runs = load_experiment(runs_dir / "scaling")
    assert len(runs) == 9 and {r.status for r in runs} == {"finished", "diverged", "failed"}
    report = write_report("scaling", runs, runs_dir / "scaling")
    lines = report.table.splitlines()
    assert lines[0].split()[:3] == ["arm", "n", "val/exact_match"]
    sqrt_row, none_row, dk_row = (next(ln for ln in lines if ln.startswith(f"attn_scale={a} ")) for a in ACC)
    assert "3/3" in sqrt_row and "0.9200 ± 0.0100" in sqrt_row
    assert "2/3" in none_row and "1 diverged" in none_row and "0.5150 ± 0.0071" in none_row
    assert "0/3" in dk_row and "no finished run (3 failed)" in dk_row
    assert report.verdict.startswith("inconclusive") and "dk" in report.verdict
    names = {p.name for p in report.figures}
    assert {"curves.png", "acc_by_len.png", "attention.png", "probe_train_grad_norm.png",
            "probe_val_attn_entropy.png"} <= names
    assert all((runs_dir / "scaling" / n).stat().st_size > 1000 for n in names)
    text = report.path.read_text()
    assert "**Verdict:** inconclusive" in text and "![curves](curves.png)" in text and "| none" not in text
    assert "| attn_scale=dk | 0/3 |" in text and QUESTIONS["scaling"].expected[:40] in text


def test_verdict_supported_when_every_arm_finished(runs_dir: Path):
    exp = runs_dir / "scaling"
    for seed in (1, 2, 3):
        shutil.rmtree(exp / f"attn_scale=dk,seed={seed}")
        fake_run(exp, "dk", seed, acc=ACC["dk"])
    report = write_report("scaling", load_experiment(exp), exp)
    assert report.verdict.startswith("supported: sqrt_dk beats none, dk")


def test_report_command_prints_table_and_path(runs_dir: Path, capsys):
    assert report_main([str(runs_dir)]) == 0
    out = capsys.readouterr().out
    assert "== scaling ==" in out and "attn_scale=sqrt_dk" in out and str(runs_dir / "scaling" / "report.md") in out
    assert report_main([str(runs_dir / "scaling")]) == 0, "an experiment directory works too"
    assert report_main([str(runs_dir / "nothing-here")]) == 2


def test_adhoc_experiment_axes_are_the_varying_parameters(runs_dir: Path):
    exp = runs_dir / "scaling"
    renamed = exp.parent / "my_experiment"
    exp.rename(renamed)
    assert experiment_dirs(runs_dir) == {"my_experiment": renamed}
    report = write_report("my_experiment", load_experiment(renamed), renamed)
    assert "attn_scale=sqrt_dk" in report.table and report.verdict.startswith("no verdict")


def test_clearly_better_uses_the_seed_spread():
    tight_hi, tight_lo = Stat(0.9, 0.01, 3), Stat(0.8, 0.01, 3)
    assert clearly_better(tight_hi, tight_lo, goal="maximize")
    assert not clearly_better(Stat(0.9, 0.2, 3), Stat(0.8, 0.2, 3), goal="maximize")
    assert clearly_better(tight_lo, tight_hi, goal="minimize")
    assert not clearly_better(tight_hi, Stat(math.nan, math.nan, 0), goal="maximize")
    verdict = beats_all([("a",)], [("b",)], metric="m", goal="maximize")
    assert verdict({("a",): {"m": tight_hi}, ("b",): {"m": tight_lo}}).startswith("supported")
    assert verdict({("a",): {"m": tight_lo}, ("b",): {"m": tight_hi}}).startswith("not supported")
    assert verdict({("a",): {"m": tight_hi}}).startswith("inconclusive")


def test_norm_verdict_reads_the_deep_arms():
    def arms(post_cold: float) -> dict:
        return {("post", 6, 0): {"val/exact_match": Stat(post_cold, 0.01, 3)},
                ("post", 6, 400): {"val/exact_match": Stat(0.8, 0.01, 3)},
                ("pre", 6, 0): {"val/exact_match": Stat(0.8, 0.01, 3)},
                ("pre", 6, 400): {"val/exact_match": Stat(0.8, 0.01, 3)}}

    verdict = QUESTIONS["norm"].verdict
    assert verdict(arms(0.2)).startswith("supported")
    assert verdict(arms(0.8)).startswith("not supported")


def test_positions_verdict_names_the_arm_that_extrapolates():
    def arm(exact: float, beyond: float) -> dict:
        return {"test/exact_match": Stat(exact, 0.01, 3),
                "test/token_acc_by_len/len_011_015": Stat(0.99, 0.01, 3),  # straddles the training max: ignored
                "test/token_acc_by_len/len_016_020": Stat(beyond, 0.01, 3),
                "test/token_acc_by_len/len_021_025": Stat(beyond / 2, 0.01, 3)}

    stats = {("sinusoidal",): arm(0.4, 0.08), ("rope",): arm(0.3, 0.3), ("learned",): arm(0.35, 0.04),
             ("none",): arm(0.01, 0.05)}
    verdict = QUESTIONS["positions"].verdict(stats)
    assert verdict.startswith("supported") and "rope leads: rope 0.225, sinusoidal 0.060" in verdict
    stats[("none",)] = arm(0.5, 0.05)
    assert QUESTIONS["positions"].verdict(stats).startswith("not supported")


def test_stat_is_mean_and_sample_std_of_finite_values():
    s = stat([1.0, 3.0, math.nan])
    assert (s.mean, s.n) == (2.0, 2) and s.std == pytest.approx(math.sqrt(2))
    assert stat([]).n == 0 and math.isnan(stat([]).mean)


def test_wandb_sweep_records_map_to_the_same_keys(monkeypatch):
    """The W&B API path with a stand-in Api object (the real one needs a server and credentials)."""
    import wandb

    from ablations.results import load_wandb_sweep

    class Run:
        def __init__(self, name: str, state: str, scale: str, acc: float) -> None:
            self.name, self.state = name, state
            self.config = {"model.attn_scale": scale, "seed_everything": 1, "_wandb": {}}
            self.summary = {"val/exact_match": acc, "_runtime": 3.0, "note": "text"}

        def scan_history(self, keys):
            return [{"val/exact_match": 0.1, "trainer/global_step": 9, "_step": 1}]

    sweep = type("Sweep", (), {"id": "abc", "config": {"name": "scaling", "metric": {"name": "val/exact_match"}},
                               "runs": [Run("r1", "finished", "sqrt_dk", 0.9), Run("r2", "crashed", "none", 0.1)]})
    monkeypatch.setattr(wandb, "Api", lambda: type("Api", (), {"sweep": lambda self, path: sweep})())
    name, records = load_wandb_sweep("me/attnlab/abc")
    assert name == "scaling" and [r.status for r in records] == ["finished", "failed"]
    assert records[0].arm(("model.init_args.attn_scale",)) == ("sqrt_dk",) and records[0].curve("val/exact_match") == [
        (9, 0.1)]
    assert "_wandb" not in records[0].params and "note" not in records[0].metrics
