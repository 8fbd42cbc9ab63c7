"""ALFWorld on the real TextWorld engine (benchmark ``alfworld_textworld``, needs the optional extra).

Modules: :mod:`.environment` (:class:`AlfworldTextWorld`), :mod:`.pddl` (a state line as an ALFWorld PDDL
problem), :mod:`.engine` (the TextWorld engine and Fast-Downward planner). Importing needs no extra.
"""

from genenv_engine.environments.alfworld.textworld.environment import AlfworldTextWorld

__all__ = ["AlfworldTextWorld"]
