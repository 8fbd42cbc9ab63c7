"""Registry of environments by name, imported lazily so choosing one never loads the other benchmarks.

`BENCHMARKS` maps a benchmark name to ``module:Class`` (a benchmark subpackage and the class its
``__init__`` exposes); `get_environment` imports and builds it. Each benchmark is a subpackage
(``alfworld/``, ``apibank/``, ``bamboogle/``, ``bfcl/``, ``travelplanner/``, and ``chain/``, a generated
benchmark of chained calls whose level is the chain length 1-8) beside :mod:`.base`;
``bfcl_official`` and ``alfworld_textworld`` live inside ``bfcl/official/`` and ``alfworld/textworld/``
and so load their mini's package too.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from genenv_engine.environments.base import Environment, SplitSizes

BENCHMARKS: dict[str, str] = {
    "bfcl": "genenv_engine.environments.bfcl:BfclMini",
    "bamboogle": "genenv_engine.environments.bamboogle:BamboogleMini",
    "alfworld": "genenv_engine.environments.alfworld:AlfworldMini",
    "apibank": "genenv_engine.environments.apibank:ApiBankMini",
    "travelplanner": "genenv_engine.environments.travelplanner:TravelPlannerMini",
    "bfcl_official": "genenv_engine.environments.bfcl.official:BfclOfficial",
    "alfworld_textworld": "genenv_engine.environments.alfworld.textworld:AlfworldTextWorld",
    "chain": "genenv_engine.environments.chain:ChainEnv",
}
"""Known benchmark names and the class implementing each."""

PAPER_BENCHMARKS: tuple[str, ...] = ("bfcl", "apibank", "alfworld", "bamboogle", "travelplanner")
"""The five benchmarks of the GenEnv paper as built-in minis (what ``--benchmarks all`` enables).

``bfcl_official`` (the real BFCL items and official checker, from the pinned ``bfcl-eval`` wheel) is
selectable by name instead of ``bfcl``; its prompts (median ~2k characters) are for real LLMs."""


def environment_class(name: str) -> type["Environment"]:
    """Import and return the environment class registered under ``name``."""
    if name not in BENCHMARKS:
        raise KeyError(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}")
    module, _, cls = BENCHMARKS[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def environments_of(config: Any) -> dict[str, "Environment"]:
    """Every benchmark a run config names, seeded and with its data folder: the environments the loop runs on."""
    return {name: get_environment(name, config.seed, data_dir=config.data_dirs.get(name)) for name in config.benchmarks}


def get_environment(name: str, seed: int = 0, sizes: "SplitSizes | None" = None,
                    data_dir: str | None = None) -> "Environment":
    """Build the environment ``name`` with seeded splits (and upstream data from ``data_dir`` if given)."""
    return environment_class(name)(seed=seed, sizes=sizes, data_dir=data_dir)
