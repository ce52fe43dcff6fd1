"""Options declared once in a frozen spec and shown flat under every class that takes them.

A spec (a frozen keyword-only dataclass, e.g. ``lit_models.decoder_training.DecoderTraining`` or
``datamodules.splits.SplitOptions``) declares a group of options with their types, defaults and docs.
A class that takes the group declares ``**options`` and calls a constructor from :func:`with_defaults`;
jsonargparse follows that ``**kwargs`` call (it reads the source), so the CLI shows the options flat
(``--model.lr``, ``--data.seed``) with the class's defaults and the spec's docs. :func:`flat_signature`
gives ``inspect.signature(cls)`` the same flat view.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def _narrowed(annotation: Any, default: Any) -> Any:
    """``X | None`` as ``X`` when a family gives the option a non-None default (``null`` stays refused)."""
    args = typing.get_args(annotation)
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    if default is None or not union or type(None) not in args:
        return annotation
    rest = tuple(a for a in args if a is not type(None))
    return rest[0] if len(rest) == 1 else typing.Union[rest]  # noqa: UP007


def with_defaults(spec: type[T], **defaults: Any) -> Callable[..., T]:
    """A constructor of ``spec`` whose signature carries ``defaults`` instead of the fields' own.

    The signature is what the CLI shows: every option, the spec's docstring as help, the family's
    defaults (an optional option the family gives a number is typed without ``None``). An unknown name
    is a TypeError at import.
    """
    fields = inspect.signature(spec, eval_str=True).parameters
    unknown = sorted(set(defaults) - set(fields))
    if unknown:
        raise TypeError(f"{spec.__name__} has no knob {', '.join(unknown)}")

    def construct(**options: Any) -> T:
        return spec(**{**defaults, **options})

    params = [p.replace(default=(d := defaults.get(name, p.default)), annotation=_narrowed(p.annotation, d))
              for name, p in fields.items()]
    construct.__signature__ = inspect.Signature(params, return_annotation=spec)  # type: ignore[attr-defined]
    construct.__doc__ = spec.__doc__
    return construct


def flat_signature(cls: type, construct: Callable[..., Any]) -> inspect.Signature | None:
    """``cls``'s own ``__init__`` arguments, then ``construct``'s options in place of its ``**options``
    (``None``, i.e. the plain signature, when its ``__init__`` takes no ``**options``)."""
    own = list(inspect.signature(cls.__init__).parameters.values())[1:]  # type: ignore[misc]
    if not any(p.kind is p.VAR_KEYWORD for p in own):
        return None
    options = inspect.signature(construct).parameters.values()
    return inspect.Signature([p for p in own if p.kind is not p.VAR_KEYWORD] + list(options))
