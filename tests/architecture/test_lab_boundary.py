"""The lab stays out of the engine: the ``genenv`` command line is built without importing a lab module and lists
the user's commands, the engine's own strategies serve its presets with the lab out of reach, and a non-editable
wheel of the engine holds no lab module, no ``docs/results`` path and no study prose."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

USER_COMMANDS = ("run", "resume", "status", "presets", "benchmarks", "tasks", "export-model", "report", "bench", "env")
"""Every subcommand ``genenv --help`` lists."""
USER_BENCHES = ("update-memory", "rollouts", "epoch", "warmstart", "store", "grpo", "passk", "grammar", "ablation")
"""The ``genenv bench`` subcommands a user runs on her own setup and families (``records-diff`` among them)."""

HELP = r"""
import json, runpy, sys

helps = {}
for argv in (["--help"], ["bench", "--help"]):
    sys.argv = ["genenv", *argv]
    try:
        runpy.run_module("genenv_engine", run_name="__main__")
    except SystemExit:
        pass
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "genenv_lab")))
"""


def test_the_command_line_imports_no_lab_module_and_lists_the_users_commands():
    out = subprocess.run([sys.executable, "-c", HELP], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    usage, _, modules = out.rpartition("\n[")
    assert json.loads("[" + modules) == []
    top, _, bench = usage.partition("usage: genenv bench")
    assert top.startswith("usage: genenv [-h] [--version]")
    listed = top.split("{", 1)[1].split("}", 1)[0].split(",")
    assert set(USER_COMMANDS) <= set(listed)
    benches = bench.split("{", 1)[1].split("}", 1)[0].split(",")
    assert {*USER_BENCHES, "records-diff"} <= set(benches)


BLOCK_LAB = r"""
import importlib.abc, sys, warnings


class NoLab(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "genenv_lab":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NoLab())
warnings.simplefilter("ignore")
from genenv_engine.config import load_config, preset_names
from genenv_engine.method.strategies import resolve

for name in preset_names():
    resolve(load_config(name))
for overrides in ({"simulator.mode": "sampler"}, {"agent.base_source": "unseen"}, {"agent.base_pool": 5}):
    resolve(load_config("micro", overrides=overrides))
try:
    resolve(load_config("micro", overrides={"simulator.seed_sampling": "alpha"}))
except KeyError as exc:
    print("refused:", exc)
print(sorted(m for m in sys.modules if m.split(".")[0] == "genenv_lab"))
"""


def test_the_engines_presets_and_bench_arms_resolve_without_the_lab():
    out = subprocess.run([sys.executable, "-c", BLOCK_LAB], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    refused, modules = out.stdout.strip().splitlines()
    assert refused.startswith("refused:") and "'alpha'" in refused  # a study variant needs the lab
    assert modules == "[]"


STUDY_PROSE = ("docs/results", "<!-- figures:", "pre-registered reading rule", "## Findings")
"""Text of the studies: their results folder, the generated sections' markers, the reading rule, the README's
findings."""


def wheel_of_the_engine(tmp_path: Path) -> Path:
    """A non-editable wheel built from a copy of the engine's sources, the lab beside them as in the repository."""
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for folder in ("genenv_engine", "genenv_console", "genenv_lab"):
        shutil.copytree(ROOT / folder, src / folder, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", src / "pyproject.toml")
    (src / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "package.md", src / "docs" / "package.md")
    out = tmp_path / "wheel"
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(src), "-w", str(out)]
    subprocess.run(build, check=True, capture_output=True, text=True)
    (wheel,) = out.glob("*.whl")
    return wheel


@pytest.mark.slow
def test_a_wheel_of_the_engine_holds_no_lab_module_no_results_path_and_no_study_prose(tmp_path):
    with zipfile.ZipFile(wheel_of_the_engine(tmp_path)) as wheel:
        names = wheel.namelist()
        assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {
            "genenv_engine",
            "genenv_console",
        }
        assert not [n for n in names if "docs/results" in n or n.startswith("genenv_lab")]
        assert any(n.startswith("genenv_engine/ablation/") for n in names)  # the user's ablation bench ships
        texts = {n: wheel.read(n) for n in names if not n.endswith((".safetensors", ".bin", ".pt"))}
        found = {(n, s) for n, data in texts.items() for s in STUDY_PROSE if s.encode() in data}
        assert found == set()
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        modules = [
            line.split("=", 1)[1].strip().split(":")[0]
            for line in texts[entry_points].decode().splitlines()
            if "=" in line
        ]
        for module in modules:  # every entry point's module ships in the wheel
            path = module.replace(".", "/")
            assert f"{path}.py" in names or f"{path}/__init__.py" in names, module
