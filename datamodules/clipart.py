"""Tux Paint's clip-art stamps as a small, real, offline image-caption set.

Debian's ``tuxpaint-stamps-default`` (GPL-2; ``apt-get install tuxpaint-stamps-default``) installs the
stamps under ``/usr/share/tuxpaint/stamps/<category>/<subcategory>/.../<name>.<ext>`` (the root is
``--data.init_args.stamps_path``, default that folder). One stamp is one image with siblings of the same
name:

- ``<name>.png`` (a bitmap with transparency) and/or ``<name>.svg`` (a vector drawing);
- ``<name>.txt``: the description, **English on the first line**, then one ``<locale>.utf8=<text>`` line
  per translation (read: the first line only, stripped);
- ``<name>.dat`` (stamp options), ``<name>*.ogg`` / ``.wav`` (spoken names): not read.

Only PNG stamps are read (no SVG renderer is a dependency of the project): of the 952 described stamps of
package version 2022.06.04-1, 785 have a PNG; 165 SVG-only and 2 image-less descriptions are dropped, as are
the 17 PNGs without a description (``*_mirror`` variants, extra Tux poses). Each image is composited on
white (the stamps are transparent), padded to a square on white so that no part of a stamp is cut, and
resized to ``image_size`` (Lanczos); the result is cached once per stamp set and size as
``data_dir/clipart/stamps-<fingerprint>/images-<size>.npy`` (the fingerprint hashes every read file's
path, size and modification time, so a new package release is a new cache).

Split (:func:`stamp_split`; fixed, by stamp group, never by random stamp): stamps that share a caption
(letter case and punctuation aside: "The letter A." and "The letter a.") or a file name (trailing digits,
``_``, ``-`` aside, when something is left: ``flower1`` ... ``flower10``) form one group, by transitive
closure, and a whole group goes to one split by the SHA-256 of its first stamp's path: test when it is 0
modulo 10, validation when 1, train otherwise. So no caption and no numbered variant of a stamp (the
filled and outlined letters, the ten flowers) is on both sides: 613 groups, 639 / 82 / 64 stamps for
2022.06.04-1.
The rule depends on the stamps' names and captions alone, not on the order they are read in.

Captions are one per image (so multi-reference BLEU is single-reference here), tokenised with
``datamodules.tokenization.word_tokenize``.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

import numpy as np
from PIL import Image, UnidentifiedImageError

from attnlab_core.atomic import atomic_write
from attnlab_core.errors import UsageError
from datamodules.splits import SPLITS, Split
from datamodules.tokenization import word_tokenize

STAMPS_DEFAULT = Path("/usr/share/tuxpaint/stamps")
STAMPS_ENV = "ATTNLAB_STAMPS_PATH"
"""Environment variable naming another stamps folder than ``STAMPS_DEFAULT`` (as ``SWORD_PATH`` for the Bible)."""
PACKAGE = "tuxpaint-stamps-default"
HELD_OUT = {0: "test", 1: "val"}
"""SHA-256 of a group's first stamp path, modulo 10 -> held-out split (every other residue is train)."""


class Stamp(NamedTuple):
    """One described PNG stamp: its path relative to the stamps root without suffix, and its English caption."""

    name: str
    caption: str


class Inventory(NamedTuple):
    """The stamps read, and what was dropped (counts)."""

    stamps: list[Stamp]
    svg_only: int
    no_image: int
    no_caption: int


def stamps_root(option: str | None) -> Path:
    """The stamps folder: ``--data.init_args.stamps_path``, else ``$ATTNLAB_STAMPS_PATH``, else
    /usr/share/tuxpaint/stamps."""
    return Path(option or os.environ.get(STAMPS_ENV) or STAMPS_DEFAULT)


def check_stamps(root: Path) -> Path:
    """``root`` when it holds described stamps; else one line naming the package to install."""
    if root.is_dir() and next(root.rglob("*.txt"), None) is not None:
        return root
    raise UsageError(f"source=clipart reads the Tux Paint stamps in {root}, which are not there; run: apt-get "
                     f"install {PACKAGE} (or point --data.init_args.stamps_path at a folder in its layout)")


def english_caption(path: Path) -> str:
    """The first line of a stamp's description file, stripped (a UTF-8 BOM too)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"{path}: cannot read the stamp description ({type(err).__name__})") from None
    return text.splitlines()[0].strip() if text.strip() else ""


def inventory(root: Path) -> Inventory:
    """Every PNG stamp with a non-empty English caption, sorted by name; the dropped ones counted."""
    check_stamps(root)
    described = {p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*.txt")}
    pngs = {p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*.png")}
    svgs = {p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*.svg")}
    stamps = [Stamp(n, c) for n in sorted(described & pngs) if (c := english_caption(root / f"{n}.txt"))]
    return Inventory(stamps=stamps, svg_only=len((described & svgs) - pngs),
                     no_image=len(described - pngs - svgs), no_caption=len(pngs - described))


def _keys(stamp: Stamp) -> tuple[str, str]:
    """What ties stamps into one group: the caption's words, lower-cased; the file name less trailing digits."""
    base = stamp.name.rsplit("/", 1)[-1].lower()
    return "caption:" + " ".join(re.findall(r"\w+", stamp.caption.lower())), "name:" + (
        re.sub(r"[\d_-]+$", "", base) or base)


def stamp_groups(stamps: list[Stamp]) -> list[list[Stamp]]:
    """Stamps sharing a caption key or a name key, transitively (union-find), each group sorted by name."""
    parent = list(range(len(stamps)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}
    for i, stamp in enumerate(stamps):
        for key in _keys(stamp):
            parent[find(i)] = find(first.setdefault(key, i))
    groups: dict[int, list[Stamp]] = defaultdict(list)
    for i, stamp in enumerate(stamps):
        groups[find(i)].append(stamp)
    return sorted((sorted(g) for g in groups.values()), key=lambda g: g[0].name)


def stamp_split(group: list[Stamp]) -> Split:
    """The split of a whole group: SHA-256 of its first stamp's name, modulo 10 (see :data:`HELD_OUT`)."""
    residue = int(hashlib.sha256(min(s.name for s in group).encode()).hexdigest(), 16) % 10
    return HELD_OUT.get(residue, "train")  # type: ignore[return-value]


def split_stamps(stamps: list[Stamp]) -> dict[Split, list[Stamp]]:
    """Stamps per split (each sorted by name), whole groups at a time."""
    out: dict[Split, list[Stamp]] = {split: [] for split in SPLITS}
    for group in stamp_groups(stamps):
        out[stamp_split(group)].extend(group)
    return {split: sorted(items) for split, items in out.items()}


def render_stamp(path: Path, size: int) -> np.ndarray:
    """(size, size, 3) uint8: the stamp composited on white, padded to a centred square on white, resized."""
    try:
        with Image.open(path) as img:
            rgba = img.convert("RGBA")
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as err:
        raise UsageError(f"{path}: cannot read the stamp image ({type(err).__name__}: {err})") from None
    side = max(rgba.size)
    canvas = Image.new("RGBA", (side, side), (255, 255, 255, 255))
    canvas.alpha_composite(rgba, ((side - rgba.width) // 2, (side - rgba.height) // 2))
    return np.asarray(canvas.convert("RGB").resize((size, size), Image.Resampling.LANCZOS), dtype=np.uint8)


def fingerprint(root: Path, stamps: list[Stamp]) -> str:
    """12 hex digits of SHA-256 over each read file's relative path, size and modification time."""
    digest = hashlib.sha256()
    for stamp in stamps:
        for suffix in (".png", ".txt"):
            info = (root / f"{stamp.name}{suffix}").stat()
            digest.update(f"{stamp.name}{suffix}\t{info.st_size}\t{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:12]


def stamp_images(root: Path, stamps: list[Stamp], *, size: int, cache_dir: Path) -> np.ndarray:
    """(N, size, size, 3) uint8 images of ``stamps`` in order, rendered once and cached under ``cache_dir``."""
    path = cache_dir / f"stamps-{fingerprint(root, stamps)}" / f"images-{size}.npy"
    if path.is_file():
        cached = np.load(path)
        if cached.shape == (len(stamps), size, size, 3):
            return cached
    images = np.stack([render_stamp(root / f"{s.name}.png", size) for s in stamps]) if stamps else (
        np.zeros((0, size, size, 3), np.uint8))
    buffer = io.BytesIO()
    np.save(buffer, images)
    atomic_write(path, buffer.getvalue())
    return images


def read_clipart(root: Path, *, image_size: int, cache_dir: Path) -> dict[Split, list[tuple[list[str], np.ndarray]]]:
    """Per split, each stamp's caption tokens and its rendered (image_size, image_size, 3) uint8 image, by name."""
    stamps = inventory(root).stamps
    rendered = stamp_images(root, stamps, size=image_size, cache_dir=cache_dir)
    row = {s.name: i for i, s in enumerate(stamps)}
    return {split: [(word_tokenize(s.caption), rendered[row[s.name]]) for s in items]
            for split, items in split_stamps(stamps).items()}
