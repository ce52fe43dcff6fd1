"""Each Transformer field is declared once, in ``specs.TransformerSpec``: a throwaway field added there (and to
the attention block that uses it, ``blocks.attention.AttentionOptions``) and nowhere else reaches every
Transformer family's CLI with its doc (encoder-decoder, causal LM, classifier encoder), each family's
hyper-parameters, and every attention module it builds. The two modules are patched as source in a fresh
interpreter, exactly as a developer adding a knob would edit them, so the test follows the real derivation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]

PATCHES = {  # module -> (anchor, what replaces it): the whole of a new boolean knob outside its test
    "lit_models.specs.transformer": [
        ("    Args:\n", "    Args:\n        throwaway: a throwaway knob of this test.\n"),
        ("    d_head: int = field(init=False)\n", "    throwaway: bool = False\n    d_head: int = field(init=False)\n"),
    ],
    "lit_models.blocks.attention": [
        ("    attn_dropout: float\n", "    attn_dropout: float\n    throwaway: bool = False\n"),
        ("        self.dropout = options.attn_dropout\n",
         "        self.dropout = options.attn_dropout\n        self.throwaway = options.throwaway\n"),
    ],
}

SCRIPT = r'''
import importlib.machinery, json, sys

PATCHES = json.loads(sys.argv[1])


class Loader(importlib.machinery.SourceFileLoader):
    def get_code(self, fullname):
        with open(self.path) as f:
            source = f.read()
        for anchor, new in PATCHES[fullname]:
            assert source.count(anchor) == 1, (fullname, anchor)
            source = source.replace(anchor, new)
        return compile(source, self.path, "exec")


class Finder:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name not in PATCHES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        spec.loader = Loader(name, spec.origin)
        return spec


sys.meta_path.insert(0, Finder)

from jsonargparse import ArgumentParser  # noqa: E402

from lit_models.blocks.attention import MultiHeadAttention  # noqa: E402
from lit_models.families.causal_lm import CausalLM  # noqa: E402
from lit_models.families.classifier import SentimentClassifier  # noqa: E402
from lit_models.families.seq2seq import TransformerSeq2Seq  # noqa: E402

FAMILIES = {
    "encoder-decoder": (TransformerSeq2Seq, ["--model.src_vocab_size=12", "--model.tgt_vocab_size=12"]),
    "causal LM": (CausalLM, ["--model.tgt_vocab_size=12"]),
    "classifier": (SentimentClassifier, ["--model.src_vocab_size=12", "--model.encoder=transformer"]),
}
seen = {}
for name, (family, args) in FAMILIES.items():
    parser = ArgumentParser(exit_on_error=False)
    parser.add_class_arguments(family, "model")
    helps = {a.dest: a.help for a in parser._actions}
    model = parser.instantiate_classes(parser.parse_args([*args, "--model.throwaway=true"])).model
    attentions = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    seen[name] = {"help": helps.get("model.throwaway"), "default": vars(parser.get_defaults().model).get("throwaway"),
                  "hparam": model.hparams.get("throwaway"), "attentions": len(attentions),
                  "reached": sum(bool(m.throwaway) for m in attentions)}
print(json.dumps(seen))
'''


def test_a_field_added_to_the_spec_reaches_every_family_and_the_attention_block():
    done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(PATCHES)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(seen) == ["causal LM", "classifier", "encoder-decoder"]
    for name, knob in seen.items():
        assert "a throwaway knob of this test" in (knob["help"] or ""), (name, knob)
        assert knob["default"] is False and knob["hparam"] is True, (name, knob)
        assert knob["attentions"] > 0 and knob["reached"] == knob["attentions"], (name, knob)



def test_the_classifier_shows_the_spec_fields_after_its_own_and_builds_the_spec_from_them():
    from dataclasses import fields

    from lit_models.specs import ClassifierArgs, TransformerSpec

    spec = [f.name for f in fields(TransformerSpec) if f.init]
    shown = [f.name for f in fields(ClassifierArgs) if f.init]
    included = [n for n in spec if n not in ("encoder_layers", "decoder_layers", "attn_dropout", "tying", "dropout")]
    start = shown.index("bidirectional") + 1
    assert shown[start:start + len(included)] == included
    built = ClassifierArgs(encoder="transformer", num_layers=3, d_model=32, heads=8, dropout=0.2).spec.transformer
    got = (built.encoder_layers, built.decoder_layers, built.d_model, built.d_head, built.dropout, built.attn_dropout)
    assert got == (3, 0, 32, 4, 0.2, 0.0)
    assert ClassifierArgs(heads=5).spec.transformer is None  # an unused Transformer width is never validated


@pytest.mark.parametrize("bad", [{"dropout": 0.3}, {"no_such_field": 1}, {"after": "no_such_field"}])
def test_include_refuses_a_name_it_would_not_use(bad):
    from dataclasses import dataclass

    from attnlab_core.options import include
    from lit_models.specs import TransformerSpec

    after = bad.pop("after", "x")
    with pytest.raises(TypeError, match="no included field"):
        @dataclass(frozen=True, kw_only=True)
        @include(TransformerSpec, after=after, **bad)
        class Options:
            x: int = 1
            dropout: float = 0.1


TRAINING = {"forcing": "teacher", "scheduled_decay": "inverse_sigmoid", "scheduled_steps": 2000, "scheduled_floor": 0.0,
            "scheduled_mode": "two_pass", "lr": 0.001, "lr_schedule": "noam", "warmup_steps": 400, "weight_decay": 0.0}
ARCH = {"d_model": 128, "heads": 4, "d_ff": 512, "dropout": 0.1, "attn_dropout": 0.0, "positions": "sinusoidal",
        "attn_scale": "sqrt_dk", "position_options": None, "tying": "decoder"}
SAVED_BEFORE = {  # the flat hyper-parameters each family saved while its fields were declared in TransformerArgs
    "TransformerSeq2Seq": {**TRAINING, "label_smoothing": 0.1, "src_vocab_size": 12, "tgt_vocab_size": 12, **ARCH,
                           "encoder_layers": 2, "decoder_layers": 2, "norm": "post", "max_positions": 256},
    "CausalLM": {**TRAINING, "label_smoothing": 0.0, "tgt_vocab_size": 12, **ARCH, "layers": 2, "norm": "pre",
                 "max_positions": 512},
}


@pytest.mark.parametrize("family", sorted(SAVED_BEFORE))
def test_hyperparameters_saved_before_reload_unchanged(family):
    """A checkpoint's flat hyper-parameters from before the spec held the fields rebuild the model, and the
    defaults it saves are the ones it saved then (so an old checkpoint and a new run of the defaults agree)."""
    from lit_models.families.causal_lm import CausalLM
    from lit_models.families.seq2seq import TransformerSeq2Seq

    cls = {"TransformerSeq2Seq": TransformerSeq2Seq, "CausalLM": CausalLM}[family]
    from tests.models.test_family_options import TRANSFORMER_KNOBS_47

    saved = SAVED_BEFORE[family]
    now = {**saved, **TRANSFORMER_KNOBS_47}  # knobs added since, at the defaults that build the model as before
    assert dict(cls(**saved).hparams) == now
    sizes = {k: v for k, v in saved.items() if k.endswith("vocab_size")}
    assert dict(cls(**sizes).hparams) == now
