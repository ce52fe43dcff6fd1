"""The full-view baseline (Mnih et al. 2014's FC rows): shapes, the parameter count's formula, a one-line error
when the canvas disagrees, overfitting one batch, and a CLI fit + test of its config that logs RAM's keys."""

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from attnlab_core.errors import UsageError
from attnlab_run.cli import main
from datamodules.digits import TranslatedDigits
from lit_models.blocks.full_view_net import full_view_parameters
from lit_models.families.full_view import FullViewClassifier
from lit_models.families.glimpse import RecurrentAttentionModel

CONFIG = Path(__file__).parents[2] / "ablations" / "configs" / "ram_mnist_fc.yaml"


def _batch(canvas_size: int = 60, n: int = 16):
    dm = TranslatedDigits(canvas_size=canvas_size, train_size=n, val_size=8, test_size=8, batch_size=n, seed=0)
    dm.setup("fit")
    return next(iter(dm.train_dataloader()))


@pytest.mark.parametrize(("canvas", "hidden", "layers"), [(60, 172, 2), (28, 64, 2), (60, 8, 1), (28, 16, 3)])
def test_shapes_and_parameter_count(canvas, hidden, layers):
    model = FullViewClassifier(canvas_size=canvas, hidden_size=hidden, layers=layers)
    assert model(torch.zeros(5, 1, canvas, canvas)).shape == (5, 10)
    counted = sum(p.numel() for p in model.parameters())
    assert counted == full_view_parameters(pixels=canvas**2, hidden_size=hidden, layers=layers, num_classes=10)
    assert len(model.net.hidden) == layers


def test_config_matches_ram_budget():
    """The config's 172 hidden units give RAM's parameter count (ram_mnist.yaml's sizes) within 0.1%."""
    ram = RecurrentAttentionModel(glimpses=6, patch_size=12, scales=3, hidden_size=256, cell="lstm")
    fc = FullViewClassifier(canvas_size=60, hidden_size=172, layers=2)
    n_ram, n_fc = (sum(p.numel() for p in m.parameters()) for m in (ram, fc))
    assert (n_ram, n_fc) == (651_277, 650_858)


def test_canvas_mismatch_is_one_line_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", str(CONFIG), "--data.init_args.source=glyphs", "--data.init_args.canvas_size=28",
              "--trainer.fast_dev_run=1", "--trainer.accelerator=cpu", f"--run.root={tmp_path}"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the data has canvas_size=28 but --model.init_args.canvas_size=60" in err[0], err


def test_setup_names_the_disagreeing_size():
    model = FullViewClassifier(canvas_size=60)
    model.trainer = type("T", (), {"datamodule": TranslatedDigits(canvas_size=28)})()
    with pytest.raises(UsageError, match=r"the data has canvas_size=28 but --model.init_args.canvas_size=60"):
        model.setup("fit")


def test_overfits_one_batch():
    """16 canvases, 300 Adam steps: an MLP with 60² inputs memorises them (measured, seeds 0-2: 16/16 right,
    cross-entropy 0.00015-0.00025; the bound 0.1 is far from both)."""
    torch.manual_seed(0)
    batch = _batch()
    model = FullViewClassifier(canvas_size=60, hidden_size=64)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(300):
        opt.zero_grad()
        F.cross_entropy(model(batch.images), batch.labels).backward()
        opt.step()
    with torch.no_grad():
        logits = model(batch.images)
    right, ce = int((logits.argmax(-1) == batch.labels).sum()), float(F.cross_entropy(logits, batch.labels))
    assert right == 16 and ce < 0.1, f"{right}/16 right, cross-entropy {ce:.3f} (chance: ln 10 = 2.30)"


def test_cli_fit_and_test_log_rams_keys(tmp_path):
    """The config on offline glyph digits, two steps and a test: val/acc, val/loss, test/acc as RAM names them."""
    main(["fit", "--config", str(CONFIG), "--data.init_args.source=glyphs", "--data.init_args.train_size=32",
          "--data.init_args.val_size=8", "--data.init_args.test_size=8", "--data.init_args.batch_size=16",
          "--trainer.max_epochs=1", "--trainer.accelerator=cpu", "--trainer.enable_progress_bar=false",
          "--run.test_after_fit=true", f"--run.root={tmp_path}", "--run.name=fc"])
    summary = json.loads((tmp_path / "ram_mnist_fc" / "fc" / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["parameters"] == 650_858
    assert {"val/acc", "val/loss"} <= set(summary["metrics"])
    (evaluation,) = summary["evaluations"].values()
    assert {"test/acc", "test/loss"} <= set(evaluation["metrics"])
