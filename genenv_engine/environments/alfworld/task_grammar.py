"""The Lark grammar (llguidance's dialect) of an ALFWorld-mini task as the simulator writes it.

:func:`task_rules` gives the rules ``prompt`` (a state line, see :mod:`.text`) and ``answer`` (a command the
planner can return as optimal), built from the catalog of :mod:`.world` so every type name is one the
validator knows. The grammar carries what a context-free grammar can: the fixed keywords and separators,
the six goal forms with the object types each allows (``put hot X`` only for a heatable ``X``), ``open`` or
``closed`` exactly on openable receptacles, the adjectives each object type may take in their canonical
order, lamps only as ``[lit ]<lamp> <n>`` and never held nor inside an openable receptacle, instance numbers
as the mini numbers them (1-7 for a receptacle, 1-9 for an object), ``at:`` naming a receptacle the line lists,
at most 7 receptacles and 9 objects in one receptacle, and answers whose verb fits its arguments (``heat`` a
heatable object with a microwave, ``use`` a lamp, ...).

Left to the validator: a name listed once (a grammar would have to remember every name listed so far; a
negated regex over the names, which llguidance has, runs out of its lexer's state budget), the object totals,
the 180-character cap, whether the world is solvable, and whether the answer is optimal (the answer rule cannot
see the prompt).
"""

from __future__ import annotations

from genenv_engine.environments.alfworld.world import (
    CLEANABLE,
    COOLABLE,
    HEATABLE,
    LAMPS,
    MAX_OBJECTS,
    MAX_RECEPTACLES,
    OBJECTS,
    OPENABLE,
    PROCESS,
    RECEPTACLES,
)

REC_NUMBER = f"[1-{MAX_RECEPTACLES}]"
"""A receptacle's instance number: the mini numbers each type's receptacles 1, 2, ... in listing order."""
OBJ_NUMBER = f"[1-{MAX_OBJECTS}]"
"""An object's instance number, numbered likewise."""


def _words(types) -> str:
    return "(" + "|".join(sorted(types)) + ")"


def _names(types, number: str = OBJ_NUMBER) -> str:
    """A regex of the entity names of ``types``: ``<type> <n>``."""
    return f"/{_words(types)} {number}/"


def _thing_terminals() -> dict[str, str]:
    """One terminal per adjective class: object types that take the same adjectives, with them in order."""
    classes: dict[tuple[bool, bool, bool], list[str]] = {}
    for kind in OBJECTS:
        classes.setdefault((kind in CLEANABLE, kind in HEATABLE, kind in COOLABLE), []).append(kind)
    out = {}
    for (clean, hot, cool), kinds in sorted(classes.items()):
        temperature = [word for word, ok in (("hot", hot), ("cool", cool)) if ok]
        prefix = ("(clean )?" if clean else "") + (f"(({'|'.join(temperature)}) )?" if temperature else "")
        out[f"THING_{'C' * clean}{'H' * hot}{'K' * cool or 'P'}"] = f"/{prefix}{_words(kinds)} {OBJ_NUMBER}/"
    return out


def _standing(name: str) -> str:
    """The rule for ``at: <name>``: the rest of the prompt, which lists ``name`` among its receptacles."""
    inside = ' (" open" | " closed") shut_inside' if name.split(" ")[0] in OPENABLE else " plain_inside"
    lists = []
    for before in range(MAX_RECEPTACLES):
        after = MAX_RECEPTACLES - 1 - before
        lists.append(f'{f"before{before} " if before else ""}"{name}"{inside}{f" after{after}" if after else ""}')
    return f'at_{name.replace(" ", "_")}: "{name} | has: " held " | " ({" | ".join(lists)})'


def task_rules() -> str:
    """The ``prompt`` and ``answer`` rules with their terminals."""
    things = _thing_terminals()
    plain = sorted(RECEPTACLES - OPENABLE)
    names = [f"{kind} {n}" for kind in sorted(RECEPTACLES) for n in range(1, MAX_RECEPTACLES + 1)]
    standing = [_standing(name) for name in names]
    more, inside = MAX_RECEPTACLES - 1, MAX_OBJECTS - 1
    rules = [
        'prompt: "G: " goal " | at: " located',
        f'located: "- | has: " held " | " rec ("; " rec){{0,{more}}} | '
        + " | ".join(rule.split(":", 1)[0] for rule in standing),
        *standing,
        *(f'before{k}: (rec "; "){{{k}}}' for k in range(1, MAX_RECEPTACLES)),
        *(f'after{k}: ("; " rec){{0,{k}}}' for k in range(1, MAX_RECEPTACLES)),
        'goal: "look at " OBJ_TYPE " under " LAMP_TYPE | "put " putgoal " in " REC_TYPE',
        'putgoal: OBJ_TYPE | "two " OBJ_TYPE | "clean " CLEAN_TYPE | "hot " HEAT_TYPE | "cool " COOL_TYPE',
        'held: "-" | thing',
        'rec: SHUT (" open" | " closed") shut_inside | PLAIN plain_inside',
        f'shut_inside: (": " thing (", " thing){{0,{inside}}})?',
        f'plain_inside: (": " item (", " item){{0,{inside}}})?',
        "item: thing | LAMP",
        "thing: " + " | ".join(things),
        'answer: "go to " (SHUT | PLAIN) | "open " SHUT | "take " OBJ " from " (SHUT | PLAIN)'
        ' | "put " OBJ " in/on " (SHUT | PLAIN) | "heat " HEAT_OBJ " with " MICROWAVE'
        ' | "cool " COOL_OBJ " with " FRIDGE | "clean " CLEAN_OBJ " with " BASIN | ("use " | "toggle ") LAMP_NAME',
        f"OBJ_TYPE: /{_words(OBJECTS)}/",
        f"LAMP_TYPE: /{_words(LAMPS)}/",
        f"REC_TYPE: /{_words(RECEPTACLES)}/",
        f"CLEAN_TYPE: /{_words(CLEANABLE)}/",
        f"HEAT_TYPE: /{_words(HEATABLE)}/",
        f"COOL_TYPE: /{_words(COOLABLE)}/",
        f"SHUT: {_names(OPENABLE, REC_NUMBER)}",
        f"PLAIN: {_names(plain, REC_NUMBER)}",
        f"LAMP: /(lit )?{_words(LAMPS)} {OBJ_NUMBER}/",
        *(f"{name}: {regex}" for name, regex in things.items()),
        f"OBJ: {_names(OBJECTS)}",
        f"CLEAN_OBJ: {_names(CLEANABLE)}",
        f"HEAT_OBJ: {_names(HEATABLE)}",
        f"COOL_OBJ: {_names(COOLABLE)}",
        f"LAMP_NAME: {_names(LAMPS)}",
        f"MICROWAVE: {_names(PROCESS['heat'][3], REC_NUMBER)}",
        f"FRIDGE: {_names(PROCESS['cool'][3], REC_NUMBER)}",
        f"BASIN: {_names(PROCESS['clean'][3], REC_NUMBER)}",
    ]
    return "\n".join(rules) + "\n"


TASK_RULES = task_rules()
"""The rules of :func:`task_rules` (the catalog is fixed, so they are built once, on first import)."""
