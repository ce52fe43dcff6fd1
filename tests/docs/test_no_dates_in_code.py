"""No comment or docstring in a .py file carries a date: dated notes (measurements, history) live in records and
docs (``docs/findings/preset_history.md``, ``docs/benchmarks-history.md``), where a reader of a verdict or a
benchmark sees them. String data (a question's ``preset_changed``, a test's expected line) may hold dates."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?"
YEAR = r"(?:19|20)\d\d"
DATE = re.compile(rf"\b{YEAR}-\d\d-\d\d\b|\b{MONTH} (?:\d{{1,2}},? )?{YEAR}\b|\b\d{{1,2}} {MONTH} {YEAR}\b")


def python_files() -> list[Path]:
    """The project's tracked .py files (git decides what is the project's; skip where there is no git checkout)."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "*.py"], cwd=ROOT, capture_output=True, text=True,
                                check=False)
    except FileNotFoundError:
        pytest.skip("lists the project's files with git, which is not installed")
    if listed.returncode != 0:
        pytest.skip(f"lists the project's files with git, but {ROOT} is not a git checkout")
    return [ROOT / name for name in listed.stdout.split("\0") if name]


def commented_text(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and every module, class and function docstring."""
    found = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
             if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(
                    first.value.value, str):
                found.append((first.lineno, first.value.value))
    return found


@pytest.mark.parametrize("text", ["# measured 2026-12-01 (Xeon)", "# as of Dec 2026", "# Dec 3, 2026", "# 3 Dec 2026"])
def test_the_pattern_sees_both_date_styles(text):
    assert [t for _, t in commented_text(text + "\n") if DATE.search(t)]


def test_the_pattern_leaves_citations_alone():
    assert not DATE.search("# Vaswani et al. 2017, §3.2; Bengio 2015; lengths 2-15, seeds 1001..")


def test_outside_a_git_checkout_it_skips_with_its_reason(monkeypatch, tmp_path):
    monkeypatch.setitem(globals(), "ROOT", tmp_path)  # a folder outside any checkout
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    with pytest.raises(pytest.skip.Exception, match="not a git checkout"):
        python_files()
    monkeypatch.setenv("PATH", str(tmp_path))  # no git on the PATH
    with pytest.raises(pytest.skip.Exception, match="git, which is not installed"):
        python_files()


def test_no_comment_or_docstring_carries_a_date():
    dated = [f"{path.relative_to(ROOT)}:{line}: {DATE.search(text)[0]}"
             for path in python_files() for line, text in commented_text(path.read_text()) if DATE.search(text)]
    assert not dated, "dated notes belong in docs/ or a question's record:\n" + "\n".join(dated)
