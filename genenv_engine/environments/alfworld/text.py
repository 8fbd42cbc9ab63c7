"""The ALFWorld-mini state line: render a whole game state as one short prompt, and parse it back strictly.

A byte-level model sees every character, so a state is one line::

    G: put hot apple in fridge | at: - | has: - | countertop 1: apple 1; microwave 1 closed; fridge 1 closed

``G`` is the goal (``put [clean|hot|cool|two] <object> in <receptacle type>`` or ``look at <object>
under <lamp>``), ``at`` the receptacle the agent stands at (``-``: the middle of the room, where every
game starts), ``has`` what it holds (``-``: nothing), then each receptacle, with ``open``/``closed``
for the openable ones, and what lies in it. Object adjectives come in the order ``clean``,
``hot``/``cool``, ``lit`` (lamps). Unlike ALFWorld the agent knows what is inside closed receptacles:
the line is the full state, so the next optimal action is a function of the prompt alone.

:func:`read_state` accepts exactly what :func:`render_state` writes and raises :class:`PromptError`
with a short ``reason: detail`` (the validator's rejection reasons) on anything else.
"""

from __future__ import annotations

import re

from genenv_engine.environments.alfworld.world import (
    ADJECTIVES,
    CLEAN,
    CLEANABLE,
    COOL,
    COOLABLE,
    HEATABLE,
    HELD,
    HOT,
    LAMPS,
    LIT,
    NAME_RE,
    NOWHERE,
    OBJECTS,
    OPENABLE,
    PROCESS,
    RECEPTACLES,
    Goal,
    World,
    rtype,
)


class PromptError(ValueError):
    """A state line outside the grammar or inconsistent; ``str(err)`` is a short ``reason: detail``."""


# ---------------------------------------------------------------- goals

_GOAL_RES = (
    (re.compile(r"look at ([a-z]+) under ([a-z]+)"), lambda m: ("look", m[1], m[2])),
    (re.compile(r"put two ([a-z]+) in ([a-z]+)"), lambda m: ("two", m[1], m[2])),
    (
        re.compile(r"put (clean|hot|cool) ([a-z]+) in ([a-z]+)"),
        lambda m: ({"clean": "clean", "hot": "heat", "cool": "cool"}[m[1]], m[2], m[3]),
    ),
    (re.compile(r"put ([a-z]+) in ([a-z]+)"), lambda m: ("pick", m[1], m[2])),
)


def read_goal(text: str) -> Goal:
    """Parse and check a goal text.

    >>> read_goal("put two mug in cabinet")
    Goal(kind='two', obj='mug', target='cabinet')
    >>> read_goal("put hot book in desk")
    Traceback (most recent call last):
    ...
    genenv_engine.environments.alfworld.text.PromptError: bad_goal: book cannot be made hot
    """
    for regex, build in _GOAL_RES:
        match = regex.fullmatch(text)
        if match:
            goal = Goal(*build(match))
            _check_goal(goal)
            return goal
    raise PromptError(f"bad_goal: {text[:30]!r}")


def _check_goal(goal: Goal) -> None:
    if goal.obj not in OBJECTS:
        raise PromptError(f"unknown_type: {goal.obj}")
    if goal.kind == "look" and goal.target not in LAMPS:
        raise PromptError(f"bad_goal: {goal.target} is not a lamp")
    if goal.kind != "look" and goal.target not in RECEPTACLES:
        raise PromptError(f"bad_goal: {goal.target} is not a receptacle type")
    if goal.kind in PROCESS and goal.obj not in PROCESS[goal.kind][4]:
        word = {"clean": "clean", "heat": "hot", "cool": "cool"}[goal.kind]
        raise PromptError(f"bad_goal: {goal.obj} cannot be made {word}")


# ---------------------------------------------------------------- the state line


def object_text(world: World, o: int) -> str:
    """``[clean ][hot |cool ][lit ]<name>``."""
    words = [word for word, bit in ADJECTIVES if world.marks[o] & bit]
    return " ".join(words + [world.objs[o]])


def render_state(world: World) -> str:
    """The compact state line (the agent prompt)."""
    held = world.held
    parts = []
    for r, name in enumerate(world.recs):
        text = name + ((" closed" if world.closed[r] else " open") if rtype(name) in OPENABLE else "")
        inside = [object_text(world, o) for o in range(len(world.objs)) if world.where[o] == r]
        parts.append(text + (": " + ", ".join(inside) if inside else ""))
    at = world.recs[world.at] if world.at >= 0 else "-"
    has = object_text(world, held) if held is not None else "-"
    return f"G: {world.goal.text} | at: {at} | has: {has} | {'; '.join(parts)}"


def read_state(prompt: str) -> World:
    """Strictly parse a state line; raise :class:`PromptError` (``reason: detail``) if malformed.

    >>> read_state("G: put mug in desk | at: desk 1 | has: - | desk 1; desk 1")
    Traceback (most recent call last):
    ...
    genenv_engine.environments.alfworld.text.PromptError: duplicate_name: desk 1
    """
    parts = prompt.split(" | ")
    if (
        len(parts) != 4
        or not parts[0].startswith("G: ")
        or not parts[1].startswith("at: ")
        or not parts[2].startswith("has: ")
    ):
        raise PromptError("bad_format: expected 'G: <goal> | at: <place> | has: <object> | <receptacles>'")
    goal = read_goal(parts[0][3:])
    recs, closed, objs, where, marks = [], [], [], [], []
    held = parts[2][5:]
    if held != "-":
        _read_object(held, HELD, objs, where, marks)
    for desc in parts[3].split("; "):
        match = re.fullmatch(rf"({NAME_RE})(?: (open|closed))?(?:: (.+))?", desc)
        if match is None:
            raise PromptError(f"bad_receptacle: {desc[:30]!r}")
        name, state, inside = match.groups()
        _check_receptacle(name, state, recs)
        recs.append(name)
        closed.append(state == "closed")
        for text in inside.split(", ") if inside else ():
            _read_object(text, len(recs) - 1, objs, where, marks)
    at_name = parts[1][4:]
    if at_name != "-" and at_name not in recs:
        raise PromptError(f"inconsistent: agent at unlisted {at_name[:30]!r}")
    world = World(
        goal,
        tuple(recs),
        tuple(objs),
        tuple(where),
        tuple(marks),
        tuple(closed),
        recs.index(at_name) if at_name != "-" else NOWHERE,
    )
    if render_state(world) != prompt:
        raise PromptError("bad_format: not in canonical form")
    for o, name in enumerate(world.objs):
        if rtype(name) in LAMPS and rtype(world.recs[world.where[o]]) in OPENABLE:
            raise PromptError(f"inconsistent: {name} inside openable {world.recs[world.where[o]]}")
    return world


def first_names(prompt: str) -> str | None:
    """``prompt`` with every name at its first listing: a receptacle listed twice keeps its first place and state and
    takes what the later listing held, and an object named twice keeps its first mention. None when no name repeats
    or the line has no receptacle list. Text only: the result is read again by :func:`read_state`.

    >>> first_names("G: put mug in desk | at: - | has: mug 1 | desk 1: mug 1, pen 1; sofa 1; desk 1: cup 1")
    'G: put mug in desk | at: - | has: mug 1 | desk 1: pen 1, cup 1; sofa 1'
    """
    parts = prompt.split(" | ")
    if len(parts) != 4:
        return None
    seen = set() if parts[2] == "has: -" else {" ".join(parts[2].split(" ")[-2:])}
    listed: dict[str, tuple[str, list[str]]] = {}
    for desc in parts[3].split("; "):
        name, _, inside = desc.partition(": ")
        head, items = listed.setdefault(" ".join(name.split(" ")[:2]), (name, []))
        for item in inside.split(", ") if inside else ():
            obj = " ".join(item.split(" ")[-2:])
            if obj not in seen:
                seen.add(obj)
                items.append(item)
    recs = [head + (": " + ", ".join(items) if items else "") for head, items in listed.values()]
    mended = " | ".join(parts[:3] + ["; ".join(recs)])
    return None if mended == prompt else mended


def _check_receptacle(name: str, state: str | None, recs: list[str]) -> None:
    kind = rtype(name)
    if kind not in RECEPTACLES:
        raise PromptError(f"unknown_type: {kind}")
    if name in recs:
        raise PromptError(f"duplicate_name: {name}")
    if (state is None) == (kind in OPENABLE):
        raise PromptError(f"bad_state: {name} {'needs' if state is None else 'cannot have'} open/closed")


def _read_object(text: str, place: int, objs: list[str], where: list[int], marks: list[int]) -> None:
    words = text.split(" ")
    name = " ".join(words[-2:])
    if len(words) < 2 or not re.fullmatch(NAME_RE, name):
        raise PromptError(f"bad_object: {text[:30]!r}")
    kind = rtype(name)
    if kind not in OBJECTS and kind not in LAMPS:
        raise PromptError(f"unknown_type: {kind}")
    if name in objs:
        raise PromptError(f"duplicate_name: {name}")
    bits = 0
    for word in words[:-2]:
        bit = dict(ADJECTIVES).get(word)
        if bit is None or bits & bit:
            raise PromptError(f"bad_object: {text[:30]!r}")
        bits |= bit
    _check_marks(name, bits, place)
    objs.append(name)
    where.append(place)
    marks.append(bits)


def _check_marks(name: str, bits: int, place: int) -> None:
    kind = rtype(name)
    if kind in LAMPS:
        if bits & ~LIT or place == HELD:
            raise PromptError(f"bad_state: {name} is a lamp")
        return
    for word, bit, types in (
        ("lit", LIT, ()),
        ("clean", CLEAN, CLEANABLE),
        ("hot", HOT, HEATABLE),
        ("cool", COOL, COOLABLE),
    ):
        if bits & bit and kind not in types:
            raise PromptError(f"bad_state: {name} cannot be {word}")
    if bits & HOT and bits & COOL:
        raise PromptError(f"bad_state: {name} cannot be hot and cool")
