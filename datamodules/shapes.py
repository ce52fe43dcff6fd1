"""The offline captioning default: procedurally drawn shapes whose captions name them, with boxes.

Each 64 × 64 image holds 2–3 objects — a colour (red, green, blue, yellow, purple) and a shape
(circle, square, triangle, cross) — in distinct columns of a 3 × 3 layout, each in a random row,
with a little positional jitter and pixel noise. The caption lists the objects **left to right**,
each as ``<colour> <shape> <row>`` (row ∈ top, middle, bottom), joined by ``and`` (reference 1) or
``then`` (reference 2)::

    "red circle top and blue square bottom and green cross middle"

Why attention should matter: the caption binds colour, shape, row *and* order, i.e. one of
5 · 4 · 3 words-per-slot conjunctions for each of 2–3 ordered slots. The mean feature (the
``attention=none`` bottleneck) superposes the objects, so which colour goes with which shape and
which object comes first must be squeezed into one vector; an attentive decoder reads one object
at a time. Every object's bounding box is kept, normalised to [0, 1] as (x0, y0, x1, y1), and
every caption token is tagged with the object it names (-1 for ``and`` / ``then``), which the
captioner's localisation score uses.

Everything is a pure function of (seed, split, index): identical on every rank and every run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CANVAS = 64
GRID = 3
HALF = 7  # objects are 15 × 15 pixels
JITTER = 2
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40), "green": (40, 200, 60), "blue": (50, 90, 235), "yellow": (235, 220, 40),
    "purple": (170, 60, 210),
}
SHAPES = ("circle", "square", "triangle", "cross")
ROWS = ("top", "middle", "bottom")
JOINERS = ("and", "then")
SPLIT_OFFSET = {"train": 0, "val": 1, "test": 2}


@dataclass(frozen=True)
class ShapeScene:
    """One drawn image with its references.

    Attributes:
        image: (H, W, 3) uint8.
        captions: the references, each a list of tokens.
        objects: per reference, per token, the index of the object it names (-1: none).
        boxes: per object, (x0, y0, x1, y1) in [0, 1], in caption (left-to-right) order.
    """

    image: np.ndarray
    captions: list[list[str]]
    objects: list[list[int]]
    boxes: list[tuple[float, float, float, float]]


def _mask(shape: str, yy: np.ndarray, xx: np.ndarray, cy: int, cx: int) -> np.ndarray:
    """Boolean (H, W) pixels of ``shape`` centred at (cy, cx), inside a (2·HALF+1)² box."""
    dy, dx = yy - cy, xx - cx
    inside = (np.abs(dy) <= HALF) & (np.abs(dx) <= HALF)
    masks = {
        "circle": dy**2 + dx**2 <= HALF**2,
        "square": inside & (np.abs(dy) <= HALF - 1) & (np.abs(dx) <= HALF - 1),
        "triangle": inside & (2 * np.abs(dx) <= dy + HALF),
        "cross": inside & ((np.abs(dx) <= 2) | (np.abs(dy) <= 2)),
    }
    return masks[shape]


def draw_scene(rng: np.random.Generator, *, min_objects: int = 2, max_objects: int = 3) -> ShapeScene:
    """One scene from ``rng``: 2–3 objects in distinct columns, captions left to right."""
    k = int(rng.integers(min_objects, max_objects + 1))
    columns = np.sort(rng.choice(GRID, size=k, replace=False))
    cell = CANVAS / GRID
    yy, xx = np.mgrid[0:CANVAS, 0:CANVAS]
    image = rng.integers(0, 24, size=(CANVAS, CANVAS, 3)).astype(np.uint8)  # dark noisy background
    phrases, boxes = [], []
    for col in columns.tolist():
        row = int(rng.integers(GRID))
        colour = list(COLOURS)[int(rng.integers(len(COLOURS)))]
        shape = SHAPES[int(rng.integers(len(SHAPES)))]
        cy = int(round((row + 0.5) * cell)) + int(rng.integers(-JITTER, JITTER + 1))
        cx = int(round((col + 0.5) * cell)) + int(rng.integers(-JITTER, JITTER + 1))
        image[_mask(shape, yy, xx, cy, cx)] = COLOURS[colour]
        phrases.append([colour, shape, ROWS[row]])
        boxes.append(((cx - HALF) / CANVAS, (cy - HALF) / CANVAS, (cx + HALF + 1) / CANVAS, (cy + HALF + 1) / CANVAS))
    captions, objects = [], []
    for joiner in JOINERS:
        tokens, owners = [], []
        for i, phrase in enumerate(phrases):
            if i:
                tokens.append(joiner)
                owners.append(-1)
            tokens += phrase
            owners += [i] * len(phrase)
        captions.append(tokens)
        objects.append(owners)
    return ShapeScene(image=image, captions=captions, objects=objects, boxes=boxes)


def generate_scenes(n: int, *, seed: int, split: str) -> list[ShapeScene]:
    """``n`` scenes of ``split``; scene i depends only on (seed, split, i)."""
    return [draw_scene(np.random.default_rng([seed, SPLIT_OFFSET[split], i])) for i in range(n)]


def shapes_lexicon() -> list[str]:
    """Every word a shapes caption can use, in a fixed order (the vocabulary after the 4 special ids)."""
    return [*COLOURS, *SHAPES, *ROWS, *JOINERS]
