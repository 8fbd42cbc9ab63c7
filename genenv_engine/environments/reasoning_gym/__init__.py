"""reasoning-gym as a source of environments: ``rg:<dataset>`` names the reasoning-gym dataset as a benchmark.

Modules: :mod:`.adapter` (`rg_environment`, the function the registry's ``rg`` prefix names: the eligibility
checks and the environment class of a dataset, whose tasks its own generator materializes from specifications),
:mod:`.spec` (a specification's text, reader, level and grammar). reasoning-gym itself is imported only when a
dataset is asked for.
"""

from genenv_engine.environments.reasoning_gym.adapter import RgEnvironment, rg_environment, rg_environment_origin

__all__ = ["RgEnvironment", "rg_environment", "rg_environment_origin"]
