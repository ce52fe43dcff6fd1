"""One flat form of a config for run records, resumes and reports (``attnlab_core.flatkeys``)."""

from attnlab_core.flatkeys import flat_key, flat_options
from attnlab_run.trainer_setup import flatten


def test_flat_keys_drop_init_args_and_the_option_dashes():
    assert flat_key("--model.init_args.norm") == "model.norm"
    assert flat_key("model.init_args.encoder.init_args.layers") == "model.encoder.layers"
    assert flat_key("model.class_path") == "model.class_path"
    assert flat_key("data.init_args") == "data"


def test_a_saved_config_and_its_mapping_flatten_alike():
    config = {"seed_everything": 1, "model": {"class_path": "m.M", "init_args": {"norm": "pre", "lr": 0.1}},
              "trainer": {"callbacks": [{"class_path": "c.C"}], "max_steps": -1}, "data": {"init_args": None}}
    want = {"seed_everything": 1, "model.class_path": "m.M", "model.norm": "pre", "model.lr": 0.1,
            "trainer.callbacks": [{"class_path": "c.C"}], "trainer.max_steps": -1, "data": None}
    assert flat_options(config) == want
    dumped = ("seed_everything: 1\nmodel:\n  class_path: m.M\n  init_args:\n    norm: pre\n    lr: 0.1\n"
              "trainer:\n  callbacks:\n  - class_path: c.C\n  max_steps: -1\ndata:\n  init_args: null\n")
    assert flatten(dumped) == want
