"""The report from a directory of small fake runs (the run-directory contract written by hand):
table with mean ± std and n, diverged/failed arms shown as such, plots, and verdicts."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402

from ablations.catalog.questions import QUESTIONS, all_beat  # noqa: E402
from ablations.commands import report_main  # noqa: E402
from ablations.reports.plots_runs import curve_keys  # noqa: E402
from ablations.reports.report import write_report  # noqa: E402
from ablations.reports.results import experiment_dirs, load_experiment, stat  # noqa: E402
from ablations.verdicts.stats import Stat  # noqa: E402

ACC = {"sqrt_dk": 0.9, "none": 0.5, "dk": 0.6}
# What Vaswani et al. predict: no scaling collapses the entropy and starves W_q/W_k of gradient; 1/d_k flattens.
ENTROPY = {"sqrt_dk": 1.0, "none": 0.2, "dk": 2.0}
GRAD_QK = {"sqrt_dk": 1.0, "none": 0.1, "dk": 0.6}
ENV = {"cpu": "Test CPU", "gpu": None, "torch": "2.6.0", "lightning": "2.6.0", "precision": "32-true",
       "deterministic": False}


def fake_run(exp: Path, scale: str, seed: int, *, status: str = "finished", acc: float = 0.5,
             env: dict | None = None) -> Path:
    """One run directory as the CLI writes it (status None: a trial that died before writing a summary)."""
    run = exp / f"attn_scale={scale},seed={seed}"
    (run / "figures").mkdir(parents=True)
    config = {"seed_everything": seed, "model": {"class_path": "lit_models.families.seq2seq.TransformerSeq2Seq",
                                                 "init_args": {"attn_scale": scale, "d_model": 256}},
              "data": {"class_path": "datamodules.synthetic.SyntheticSeq2Seq", "init_args": {"max_len": 12}}}
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    rows = ["epoch,step,train/loss,train/grad_norm/encoder.layers.0,train/grad_qk/total,val/exact_match,val/loss,"
            "val/attn_entropy/cross/layer1"]
    ent, gqk = ENTROPY.get(scale, 1.0) + seed / 100, GRAD_QK.get(scale, 1.0) + seed / 100
    for step in range(0, 400, 100):  # steps far enough apart that reaching the target differs by > 47 steps
        rows.append(f"0,{step},{2 - step / 400},{1 + seed / 10},{gqk},,,")
        rows.append(f"0,{step + 99},,,,{acc * (step + 100) / 400 + seed / 100},{2 - acc},{ent}")
    (run / "metrics.csv").write_text("\n".join(rows) + "\n")
    metrics = {"val/exact_match": acc + seed / 100, "val/loss": 2 - acc, "val/attn_entropy/cross/layer1": ent,
               "test/acc_by_len/len_001_005": acc, "test/acc_by_len/len_011_015": acc / 2,
               "test/token_acc_by_len/len_011_015": 0.9}
    if status == "diverged":
        metrics["val/loss"] = math.nan
    if status is not None:
        (run / "summary.json").write_text(json.dumps({
            "status": status, "metrics": metrics, "seed": seed, "parameters": 1000 + (scale == "dk"),
            "global_step": 399, "tokens_seen": 5000 + seed, "environment": env or ENV}))
    else:
        (run / "trial.json").write_text(json.dumps({"status": "failed", "returncode": 1,
                                                    "params": {"model.attn_scale": scale, "seed_everything": seed}}))
    fig, ax = plt.subplots(figsize=(2, 2))
    weights = [[acc, 1 - acc], [1 - acc, acc]] if scale != "none" else [[0.0, 0.0], [0.0, 0.0]]
    ax.imshow(weights)
    fig.savefig(run / "figures" / "cross_ex0.png")
    plt.close(fig)
    record = {"kind": "cross", "epoch": 0, "example": 0, "x_labels": ["a", "b"], "y_labels": ["<s>→b", "b→a"],
              "x_title": "source token (key)", "y_title": "decoder step: fed→predicted", "layers": [weights]}
    (run / "figures" / "cross_ex0.json").write_text(json.dumps(record))
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
    assert max(map(len, lines)) <= 100, "a terminal table is split into column groups, not 300 columns wide"
    heads = " ".join(ln for ln in lines if ln.startswith("arm "))
    assert "params" in heads and "steps" in heads and "tokens seen" in heads and "curve/steps_to_target" in heads
    assert "[95% Student-t interval of the mean]" in report.table, "what ± and the brackets are"
    sqrt_row, none_row, dk_row = (" ".join(ln for ln in lines if ln.startswith(f"attn_scale={a} ")) for a in ACC)
    # 0.92 ± 0.01 over 3 seeds: t_{0.975,2} = 4.303, half-width 4.303 * 0.01 / sqrt(3) = 0.0248
    assert "3/3" in sqrt_row and "0.9200 ± 0.0100 [0.8952, 0.9448]" in sqrt_row
    assert "1,000" in sqrt_row and "5,001-5,003" in sqrt_row
    assert "2/3" in none_row and "1 diverged" in none_row and "0.5150 ± 0.0071" in none_row
    assert "0/3" in dk_row and "no finished run (3 failed)" in dk_row
    # dk's comparisons are secondary in scaling's plan (Vaswani et al. do not test 1/d_k): its missing seeds show
    # in its check and leave the main answer alone
    assert report.verdict.startswith("supported") and "inconclusive (no finished seed for dk)" in report.verdict
    assert report.warning is None
    names = {p.name for p in report.figures}
    assert {"seeds.png", "curves.png", "acc_by_len.png", "attention.png", "probe_train_grad_norm.png",
            "probe_val_attn_entropy.png"} <= names
    assert all((runs_dir / "scaling" / n).stat().st_size > 1000 for n in names)
    text = report.path.read_text()
    assert "**Verdict:** supported" in text and "![curves](curves.png)" in text and "| none" not in text
    assert "Warning" not in text
    assert "| attn_scale=dk | 0/3 |" in text and QUESTIONS["scaling"].expected[:40] in text
    assert "- **Seed set:** exploratory (main) (9 runs); exploratory seeds informed the preset" in text


def test_seed_sets_are_named_by_their_first_seeds():
    from ablations.catalog.plan import seed_set

    want = [(1, "exploratory (main)"), (1000, "exploratory (main)"), (1001, "exploratory (replication)"),
            (2000, "exploratory (replication)"), (2001, "exploratory (power)"), (3000, "exploratory (power)"),
            (3001, "confirmatory"), (3101, "confirmatory"), (None, "unknown"), (True, "unknown")]
    assert [(seed, seed_set(seed)) for seed, _ in want] == want


def test_verdict_supported_when_every_arm_finished(runs_dir: Path):
    exp = runs_dir / "scaling"
    for seed in (1, 2, 3):
        shutil.rmtree(exp / f"attn_scale=dk,seed={seed}")
        fake_run(exp, "dk", seed, acc=ACC["dk"])
    report = write_report("scaling", load_experiment(exp), exp)
    assert report.verdict.startswith("supported: "), report.verdict
    for claim in ("entropy collapses", "through the softmax", "over-flattens", "target before none",
                  "sqrt_dk learns faster than dk (area under the exact-match curve): supported"):
        assert f"{claim}" in report.verdict
    assert "  - without scaling attention entropy collapses" in report.path.read_text()


def test_report_warns_when_arms_ran_in_different_environments(runs_dir: Path):
    exp = runs_dir / "scaling"
    shutil.rmtree(exp / "attn_scale=dk,seed=1")
    fake_run(exp, "dk", 1, acc=ACC["dk"], env={**ENV, "gpu": "NVIDIA H100", "torch": "2.7.0"})
    report = write_report("scaling", load_experiment(exp), exp)
    assert report.warning is not None and "gpu: NVIDIA H100 / None" in report.warning
    assert "torch: 2.7.0 / 2.6.0" in report.warning and "**Warning:**" in report.path.read_text()


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


def test_all_beat_reads_the_interval_of_the_difference():
    tight_hi, tight_lo = Stat(0.9, 0.01, 3), Stat(0.8, 0.01, 3)
    verdict = all_beat([("a",)], [("b",)], metric="m", goal="maximize", sesoi=0.05)
    assert verdict({("a",): {"m": tight_hi}, ("b",): {"m": tight_lo}}).startswith("supported")
    assert verdict({("a",): {"m": tight_lo}, ("b",): {"m": tight_hi}}).startswith("not supported")
    noisy = verdict({("a",): {"m": Stat(0.9, 0.2, 3)}, ("b",): {"m": Stat(0.8, 0.2, 3)}})
    assert noisy.startswith("inconclusive (difference within seed noise)")
    assert verdict({("a",): {"m": tight_hi}}).startswith("inconclusive")
    assert verdict({("a",): {"m": Stat(0.9, 0.0, 1)}, ("b",): {"m": Stat(0.1, 0.0, 1)}}).startswith(
        "inconclusive (n too small)")


def test_stat_is_mean_and_sample_std_of_finite_values():
    s = stat([1.0, 3.0, math.nan])
    assert (s.mean, s.n) == (2.0, 2) and s.std == pytest.approx(math.sqrt(2))
    assert stat([]).n == 0 and math.isnan(stat([]).mean)


def test_wandb_sweep_records_map_to_the_same_keys(monkeypatch):
    """The W&B API path with a stand-in Api object (the real one needs a server and credentials)."""
    import wandb

    from ablations.reports.results import load_wandb_sweep

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


def test_curves_show_every_curve_a_verdict_averages(runs_dir: Path):
    """A ``curve/mean/<key>`` probe (forcing's exposure gap) gets its own panel next to the metric and val/loss."""
    runs = load_experiment(runs_dir / "scaling")
    assert curve_keys(QUESTIONS["scaling"], runs) == ["val/exact_match", "val/loss"]
    gap = "val/attn_entropy/cross/layer1"  # a validation curve the fake runs log
    question = dataclasses.replace(QUESTIONS["scaling"], probes=("val/loss", f"curve/mean/{gap}"))
    assert curve_keys(question, runs) == ["val/exact_match", gap, "val/loss"]
    unlogged = dataclasses.replace(QUESTIONS["scaling"], probes=("curve/mean/val/exposure_gap",))
    assert curve_keys(unlogged, runs) == ["val/exact_match", "val/loss"]


def test_attention_panels_draw_saved_weights_and_leave_out_arms_without_attention(tmp_path: Path):
    from ablations.reports.plots import _attention_picks, plot_attention
    from ablations.reports.results import group_arms

    exp = tmp_path / "scaling"
    for scale in ("sqrt_dk", "none", "dk"):
        fake_run(exp, scale, 1, acc=ACC[scale])
    (exp / "attn_scale=dk,seed=1" / "figures" / "cross_ex0.json").unlink()  # a run from before the weights were saved
    arms = group_arms(load_experiment(exp), ("model.attn_scale",))
    order = [("sqrt_dk",), ("none",), ("dk",)]
    picks, left_out = _attention_picks(arms, order, label=lambda a: f"attn_scale={a[0]}")
    assert [name for name, _, _ in picks] == ["attn_scale=sqrt_dk"]
    assert picks[0][2]["layers"][-1] == [[0.9, pytest.approx(0.1)], [pytest.approx(0.1), 0.9]]
    assert left_out == ["attn_scale=none (no attention)", "attn_scale=dk (no attention weights saved)"]
    path = plot_attention(arms, order, label=str, out=tmp_path)
    assert path is not None and path.stat().st_size > 1000


def test_report_says_which_alignment_reading_the_claim_reads():
    from ablations.reports.report import ALIGN_NOTE, _markdown

    question = QUESTIONS["attention_bottleneck"]
    assert {"val/align_mass", "val/align_mass/predicted", "val/align_mass/fed"} <= set(question.probes)
    text = _markdown(question, [], ["arm", "n", "val/align_mass", "val/align_mass/fed"], [], "inconclusive", [])
    assert ALIGN_NOTE in text and "what the claim reads" in text
    assert ALIGN_NOTE not in _markdown(question, [], ["arm", "n", "val/loss"], [], "inconclusive", [])
