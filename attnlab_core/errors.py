"""One clear line for bad input: user-facing errors and condensed parser errors."""

from __future__ import annotations

import argparse
import re


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad option is one line (``prog: error: ...``, exit 2) without the usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


class UsageError(ValueError):
    """A problem with the user's input (config, data, paths); the CLI prints it as one line, exit 2."""


def condense_parser_error(err: BaseException) -> str | None:
    """Turn jsonargparse's nested error report into one line, or None if ``err`` is not a parse error."""
    if type(err).__name__ not in ("ArgumentError", "ParserError", "NSKeyError"):
        return None
    text = str(err)
    keys = re.findall(r'[Kk]ey "([^"]+)"', text)
    literal = re.search(r"Expected a typing\.Literal\[([^\]]*)\]\. Got value: (\S+)", text)
    if literal:
        allowed = ", ".join(v.strip().strip("'\"") for v in literal.group(1).split(","))
        return f"{_path(keys)}={literal.group(2)} is not allowed; choose one of: {allowed}"
    unaccepted = re.search(r"Problem with given class_path '([\w.]+)':\s*Option '([^']+)' is not accepted", text)
    if unaccepted:
        return f"{_path(keys)}.{unaccepted.group(2)} is not an option of {unaccepted.group(1)}"
    expected = re.search(r"Expected a (<class '(\w+)'>|[^.]+)\. Got value: (.+)", text)
    if expected:
        kind = expected.group(2) or expected.group(1)
        return f"{_path(keys)}={expected.group(3).strip()} is not a valid {kind}"
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), text)
    return first if len(keys) == 0 else f"{_path(keys)}: {text.splitlines()[-1].strip()}"


def _path(keys: list[str]) -> str:
    parts = [k for k in keys if k != "init_args"]
    return "--" + ".".join(parts) if parts else "argument"


def user_error_line(err: BaseException) -> str | None:
    """One line for an error caused by the user's input, or None for anything else (a real bug).

    Recognised: :class:`UsageError` anywhere in the exception chain; jsonargparse parse errors;
    a constructor's ``ValueError`` that jsonargparse wrapped while instantiating a class (e.g.
    ``d_model=16 is not divisible by heads=3``); a ``ValueError`` raised by our own blocks or
    builders while checking their configuration against the data (e.g. the learned position table).
    """
    line = _user_error_line(err)
    return bounded(line) if line is not None else None


MAX_LINE = 1000
"""The most characters of one error line (a value quoted in a message may be huge: an expanded YAML alias)."""


def bounded(text: str, limit: int = MAX_LINE) -> str:
    """``text`` on one line, cut to ``limit`` characters with a note of how many were left out."""
    flat = " ".join(text.split("\n")) if "\n" in text else text
    return flat if len(flat) <= limit else f"{flat[:limit]}... ({len(flat) - limit:,} more characters)"


def _user_error_line(err: BaseException) -> str | None:
    for link in exception_chain(err):
        if isinstance(link, UsageError):
            return _worker_message(str(link))
    parsed = condense_parser_error(err)
    if parsed is not None:
        return parsed
    if isinstance(err, ValueError):
        inner = _instantiation_error(str(err))
        if inner is not None:
            return inner
        if _raised_in(err, ("lit_models/blocks/", "lit_models/builders.py")):
            return str(err)
    return None


def _worker_message(text: str) -> str:
    """A DataLoader worker's error arrives as "Caught X in DataLoader worker ... Original Traceback ...
    X: message"; keep the message."""
    if "Original Traceback" not in text:
        return text
    last = text.strip().splitlines()[-1]
    return last.split(f"{UsageError.__name__}: ", 1)[-1]


def exception_chain(err: BaseException) -> list[BaseException]:
    """``err`` and every exception it was raised from or during (``__cause__``, else ``__context__``), outermost
    first; a chain that loops back is cut where it repeats. The one walker of exception chains."""
    out: list[BaseException] = []
    node: BaseException | None = err
    while node is not None and node not in out:
        out.append(node)
        node = node.__cause__ or node.__context__
    return out


def _instantiation_error(text: str) -> str | None:
    """The constructor's own message inside jsonargparse's "Does not validate against any of the Union subtypes"."""
    if "Does not validate against any of the Union subtypes" not in text or "\nErrors:" not in text:
        return None
    errors = [ln.strip()[2:] for ln in text.split("\nErrors:", 1)[1].splitlines() if ln.strip().startswith("- ")]
    own = [e for e in errors if not e.startswith("Expected a ")]
    return own[0] if own else None


def _raised_in(err: BaseException, places: tuple[str, ...]) -> bool:
    tb = err.__traceback__
    last = None
    while tb is not None:
        last, tb = tb, tb.tb_next
    return last is not None and any(p in last.tb_frame.f_code.co_filename.replace("\\", "/") for p in places)
