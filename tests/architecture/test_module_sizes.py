"""Every module of the engine, the console and the lab is short enough to read as one job: at most `LIMIT` lines,
and each opens with a docstring saying what it provides."""

from __future__ import annotations

import ast
from pathlib import Path

import genenv_console
import genenv_engine
import genenv_lab

LIMIT = 600
"""The most lines a ``.py`` file under ``genenv_engine/``, ``genenv_console/`` or ``genenv_lab/`` may have."""

ROOTS = tuple(Path(package.__file__).parent for package in (genenv_engine, genenv_console, genenv_lab))


def python_files() -> list[Path]:
    return sorted(path for root in ROOTS for path in root.rglob("*.py"))


def too_long(paths: list[Path], limit: int = LIMIT) -> dict[str, int]:
    """The files of ``paths`` with more than ``limit`` lines, and their line counts."""
    counts = {str(path): len(path.read_text(encoding="utf-8").splitlines()) for path in paths}
    return {name: n for name, n in counts.items() if n > limit}


def test_no_module_is_over_the_limit():
    assert len(python_files()) > 100
    assert {root.name for root in ROOTS} == {"genenv_engine", "genenv_console", "genenv_lab"}
    assert any(path.parent.name == "genenv_lab" for path in python_files())
    assert too_long(python_files()) == {}


def test_the_size_rule_catches_a_long_file(tmp_path):
    short, long = tmp_path / "short.py", tmp_path / "long.py"
    short.write_text('"""Short."""\n' + "x = 1\n" * (LIMIT - 1))
    long.write_text('"""Long."""\n' + "x = 1\n" * LIMIT)
    assert too_long([short, long]) == {str(long): LIMIT + 1}


def test_every_module_opens_with_a_docstring():
    missing = [
        str(path)
        for path in python_files()
        if path.name != "__main__.py"
        and path.read_text(encoding="utf-8").strip()
        and not ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert missing == []
