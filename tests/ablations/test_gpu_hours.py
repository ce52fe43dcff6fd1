"""The full presets' GPU-hour estimate (``attnlab sweep --scale full --dry-run``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import ablations.engine.gpu_hours as gh
from tests.tiny_fit import tiny_fit


def test_seeds_of_one_arm_are_one_arm():
    cmds = [["python", "cli.py", "fit", "--config", "c.yaml", f"--model.attention={a}", f"--seed_everything={s}",
             f"--run.name=attention={a},seed={s}"] for a in ("none", "additive") for s in (1, 2, 3)]
    assert list(gh.arms(cmds).values()) == [3, 3]
    assert all("--seed_everything" not in " ".join(args) and "--run.name" not in " ".join(args)
               for args in gh.arms(cmds))


def test_hours_is_flops_over_the_stated_throughput():
    # 1 PFLOP a step x 1000 steps x 3 trials at 30% of 989 TFLOP/s
    assert gh.hours(1e15, 1000, 3) == pytest.approx(3e18 / (0.30 * 989e12) / 3600)


def test_lines_give_each_arm_and_the_total_and_name_an_arm_they_cannot_build(monkeypatch):
    def fake(args: list[str], build) -> tuple[float, int]:
        if "--model.attention=hard" in args:
            raise FileNotFoundError("no corpus here")
        return 2e12, 500

    monkeypatch.setattr(gh, "step_flops", fake)
    cmds = [["fit", f"--model.attention={a}", f"--seed_everything={s}"] for a in ("none", "hard") for s in (1, 2)]
    lines = gh.estimate_lines(cmds, build=None)
    assert "MFU 30%" in lines[0] and f"{gh.hours(2e12, 500, 2):.3g} GPU-hours" in lines[0]
    assert "for the 1 arms estimated" in lines[0]
    assert any("model.attention=hard: not estimated (FileNotFoundError: no corpus here)" in ln for ln in lines)


def test_arms_are_labelled_by_the_arguments_that_tell_them_apart(monkeypatch):
    """rope_scaling's arms cross a model and a data parameter, ram_mnist's baseline swaps the config file: every
    row names its arm, and no argument all arms share."""
    monkeypatch.setattr(gh, "step_flops", lambda args, build: (1e9, 10))
    cmds = [["fit", "--config", "lm.yaml", f"--model.rope_scaling={r}", f"--data.finetune_steps={f}",
             "--model.positions=rope", "--seed_everything=1"] for r in ("none", "linear") for f in (0, 32)]
    cmds.append(["fit", "--config", "fc.yaml", "--seed_everything=1"])
    rows = [line.split(": ")[0].strip() for line in gh.estimate_lines(cmds, build=None)[1:]]
    assert rows == ["lm.yaml model.rope_scaling=none data.finetune_steps=0 model.positions=rope",
                    "lm.yaml model.rope_scaling=none data.finetune_steps=32 model.positions=rope",
                    "lm.yaml model.rope_scaling=linear data.finetune_steps=0 model.positions=rope",
                    "lm.yaml model.rope_scaling=linear data.finetune_steps=32 model.positions=rope",
                    "fc.yaml"], rows
    assert gh.labels([("fit", "--config", "c.yaml")]) == ["(config as written)"]


def test_a_real_step_is_counted_forward_and_backward(tmp_path: Path):
    """Counted FLOPs of the tiny Transformer's step exceed 3x the output layer's forward matmul alone (2·B·T·d·V;
    backward twice that), and steps are epochs x batches."""
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(tiny_fit(seed=1, max_epochs=2, task="copy", vocab_size=12, min_len=3, max_len=6,
                                           train_size=64, val_size=8, test_size=8, batch_size=16)))
    from ablations.stacked import build

    flops, steps = gh.step_flops(["fit", "--config", str(cfg), f"--run.root={tmp_path}"], build)
    assert steps == 2 * 4
    assert flops > 3 * 2 * 16 * 4 * 16 * 12  # B=16, T >= 4 (3 tokens + EOS), d=16, V >= 12: a loose floor


def test_a_family_without_a_training_loss_is_counted(tmp_path: Path):
    """The recurrent attention model (ram_mnist's arms) has Lightning's training_step and no training_loss: its
    step is counted all the same (ram_translated.yaml: the offline glyph digits, made tiny)."""
    from ablations.stacked import build

    flops, steps = gh.step_flops(["fit", "--config", "ablations/configs/ram_translated.yaml", "--data.train_size=32",
                                  "--data.val_size=8", "--data.test_size=8", "--data.batch_size=16",
                                  "--trainer.max_epochs=1", "--model.hidden_size=32", f"--run.root={tmp_path}"], build)
    assert steps == 2
    assert flops > 3 * 2 * 16 * 6 * 32 * 32  # B=16, 6 glimpses, the core's H x H recurrence: a loose floor


def test_full_dry_run_prints_the_estimate_of_every_trial_and_quick_does_not(monkeypatch, capsys, tmp_path):
    from ablations.commands import sweep_main

    seen = []
    monkeypatch.setattr(gh, "estimate_lines",
                        lambda commands, build: seen.extend(commands) or ["ESTIMATE 1.0 GPU-hours"])
    assert sweep_main(["attention_bottleneck", "--dry-run", "--scale", "full", "--root", str(tmp_path)]) == 0
    assert "ESTIMATE 1.0 GPU-hours" in capsys.readouterr().out
    assert len(seen) == 15 and all("fit" in c for c in seen)  # 5 arms x 3 seeds
    assert sweep_main(["attention_bottleneck", "--dry-run", "--scale", "quick", "--root", str(tmp_path)]) == 0
    assert "ESTIMATE" not in capsys.readouterr().out
    assert not any(tmp_path.iterdir())


def test_full_dry_run_estimates_the_baseline_arms_too(monkeypatch, capsys, tmp_path):
    """ram_mnist's full preset runs its full_view baseline (ram_mnist_fc.yaml) on each seed after the grid."""
    from ablations.commands import sweep_main

    seen = []
    monkeypatch.setattr(gh, "estimate_lines", lambda commands, build: seen.extend(commands) or ["ESTIMATE"])
    assert sweep_main(["ram_mnist", "--dry-run", "--scale", "full", "--root", str(tmp_path)]) == 0
    configs = [c[c.index("--config") + 1] for c in seen]
    assert configs == ["ablations/configs/ram_mnist.yaml"] * 9 + ["ablations/configs/ram_mnist_fc.yaml"] * 3, configs
    assert not any(tmp_path.iterdir())


def _fake_build(max_epochs: int, max_steps: int):
    """A CLI whose model is one linear layer over 10 batches, with the trainer's epoch and step limits."""
    import torch

    class Model(torch.nn.Linear):
        def training_step(self, batch, index):
            return self(batch).sum()

    class Data:
        def prepare_data(self):
            pass

        def setup(self, stage):
            pass

        def train_dataloader(self):
            return [torch.ones(2, 4)] * 10

    trainer = type("Trainer", (), {"max_epochs": max_epochs, "max_steps": max_steps})()
    cli = type("Cli", (), {"model": Model(4, 3), "datamodule": Data(), "trainer": trainer})()
    return lambda arg_lists: [cli]


def test_an_unbounded_run_is_not_estimated_and_no_arm_is_given_negative_hours():
    """max_epochs=-1 is Lightning's 'no epoch limit': the steps come from max_steps, or the arm is not estimated."""
    cmds = [["fit", "--model.x=1", "--seed_everything=1"]]
    unbounded = gh.estimate_lines(cmds, build=_fake_build(-1, -1))
    assert "not estimated" in unbounded[1] and "max_epochs" in unbounded[1] and " -" not in unbounded[0], unbounded
    by_steps = gh.estimate_lines(cmds, build=_fake_build(-1, 50))
    assert "x 50 steps" in by_steps[1], by_steps
    assert "x 30 steps" in gh.estimate_lines(cmds, build=_fake_build(3, -1))[1]
    assert "x 20 steps" in gh.estimate_lines(cmds, build=_fake_build(3, 20))[1]


def test_an_arm_whose_error_has_no_message_is_named_by_its_type(monkeypatch):
    def fail(args, build):
        raise RuntimeError()

    monkeypatch.setattr(gh, "step_flops", fail)
    lines = gh.estimate_lines([["fit", "--model.x=1"]], build=None)
    assert lines[1].endswith("not estimated (RuntimeError)"), lines
