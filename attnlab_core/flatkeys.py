"""The flat form of a LightningCLI config: dotted keys without ``init_args`` (``model.init_args.norm`` ->
``model.norm``), as run records, resumes, W&B configs and reports compare them."""

from __future__ import annotations

from typing import Any


def flat_key(key: str) -> str:
    """``--model.init_args.norm`` -> ``model.norm``; ``class_path`` stays as ``<group>.class_path``."""
    return key.removeprefix("--").replace(".init_args.", ".").removesuffix(".init_args")


def flat_options(node: Any, prefix: str = "") -> dict[str, Any]:
    """A nested config mapping -> {flat key: leaf value}; a non-mapping ``node`` is one leaf named ``prefix``."""
    if not isinstance(node, dict):
        return {flat_key(prefix): node}
    out: dict[str, Any] = {}
    for key, value in node.items():
        out.update(flat_options(value, f"{prefix}.{key}" if prefix else str(key)))
    return out
