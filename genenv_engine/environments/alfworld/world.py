"""ALFWorld-mini household text world: catalog, goals, state, command grammar and rules.

A pure-Python stand-in for ALFWorld's TextWorld/PDDL games (no ``textworld`` needed). It keeps
ALFWorld's command grammar (``go to X``, ``take X from Y``, ``put X in/on Y``, ``open``/``close``,
``heat``/``cool``/``clean X with Y``, ``use``/``toggle``, ``examine``, ``look``, ``inventory``),
its naming (``apple 1``, ``countertop 1``), its six task types and the rules of its PDDL domain
(one object in hand, closed receptacles must be opened, heat at a microwave, cool at a fridge,
clean at a sink basin, lamps switched on where they stand). The compact state line the agent
reads is written and parsed by :mod:`.text`.

>>> from genenv_engine.environments.alfworld.text import read_state, render_state
>>> w = read_state("G: put hot apple in fridge | at: - | has: - | countertop 1: apple 1; microwave 1 closed")
>>> w.goal.kind, w.recs, w.objs
('heat', ('countertop 1', 'microwave 1'), ('apple 1',))
>>> render_state(apply(w, parse_command("go to countertop 1")))
'G: put hot apple in fridge | at: countertop 1 | has: - | countertop 1: apple 1; microwave 1 closed'
>>> apply(w, parse_command("take apple 1 from countertop 1"))
'not at countertop 1'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

# ---------------------------------------------------------------- catalog (ALFWorld types, lower-case)

RECEPTACLES = frozenset(
    (
        "armchair",
        "bathtubbasin",
        "bed",
        "cabinet",
        "cart",
        "coffeemachine",
        "coffeetable",
        "countertop",
        "desk",
        "diningtable",
        "drawer",
        "dresser",
        "fridge",
        "garbagecan",
        "handtowelholder",
        "laundryhamper",
        "microwave",
        "ottoman",
        "safe",
        "shelf",
        "sidetable",
        "sinkbasin",
        "sofa",
        "stoveburner",
        "toaster",
        "toilet",
        "toiletpaperhanger",
        "towelholder",
        "tvstand",
    )
)
MAX_RECEPTACLES = 7
"""Most receptacles one mini world (a generated state line) lists."""
MAX_OBJECTS = 9
"""Most objects one mini world holds."""
OPENABLE = frozenset(("cabinet", "drawer", "fridge", "microwave", "safe"))
LAMPS = frozenset(("desklamp", "floorlamp"))
"""Toggleable, never pickable: the light of a look_at_obj_in_light task."""
OBJECTS = frozenset(
    (
        "alarmclock",
        "apple",
        "baseballbat",
        "basketball",
        "book",
        "bowl",
        "box",
        "bread",
        "butterknife",
        "candle",
        "cd",
        "cellphone",
        "cloth",
        "creditcard",
        "cup",
        "dishsponge",
        "egg",
        "fork",
        "glassbottle",
        "handtowel",
        "kettle",
        "keychain",
        "knife",
        "ladle",
        "laptop",
        "lettuce",
        "mug",
        "newspaper",
        "pan",
        "papertowelroll",
        "pen",
        "pencil",
        "peppershaker",
        "pillow",
        "plate",
        "plunger",
        "pot",
        "potato",
        "remotecontrol",
        "saltshaker",
        "scrubbrush",
        "soapbar",
        "soapbottle",
        "spatula",
        "spoon",
        "spraybottle",
        "statue",
        "teddybear",
        "tennisracket",
        "tissuebox",
        "toiletpaper",
        "tomato",
        "towel",
        "vase",
        "watch",
        "wateringcan",
        "winebottle",
    )
)
"""Pickable object types (lamps excluded)."""
HEATABLE = frozenset(("apple", "bread", "cup", "egg", "mug", "plate", "potato", "tomato"))
COOLABLE = frozenset(
    ("apple", "bowl", "bread", "cup", "egg", "lettuce", "mug", "pan", "plate", "pot", "potato", "tomato", "winebottle")
)
CLEANABLE = frozenset(
    (
        "apple",
        "bowl",
        "butterknife",
        "cloth",
        "cup",
        "dishsponge",
        "egg",
        "fork",
        "kettle",
        "knife",
        "ladle",
        "lettuce",
        "mug",
        "pan",
        "plate",
        "pot",
        "potato",
        "soapbar",
        "spatula",
        "spoon",
        "tomato",
    )
)

CLEAN, HOT, COOL, LIT = 1, 2, 4, 8
ADJECTIVES = (("clean", CLEAN), ("hot", HOT), ("cool", COOL), ("lit", LIT))
"""Object adjectives in their canonical order."""
PROCESS = {  # goal kind -> (verb, mark it sets, marks it clears, appliance types, object types it applies to)
    "clean": ("clean", CLEAN, 0, ("sinkbasin", "bathtubbasin"), CLEANABLE),
    "heat": ("heat", HOT, COOL, ("microwave",), HEATABLE),
    "cool": ("cool", COOL, HOT, ("fridge",), COOLABLE),
}
TASK_TYPES = {
    "pick": "pick_and_place_simple",
    "look": "look_at_obj_in_light",
    "clean": "pick_clean_then_place_in_recep",
    "heat": "pick_heat_then_place_in_recep",
    "cool": "pick_cool_then_place_in_recep",
    "two": "pick_two_obj_and_place",
}
"""Goal kind -> ALFWorld task type."""
KIND_OF = {task_type: kind for kind, task_type in TASK_TYPES.items()}
"""ALFWorld task type -> goal kind."""
HELD = -1
"""``where`` value of the held object."""
NOWHERE = -1
"""``at`` value before the agent has gone anywhere (the middle of the room)."""
NAME_RE = r"[a-z]+ [1-9][0-9]?"
"""An entity name: type and instance number 1-99, e.g. ``cabinet 12``."""


def rtype(name: str) -> str:
    """The type of an entity name: ``rtype("cabinet 2") == "cabinet"``."""
    return name.rsplit(" ", 1)[0]


# ---------------------------------------------------------------- goals


@dataclass(frozen=True)
class Goal:
    """One of the six ALFWorld goals: ``kind`` (pick/look/clean/heat/cool/two), object type, target type.

    ``target`` is a receptacle type, or a lamp type for ``look``.
    """

    kind: str
    obj: str
    target: str

    @property
    def text(self) -> str:
        """The compact goal text, e.g. ``put hot apple in fridge`` or ``look at cd under desklamp``."""
        if self.kind == "look":
            return f"look at {self.obj} under {self.target}"
        adjective = {"pick": "", "two": "two ", "clean": "clean ", "heat": "hot ", "cool": "cool "}[self.kind]
        return f"put {adjective}{self.obj} in {self.target}"

    @property
    def task_type(self) -> str:
        return TASK_TYPES[self.kind]


# ---------------------------------------------------------------- state


@dataclass(frozen=True)
class World:
    """A full game state. Objects and receptacles keep their listing order (the prompt's order)."""

    goal: Goal
    recs: tuple[str, ...]
    objs: tuple[str, ...]
    where: tuple[int, ...]
    """Per object: index of its receptacle, or HELD."""
    marks: tuple[int, ...]
    """Per object: CLEAN | HOT | COOL | LIT bits."""
    closed: tuple[bool, ...]
    """Per receptacle: whether it is an openable receptacle that is closed."""
    at: int = NOWHERE

    @property
    def held(self) -> int | None:
        """Index of the held object (None when the hand is empty)."""
        return self.where.index(HELD) if HELD in self.where else None

    def rec(self, name: str) -> int | None:
        return self.recs.index(name) if name in self.recs else None

    def obj(self, name: str) -> int | None:
        return self.objs.index(name) if name in self.objs else None

    def visible(self, o: int) -> bool:
        """Whether object ``o`` is held or lies in the (not closed) receptacle the agent stands at."""
        r = self.where[o]
        return r == HELD or (r == self.at and r >= 0 and not self.closed[r])


def won(world: World) -> bool:
    """Whether the goal holds (ALFWorld's ``won``)."""
    goal = world.goal
    mine = [o for o, name in enumerate(world.objs) if rtype(name) == goal.obj]
    if goal.kind == "look":
        return (
            world.held in mine
            and world.at >= 0
            and any(
                rtype(name) == goal.target and world.where[o] == world.at and world.marks[o] & LIT
                for o, name in enumerate(world.objs)
            )
        )
    need = PROCESS[goal.kind][1] if goal.kind in PROCESS else 0
    placed = [
        world.where[o]
        for o in mine
        if world.where[o] >= 0 and world.marks[o] & need == need and rtype(world.recs[world.where[o]]) == goal.target
    ]
    if goal.kind == "two":
        return any(placed.count(r) >= 2 for r in placed)
    return bool(placed)


# ---------------------------------------------------------------- commands


@dataclass(frozen=True)
class Command:
    """A parsed command: verb and entity names; ``text`` is its canonical ALFWorld spelling."""

    verb: str
    args: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        a = self.args
        return {
            "go": lambda: f"go to {a[0]}",
            "take": lambda: f"take {a[0]} from {a[1]}",
            "put": lambda: f"put {a[0]} in/on {a[1]}",
            "look": lambda: "look",
            "inventory": lambda: "inventory",
        }.get(self.verb, lambda: f"{self.verb} {a[0]}" + (f" with {a[1]}" if len(a) > 1 else ""))()


_COMMAND_RES = (
    ("go", re.compile(rf"go to ({NAME_RE})")),
    ("take", re.compile(rf"take ({NAME_RE}) from ({NAME_RE})")),
    ("put", re.compile(rf"put ({NAME_RE}) (?:in|on|in/on) ({NAME_RE})")),
    ("put", re.compile(rf"move ({NAME_RE}) to ({NAME_RE})")),
    ("process", re.compile(rf"(heat|cool|clean) ({NAME_RE}) with ({NAME_RE})")),
    ("single", re.compile(rf"(open|close|use|toggle|examine) ({NAME_RE})")),
    ("bare", re.compile(r"(look|inventory)")),
)
MAX_COMMAND_CHARS = 100


class CommandError(ValueError):
    """Not a command: ``kind`` is ``parse_error`` (not a one-line text) or ``invalid_command`` (grammar)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


def parse_command(text: str) -> Command:
    """Parse one command (case, spacing and a final period are forgiven; ``in``/``on``/``move`` map to put).

    >>> parse_command("Put apple 1 on  countertop 1.").text
    'put apple 1 in/on countertop 1'
    >>> parse_command("fly to the moon")
    Traceback (most recent call last):
    ...
    genenv_engine.environments.alfworld.world.CommandError: invalid_command: 'fly to the moon'
    """
    line = text.strip().lower()
    if not line or len(line) > MAX_COMMAND_CHARS or "\n" in line or not line.isprintable():
        raise CommandError("parse_error", "not a single short line")
    line = " ".join(line.removesuffix(".").split())
    for kind, regex in _COMMAND_RES:
        match = regex.fullmatch(line)
        if match is None:
            continue
        groups = match.groups()
        if kind in ("process", "single", "bare"):
            return Command(groups[0], groups[1:])
        return Command(kind, groups)
    raise CommandError("invalid_command", repr(line[:40]))


# ---------------------------------------------------------------- rules


def apply(world: World, cmd: Command) -> World | str:
    """The state after ``cmd``, or a short reason why it is not admissible here."""
    verb = cmd.verb
    if verb in ("look", "inventory"):
        return world
    if verb == "go":
        return _go(world, cmd.args[0])
    if verb in ("open", "close"):
        return _open_close(world, cmd.args[0], verb == "open")
    if verb == "take":
        return _take(world, *cmd.args)
    if verb == "put":
        return _put(world, *cmd.args)
    if verb in ("heat", "cool", "clean"):
        return _process(world, verb, *cmd.args)
    if verb in ("use", "toggle"):
        return _toggle(world, cmd.args[0])
    return _examine(world, cmd.args[0])


def _here(world: World, name: str) -> int | str:
    r = world.rec(name)
    if r is None:
        return f"no receptacle {name}"
    return r if r == world.at else f"not at {name}"


def _go(world: World, name: str) -> World | str:
    r = world.rec(name)
    if r is None:
        return f"no receptacle {name}"
    return f"already at {name}" if r == world.at else replace(world, at=r)


def _open_close(world: World, name: str, opening: bool) -> World | str:
    r = _here(world, name)
    if isinstance(r, str):
        return r
    if rtype(name) not in OPENABLE:
        return f"{name} cannot be opened"
    if world.closed[r] != opening:
        return f"{name} is already {'open' if opening else 'closed'}"
    return replace(world, closed=_set(world.closed, r, not opening))


def _take(world: World, obj: str, name: str) -> World | str:
    r, o = _here(world, name), world.obj(obj)
    if isinstance(r, str):
        return r
    if o is None or world.where[o] != r:
        return f"no {obj} in {name}"
    if world.closed[r]:
        return f"{name} is closed"
    if rtype(obj) in LAMPS:
        return f"{obj} cannot be taken"
    if world.held is not None:
        return "hands are full"
    return replace(world, where=_set(world.where, o, HELD))


def _put(world: World, obj: str, name: str) -> World | str:
    r, o = _here(world, name), world.obj(obj)
    if isinstance(r, str):
        return r
    if o is None or world.where[o] != HELD:
        return f"not holding {obj}"
    if world.closed[r]:
        return f"{name} is closed"
    return replace(world, where=_set(world.where, o, r))


def _process(world: World, verb: str, obj: str, name: str) -> World | str:
    kind = {"heat": "heat", "cool": "cool", "clean": "clean"}[verb]
    _, mark, clears, appliances, types = PROCESS[kind]
    r, o = _here(world, name), world.obj(obj)
    if isinstance(r, str):
        return r
    if rtype(name) not in appliances:
        return f"cannot {verb} with {name}"
    if o is None or world.where[o] != HELD:
        return f"not holding {obj}"
    if rtype(obj) not in types:
        return f"cannot {verb} {obj}"
    return replace(world, marks=_set(world.marks, o, (world.marks[o] | mark) & ~clears))


def _toggle(world: World, obj: str) -> World | str:
    o = world.obj(obj)
    if o is None or not world.visible(o):
        return f"no {obj} here"
    if rtype(obj) not in LAMPS:
        return f"{obj} cannot be toggled"
    return replace(world, marks=_set(world.marks, o, world.marks[o] ^ LIT))


def _examine(world: World, name: str) -> World | str:
    o = world.obj(name)
    if world.rec(name) is not None:
        return world if world.rec(name) == world.at else f"not at {name}"
    return world if o is not None and world.visible(o) else f"no {name} here"


def _set(values: tuple, i: int, value: object) -> tuple:
    return values[:i] + (value,) + values[i + 1 :]


def admissible_commands(world: World) -> list[str]:
    """Every admissible command here (canonical text), like ALFWorld's ``admissible_commands``."""
    names = list(world.recs) + list(world.objs)
    candidates = [Command("go", (r,)) for r in world.recs] + [Command("look"), Command("inventory")]
    if world.at >= 0:
        here = world.recs[world.at]
        candidates += [Command(v, (here,)) for v in ("open", "close")]
        candidates += [Command("take", (o, here)) for o in world.objs]
        candidates += [Command("put", (o, here)) for o in world.objs]
        candidates += [Command(v, (o, here)) for v in ("heat", "cool", "clean") for o in world.objs]
    candidates += [Command(v, (n,)) for v in ("use", "toggle", "examine") for n in names]
    return [c.text for c in candidates if not isinstance(apply(world, c), str)]
