"""``python -m benchmarks.gpu_wheels``: the wheels a lent GPU machine lacks for ``benchmarks.gpu_check`` (issue #43).

The lent machine (the ``device`` tool) runs Python 3.12 with PyTorch, Lightning, torchmetrics, torchvision,
sentencepiece, sacrebleu, matplotlib, NumPy, SciPy and scikit-learn installed, and reaches no package index. What
attnlab needs beyond that is jsonargparse (LightningCLI) and wandb with its sweeps engine. This downloads them, with
their dependencies resolved for CPython 3.12 on manylinux x86-64, into ``--dir`` (default ``.whl``, which the device
tool carries when a run names it), drops every wheel whose distribution the machine's image already holds, and
prints the one command to run there. The command installs the wheels into ``/tmp/site`` without dependencies and
runs the check with its results under ``$OUT``.

Dropping the image's own distributions keeps its builds (NumPy 2 among them; the sweeps engine asks for NumPy < 2
but uses nothing NumPy 2 removed) and keeps the carried tree under the tool's 64 MiB.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

LACKED = ("jsonargparse", "wandb")
"""What the lent image lacks of ``pyproject.toml``'s dependencies (their ranges: :func:`requirements`)."""
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")
IMAGE_HAS = frozenset("""
anyio attrs certifi charset-normalizer click cloudpickle filelock fsspec h11 httpcore httpx idna jinja2 joblib
lightning lightning-utilities markupsafe matplotlib narwhals numpy packaging pillow protobuf pyyaml requests sacrebleu
scikit-learn scipy sentencepiece six threadpoolctl torch torchmetrics torchvision tqdm urllib3 xxhash
""".split())
"""Distributions of the lent image (``device`` tool, KINDS.md, read 2026-11-17) that the resolution pulls in: kept
out. typing-extensions is carried although the image has it: pydantic and wandb want a recent one."""
DEVICE_COMMAND = ("python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade "
                  "--target /tmp/site {dir}/*.whl && export PYTHONPATH=/tmp/site:$PWD WANDB_MODE=disabled "
                  "PYTHONUNBUFFERED=1 && nvidia-smi -L && set -o pipefail && python3 -m benchmarks.gpu_check "
                  "--out $OUT/gpu_check.json 2>&1 | tee $OUT/gpu_check.log")
"""The device tool's ``run`` command (at most 2,000 characters), with ``carry: [DIR]`` and ``timeout_s`` 600."""


def normalised(name: str) -> str:
    """A distribution name as PEP 503 compares it: ``Scikit_Learn`` -> ``scikit-learn``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def distribution(wheel: str) -> str:
    """A wheel file's distribution: ``scikit_learn-1.9.1-cp312-....whl`` -> ``scikit-learn``."""
    return normalised(wheel.split("-", 1)[0])


def drop_image_wheels(folder: Path) -> list[str]:
    """Delete the wheels in ``folder`` whose distribution the lent image holds; the names of those kept."""
    kept = []
    for wheel in sorted(folder.glob("*.whl")):
        if distribution(wheel.name) in IMAGE_HAS:
            wheel.unlink()
        else:
            kept.append(wheel.name)
    return kept


def requirements() -> list[str]:
    """The installed attnlab's requirements (``pyproject.toml``'s, with their extras and ranges) on ``LACKED``."""
    from importlib.metadata import requires

    mine = [r for r in requires("attnlab") or [] if "extra ==" not in r]
    return [r for r in mine if normalised(re.match(r"[\w.-]+", r)[0]) in LACKED]


def download(folder: Path) -> None:
    """``pip download`` of :func:`requirements` and their dependencies, binary wheels for CPython 3.12 only."""
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version", "3.12",
                    "--implementation", "cp", *platforms, "-d", str(folder), *requirements()], check=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu_wheels", description=__doc__.splitlines()[0])
    p.add_argument("--dir", type=Path, default=Path(".whl"), help="where the wheels go (default .whl)")
    args = p.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    download(args.dir)
    kept = drop_image_wheels(args.dir)
    mib = sum((args.dir / w).stat().st_size for w in kept) / 2**20
    print(f"{len(kept)} wheels, {mib:.1f} MiB in {args.dir} (.gitignore holds /.whl/: name it in the run's carry)")
    print(f"device run, carry [{args.dir}], timeout_s 600:\n{DEVICE_COMMAND.format(dir=args.dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
