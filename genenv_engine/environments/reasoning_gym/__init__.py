"""reasoning-gym as a source of environments: ``rg:<dataset>`` names the reasoning-gym dataset as a benchmark.

Modules: :mod:`.adapter` (`rg_environment`, the function the registry's ``rg`` prefix names, and the environment
class of a dataset, whose tasks its own generator materializes from specifications), :mod:`.eligibility` (whether a
dataset can be a benchmark and how its replies are scored), :mod:`.scan` (the scan of a scorer's code for calls
that run text), :mod:`.calls` (every call into reasoning-gym, made in a time-limited, contained worker),
:mod:`.entry_cache` (slow entries kept on disk) and :mod:`.spec` (a specification's text, reader, level and
grammar). reasoning-gym itself is imported only when a dataset is asked for.
"""

from genenv_engine.environments.reasoning_gym.adapter import RgEnvironment, rg_environment, rg_environment_origin

__all__ = ["RgEnvironment", "rg_environment", "rg_environment_origin"]
