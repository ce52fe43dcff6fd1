"""Model sizes checked once, before any arithmetic with them: every width, count and layer number a
model takes is a positive integer, and the attention width splits evenly over the heads.

The CLI calls :func:`check_model_sizes` on the parsed ``--model`` options (so a bad value is refused
at parse time, naming its option, before any run directory exists); the builders call
:func:`head_size` (through ``lit_models.specs.TransformerSpec``) so a model built from Python is held
to the same rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from attnlab_core.errors import UsageError

SIZES = frozenset({
    "d_model", "heads", "d_ff", "layers", "encoder_layers", "decoder_layers", "num_layers", "embed_dim",
    "hidden_size", "attn_size", "max_positions", "grid_size", "cnn_width", "num_classes", "in_channels",
    "glimpses", "patch_size", "scales", "scale_factor", "glimpse_hidden", "location_hidden", "glimpse_size",
    "canvas_size",
    "src_vocab_size", "tgt_vocab_size", "vocab_size",
})
"""Model arguments that count something (a width, a number of heads, layers or positions): each must be >= 1."""


def _finite(v: float) -> bool:
    return math.isfinite(v)


RANGES: dict[str, tuple[str, Callable[[float], bool]]] = {
    "lr": ("a finite number > 0", lambda v: _finite(v) and v > 0),
    "weight_decay": ("a finite number >= 0", lambda v: _finite(v) and v >= 0),
    "label_smoothing": ("a number in [0, 1)", lambda v: 0 <= v < 1),
    "warmup_steps": ("an integer >= 0", lambda v: float(v).is_integer() and v >= 0),
    "scheduled_steps": ("an integer >= 1", lambda v: float(v).is_integer() and v >= 1),
    "scheduled_floor": ("a number in [0, 1]", lambda v: 0 <= v <= 1),
}
"""Training knobs (declared in ``optim.Optimisation`` and ``decoder_training.Feeding``) and the values they
may take: (the rule in words, a test). A value outside would crash or silently misbehave later (a
negative learning rate climbs the loss, ``1e400`` parses as infinity, label smoothing >= 1 inverts it)."""


def check_model_values(values: Mapping[str, Any], *, prefix: str = "--model.") -> None:
    """Refuse any :data:`RANGES` entry of ``values`` outside its range, naming the option and the rule."""
    for name in sorted(RANGES.keys() & set(values)):
        value, (rule, ok) = values[name], RANGES[name]
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not ok(value):
            raise UsageError(f"{prefix}{name}={value} is not allowed: it must be {rule}")


class RangeChecked:
    """Base of a frozen dataclass of training knobs (``optim.Optimisation``, ``decoder_training.Feeding``): its
    fields named in :data:`RANGES` are checked when it is built, once for a class combining several groups."""

    def __post_init__(self) -> None:
        check_model_values(vars(self), prefix="")


def check_model_sizes(values: Mapping[str, Any], *, prefix: str = "--model.") -> None:
    """Refuse any :data:`SIZES` entry of ``values`` that is not a positive integer, and a ``d_model``
    that ``heads`` does not divide; the message names the option (``prefix`` + name) and the rule.
    Training knobs are held to :data:`RANGES` (:func:`check_model_values`).

    Values left unset (None, e.g. vocabulary sizes filled in later from the data) are not checked.
    """
    check_model_values(values, prefix=prefix)
    for name in sorted(SIZES & set(values)):
        value = values[name]
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(f"{prefix}{name}={value} is not allowed: it must be a positive integer (>= 1)")
    d_model, heads = values.get("d_model"), values.get("heads")
    if isinstance(d_model, int) and isinstance(heads, int):
        head_size(d_model=d_model, heads=heads)


def head_size(*, d_model: int, heads: int) -> int:
    """Vaswani et al. 2017 §3.2.2: ``h`` heads of width ``d_k = d_model / h``; both positive and
    ``h`` divides ``d_model``. Returns d_k; the one place the split is checked."""
    for name, value in (("d_model", d_model), ("heads", heads)):
        if value < 1:
            raise UsageError(f"{name}={value} is not allowed: it must be a positive integer (>= 1)")
    if d_model % heads:
        raise UsageError(f"d_model={d_model} is not divisible by heads={heads}")
    return d_model // heads


def kv_head_count(*, heads: int, kv_heads: int | None) -> int:
    """Grouped-query attention (Ainslie et al. 2023): G = ``kv_heads`` key/value heads, each shared by h/G query
    heads, so G is positive and divides h; None means h (multi-head). Returns G."""
    if kv_heads is None:
        return heads
    if isinstance(kv_heads, bool) or kv_heads < 1 or heads % kv_heads:
        raise UsageError(f"kv_heads={kv_heads} is not allowed: it must be a positive divisor of heads={heads} "
                         "(1 = multi-query, heads = multi-head)")
    return kv_heads


def check_data_matches(module: Any, names: Iterable[str]) -> None:
    """A one-line UsageError when the trainer's datamodule declares one of ``names`` (e.g. ``num_classes``,
    ``in_channels``) with a value other than the module's hyper-parameter of that name; a module without a
    trainer, or data that does not declare the name, passes."""
    dm = module.trainer.datamodule if module._trainer is not None else None
    for name in names:
        value = getattr(dm, name, None)
        if value is not None and value != module.hparams[name]:
            raise UsageError(f"the data has {name}={value} but --model.init_args.{name}={module.hparams[name]}")
