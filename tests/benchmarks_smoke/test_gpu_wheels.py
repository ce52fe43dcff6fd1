"""The lent GPU machine's wheels: which are carried, which the image keeps, and the command run there."""

from __future__ import annotations

from pathlib import Path

from benchmarks.gpu_wheels import DEVICE_COMMAND, IMAGE_HAS, LACKED, distribution, drop_image_wheels, requirements


def test_the_requirements_are_the_projects_own_ranges_for_what_the_image_lacks():
    reqs = requirements()
    assert sorted(r.split("[")[0] for r in reqs) == sorted(LACKED)
    assert all("<" in r and ">=" in r for r in reqs), reqs  # pyproject's bounded ranges, not bare names


def test_wheels_of_the_images_distributions_are_dropped(tmp_path: Path):
    names = ["scikit_learn-1.9.1-cp312-cp312-manylinux_2_28_x86_64.whl", "PyYAML-6.0.4-cp312-cp312-manylinux1.whl",
             "wandb-0.31.0-py3-none-manylinux_2_28_x86_64.whl", "typing_extensions-4.16.0-py3-none-any.whl",
             "jsonargparse-4.53.0-py3-none-any.whl"]
    for name in names:
        (tmp_path / name).write_bytes(b"")
    kept = drop_image_wheels(tmp_path)
    assert kept == sorted(names[2:]) and sorted(p.name for p in tmp_path.iterdir()) == kept
    assert distribution(names[0]) == "scikit-learn" and distribution(names[1]) == "pyyaml"


def test_what_is_carried_is_not_in_the_image_and_the_command_fits_the_tool():
    assert not set(LACKED) & IMAGE_HAS and "typing-extensions" not in IMAGE_HAS
    command = DEVICE_COMMAND.format(dir=".whl")
    assert len(command) <= 2000 and "--no-deps" in command and "$OUT/gpu_check.json" in command
