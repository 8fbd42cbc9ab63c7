"""ALFWorld PDDL for the ``alfworld_textworld`` benchmark: a mini state line as an ALFWorld PDDL problem.

A state of the ALFWorld-mini world (:mod:`..world`, written and read as a state line by
:mod:`..text`) becomes a problem over ALFWorld's own PDDL domain (``alfworld/data/alfred.pddl``
from the ``alfworld`` wheel), so that the real TextWorld engine plays it and Fast-Downward plans it:

- every receptacle is a ``receptacle`` at its own ``location`` (``receptacleAtLocation``), typed
  ``<Type>Type``; the openable ones (``openable``) are ``opened`` unless the line says ``closed``;
- every object is an ``object`` typed ``<Type>Type``, ``inReceptacle`` and ``objectAtLocation`` where the
  line puts it (or ``holds``/``holdsAny`` for the agent's hand), ``pickupable`` (lamps are
  ``toggleable`` instead), ``heatable``/``coolable``/``cleanable`` from ALFWorld's ``VAL_ACTION_OBJECTS``,
  ``isHot``/``isCool``/``isClean`` from its adjectives, a lit lamp ``isOn`` and ``isToggled`` (read back
  as lit from ``isToggled``, the look goal's condition: unlike the mini, switching a lamp off again leaves
  ALFWorld's ``isToggled`` set);
- ``canContain`` holds for every receptacle/object type pair ALFWorld's ``VAL_RECEPTACLE_OBJECTS`` allows
  (so unlike the mini, an apple cannot be put on a sofa);
- the agent starts at ``loc_start`` (the middle of the room, no receptacle) unless the line says where;
- the goal is ALFWorld's own goal formula for the task type (``alfworld.gen.goal_library``).

The problem has no ``:metric``, so Fast-Downward minimises the number of actions: the plan length is the
difficulty feature, as in the mini. Commands map between the mini grammar and ALFWorld 0.4.2's
(``put X in/on Y`` is ``move X to Y`` there, ``toggle X`` is ``use X``) by :func:`tw_command`.
Nothing here runs generated text: a state line is parsed by :func:`~..text.read_state` first.
"""

from __future__ import annotations

from functools import cache
from types import SimpleNamespace

from genenv_engine.environments.alfworld.planner import diagnose
from genenv_engine.environments.alfworld.world import (
    CLEAN,
    COOL,
    HELD,
    HOT,
    LAMPS,
    LIT,
    OPENABLE,
    TASK_TYPES,
    Command,
    World,
    rtype,
)

START = "loc_start"
"""The agent's location before it goes anywhere."""
DOMAIN_TYPES = ("sinkbasin", "microwave", "fridge")
"""Receptacle types the domain names in preconditions (declared in every problem)."""
DOMAIN_OBJECT_TYPES = ("knife", "butterknife")
"""Object types the domain names in preconditions (declared in every problem)."""


@cache
def catalog() -> SimpleNamespace:
    """ALFWorld's tables from the ``alfworld`` package, lower-cased: type names, canContain, action sets."""
    from alfworld.gen import constants, goal_library  # the optional package (imported only here)

    camel = {name.lower(): name for name in [*constants.OBJECTS, *constants.RECEPTACLES]}
    can = {r.lower(): frozenset(o.lower() for o in objs) for r, objs in constants.VAL_RECEPTACLE_OBJECTS.items()}
    actions = {k.lower(): frozenset(o.lower() for o in v) for k, v in constants.VAL_ACTION_OBJECTS.items()}
    goals = {task_type: goal_library.gdict[task_type]["pddl"] for task_type in TASK_TYPES.values()}
    return SimpleNamespace(camel=camel, can=can, actions=actions, goals=goals)


def pddl_id(name: str) -> str:
    """The PDDL id of an entity name: ``"apple 1"`` -> ``apple_1``."""
    return name.replace(" ", "_")


def type_id(kind: str) -> str:
    """The PDDL type constant of a mini type: ``"countertop"`` -> ``CounterTopType``."""
    return catalog().camel.get(kind, kind) + "Type"


def static_problem(world: World) -> str:
    """Why the goal is unreachable on ALFWorld's rules, before any planning ("" when nothing is missing).

    The mini's own checks (the goal objects, target and appliance exist) plus ALFWorld's ``canContain``
    for the goal object in the target receptacle type.
    """
    missing = diagnose(world)
    if missing:
        return missing
    goal = world.goal
    if goal.kind != "look" and goal.obj not in catalog().can.get(goal.target, frozenset()):
        return f"{goal.target} cannot hold {goal.obj} (ALFWorld canContain)"
    return ""


def problem_pddl(world: World, name: str = "genenv") -> str:
    """The ALFWorld PDDL problem of a mini state (see the module docstring)."""
    cat = catalog()
    objects, init = ["agent1 - agent", f"{START} - location"], ["(= (total-cost) 0)"]
    rtypes = sorted({rtype(r) for r in world.recs} | set(DOMAIN_TYPES))
    otypes = sorted({rtype(o) for o in world.objs} | set(DOMAIN_OBJECT_TYPES) | {world.goal.obj})
    objects += [f"{type_id(t)} - rtype" for t in rtypes] + [f"{type_id(t)} - otype" for t in otypes]
    init += [f"(canContain {type_id(r)} {type_id(o)})" for r in rtypes for o in otypes if o in cat.can.get(r, ())]
    for r, rec in enumerate(world.recs):
        rid = pddl_id(rec)
        objects += [f"{rid} - receptacle", f"loc_{rid} - location"]
        init += [f"(receptacleType {rid} {type_id(rtype(rec))})", f"(receptacleAtLocation {rid} loc_{rid})"]
        if rtype(rec) in OPENABLE:
            init += [f"(openable {rid})"] + ([] if world.closed[r] else [f"(opened {rid})"])
    for o, obj in enumerate(world.objs):
        init += _object_facts(world, o, obj, cat)
        objects.append(f"{pddl_id(obj)} - object")
    init.append(f"(atLocation agent1 {START if world.at < 0 else 'loc_' + pddl_id(world.recs[world.at])})")
    return (
        f"(define (problem {name})\n (:domain alfred)\n (:objects\n  " + "\n  ".join(objects) + ")\n"
        " (:init\n  " + "\n  ".join(init) + ")\n" + goal_pddl(world) + "\n"
    )


def _object_facts(world: World, o: int, obj: str, cat: SimpleNamespace) -> list[str]:
    oid, kind, marks = pddl_id(obj), rtype(obj), world.marks[o]
    facts = [f"(objectType {oid} {type_id(kind)})"]
    if kind in LAMPS:
        facts.append(f"(toggleable {oid})")
        facts += [f"(isOn {oid})", f"(isToggled {oid})"] if marks & LIT else []
    else:
        facts.append(f"(pickupable {oid})")
    facts += [
        f"({fact} {oid})"
        for fact, table in (("heatable", "heatable"), ("coolable", "coolable"), ("cleanable", "cleanable"))
        if kind in cat.actions[table]
    ]
    facts += [f"({fact} {oid})" for fact, bit in (("isHot", HOT), ("isCool", COOL), ("isClean", CLEAN)) if marks & bit]
    where = world.where[o]
    if where == HELD:
        return facts + [f"(holds agent1 {oid})", "(holdsAny agent1)"]
    rid = pddl_id(world.recs[where])
    return facts + [f"(inReceptacle {oid} {rid})", f"(objectAtLocation {oid} loc_{rid})"]


def goal_pddl(world: World) -> str:
    """ALFWorld's goal formula for the task type (it also closes the ``define``)."""
    goal = world.goal
    template = catalog().goals[goal.task_type]
    camel = catalog().camel
    text = template.format(
        obj=camel.get(goal.obj, goal.obj),
        recep=camel.get(goal.target, goal.target),
        toggle=camel.get(goal.target, goal.target),
        mrecep="",
    )
    return text.replace("#", "-").strip()


def tw_command(cmd: Command) -> str:
    """A parsed mini command in ALFWorld 0.4.2's spelling (what TextWorld lists as admissible).

    >>> from genenv_engine.environments.alfworld.world import parse_command
    >>> tw_command(parse_command("put apple 1 in/on fridge 1")), tw_command(parse_command("toggle desklamp 1"))
    ('move apple 1 to fridge 1', 'use desklamp 1')
    """
    if cmd.verb == "put":
        return f"move {cmd.args[0]} to {cmd.args[1]}"
    if cmd.verb == "toggle":
        return f"use {cmd.args[0]}"
    return cmd.text


def world_from_facts(template: World, facts: list) -> World:
    """The mini state a TextWorld state is in: where things are, what is open, hot, cool, clean or lit.

    ``facts`` are TextWorld propositions over PDDL ids (``state["_facts"]``); ``template`` supplies the
    goal and the listing order of receptacles and objects. A lamp is lit iff ``isToggled`` holds.
    """
    recs = {pddl_id(r): i for i, r in enumerate(template.recs)}
    objs = {pddl_id(o): i for i, o in enumerate(template.objs)}
    where, marks = [None] * len(template.objs), [0] * len(template.objs)
    closed, at = [rtype(r) in OPENABLE for r in template.recs], -1
    bits = {"ishot": HOT, "iscool": COOL, "isclean": CLEAN, "istoggled": LIT}
    for fact in facts:
        name, args = fact.name.lower(), [v.name for v in fact.arguments]
        if name == "inreceptacle" and args[0] in objs and args[1] in recs:
            where[objs[args[0]]] = recs[args[1]]
        elif name == "holds" and args[1] in objs:
            where[objs[args[1]]] = HELD
        elif name == "opened" and args[0] in recs:
            closed[recs[args[0]]] = False
        elif name in bits and args[0] in objs:
            marks[objs[args[0]]] |= bits[name]
        elif name == "atlocation" and args[1] != START:
            at = recs[args[1].removeprefix("loc_")]
    if None in where:
        raise ValueError(f"TextWorld state places no {template.objs[where.index(None)]}")
    return World(template.goal, template.recs, template.objs, tuple(where), tuple(marks), tuple(closed), at)
