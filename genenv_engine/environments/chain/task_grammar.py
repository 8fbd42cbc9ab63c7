"""The Lark grammar (llguidance's dialect) of a chain task as the simulator writes it.

:data:`RULES` defines ``prompt`` (``apply <names> | start <n> | <definitions> [| hint <calls>]``, the sections in
the order :func:`~genenv_engine.environments.chain.grammar.render_prompt` writes them) and ``answer`` (the calls
``f(5)=8; g(8)=16; ...`` without brackets), with the limits of :mod:`~genenv_engine.environments.chain.grammar`:
one-letter names other than ``x``, 1-8 names to apply, 1-10 definitions of the four rule shapes with their
constants, every value in 0-99 without leading zeros, and a hint of fewer calls than the chain has.

Calls are chained: the hint's first call takes the start value (a rule per start value), and each later call of
the hint or the answer takes the previous call's result (one terminal holds a result and the next call's
argument). What a context-free grammar cannot carry stays with the validator: the arithmetic, the names being
defined once and applied in the ``apply`` order, and the answer agreeing with the prompt.
"""

from __future__ import annotations

import json
import re

from genenv_engine.environments.chain.grammar import (
    CALL_JOIN,
    CONSTANTS,
    MAX_FUNCTIONS,
    MAX_K,
    MAX_VALUE,
    NAMES,
    SECTION_JOIN,
)

VALUES = range(MAX_VALUE + 1)
NUM = "/0|[1-9][0-9]?/"
"""A value 0-99 as the reader takes it (no sign, no leading zero)."""
assert MAX_VALUE == 99, "NUM spells out the value range"


def _link() -> str:
    """The regex joining two calls: a result, the join and the next call up to its ``=``, taking that result as
    its argument (``8; g(8)=``): one terminal, so the chaining costs the parser nothing."""
    name = f"[{NAMES}]"
    return "|".join(f"{v}{CALL_JOIN}{name}\\({v}\\)=" for v in VALUES)


def _calls(arg: str, most: int) -> str:
    """1..``most`` chained calls whose first takes ``arg`` (a literal or ``NUM``)."""
    links = f" LINK{{0,{most - 1}}}" if most > 1 else ""
    return f'NAME "(" {arg} ")="{links} NUM'


def _rule_shape() -> str:
    """The body of a definition, ``x<op><c>`` with the constants the shape allows."""
    shapes = {}
    for op, cs in CONSTANTS.items():
        shapes.setdefault((cs.start, cs.stop - 1), []).append(op)
    return " | ".join(f"/[{''.join(map(re.escape, ops))}][{lo}-{hi}]/" for (lo, hi), ops in shapes.items())


def build_rules() -> str:
    """The grammar's rules: ``prompt``, ``answer`` and the sections they use."""
    sep = json.dumps(SECTION_JOIN)
    lines = [
        "prompt: "
        + " | ".join(
            f'"apply " NAME (" " NAME){{{n - 1}}} " | start " s{n}' if n > 1 else '"apply " NAME " | start " s1'
            for n in range(1, MAX_K + 1)
        ),
        f"answer: {_calls('NUM', MAX_K)}",
    ]
    for n in range(1, MAX_K + 1):  # s<n>: the start value, definitions and a hint of fewer than n calls from it
        hints = [f' ({sep} "hint " {_calls(json.dumps(str(a)), n - 1)})?' if n > 1 else "" for a in VALUES]
        lines.append(
            f"s{n}: " + " | ".join(f'"{a}{SECTION_JOIN}" defs{hint}' for a, hint in zip(VALUES, hints, strict=False))
        )
    lines += [
        f'defs: def (" " def){{0,{MAX_FUNCTIONS - 1}}}',
        'def: NAME "(x)=x" SHAPE',
        f"SHAPE: {_rule_shape()}",
        f"NAME: /[{NAMES}]/",
        f"NUM: {NUM}",
        f"LINK: /{_link()}/",
    ]
    return "\n".join(lines) + "\n"


RULES = build_rules()
"""The Lark rules of a chain task (``prompt`` and ``answer``)."""
