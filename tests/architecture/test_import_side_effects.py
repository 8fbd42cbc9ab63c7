"""Importing the engine does nothing to the process; each entry point chooses the OpenMP spin before torch loads.

Every check runs in a fresh interpreter whose environment has neither ``GOMP_SPINCOUNT`` nor ``OMP_WAIT_POLICY``
(the test process itself has chosen a spin, which a child would otherwise inherit). The entry points run with
``--help`` (or, for the benchmark child, no work), under an import hook that records ``GOMP_SPINCOUNT`` at the
moment the entry first imports torch, and ends there; an entry that returns without importing it is checked as torch
would be imported next (the spin set, torch not loaded), without paying for the import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from genenv_engine.backends.openmp import OPENMP_SPIN_BUSY, OPENMP_SPIN_IDLE, USER_SETTINGS

SPINS = (OPENMP_SPIN_BUSY, OPENMP_SPIN_IDLE)

PROBE = r'''
import importlib, json, os, runpy, sys

seen = {}


class Watch:
    """Records GOMP_SPINCOUNT when torch is first looked for and ends the process there: what the entry does after
    that (torch's own import, about 1.5 s, included) is not what is checked."""

    def find_spec(self, name, path=None, target=None):
        if name == "torch" and "torch" not in seen:
            seen["torch"] = os.environ.get("GOMP_SPINCOUNT")
            print("\n" + json.dumps(seen), flush=True)
            os._exit(0)
        return None


sys.meta_path.insert(0, Watch())
entry, argv = sys.argv[1], sys.argv[2:]
sys.argv = [entry, *argv]
try:
    if ":" in entry:  # a console script: module:function
        module, function = entry.split(":")
        getattr(importlib.import_module(module), function)(argv)
    elif entry != "-":  # python -m module
        runpy.run_module(entry, run_name="__main__", alter_sys=True)
except SystemExit:
    pass
if "torch" not in seen:  # torch would load now
    seen["torch"] = None if "torch" in sys.modules else os.environ.get("GOMP_SPINCOUNT")
print(json.dumps(seen))
'''


def clean_env() -> dict[str, str]:
    """This process's environment without the user's OpenMP choices (and without the one conftest made)."""
    return {k: v for k, v in os.environ.items() if k not in USER_SETTINGS} | {"HF_HUB_OFFLINE": "1"}


def spin_at_torch_import(entry: str, *argv: str) -> str | None:
    """``GOMP_SPINCOUNT`` when torch was first imported while ``entry`` ran with ``argv`` (or would be, after it)."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE, entry, *argv], env=clean_env(), capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])["torch"]


def test_importing_the_package_changes_no_environment_and_loads_no_submodule():
    code = (
        "import json, os, sys; before = dict(os.environ); import genenv_engine; "
        "print(json.dumps([dict(os.environ) == before, genenv_engine.__version__, "
        "sorted(m for m in sys.modules if m.startswith('genenv_engine'))]))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True, check=True)
    unchanged, version, loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert unchanged is True
    assert version == "0.1.0"
    assert loaded == ["genenv_engine"]  # neither the load probe (backends.cpu_load) nor the spin choice


def test_importing_the_spin_module_chooses_nothing():
    code = (
        "import json, os, sys; before = dict(os.environ); import genenv_engine.backends.openmp; "
        "print(json.dumps([dict(os.environ) == before, 'genenv_engine.backends.cpu_load' in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [True, False]


def test_the_probe_sees_torch_loaded_without_a_choice():
    # guards against a vacuous probe: with no entry point run, or a module that imports torch and chooses nothing
    assert spin_at_torch_import("-") is None
    assert spin_at_torch_import("genenv_engine.training.trainer") is None


@pytest.mark.parametrize(
    ("entry", "argv"),
    [
        ("genenv_engine.interfaces.cli:main", ["--help"]),  # genenv
        ("genenv_console.__main__:main", ["--help"]),  # genenv-console
        ("genenv_engine", ["--help"]),  # python -m genenv_engine
        ("genenv_engine.training.warmstart", ["--help"]),  # python -m genenv_engine.training.warmstart
        ("genenv_engine.interfaces.benches.update_memory", []),  # a child of genenv bench update-memory, given no work
        ("genenv_console.measure", ["--help"]),  # python -m genenv_console.measure
    ],
)
def test_each_entry_point_chooses_the_spin_before_torch_loads(entry, argv):
    assert spin_at_torch_import(entry, *argv) in SPINS


@pytest.mark.ray
@pytest.mark.slow  # 31 s on the 2-core machine beside other jobs: starting a local Ray and one worker
def test_a_ray_worker_chooses_the_spin_before_torch_loads():
    """A driver that chose no spin starts a local Ray through the executor's `connect`: its worker process has the
    spin set before the actor's first call, and torch not yet loaded."""
    pytest.importorskip("ray")
    code = r"""
import json, os, sys
from genenv_engine.executors.ray_exec import connect
import ray

connect("local", 1)


@ray.remote(num_cpus=1)
class Probe:
    def look(self):
        import os, sys
        return [os.environ.get("GOMP_SPINCOUNT"), "torch" in sys.modules, os.getpid()]


try:
    print(json.dumps([*ray.get(Probe.remote().look.remote(), timeout=90), os.getpid(),
                      os.environ.get("GOMP_SPINCOUNT")]))
finally:
    ray.shutdown()
"""
    env = clean_env() | {"RAY_worker_niceness": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    spin, torch_loaded, worker_pid, driver_pid, driver_spin = json.loads(out.stdout.strip().splitlines()[-1])
    assert worker_pid != driver_pid
    assert driver_spin is None  # the worker did not inherit it: it chose its own
    assert spin in SPINS and torch_loaded is False
