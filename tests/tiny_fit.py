"""The smallest real ``attnlab fit`` config, for tests that run the CLI in a subprocess: a one-layer
TransformerSeq2Seq on SyntheticSeq2Seq, on the CPU, without progress bar or model summary."""

from __future__ import annotations


def tiny_fit(*, seed: int, max_epochs: int, **data: object) -> dict:
    """The config (as YAML loads it): ``seed_everything=seed``, ``max_epochs`` and the data options ``data``."""
    return {
        "seed_everything": seed,
        "trainer": {"max_epochs": max_epochs, "accelerator": "cpu", "devices": 1, "enable_model_summary": False,
                    "enable_progress_bar": False},
        "model": {"class_path": "lit_models.families.seq2seq.TransformerSeq2Seq",
                  "init_args": {"d_model": 16, "heads": 2, "d_ff": 32, "encoder_layers": 1, "decoder_layers": 1}},
        "data": {"class_path": "datamodules.synthetic.SyntheticSeq2Seq", "init_args": data},
    }
