"""Sweep files and trial commands as W&B renders them: reading and validating a sweep YAML with
W&B's own schema, the values the engine can propose, ``wandb agent``'s command rendering
(``${env} ${interpreter} ${program} ... ${args}``, values rendered ``--key=value`` with ``str()``)
and readable trial names.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from attnlab_core.errors import UsageError
from attnlab_core.yamlfile import load_user_yaml
from attnlab_run.rundir import check_name, safe_name

DEFAULT_COMMAND = ["${env}", "${interpreter}", "${program}", "${args}"]  # wandb's DEFAULT_SWEEP_COMMAND
ENVVAR_MACRO = re.compile(r"\$\{envvar:([A-Z0-9_]*)\}")  # wandb's SWEEP_COMMAND_ENV_VAR_REGEX
SEED_KEY = "seed_everything"


class SweepError(ValueError):
    """A sweep file that cannot run (schema violation, unknown method without a bound, ...)."""


# ---------------------------------------------------------------- sweep files
def load_sweep(path: str | Path) -> dict[str, Any]:
    """Read a sweep YAML file into a dict; SweepError naming the file (and line) when it is not readable
    YAML, not a mapping, or its ``name`` (the experiment folder of its trials) is not a safe name."""
    try:
        data = load_user_yaml(Path(path))
    except UsageError as err:  # malformed, not UTF-8, a repeated key, an alias bomb: file:line and the problem
        raise SweepError(str(err)) from None
    except OSError as err:
        raise SweepError(f"{path}: cannot read the sweep file ({err})") from None
    if not isinstance(data, dict):
        raise SweepError(f"{path}: a sweep file must be a YAML mapping")
    if "name" in data:
        try:
            check_name(str(data["name"]), option="name")
        except UsageError as err:
            raise SweepError(f"{path}: {err}") from None
    data.setdefault("name", safe_name(Path(path).stem))
    if data.get("method") == "bayes" and not isinstance(data.get("metric"), dict):
        raise SweepError(f"{path}: method bayes needs a metric to model (metric: {{name: val/loss, goal: minimize}})")
    for key, spec in (data.get("parameters") or {}).items():
        spec = spec if isinstance(spec, dict) else {}
        given = [spec["value"]] if "value" in spec else spec.get("values") or []
        if None in given:
            raise SweepError(f"{path}: parameter {key} has the value null, which the agent passes as the string "
                             "'None'; remove it (leave the parameter out to keep the config's default)")
    return data


CHECKED_GROUPS = ("model", "data", "trainer", "run", "decode")
"""Parameter groups whose option names :func:`check_parameters` knows (``group.option``)."""


def check_parameters(sweep: Mapping[str, Any], *, path: str | Path, cwd: Path) -> None:
    """Every ``group.option`` parameter names an option of the class the sweep's command configures,
    so a misspelt parameter fails the sweep (and ``--dry-run``) instead of every trial.

    ``cwd`` is where trials run (relative ``--config`` paths are read from there). Parameters of
    other groups, nested ones (``model.a.b``) and groups whose class is unknown are not checked.
    """
    import difflib

    from attnlab_run.conventions import option_choices, option_names

    command = render_command(sweep, {})
    argv = [str(cwd / a) if not Path(a).is_absolute() and (cwd / a).is_file() else a for a in command]
    argv = [f"--config={cwd / a[9:]}" if a.startswith("--config=") and (cwd / a[9:]).is_file() else a for a in argv]
    for key in sweep.get("parameters") or {}:
        group, _, option = str(key).partition(".")
        option = option.removeprefix("init_args.")
        if group not in CHECKED_GROUPS or not option or "." in option:
            continue
        known = option_names(group, argv)
        if known and option not in known:
            close = difflib.get_close_matches(option, known, n=1, cutoff=0.6)
            hint = f"; did you mean {group}.{close[0]}?" if close else ""
            raise SweepError(f"{path}: parameter {key}: no option {group}.{option}{hint}")
        allowed = option_choices(group, argv).get(option)
        spec = sweep["parameters"][key] if isinstance(sweep["parameters"][key], dict) else {}
        wrong = [v for v in ([spec["value"]] if "value" in spec else spec.get("values") or []) if allowed
                 and v not in allowed]
        if wrong:
            raise SweepError(f"{path}: parameter {key} has the value {wrong[0]!r}, which --{group}.{option} does not "
                             f"allow; choose from: {', '.join(map(str, allowed))}")


def applicable_args(args: list[str], config: Path) -> list[str]:
    """The arguments of ``args`` (``--group.option=value``) that the class ``config`` gives their group accepts:
    a question's quick flags for a baseline arm that runs another config (``Question.baselines``). Arguments of
    other groups, nested ones and those of a class that cannot be found are kept."""
    from attnlab_run.conventions import option_names

    out = []
    for arg in args:
        group, _, option = arg.removeprefix("--").split("=", 1)[0].partition(".")
        option = option.removeprefix("init_args.")
        checked = group in CHECKED_GROUPS and option and "." not in option
        known = option_names(group, [f"--config={config}"]) if checked else []
        if not known or option in known:
            out.append(arg)
    return out


def schema_violations(sweep: Mapping[str, Any]) -> list[str]:
    """W&B's own validation of a sweep config (``sweeps.schema_violations_from_proposed_config``)."""
    from sweeps import schema_violations_from_proposed_config

    return list(schema_violations_from_proposed_config(dict(sweep)))


def varied_keys(sweep: Mapping[str, Any]) -> list[str]:
    """Parameters that take more than one value (everything but ``value:`` constants), sorted."""
    return sorted(k for k, spec in sweep.get("parameters", {}).items() if "value" not in spec)


def to_python(value: Any) -> Any:
    """numpy scalars (what the engine proposes for distributions) -> plain Python, as JSON would give."""
    return value.item() if hasattr(value, "item") and not isinstance(value, (list, dict, str)) else value


def proposable_values(name: str, spec: Mapping[str, Any]) -> list[Any]:
    """Every value the engine can propose for a categorical/constant parameter; for a distribution,
    its minimum, median and (almost) maximum as the engine would render them."""
    if "values" in spec:
        return list(spec["values"])
    if "value" in spec:
        return [spec["value"]]
    import numpy as np
    from sweeps.params import HyperParameter

    quantiles = np.array([0.0, 0.5, 1.0 - 1e-9])
    return [to_python(v) for v in np.atleast_1d(HyperParameter(name, dict(spec)).ppf(quantiles))]


# -------------------------------------------------------------- command rendering
def render_args(params: Mapping[str, Any]) -> list[str]:
    """``${args}``: ``--key=value`` with ``str(value)``, in the given order (as the agent does)."""
    return [f"--{key}={value}" for key, value in params.items()]


def render_command(
    sweep: Mapping[str, Any], params: Mapping[str, Any], *, interpreter: str = "python", env: str = "/usr/bin/env"
) -> list[str]:
    """The argument list ``wandb agent`` runs for a trial with ``params`` (its ``_command_run``).

    ``${envvar:NAME}`` becomes the variable's value (or ``NAME`` when unset, like the agent);
    ``${args_no_hyphens}`` and the other agent macros are supported, but ``${args}`` is the one
    LightningCLI accepts.
    """
    macros: dict[str, list[str]] = {
        "env": [env], "interpreter": [interpreter], "program": [str(sweep.get("program", ""))],
        "args": render_args(params), "args_no_hyphens": [f"{k}={v}" for k, v in params.items()],
        "args_no_equals": [s for k, v in params.items() for s in (f"--{k}", str(v))],
        "args_json": [json.dumps(dict(params))],
        "args_no_boolean_flags": [f"--{k}" if v is True else f"--{k}={v}" for k, v in params.items() if v is not False],
        "args_append_hydra": [f"+{k}={v}" for k, v in params.items()],
        "args_override_hydra": [f"++{k}={v}" for k, v in params.items()],
    }
    out: list[str] = []
    for chunk in list(sweep.get("command") or DEFAULT_COMMAND):
        chunk = ENVVAR_MACRO.sub(lambda m: os.environ.get(m.group(1), m.group(1)), str(chunk))
        if chunk.startswith("${") and chunk.endswith("}"):
            out += macros.get(chunk[2:-1]) or []
        else:
            out.append(chunk)
    return out


def _config_at(command: list[str]) -> int | None:
    """Index of the ``--config`` value in ``command`` (``--config PATH`` or ``--config=PATH``; the first)."""
    for i, chunk in enumerate(command):
        if chunk == "--config" and i + 1 < len(command):
            return i + 1
        if chunk.startswith("--config="):
            return i
    return None


def command_config(sweep: Mapping[str, Any]) -> str | None:
    """The config file the sweep's ``command`` passes with ``--config`` (None when it passes none)."""
    command = [str(c) for c in sweep.get("command") or []]
    at = _config_at(command)
    return None if at is None else command[at].removeprefix("--config=")


def with_config(command: list[str], config: str) -> list[str]:
    """``command`` with its ``--config`` file replaced by ``config`` (a baseline arm's own config); SweepError
    when the command passes no ``--config``."""
    at = _config_at(command)
    if at is None:
        raise SweepError(f"the sweep's command passes no --config to replace with {config}")
    out = list(command)
    out[at] = f"--config={config}" if out[at].startswith("--config=") else config
    return out


def trial_name(params: Mapping[str, Any], varied: list[str]) -> str:
    """Deterministic, readable name from the varied parameters: ``attn_scale=none,seed=1``."""
    shorts = [k.split(".")[-1] for k in varied]
    parts = []
    for key, short in zip(varied, shorts, strict=True):
        label = "seed" if key == SEED_KEY else (short if shorts.count(short) == 1 else key)
        parts.append(f"{label}={params.get(key)}")
    name = re.sub(r"[^A-Za-z0-9_.,=+-]", "_", ",".join(parts)) or "default"
    return name if len(name) <= 120 else name[:100] + "-" + hashlib.sha1(name.encode()).hexdigest()[:8]


def grid_params(sweep: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every parameter set of a grid sweep (``proposable_values`` of each parameter, in the file's order)."""
    import itertools

    specs = sweep["parameters"]
    values = [proposable_values(name, spec) for name, spec in specs.items()]
    return [dict(zip(specs, combo, strict=True)) for combo in itertools.product(*values)]
