"""The environment a run ran in, recorded in summary.json so a report can warn when the arms of
one question ran on different hardware or library versions (a confound of any comparison).

``environment(trainer)`` -> ``{"cpu", "gpu", "accelerator", "devices", "threads", "torch", "lightning",
"python", "precision", "deterministic"}``; every value a plain string, int or bool.
"""

from __future__ import annotations

import functools
import platform
from pathlib import Path
from typing import Any

import lightning as L
import torch

# The keys whose disagreement across the arms of one question the report warns about.
COMPARED = ("cpu", "gpu", "torch", "lightning", "precision", "deterministic")
CPU_IDS = (("cpu family", "family"), ("model", "model"), ("stepping", "stepping"))
"""``/proc/cpuinfo`` keys that tell CPUs of one model name apart, and how ``cpu_model`` labels them."""


@functools.cache
def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else ``platform.processor()``), with its x86 family,
    model and stepping where ``/proc/cpuinfo`` gives them (``cpu_from_cpuinfo``)."""
    try:
        found = cpu_from_cpuinfo(Path("/proc/cpuinfo").read_text())
    except OSError:
        found = None
    return found or platform.processor() or platform.machine() or "unknown"


def cpu_from_cpuinfo(text: str) -> str | None:
    """``model name (family F, model M, stepping S)`` of the first processor in ``/proc/cpuinfo`` text, or the name
    alone where those fields are missing; None without a model name.

    A virtual machine may show only a family name ("AMD EPYC"): two such machines of different generations then
    read alike, while their trials differ in speed (two "AMD EPYC" machines ran the quick ``norm`` trials about 1.45x
    apart, docs/benchmarks-history.md); the numbers tell them apart, so reports and the time benchmark do too.
    """
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the first processor's block ends
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name")
    if not name:
        return None
    ids = [f"{label} {fields[key]}" for key, label in CPU_IDS if fields.get(key)]
    return f"{name} ({', '.join(ids)})" if len(ids) == len(CPU_IDS) else name


def gpu_model(trainer: L.Trainer | None) -> str | None:
    """The CUDA device's name when the run uses one, else None."""
    root = getattr(getattr(trainer, "strategy", None), "root_device", None)
    if root is None or root.type != "cuda" or not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_name(root)


def environment(trainer: L.Trainer | None = None) -> dict[str, Any]:
    """Hardware, library versions, precision and determinism of the current process (and ``trainer``)."""
    deterministic = torch.are_deterministic_algorithms_enabled()
    return {
        "cpu": cpu_model(),
        "gpu": gpu_model(trainer),
        "accelerator": type(getattr(trainer, "accelerator", None)).__name__ if trainer is not None else None,
        "devices": int(getattr(trainer, "num_devices", 1) or 1) if trainer is not None else 1,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "lightning": L.__version__,
        "python": platform.python_version(),
        "precision": str(getattr(trainer, "precision", "32-true")) if trainer is not None else None,
        "deterministic": bool(deterministic),
    }


def differences(records: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Key -> the distinct values seen, for each ``COMPARED`` key on which the (non-empty) records disagree."""
    out: dict[str, list[Any]] = {}
    for key in COMPARED:
        seen: list[Any] = []
        for record in records:
            if record and record.get(key) not in seen:
                seen.append(record.get(key))
        if len(seen) > 1:
            out[key] = seen
    return out
