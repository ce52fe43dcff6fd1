"""YAML read for user files (``--config``, sweep files): refused in one line when a key repeats in a
mapping (YAML 1.2 requires unique keys; PyYAML keeps the last silently) or when aliases expand the
document past :data:`MAX_EXPANDED` values (an alias bomb: nine aliases per level, eight levels, is a
small file that expands to 9^8 values; PyYAML builds it shared, but whatever walks it, such as
jsonargparse, expands it in memory).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from attnlab_core.errors import UsageError

MAX_EXPANDED = 200_000
"""The most scalars, sequences and mappings a user YAML document may count once its aliases are expanded."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping with a repeated key."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise UsageError(f"{self.name}:{line}: duplicate key {key!r} (first at line {seen[key]}); "
                                 "each key may appear once in a mapping")
            if isinstance(key, (str, int, float, bool)):
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def expanded_size(node: yaml.Node, memo: dict[int, int] | None = None, limit: int = MAX_EXPANDED) -> int:
    """How many nodes ``node`` stands for once every alias is written out (stops counting past ``limit``)."""
    memo = {} if memo is None else memo
    if id(node) in memo:
        return memo[id(node)]
    total = 1
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            total += expanded_size(child, memo, limit)
            if total > limit:
                break
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            total += expanded_size(key, memo, limit) + expanded_size(value, memo, limit)
            if total > limit:
                break
    memo[id(node)] = total
    return total


def load_user_yaml(path: Path) -> Any:
    """The YAML document in ``path``; a UsageError naming the file (and line) when it is malformed, not
    UTF-8, repeats a key, or expands through aliases past :data:`MAX_EXPANDED` values."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        loader = _UniqueKeyLoader(text)
        loader.name = str(path)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            if expanded_size(node) > MAX_EXPANDED:
                raise UsageError(f"{path}: its aliases expand to more than {MAX_EXPANDED:,} values (an alias bomb?); "
                                 "write the values out")
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise UsageError(f"{path}{line}: malformed YAML ({err.problem or err.context})") from None
    except yaml.YAMLError as err:
        raise UsageError(f"{path}: malformed YAML ({str(err)[:200]})") from None
    except UnicodeDecodeError as err:
        raise UsageError(f"{path}: not valid UTF-8 ({err.reason})") from None


def check_config_files(argv: list[str]) -> None:
    """Every ``--config`` file must hold a mapping of options in well-formed YAML (``file:line: problem``
    otherwise, also for a repeated key or an alias bomb: :func:`attnlab_core.yamlfile.load_user_yaml`)."""
    for path in config_paths(argv):
        data = load_user_yaml(path)
        if data is None:
            raise UsageError(f"{path}: the config file is empty; it must hold a mapping of options "
                             "(e.g. trainer:, model:)")
        if not isinstance(data, dict):
            raise UsageError(f"{path}: the config file holds a {type(data).__name__}, not a mapping of options "
                             "(e.g. trainer:, model:)")


def config_paths(argv: list[str]) -> list[Path]:
    """Existing files named by ``--config X``, ``--config=X`` or ``-c X`` (others are left to the parser)."""
    out = []
    for i, arg in enumerate(argv):
        value = None
        if arg in ("--config", "-c") and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--config="):
            value = arg.split("=", 1)[1]
        if value and Path(value).is_file():
            out.append(Path(value))
    return out
