"""One clear line for bad input: user-facing errors and condensed parser errors."""

from __future__ import annotations

import re


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
    expected = re.search(r"Expected a (<class '(\w+)'>|[^.]+)\. Got value: (.+)", text)
    if expected:
        kind = expected.group(2) or expected.group(1)
        return f"{_path(keys)}={expected.group(3).strip()} is not a valid {kind}"
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), text)
    return first if len(keys) == 0 else f"{_path(keys)}: {text.splitlines()[-1].strip()}"


def _path(keys: list[str]) -> str:
    parts = [k for k in keys if k != "init_args"]
    return "--" + ".".join(parts) if parts else "argument"
