"""One frozen spec per architecture: what the builders take (cf. nanoGPT's ``GPTConfig``, litgpt's ``Config``).

Derived values (head size, logit scale, resolved arms, encoder widths) are computed in each
spec's ``__post_init__``, and validated there; the builders read them and hand the blocks numbers
and resolved objects.
"""

from lit_models.specs.classifier import ClassifierArgs, ClassifierSpec
from lit_models.specs.glimpse import FullViewSpec, RamSpec
from lit_models.specs.recurrent import CaptionerSpec, RecurrentEncoderSpec, RecurrentSeq2SeqSpec
from lit_models.specs.transformer import TransformerSpec

__all__ = ["CaptionerSpec", "ClassifierArgs", "ClassifierSpec", "FullViewSpec", "RamSpec", "RecurrentEncoderSpec",
           "RecurrentSeq2SeqSpec", "TransformerSpec"]
