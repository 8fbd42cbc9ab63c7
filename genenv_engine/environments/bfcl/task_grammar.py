"""The Lark grammar (llguidance's dialect) of a BFCL-mini task as the simulator writes it.

:data:`RULES` defines ``prompt`` (``F: <signatures> | Q: <query>``) and ``answer`` (the canonical calls), built
from :data:`~genenv_engine.environments.bfcl.catalog.CATALOG` so that every signature, verb, cue, enum value and
keyword is exactly the catalog's: grammar-constrained decoding then writes only prompts :func:`read_prompt` can
read (1-6 signatures, 1-3 calls, integers 0-999 without leading zeros) and answers in the canonical
``name(k=v,...)`` form joined by ``;``.

The first call's function is always among the listed ones. What a context-free grammar cannot carry stays with the
validator: a signature listed twice, the later calls' functions being listed, the length caps, and the answer
agreeing with the query.
"""

from __future__ import annotations

import json
import re

from genenv_engine.environments.bfcl.catalog import (
    ANSWER_JOIN,
    CATALOG,
    MAX_CALLS,
    MAX_FUNCTIONS,
    QUERY_JOIN,
    Function,
    Param,
)

INT = r"/0|[1-9][0-9]{0,2}/"
"""An integer 0-999 as the reader takes it (no sign, no leading zero)."""


def _lit(text: str) -> str:
    return json.dumps(text)


def _value(param: Param) -> str:
    return "(" + " | ".join(map(_lit, param.values)) + ")" if param.kind == "enum" else "INT"


def _query(function: Function) -> str:
    """A call as the query phrases it: a verb, each required value after its cue, optional ones with theirs."""
    parts = ["(" + " | ".join(map(_lit, function.verbs)) + ")"]
    for p in function.params:
        piece = f"{_lit(' ' + p.cue + ' ' if p.cue else ' ')} {_value(p)}"
        parts.append(f"({piece})?" if p.optional else piece)
    return " ".join(parts)


def _answer(function: Function) -> str:
    """The canonical answer call: keyword arguments in signature order, optional ones omitted or given."""
    assert not function.params[0].optional, "a signature starts with a required parameter"
    parts = [_lit(f"{function.name}(")]
    for i, p in enumerate(function.params):
        piece = f"{_lit((',' if i else '') + p.name + '=')} {_value(p)}"
        parts.append(f"({piece})?" if p.optional else piece)
    return " ".join(parts + [_lit(")")])


def _regex(text: str) -> str:
    """``text`` as a literal in a Lark regex (``/.../``)."""
    return re.sub(r"([()|.*+?\[\]{}^$\\/])", r"\\\1", text)


def _heads() -> list[str]:
    """Terminals ``HEAD_<NAME>``: 1-6 signatures, ``name``'s among them, and the `` | Q: `` after them.

    One terminal each (regexes intersected) rather than rules: the parser does not track which signature is the
    called one, and the lexer ends the list only at the separator it holds."""
    sig = "(" + "|".join(_regex(f.signature) for f in CATALOG.values()) + ")"
    tail = _regex(" | Q: ")
    lines = [f"SIGS: /{sig}( {sig}){{0,{MAX_FUNCTIONS - 1}}}{tail}/"]
    lines += [f"HEAD_{n.upper()}: SIGS & /({sig} )*{_regex(f.signature)}( {sig})*{tail}/" for n, f in CATALOG.items()]
    return lines


def build_rules() -> str:
    """The grammar's rules: ``prompt``, ``answer`` and the per-function rules they use."""
    names = list(CATALOG)
    lines = [
        "prompt: "
        + " | ".join(
            f'"F: " HEAD_{n.upper()} query_{n} ({_lit(QUERY_JOIN)} query){{0,{MAX_CALLS - 1}}}' for n in names
        ),
        f"answer: call ({_lit(ANSWER_JOIN)} call){{0,{MAX_CALLS - 1}}}",
        "query: " + " | ".join(f"query_{n}" for n in names),
        "call: " + " | ".join(f"call_{n}" for n in names),
    ]
    for n, f in CATALOG.items():
        lines += [f"query_{n}: {_query(f)}", f"call_{n}: {_answer(f)}"]
    return "\n".join(lines + _heads() + [f"INT: {INT}"]) + "\n"


RULES = build_rules()
"""The Lark rules of a BFCL-mini task (``prompt`` and ``answer``)."""
