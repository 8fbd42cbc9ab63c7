"""The engine never loads the console, textual, vllm or ray: checked in a fresh interpreter per module (ray is
loaded only when a Ray executor is built, by genenv_engine.executors.ray_exec)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

FORBIDDEN = ("textual", "textual_plotext", "vllm", "genenv_console", "ray")
ENGINE_MODULES = [
    "genenv_engine",
    "genenv_engine.method.loop",
    "genenv_engine.interfaces.cli",
    "genenv_engine.config",
    "genenv_engine.storage.store",
    "genenv_engine.environments.bfcl",
    "genenv_engine.backends.hf",
    "genenv_engine.executors",
    "genenv_engine.executors.local",
    "genenv_engine.executors.worker",
    "genenv_engine.executors.ray_exec",
    "genenv_engine.executors.ray_join",
]


def loaded_after_import(module: str) -> set[str]:
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("module", ENGINE_MODULES)
def test_engine_module_loads_no_ui_or_vllm(module):
    loaded = loaded_after_import(module)
    assert module in loaded
    leaked = {m for m in loaded if m.split(".")[0] in FORBIDDEN}
    assert leaked == set()


def test_package_import_is_light():
    loaded = loaded_after_import("genenv_engine")
    assert "torch" not in loaded and "transformers" not in loaded


def test_the_check_itself_sees_a_forbidden_import():
    # guards against a vacuous test: importing textual is visible to the same probe
    assert "textual" in loaded_after_import("textual")


def test_the_check_sees_ray_when_installed():
    pytest.importorskip("ray")
    assert "ray" in loaded_after_import("ray")


def test_building_the_command_line_parser_loads_no_torch():
    """``genenv --help`` and every subcommand's parser (the benches' included) are built without torch, which a
    command loads only when it runs."""
    code = (
        "import json, sys; from genenv_engine.interfaces.cli import build_parser; build_parser(); "
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert "genenv_engine.interfaces.bench_command" in loaded
    assert "torch" not in loaded and "transformers" not in loaded
