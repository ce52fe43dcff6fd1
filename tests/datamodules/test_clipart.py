"""The clip-art captioning source (datamodules/clipart.py) on a tiny stamps folder in the layout of Debian's
``tuxpaint-stamps-default`` (tests/fixtures/clipart/stamps: PNGs in RGBA / P / LA with transparency, description
files with the English line first and translations after, .dat and .ogg siblings, plus one SVG-only stamp, one
description without an image and one PNG without a description), so the reader runs without the package;
plus a smoke run on the installed stamps, skipped where they are absent."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import datamodules.clipart as clipart
from attnlab.cli import main
from attnlab_core.errors import UsageError
from datamodules.captioning import CaptionData
from datamodules.clipart import (
    Stamp,
    check_stamps,
    english_caption,
    inventory,
    read_clipart,
    render_stamp,
    split_stamps,
    stamp_groups,
    stamps_root,
)
from tests.datamodules.real_data import needs_real_data

FIXTURE = Path(__file__).parents[1] / "fixtures" / "clipart" / "stamps"
CONFIG = Path(__file__).parents[2] / "ablations" / "configs" / "clipart_soft.yaml"
STAMPS = stamps_root(None)  # the installed stamps, or $ATTNLAB_STAMPS_PATH
INSTALLED = (STAMPS / "animals").is_dir()


def _key(caption: str) -> str:
    return " ".join(re.findall(r"\w+", caption.lower()))


def test_inventory_reads_english_first_lines_of_png_stamps_only() -> None:
    inv = inventory(FIXTURE)
    assert (inv.svg_only, inv.no_image, inv.no_caption) == (1, 1, 1)  # space/sun.svg, town/fountain, truck_mirror
    names = [s.name for s in inv.stamps]
    assert names == sorted(names) and len(names) == 18
    assert "space/sun" not in names and "vehicles/truck_mirror" not in names
    captions = dict(inv.stamps)
    assert captions["space/planets/mars"] == "Mars—the “red planet”."
    assert captions["animals/mammals/badger"] == "A badger."
    assert not any("utf8=" in c for c in captions.values())


def test_groups_tie_shared_captions_and_numbered_names() -> None:
    groups = {tuple(s.name.rsplit("/", 1)[1] for s in g) for g in stamp_groups(inventory(FIXTURE).stamps)}
    assert ("flower1", "flower10", "flower2") in groups  # "A flower." twice, and flower<n> by name
    assert ("A_filled", "a_outline") in groups  # "The letter A." / "The letter a."
    assert ("apple", "apple") in groups  # food/fruit/apple and food/fruit/cartoon/apple


def test_splits_are_disjoint_by_caption_and_name_and_independent_of_order() -> None:
    stamps = inventory(FIXTURE).stamps
    parts = split_stamps(stamps)
    assert sum(map(len, parts.values())) == len(stamps) and all(parts.values())
    for a, b in (("train", "val"), ("train", "test"), ("val", "test")):
        assert not {_key(s.caption) for s in parts[a]} & {_key(s.caption) for s in parts[b]}
        assert not {s.name for s in parts[a]} & {s.name for s in parts[b]}
    assert split_stamps(list(reversed(stamps))) == parts
    flowers = [s for s in stamps if "flower" in s.name]
    assert {split for split, items in parts.items() for s in items if s in flowers} == {"test"}
    alone = split_stamps([s for s in stamps if s.name.endswith("flower2")])  # alone it would hash to train
    assert [len(alone[s]) for s in ("train", "val", "test")] == [1, 0, 0]


def test_render_composites_on_white_and_pads_without_cropping() -> None:
    for name in ("animals/birds/crane", "animals/birds/heron", "space/moon"):  # RGBA 12x8, P 8x12, LA 10x10
        image = render_stamp(FIXTURE / f"{name}.png", 24)
        assert image.shape == (24, 24, 3) and image.dtype == np.uint8
        assert (image[0, 0] == 255).all() and (image[-1, -1] == 255).all(), "transparent corners become white"
        ink = np.argwhere((image < 200).any(axis=2))
        assert ink[:, 0].min() > 0 and ink[:, 1].min() > 0 and ink.max() < 23, "the whole stamp is kept"
    wide = render_stamp(FIXTURE / "animals/birds/crane.png", 24)  # 12x8: 2 padding rows above, 2 below (x2)
    assert (wide[:3] >= 240).all() and (wide[-3:] >= 240).all() and (wide[:, :3] < 200).any()


def test_read_clipart_caches_rendered_images_once_per_size(tmp_path: Path, monkeypatch) -> None:
    splits = read_clipart(FIXTURE, image_size=16, cache_dir=tmp_path)
    assert [len(splits[s]) for s in ("train", "val", "test")] == [11, 2, 5]
    assert [tokens for tokens, _ in splits["val"]] == [["a", "dolphin", "."],
                                                       ["mars", "—", "the", "“", "red", "planet", "”", "."]]
    assert splits["val"][0][1].shape == (16, 16, 3)
    assert np.array_equal(splits["val"][0][1], render_stamp(FIXTURE / "animals/fish/dolphin.png", 16))
    cached = sorted(p.relative_to(tmp_path).parts[1] for p in tmp_path.rglob("*.npy"))
    assert cached == ["images-16.npy"]

    def fail(*_: object) -> None:
        raise AssertionError("rendered again")

    monkeypatch.setattr(clipart, "render_stamp", fail)
    again = read_clipart(FIXTURE, image_size=16, cache_dir=tmp_path)
    for split, rows in splits.items():
        assert [t for t, _ in again[split]] == [t for t, _ in rows]
        assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(again[split], rows, strict=True))
    with pytest.raises(AssertionError, match="rendered again"):
        read_clipart(FIXTURE, image_size=8, cache_dir=tmp_path)


def test_a_changed_stamp_set_is_a_new_cache(tmp_path: Path) -> None:
    stamps = tmp_path / "stamps"
    for path in FIXTURE.rglob("*"):
        if path.is_file():
            (stamps / path.relative_to(FIXTURE)).parent.mkdir(parents=True, exist_ok=True)
            (stamps / path.relative_to(FIXTURE)).write_bytes(path.read_bytes())
    read_clipart(stamps, image_size=8, cache_dir=tmp_path / "cache")
    (stamps / "town/house.txt").write_text("A tall house.\n", encoding="utf-8")
    read_clipart(stamps, image_size=8, cache_dir=tmp_path / "cache")
    assert len(list((tmp_path / "cache").glob("stamps-*/images-8.npy"))) == 2


def test_empty_description_and_unreadable_image_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a/blank.txt").write_text("\n\n", encoding="utf-8")
    assert english_caption(tmp_path / "a/blank.txt") == ""
    (tmp_path / "a/bad.txt").write_text("A bad stamp.\n", encoding="utf-8")
    (tmp_path / "a/bad.png").write_bytes(b"not a png")
    (tmp_path / "a/blank.png").write_bytes(b"")
    assert inventory(tmp_path).stamps == [Stamp("a/bad", "A bad stamp.")]
    with pytest.raises(UsageError, match=r"bad\.png: cannot read the stamp image"):
        read_clipart(tmp_path, image_size=8, cache_dir=tmp_path / "cache")


def test_absent_stamps_name_the_package(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"apt-get install tuxpaint-stamps-default") as err:
        check_stamps(tmp_path / "nowhere")
    assert "\n" not in str(err.value)
    with pytest.raises(UsageError, match=r"apt-get install tuxpaint-stamps-default"):
        CaptionData(source="clipart", stamps_path=str(tmp_path), data_dir=str(tmp_path / "data"))
    assert not (tmp_path / "data").exists()


def test_cli_exits_2_in_one_line_and_creates_nothing_when_absent(tmp_path: Path, capsys) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", str(CONFIG), f"--run.root={tmp_path}/runs",
              f"--data.init_args.data_dir={tmp_path}/data", f"--data.init_args.stamps_path={tmp_path}/empty"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err and len(lines) == 1 and lines[0].startswith("attnlab: error: source=clipart"), err
    assert "apt-get install tuxpaint-stamps-default" in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]


def test_fixture_trains_through_the_cli(tmp_path: Path) -> None:
    main(["fit", "--config", str(CONFIG), f"--run.root={tmp_path}/runs", "--run.name=fixture",
          f"--data.init_args.data_dir={tmp_path}/data", f"--data.init_args.stamps_path={FIXTURE}",
          "--data.init_args.min_freq=1", "--data.init_args.batch_size=4", "--data.init_args.image_size=16",
          "--model.init_args.grid_size=4", "--trainer.max_epochs=1",
          "--trainer.accelerator=cpu", "--trainer.enable_progress_bar=false", "--trainer.log_every_n_steps=1"])
    summary = json.loads(next((tmp_path / "runs").glob("*/fixture/summary.json")).read_text())
    assert summary["status"] == "finished" and summary["global_step"] == 3  # 11 training stamps / 4
    assert list((tmp_path / "data" / "clipart").glob("stamps-*/images-16.npy"))


# --------------------------------------------------------------------------- real data (skips when absent)
@needs_real_data(None if INSTALLED else f"no Tux Paint stamps in {STAMPS} (apt-get install tuxpaint-stamps-default)")
def test_real_stamps_split_by_group_and_train_a_few_steps(tmp_path: Path) -> None:
    inv = inventory(STAMPS)
    assert len(inv.stamps) > 700 and all(s.caption and "utf8=" not in s.caption for s in inv.stamps)
    parts = split_stamps(inv.stamps)
    keys = {split: {_key(s.caption) for s in items} for split, items in parts.items()}
    assert not keys["train"] & keys["val"] and not keys["train"] & keys["test"] and not keys["val"] & keys["test"]
    assert min(len(parts["val"]), len(parts["test"])) > 0.05 * len(inv.stamps)
    main(["fit", "--config", str(CONFIG), f"--run.root={tmp_path}/runs", "--run.name=real",
          f"--data.init_args.data_dir={tmp_path}/data", "--data.init_args.image_size=16",
          "--data.init_args.train_size=64", "--data.init_args.val_size=16", "--data.init_args.test_size=16",
          "--trainer.max_epochs=1", "--trainer.accelerator=cpu", "--trainer.enable_progress_bar=false",
          "--trainer.log_every_n_steps=1", "--model.init_args.grid_size=4"])
    summary = json.loads(next((tmp_path / "runs").glob("*/real/summary.json")).read_text())
    assert summary["status"] == "finished" and summary["global_step"] == 2  # 64 stamps / 32
    assert 0.0 <= summary["metrics"]["val/bleu1"] <= 1.0
