"""The attention figures are drawn on the longest examples of the first validation batch."""

from __future__ import annotations

import torch

from datamodules.batching import PAD, Seq2SeqBatch
from lit_models.callbacks.figures import longest_examples


def test_longest_examples_pick_the_longest_sources_in_batch_order_on_ties():
    src = torch.tensor([[5, 6, PAD, PAD], [5, 6, 7, 8], [9, PAD, PAD, PAD], [7, 7, 7, 8]])
    tgt = torch.arange(16).view(4, 4)
    picked = longest_examples(Seq2SeqBatch(src=src, tgt=tgt), 2)
    assert isinstance(picked, Seq2SeqBatch)
    assert picked.src.tolist() == [[5, 6, 7, 8], [7, 7, 7, 8]]
    assert picked.tgt.tolist() == [tgt[1].tolist(), tgt[3].tolist()]
    assert longest_examples(Seq2SeqBatch(src=src, tgt=tgt), 1).src.tolist() == [[5, 6, 7, 8]]


def test_decoder_rows_name_the_token_fed_and_the_token_predicted():
    """Row t of a decoder map is the step fed out[t-1] that predicts out[t]; decoder self-attention keys are the
    fed tokens. Labelling rows with the predicted token alone hides which token a row's query was fed."""
    from lit_models.callbacks.figures import _keys, _queries, decoder_row_labels

    out = ["c", "b", "a", "</s>"]
    assert decoder_row_labels(out) == ["<s>→c", "c→b", "b→a", "a→</s>"]
    src = ["a", "b", "c"]
    assert _queries("cross", src, out) == decoder_row_labels(out) == _queries("dec_self", src, out)
    assert _keys("dec_self", src, out) == ["<s>", "c", "b", "a"] and _keys("cross", src, out) == src
    assert _queries("enc_self", src, out) == src == _keys("enc_self", src, out)
    assert _queries("self", out, out) == out  # a causal LM labels its own positions with their input tokens


def test_heatmap_records_hold_the_head_mean_weights_and_labels_drawn():
    from lit_models.callbacks.figures import _heatmaps
    from lit_models.callbacks.heatmap_plot import AttentionPlot

    class Maps:  # the one method ``_heatmaps`` reads (``protocols.HasAttentionMaps.figure_maps``)
        def figure_maps(self):
            w = torch.zeros(1, 2, 4, 5)  # (N, H, T, S): 4 decoder steps over 5 padded source positions
            w[0, 0, :, 0], w[0, 1, :, 1] = 1.0, 1.0  # head 0 reads position 0, head 1 position 1
            return {"cross/layer1": w}, [["x", "y", "z"]], [["z", "y", "</s>"]]

    specs, records = _heatmaps(Maps(), epoch=3)
    record = records["cross_ex0"]
    assert record["layers"] == [[[0.5, 0.5, 0.0]] * 3]  # trimmed to 3 steps x 3 source tokens, mean over heads
    assert record["y_labels"] == ["<s>→z", "z→y", "y→</s>"] and record["x_labels"] == ["x", "y", "z"]
    assert record["y_title"] == "decoder step: fed→predicted" and record["epoch"] == 3
    plot = AttentionPlot(**specs["cross_ex0"])
    ax = plot.figure.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == record["y_labels"] and ax.get_ylabel() == record["y_title"]
    plot.close()


def test_a_model_without_attention_draws_no_all_zero_map():
    """attention=none: the recurrent model reports zero cross-attention weights, which are no figure to draw."""
    from lit_models.callbacks.figures import _heatmaps

    class NoAttention:
        def figure_maps(self):
            return ({"cross/layer1": torch.zeros(1, 1, 3, 3), "enc_self/layer1": torch.eye(3).view(1, 1, 3, 3)},
                    [["x", "y", "z"]], [["z", "y", "</s>"]])

    specs, records = _heatmaps(NoAttention(), epoch=0)
    assert set(specs) == set(records) == {"enc_self_ex0"}
