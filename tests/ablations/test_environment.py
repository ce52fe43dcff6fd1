"""The environment record every run writes, and the disagreements the report warns about."""

from __future__ import annotations

import json

import lightning as L
import torch

from attnlab_run.environment import COMPARED, cpu_from_cpuinfo, differences, environment


def test_environment_names_hardware_versions_precision_and_determinism():
    trainer = L.Trainer(accelerator="cpu", devices=1, precision="bf16-mixed", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False)
    env = environment(trainer)
    assert set(COMPARED) <= set(env)
    assert env["torch"] == torch.__version__ and env["lightning"] == L.__version__
    assert env["precision"] == "bf16-mixed" and env["gpu"] is None and env["cpu"]
    assert env["deterministic"] is torch.are_deterministic_algorithms_enabled()
    json.dumps(env)  # summary.json must be able to hold it


def test_differences_lists_only_disagreeing_keys():
    a = {"cpu": "X", "gpu": None, "torch": "2.6", "lightning": "2.6", "precision": "32-true", "deterministic": False}
    assert differences([a, dict(a)]) == {}
    b = {**a, "gpu": "H100", "precision": "bf16-mixed"}
    assert differences([a, b, a]) == {"gpu": [None, "H100"], "precision": ["32-true", "bf16-mixed"]}
    assert differences([a, {}]) == {}, "runs without a record are reported separately, not as a disagreement"


def test_the_cpu_name_carries_family_model_and_stepping_so_two_generations_differ():
    block = ("processor\t: {n}\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: {m}\n"
             "model name\t: AMD EPYC\nstepping\t: 1\n")
    genoa = block.format(n=0, m=17) + "\n" + block.format(n=1, m=1)  # only the first processor is read
    assert cpu_from_cpuinfo(genoa) == "AMD EPYC (family 25, model 17, stepping 1)"
    assert cpu_from_cpuinfo(block.format(n=0, m=1)) != cpu_from_cpuinfo(genoa)
    assert cpu_from_cpuinfo("processor\t: 0\nmodel name\t: Some ARM core\n") == "Some ARM core"
    assert cpu_from_cpuinfo("processor\t: 0\nBogoMIPS\t: 50\n") is None
