"""Executors chosen by name and imported only when used: where the agent's rollouts are generated and scored and
the simulator's drafts validated.

``local`` (in this process, the default) and ``ray`` (worker actors on a Ray instance, the ``ray`` extra). The
controller (`genenv_engine.method.loop`) picks one with `make_executor` and calls it where the validate phase checks
drafts and the rollout phase generates; every phase stays the controller's. Ray is imported by
``genenv_engine.executors.ray_exec`` alone, inside its
functions, so importing the engine never loads it (an import-linter contract and a test check this).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from genenv_engine.executors.base import RolloutExecutor

EXECUTORS: dict[str, str] = {
    "local": "genenv_engine.executors.local:LocalExecutor",
    "ray": "genenv_engine.executors.ray_exec:RayExecutor",
}
"""Executor names and the dotted path of the class implementing each."""


def executor_name(ray: str) -> str:
    """``local`` when the config's ``ray.address`` is empty, else ``ray``.

    >>> executor_name(""), executor_name("local"), executor_name("10.0.0.1:6379")
    ('local', 'ray', 'ray')
    """
    return "ray" if ray else "local"


def preflight(config: Any) -> None:
    """Check, before anything is computed, that the executor the config names can start: for a Ray cluster
    address, that its head answers and that a driver started here joins it (`genenv_engine.executors.ray_exec.
    preflight`), so a bad address fails in one line before a warm start or an epoch, leaving nothing partial.
    The in-process executor needs nothing."""
    if executor_name(config.ray.address) == "ray":
        importlib.import_module("genenv_engine.executors.ray_exec").preflight(config.ray.address)


def make_executor(
    config: Any, roles: Any, envs: dict[str, Any], version: int, emit: Any = None, simulator_version: int = 0
) -> RolloutExecutor:
    """Build the executor the config names, holding agent weights of ``version`` and simulator weights of
    ``simulator_version``."""
    module, _, cls = EXECUTORS[executor_name(config.ray.address)].partition(":")
    return getattr(importlib.import_module(module), cls)(
        config, roles, envs, version, emit, simulator_version=simulator_version
    )
