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


@functools.cache
def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else ``platform.processor()``)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


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
