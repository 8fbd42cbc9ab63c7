"""The roles and the epoch read no study setting: no module of ``genenv_engine/method/`` or
``genenv_engine/training/`` reads the ``[study]`` table (an attribute ``.study``, ``getattr`` of it, a reader of its
settings), a registered study setting by name, or a setting retired with its study."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from genenv_engine.config import RETIRED_VALUES, study_keys
from genenv_engine.method.strategies import load_plugins

ENGINE = Path(__file__).parents[2] / "genenv_engine"
CHECKED = sorted(p for folder in ("method", "training") for p in (ENGINE / folder).rglob("*.py"))
READERS = {"study_settings", "lab_settings", "study_keys"}
"""Functions that read the study table's values (`genenv_engine.config.check_study` only checks them)."""


def study_names() -> set[str]:
    """Every study setting's name: those an installed package registers, and those retired with their study."""
    load_plugins()
    return set(study_keys()) | {old.rsplit(".", 1)[1] for old in RETIRED_VALUES}


def study_reads(source: str, names: set[str]) -> list[str]:
    """Every read of the study table or of a study setting in ``source``, as ``line N: what`` (an attribute that is
    called is a function, such as the success line's text, not a setting)."""
    found = []
    tree = ast.parse(source)
    called_attrs = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and id(node) not in called_attrs
            and (node.attr == "study" or node.attr in names)
        ):
            found.append(f"line {node.lineno}: reads .{node.attr}")
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if called in READERS:
                found.append(f"line {node.lineno}: calls {called}")
            elif (
                called == "getattr"
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and (node.args[1].value == "study" or node.args[1].value in names)
            ):
                found.append(f"line {node.lineno}: getattr {node.args[1].value}")
        elif isinstance(node, ast.ImportFrom) and any(alias.name in READERS for alias in node.names):
            found.append(f"line {node.lineno}: imports a study reader")
    return found


def test_the_checked_folders_are_the_roles_and_the_epoch():
    names = {p.relative_to(ENGINE).as_posix() for p in CHECKED}
    assert {
        "method/loop.py",
        "method/coevolution.py",
        "training/simulator.py",
        "training/warmstart/training.py",
    } <= names
    assert len(CHECKED) > 20


@pytest.mark.parametrize("path", CHECKED, ids=lambda p: p.relative_to(ENGINE).as_posix())
def test_no_role_reads_a_study_setting(path):
    assert study_reads(path.read_text(), study_names()) == []


@pytest.mark.parametrize(
    ("snippet", "want"),
    [
        ("hold = cfg.study['steer_hold']", ["line 1: reads .study"]),
        ("hold = cfg.simulator.steer_hold", ["line 1: reads .steer_hold"]),
        ("on = cfg.simulator.steer", ["line 1: reads .steer"]),
        ("table = getattr(cfg, 'study')", ["line 1: getattr study"]),
        ("s = lab_settings(cfg)", ["line 1: calls lab_settings"]),
        ("from genenv_engine.config import study_settings", ["line 1: imports a study reader"]),
        ("check_study(cfg, load_plugins)\nnote = cfg.simulator.note", []),
        ("line = sim.success_note('bfcl', None, 0.5)", []),
    ],
)
def test_the_rule_catches_a_study_read(snippet, want):
    assert study_reads(snippet, study_names()) == want
