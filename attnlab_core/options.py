"""Options declared once in a frozen spec and shown flat under every class that takes them.

A spec (a frozen keyword-only dataclass, e.g. ``lit_models.training.decoder_training.DecoderTraining`` or
``datamodules.splits.SplitOptions``) declares a group of options with their types, defaults and docs.
A class that takes the group declares ``**options`` and calls a constructor from :func:`with_defaults`;
jsonargparse follows that ``**kwargs`` call (it reads the source), so the CLI shows the options flat
(``--model.lr``, ``--data.seed``) with the class's defaults and the spec's docs. :func:`flat_signature`
gives ``inspect.signature(cls)`` the same flat view. :func:`compose` joins several groups into one
``**options`` (an architecture, then the training knobs), in the order the CLI shows them.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
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


def field_docs(spec: type | Callable[..., Any]) -> dict[str, str]:
    """``name -> text`` of the ``Args:`` sections of ``spec``'s Google-style docstring and of its base classes'
    (a spec extending another documents only its own fields; one name a line; indented lines continue the
    entry above)."""
    docs: dict[str, str] = {}
    for owner in reversed(getattr(spec, "__mro__", (spec,))):
        docs.update(_args_section(inspect.cleandoc(owner.__doc__ or "")))
        docs.update(vars(owner).get("included_docs", {}))
    return docs


def _args_section(doc: str) -> dict[str, str]:
    docs: dict[str, str] = {}
    _, _, args = doc.partition("Args:\n")
    name = None
    for line in args.splitlines():
        entry = re.match(r"^    (\w+): (.*)$", line)
        if entry:
            name, docs[entry[1]] = entry[1], entry[2]
        elif name and line.startswith("     "):
            docs[name] += " " + line.strip()
        elif line.strip():
            break  # the section after Args (e.g. "Derived ...")
    return docs


def _docstring(summary: str, docs: Mapping[str, str]) -> str:
    return summary + "\n\nArgs:\n" + "".join(f"    {name}: {text}\n" for name, text in docs.items())


def with_defaults(
    spec: type[T], *, rename: Mapping[str, str] | None = None, fixed: Mapping[str, Any] | None = None,
    **defaults: Any,
) -> Callable[..., T]:
    """A constructor of ``spec`` whose signature carries ``defaults`` instead of the fields' own.

    The signature is what the CLI shows: every option, the spec's docstring as help, the family's
    defaults (an optional option the family gives a number is typed without ``None``). A family may
    show a field under another name (``rename``: field -> shown name; ``defaults`` use the shown name)
    or pin it (``fixed``: field -> value, not an option). An unknown name is a TypeError at import.
    """
    rename, fixed = dict(rename or {}), dict(fixed or {})
    hints = typing.get_type_hints(spec)  # each field's type in its own class's module (a spec may extend another's)
    fields = {name: p.replace(annotation=hints.get(name, p.annotation))
              for name, p in inspect.signature(spec).parameters.items()}
    shown = {rename.get(name, name): name for name in fields if name not in fixed}
    unknown = sorted((set(rename) | set(fixed)) - set(fields) | set(defaults) - set(shown))
    if unknown:
        raise TypeError(f"{spec.__name__} has no knob {', '.join(unknown)}")

    def construct(**options: Any) -> T:
        given = {**defaults, **options}
        return spec(**fixed, **{shown[name]: value for name, value in given.items()})

    params = [fields[field].replace(name=name, default=(d := defaults.get(name, fields[field].default)),
                                    annotation=_narrowed(fields[field].annotation, d))
              for name, field in shown.items()]
    construct.__signature__ = inspect.Signature(params, return_annotation=spec)  # type: ignore[attr-defined]
    docs = field_docs(spec)
    summary = (inspect.getdoc(spec) or "").split("\n\n")[0]
    construct.__doc__ = _docstring(summary, {name: docs[field] for name, field in shown.items() if field in docs})
    return construct


def include(
    spec: type, *, after: str, omit: tuple[str, ...] = (), prefix: str = "", **defaults: Any,
) -> Callable[[type[T]], type[T]]:
    """A class decorator, under ``@dataclass``, that gives the class ``spec``'s fields (their types, defaults
    and docs, declared once in ``spec``) after its own field ``after``: a spec whose options include
    another's (the classifier's Transformer encoder) declares none of them twice.

    A field the class declares itself is shared (its value goes to both); ``omit`` names fields the class
    does not show; ``defaults`` replace ``spec``'s; ``prefix`` starts each included field's doc (in
    ``included_docs``, which :func:`field_docs` reads). An unknown name is a TypeError at import.
    ``pick(obj, spec)`` gives back the values ``spec`` takes.
    """

    def add(cls: type[T]) -> type[T]:
        own = dict(vars(cls).get("__annotations__", {}))
        taken = {name: p for name, p in inspect.signature(spec).parameters.items()
                 if name not in omit and name not in own}
        unknown = sorted(set(omit) - set(inspect.signature(spec).parameters) | set(defaults) - set(taken)
                         | {after} - set(own))
        if unknown:  # a default for a shared or omitted field would be silently unused: refused too
            raise TypeError(f"{cls.__name__} includes {spec.__name__}: no included field {', '.join(unknown)}")
        required = sorted(name for name, p in taken.items() if p.default is p.empty and name not in defaults)
        if required:
            raise TypeError(f"{cls.__name__} includes {spec.__name__}: give {', '.join(required)} a default")
        hints = typing.get_type_hints(spec)
        annotations: dict[str, Any] = {}
        for name, annotation in own.items():
            annotations[name] = annotation
            if name == after:
                annotations.update({name: hints[name] for name in taken})
        for name, p in taken.items():
            setattr(cls, name, defaults.get(name, p.default))
        cls.__annotations__ = annotations
        docs = field_docs(spec)
        cls.included_docs = {name: prefix + docs[name] for name in taken if name in docs}  # type: ignore[attr-defined]
        return cls

    return add


def pick(obj: object, spec: type[T], **given: Any) -> T:
    """``spec`` built from ``obj``'s attributes of the same names as its fields (what :func:`include` gave
    ``obj``'s class, and the fields it shares), then ``given``."""
    names = set(inspect.signature(spec).parameters) - set(given)
    return spec(**{name: getattr(obj, name) for name in names if hasattr(obj, name)}, **given)


class Groups(tuple):
    """What :func:`compose`'s constructor returns: one object per group, and ``values``, every option
    under its shown name with the value it took (given, else the family's default)."""

    values: dict[str, Any]


def compose(*groups: Callable[..., Any]) -> Callable[..., Groups]:
    """One constructor of several groups (each from :func:`with_defaults`): its signature is theirs in
    order, its docstring their ``Args``; it returns :class:`Groups`. A name in two groups, or one in
    none, is a TypeError."""
    params = [p for group in groups for p in inspect.signature(group).parameters.values()]
    names = [p.name for p in params]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise TypeError(f"options declared by two groups: {', '.join(twice)}")
    owner = [set(inspect.signature(group).parameters) for group in groups]

    def construct(**options: Any) -> Groups:
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise TypeError(f"no knob {', '.join(unknown)}")
        pairs = zip(groups, owner, strict=True)
        built = Groups(group(**{k: v for k, v in options.items() if k in own}) for group, own in pairs)
        built.values = {p.name: options.get(p.name, p.default) for p in params}
        return built

    construct.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    docs = {k: v for group in groups for k, v in field_docs(group).items()}  # type: ignore[arg-type]
    construct.__doc__ = _docstring((groups[0].__doc__ or "").split("\n\n")[0] if groups else "", docs)
    return construct


def flat_signature(cls: type, construct: Callable[..., Any]) -> inspect.Signature | None:
    """``cls``'s own ``__init__`` arguments, then ``construct``'s options in place of its ``**options``
    (``None``, i.e. the plain signature, when its ``__init__`` takes no ``**options``)."""
    own = list(inspect.signature(cls.__init__).parameters.values())[1:]  # type: ignore[misc]
    if not any(p.kind is p.VAR_KEYWORD for p in own):
        return None
    options = inspect.signature(construct).parameters.values()
    return inspect.Signature([p for p in own if p.kind is not p.VAR_KEYWORD] + list(options))


class TakesOptions:
    """A class whose ``__init__`` takes ``**options``: the groups in ``option_groups`` (constructors from
    :func:`with_defaults`), composed once per subclass into ``options`` (what ``**options`` go to), with
    ``inspect.signature(cls)`` flat (:func:`flat_signature`: what the checkpoint guard and tests read).

    A subclass's ``__init__`` calls ``groups = self.options(**options)``, builds from the groups, and calls
    ``save_options(groups)`` after its ``save_hyperparameters()``.
    """

    option_groups: typing.ClassVar[tuple[Callable[..., Any], ...]] = ()
    """The class's groups of options, in the order the CLI shows them."""
    options: typing.ClassVar[Callable[..., Groups]]
    """``compose(*all_option_groups())``, set for each subclass."""

    @classmethod
    def all_option_groups(cls) -> tuple[Callable[..., Any], ...]:
        """Every group ``**options`` takes (a base may add its own after the family's ``option_groups``)."""
        return cls.option_groups

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.options = staticmethod(compose(*cls.all_option_groups()))
        cls.__signature__ = flat_signature(cls, cls.options)  # type: ignore[attr-defined]

    def save_options(self, groups: Groups) -> None:
        """Record every option, given or left at the family's default, as a hyper-parameter (after the
        family's ``save_hyperparameters()``, which records the ones given)."""
        self.save_hyperparameters(groups.values)  # type: ignore[attr-defined]
