"""The callbacks' declared protocols: each family implements exactly the ones its docs claim, and every
member is visible to ``inspect.getattr_static`` (how Python >= 3.12 checks runtime protocols), so the
probes and figures find the same modules on every supported Python."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import pytest
import torch
from torch import nn

from datamodules.batching import Seq2SeqBatch
from datamodules.captioning import CaptionBatch
from datamodules.synthetic import SyntheticSeq2Seq
from lit_models import protocols
from lit_models.families.captioner import ShowAttendTell
from lit_models.families.causal_lm import CausalLM
from lit_models.families.classifier import SentimentClassifier
from lit_models.families.full_view import FullViewClassifier
from lit_models.families.glimpse import RecurrentAttentionModel
from lit_models.families.recurrent_seq2seq import RecurrentSeq2Seq
from lit_models.families.regressor import AddingRegressor
from lit_models.families.seq2seq import Seq2SeqModule, TransformerSeq2Seq
from lit_models.training.decoder_training import DecoderTrainingModule

ALL = [protocols.AttentionMapsNet, protocols.StepwiseNet, protocols.SmoothedLoss, protocols.PlotsFigures,
       protocols.HasAttentionMaps, protocols.SourceTargetBatch, protocols.NamesTask]
DECODER = {protocols.AttentionMapsNet, protocols.StepwiseNet}

# family -> (the protocols of the module, the protocols of its network)
FAMILIES: dict[str, tuple[Callable[[], nn.Module], set, set]] = {
    "transformer": (lambda: TransformerSeq2Seq(src_vocab_size=12, tgt_vocab_size=12, d_model=16, heads=2, d_ff=32),
                    {protocols.SmoothedLoss, protocols.HasAttentionMaps}, DECODER),
    "recurrent": (lambda: RecurrentSeq2Seq(src_vocab_size=12, tgt_vocab_size=12, hidden_size=16, embed_dim=8),
                  {protocols.SmoothedLoss, protocols.HasAttentionMaps}, DECODER),
    "captioner": (lambda: ShowAttendTell(tgt_vocab_size=12, grid_size=4, cnn_width=16, embed_dim=16, hidden_size=32),
                  {protocols.SmoothedLoss, protocols.PlotsFigures}, DECODER),
    "causal_lm": (lambda: CausalLM(tgt_vocab_size=12, d_model=16, heads=2, d_ff=32),
                  {protocols.SmoothedLoss, protocols.HasAttentionMaps}, DECODER),
    "classifier": (lambda: SentimentClassifier(src_vocab_size=12), set(), set()),
    "ram": (lambda: RecurrentAttentionModel(glimpses=2, patch_size=4, scales=1, hidden_size=8, glimpse_size=8,
                                            glimpse_hidden=8, location_hidden=8), {protocols.PlotsFigures}, set()),
    "full_view": (lambda: FullViewClassifier(canvas_size=28, hidden_size=8), set(), set()),
    "regressor": (lambda: AddingRegressor(), set(), set()),
}


def _members(proto: type) -> set[str]:
    names = set(proto.__dict__.get("__annotations__", {}))
    return names | {n for n, v in proto.__dict__.items()
                    if not n.startswith("_") and (callable(v) or isinstance(v, property))}


def _check(obj: object, expected: set) -> None:
    for proto in ALL:
        assert isinstance(obj, proto) == (proto in expected), (type(obj).__name__, proto.__name__)
    missing = object()
    for proto in expected:
        for name in _members(proto):
            assert inspect.getattr_static(obj, name, missing) is not missing, (type(obj).__name__, name)


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_implements_its_declared_protocols(family):
    make, on_module, on_net = FAMILIES[family]
    torch.manual_seed(0)
    module = make()
    _check(module, on_module)
    _check(module.net, on_net)


def test_batches_and_data_name_what_the_probes_read():
    x = torch.zeros(1, 2, dtype=torch.long)
    _check(Seq2SeqBatch(x, x), {protocols.SourceTargetBatch})
    _check(CaptionBatch(torch.zeros(1, 3, 4, 4), x, x, torch.zeros(1, 1, 4), [["a"]]), {protocols.SourceTargetBatch})
    _check(SyntheticSeq2Seq(task="sort"), {protocols.NamesTask})


@pytest.mark.parametrize("family", ["transformer", "recurrent", "causal_lm", "captioner"])
def test_decoder_families_share_one_base_and_the_captioner_is_not_seq2seq(family):
    """Forcing, loss, optimiser and decoding come from ``DecoderTrainingModule``; only the token-to-token
    families are ``Seq2SeqModule`` (seq2seq metrics, heatmaps), so the captioner gets no seq2seq figure."""
    module = FAMILIES[family][0]()
    assert isinstance(module, DecoderTrainingModule)
    assert isinstance(module, Seq2SeqModule) == (family != "captioner")
    assert hasattr(module, "figure_maps") == (family != "captioner")
