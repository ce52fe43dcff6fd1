"""The memory a model's parameters will take, estimated from its options before it is built, and
refused in one line when it cannot fit (``--model.d_model=1073741824`` would otherwise allocate until
the machine kills the process).

The estimate builds the model on torch's ``meta`` device: every parameter gets its shape and no storage,
so the count is exact for the options given and costs no memory. Sizes the data fills in later
(vocabularies) count as the data's ``vocab_size`` when it gives one, else 1: the estimate is a lower
bound. A fit needs 16 bytes a parameter (fp32 weights, gradients and AdamW's two moments); an
evaluation 4. The bound it is held to is the memory this process can get: the machine's available
memory, a cgroup limit and ``RLIMIT_AS`` / ``RLIMIT_DATA``, whichever is smallest.

Not estimated: activations (they depend on the batch), and a model whose options name pre-trained weights
(building it downloads them) or whose constructor needs the data.
"""

from __future__ import annotations

import importlib
import resource
from pathlib import Path
from typing import Any

from attnlab_core.errors import UsageError

OVERFLOW = 2**63
"""The count given to a model with a tensor of more than 2**63 bytes (torch refuses to even describe it)."""
BYTES_PER_PARAMETER = {"fit": 16, "other": 4}
"""fp32 weights (4 B); a fit adds their gradients and AdamW's first and second moments."""


def available_bytes() -> int | None:
    """The memory this process can still get: MemAvailable, the cgroup's headroom, the rlimits'."""
    found: list[int] = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit.isdigit():
            used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
            found.append(int(limit) - used)
    except (OSError, ValueError):
        pass
    status = _proc_status()
    for which, used_key in ((resource.RLIMIT_AS, "VmSize"), (resource.RLIMIT_DATA, "VmData")):
        soft = resource.getrlimit(which)[0]
        if soft != resource.RLIM_INFINITY:
            found.append(soft - status.get(used_key, 0))
    return min(found) if found else None


def _proc_status() -> dict[str, int]:
    out = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if value.strip().endswith("kB"):
                out[key] = int(value.split()[0]) * 1024
    except (OSError, ValueError):
        pass
    return out


def parameter_count(class_path: str, init_args: dict[str, Any], *, vocab_size: int | None) -> int | None:
    """The parameters of ``class_path(**init_args)``, counted on the meta device; None when it cannot be
    built that way (pre-trained weights named, a constructor that needs the data, an unknown class)."""
    import torch

    if init_args.get("weights"):
        return None
    args = {k: (vocab_size or 1) if v is None and k.endswith("vocab_size") else v for k, v in init_args.items()}
    module, _, name = class_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
        with torch.device("meta"):
            model = cls(**args)
        return sum(p.numel() for p in model.parameters())
    except RuntimeError as err:
        return OVERFLOW if "overflow" in str(err) else None  # a tensor larger than torch can index
    except Exception:  # noqa: BLE001 - no estimate; the real build reports its own problem
        return None


def check_model_memory(class_path: str | None, init_args: dict[str, Any], *, subcommand: str,
                       vocab_size: int | None = None, given: tuple[str, ...] = ()) -> None:
    """Refuse a model whose parameters alone need more memory than this process can get, in one line
    naming the options (``given``: the ``--model.*`` options of the command line), the estimate and
    the memory available."""
    if not class_path:
        return
    count = parameter_count(class_path, init_args, vocab_size=vocab_size)
    limit = available_bytes()
    if count is None or limit is None:
        return
    per = BYTES_PER_PARAMETER["fit" if subcommand == "fit" else "other"]
    need = count * per
    if need > limit:
        named = f" ({', '.join(given)})" if given else ""
        if count >= OVERFLOW:
            raise UsageError(f"the model{named} has a parameter tensor of more than 2^63 bytes, which torch cannot "
                             f"allocate (the memory available is {_size(limit)}); choose smaller --model sizes")
        raise UsageError(f"the model{named} has {count:,} parameters: at least {_size(need)} for {subcommand} "
                         f"({per} bytes a parameter), more than the {_size(limit)} of memory available; "
                         "choose smaller --model sizes")


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"


def check_config_memory(cfg: Any, *, subcommand: str, argv: tuple[str, ...] = ()) -> None:
    """:func:`check_model_memory` of a parsed subcommand config (``argv``: the command line, for the message)."""
    model, data = cfg.get("model"), cfg.get("data")
    init_args = model.get("init_args") if model is not None else None
    data_args = data.get("init_args") if data is not None else None
    vocab = data_args.get("vocab_size") if data_args is not None else None
    check_model_memory(model.get("class_path") if model is not None else None,
                       dict(vars(init_args)) if init_args is not None else {}, subcommand=subcommand,
                       vocab_size=vocab if isinstance(vocab, int) else None,
                       given=tuple(a for a in argv if a.startswith("--model.") and "=" in a))
