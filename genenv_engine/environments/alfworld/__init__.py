"""ALFWorld: the pure-Python mini (:class:`AlfworldMini`, benchmark ``alfworld``) and, in :mod:`.textworld`,
the optional real-engine counterpart (benchmark ``alfworld_textworld``).

Modules: :mod:`.mini` (the environment: generator, ``step_match`` checker, validator, episodes), :mod:`.world`
(catalog, goals, state, command grammar and rules), :mod:`.text` (the state line), :mod:`.planner`
(breadth-first planner), :mod:`.tasks` (the step task record and its level), :mod:`.upstream` (official
``traj_data.json`` games).
"""

from genenv_engine.environments.alfworld.mini import AlfworldMini

__all__ = ["AlfworldMini"]
