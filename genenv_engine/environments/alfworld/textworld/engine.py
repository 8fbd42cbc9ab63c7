"""The real TextWorld engine and Fast-Downward planner behind the ``alfworld_textworld`` benchmark.

Needs the optional extra (``scripts/install_alfworld_extra.sh``: ``alfworld``, ``textworld[pddl]`` and the
``fast-downward-textworld`` planner built from source). This module imports without it; every entry point
calls :func:`require_package`, which raises :class:`AlfworldUnavailable` (an ``ImportError``) when missing.

A :class:`Game` is one mini state (a parsed state line) loaded into TextWorld's ``PddlEnv`` with ALFWorld's
domain and grammar (parsed once per process; the goal text replaces ``UNKNOWN GOAL`` in the feedback) and the
problem of
:func:`~.pddl.problem_pddl`; entities are shown by their mini names (``apple 1``), as
ALFWorld's demangler shows them. TextWorld lists the admissible commands and, after every step, asks
Fast-Downward for a plan from the current state (``policy_commands``); the goal check is TextWorld's ``won``.

:func:`analyse` (the planner's plan from a state line) and :func:`step_verdict` (execute one command in that
state, then re-plan) are memoised per state line, since loading a game costs about 0.2 s.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from functools import cache, lru_cache

from genenv_engine.environments.alfworld.text import read_state
from genenv_engine.environments.alfworld.textworld.pddl import problem_pddl, world_from_facts
from genenv_engine.environments.alfworld.world import World

PACKAGES = ("alfworld", "textworld", "fast-downward-textworld")
INSTALL_HINT = "install the ALFWorld extra with scripts/install_alfworld_extra.sh (alfworld, textworld[pddl])"


class AlfworldUnavailable(ImportError):
    """The optional ALFWorld/TextWorld/Fast-Downward packages are not installed."""


@cache
def require_package() -> dict[str, str]:
    """The installed versions of the extra's packages; raise :class:`AlfworldUnavailable` if one is missing."""
    try:
        import fast_downward  # noqa: F401
        from alfworld.gen import constants  # noqa: F401
        from textworld.envs.pddl import PddlEnv  # noqa: F401
    except ImportError as err:
        raise AlfworldUnavailable(f"{err}; {INSTALL_HINT}") from None
    return {name: importlib.metadata.version(name) for name in PACKAGES}


GOAL_PLACEHOLDER = "UNKNOWN GOAL"
"""ALFWorld's grammar says ``Your task is to: UNKNOWN GOAL.``; ALFWorld substitutes the task text there."""


@cache
def _game_logic():  # -> textworld.envs.pddl.logic.GameLogic
    """ALFWorld's domain and grammar, parsed once per process (parsing costs ~0.2 s; TextWorld does it per game)."""
    from importlib.resources import files

    from textworld.envs.pddl import logic as pddl_logic

    data = files("alfworld").joinpath("data")
    return pddl_logic.GameLogic(
        domain=data.joinpath("alfred.pddl").read_text(), grammar=data.joinpath("alfred.twl2").read_text()
    )


@cache
def _env_class() -> type:
    """TextWorld's ``PddlEnv`` with the shared parsed logic (its ``load`` minus the per-game parsing)."""
    from textworld.envs.pddl import PddlEnv
    from textworld.envs.pddl import logic as pddl_logic

    class AlfredPddlEnv(PddlEnv):
        def load(self, data):
            self._game_file, self._game_data, self.walkthrough = None, data, None
            self._logic = _game_logic()
            self._pddl_state = pddl_logic.PddlState(self.downward_lib, data["pddl_problem"], self._logic)
            self._entity_infos = self._get_entity_infos()

    return AlfredPddlEnv


class Game:
    """One mini state loaded into TextWorld; :meth:`step` plays commands in ALFWorld 0.4.2's spelling."""

    def __init__(self, world: World) -> None:
        require_package()
        import textworld

        self.world = world
        self.env = _env_class()(
            textworld.EnvInfos(admissible_commands=True, policy_commands=True, won=True, feedback=True, facts=True)
        )
        self.env.load({"pddl_problem": problem_pddl(world)})
        for info in self.env._entity_infos.values():  # ALFWorld's demangled names ("apple 1")
            if info.type in ("object", "receptacle"):
                info.name = info.id.replace("_", " ")
        self.state = self.env.reset()
        self.steps = 0

    @property
    def admissible(self) -> list[str]:
        return list(self.state["admissible_commands"])

    @property
    def plan(self) -> list[str]:
        """Fast-Downward's plan from the current state (empty when won or when no plan exists)."""
        return list(self.state["policy_commands"] or [])

    @property
    def won(self) -> bool:
        return bool(self.state["won"])

    @property
    def feedback(self) -> str:
        """TextWorld's last feedback (the intro names the task, as ALFWorld's grammar substitution does)."""
        return str(self.state.feedback).replace(GOAL_PLACEHOLDER, self.world.goal.text)

    def step(self, command: str) -> bool:
        """Play one command; False (and TextWorld's "Nothing happens.") when it is not admissible."""
        ok = command in self.state["admissible_commands"]
        self.state, _, _ = self.env.step(command)
        self.steps += 1
        return ok

    def current_world(self) -> World:
        """The mini state TextWorld is in now (read back from its PDDL facts)."""
        return world_from_facts(self.world, self.state["_facts"])


@dataclass(frozen=True)
class Analysis:
    """The planner's view of a state line: ``status`` is ``solved``, ``won`` or ``unsolvable``."""

    status: str
    plan: tuple[str, ...] = ()
    admissible: tuple[str, ...] = ()
    reason: str = ""


@lru_cache(maxsize=4096)
def analyse(prompt: str) -> Analysis:
    """Load the state line in TextWorld and plan; unsolvable problems come back with a reason.

    The FD translator proves some goals unreachable before search; TextWorld then fails to load the
    problem, which is reported as unsolvable too.
    """
    world = read_state(prompt)
    try:
        game = Game(world)
    except (KeyError, ValueError, AssertionError) as err:
        return Analysis("unsolvable", reason=f"TextWorld could not load the problem ({type(err).__name__}: {err})")
    if game.won:
        return Analysis("won", admissible=tuple(game.admissible), reason="already solved")
    if not game.plan:
        return Analysis("unsolvable", admissible=tuple(game.admissible), reason="Fast-Downward found no plan")
    return Analysis("solved", tuple(game.plan), tuple(game.admissible))


@lru_cache(maxsize=16384)
def step_verdict(prompt: str, command: str) -> str:
    """``not_admissible``, ``optimal`` (on a shortest plan) or ``suboptimal`` for one command in a state.

    The command is executed in TextWorld; it is optimal iff it wins now or Fast-Downward's plan from the
    new state is one step shorter than the plan from the old one.
    """
    before = analyse(prompt)
    if command not in before.admissible:
        return "not_admissible"
    game = Game(read_state(prompt))
    game.step(command)
    if game.won:
        return "optimal" if len(before.plan) == 1 else "suboptimal"
    after = game.plan
    return "optimal" if after and len(after) + 1 == len(before.plan) else "suboptimal"
