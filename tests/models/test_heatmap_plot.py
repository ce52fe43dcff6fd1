"""A heatmap figure redrawn in place is the image a new figure of the same drawing would be; a drawing that does
not fit its layout (another shape, longer labels) is drawn anew by the figure callback."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from lit_models.callbacks.heatmap_plot import AttentionPlot


def weights(seed: int, layers: int = 2, heads: int = 3, t: int = 5, s: int = 6) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.softmax(torch.randn(heads, t, s, generator=g), -1) for _ in range(layers)]


def pixels(plot: AttentionPlot, tmp_path, name: str) -> np.ndarray:
    path = tmp_path / f"{name}.png"
    plot.save(path)
    return np.asarray(Image.open(path))


def test_a_redrawn_figure_is_the_image_a_new_one_would_be(tmp_path):
    labels = {"x_labels": list("abcdef"), "y_labels": ["<s>→q", "q→r", "r→s", "s→t", "t→</s>"]}
    first = AttentionPlot(weights(1), **labels, title="cross · epoch 0")
    before = pixels(first, tmp_path, "first")
    assert first.fits(weights(2), **labels)
    first.redraw(weights(2), **labels, title="cross · epoch 5")
    redrawn = pixels(first, tmp_path, "redrawn")
    fresh = AttentionPlot(weights(2), **labels, title="cross · epoch 5")
    assert np.array_equal(redrawn, pixels(fresh, tmp_path, "fresh"))
    assert not np.array_equal(redrawn, before)  # the new weights and title were drawn
    first.close()
    fresh.close()


def test_new_labels_of_no_greater_length_are_drawn_in_the_old_layout():
    plot = AttentionPlot(weights(1), x_labels=list("abcdef"), y_labels=list("vwxyz"), title="t")
    plot.redraw(weights(1), x_labels=list("ghijkl"), y_labels=list("mnopq"), title="t")
    ax = plot.figure.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == list("ghijkl")
    assert [t.get_text() for t in ax.get_yticklabels()] == list("mnopq")
    plot.close()


@pytest.mark.parametrize("change", ["longer x label", "longer y label", "more steps", "another layer"])
def test_a_drawing_that_does_not_fit_the_layout_is_refused(change):
    plot = AttentionPlot(weights(1), x_labels=list("abcdef"), y_labels=list("vwxyz"), title="t")
    x, y, w = list("abcdef"), list("vwxyz"), weights(2)
    if change == "longer x label":
        x[2] = "a much longer piece"
    elif change == "longer y label":
        y[0] = "<s>→longer"
    elif change == "more steps":
        w, y = weights(2, t=6), [*y, "u"]
    else:
        w = weights(2, layers=3)
    assert not plot.fits(w, x_labels=x, y_labels=y)
    plot.close()


def test_the_callback_redraws_where_it_fits_and_draws_anew_where_not(tmp_path):
    from lit_models.callbacks.figures import AttentionFigures

    callback = AttentionFigures(run_dir=tmp_path)
    spec = {"layers": weights(1), "x_labels": list("abcdef"), "y_labels": list("vwxyz"), "title": "t",
            "x_title": "key", "y_title": "query"}
    first = callback._plot("cross_ex0", spec)
    assert callback._plot("cross_ex0", {**spec, "layers": weights(2)}) is first
    longer = callback._plot("cross_ex0", {**spec, "y_labels": ["a long row label", *"wxyz"]})
    assert longer is not first and callback._plots == {"cross_ex0": longer}
    callback.teardown(None, None, "fit")
    assert callback._plots == {}


def test_the_heads_are_tiled_in_order_with_a_blank_column_between_them():
    from lit_models.callbacks.heatmap_plot import _panels

    w = weights(4, layers=1, heads=3, t=5, s=6)[0]
    mean, tiles = _panels(w)
    assert np.allclose(mean, w.mean(0).numpy()) and tiles.shape == (5, 3 * 7 - 1)
    for h in range(3):
        assert np.array_equal(tiles[:, h * 7: h * 7 + 6], w[h].numpy())
    assert np.isnan(tiles[:, [6, 13]]).all() and not np.isnan(np.delete(tiles, [6, 13], axis=1)).any()
    (alone,) = _panels(w[:1])
    assert np.array_equal(alone, w[0].numpy())  # one head: its map is the mean, drawn once
