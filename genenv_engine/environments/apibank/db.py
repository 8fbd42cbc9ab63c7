"""API-Bank-mini mock APIs: a small JSON database, typed API specs, execution and per-API result rules.

API-Bank scores a call by *executing* it against mock APIs over a database and comparing the result
with the gold call's result. This module is that backend, written for this project: eleven APIs
(calculator, alarms, agenda, meetings, health data, stocks) over :func:`initial_db`, plus
``ToolSearcher``, which ranks the API descriptions with a small BM25 implemented here (no embeddings).
Arguments are checked and normalised per parameter type (:func:`normalise_args`) before execution,
and :func:`results_match` holds API-Bank's per-API correctness rules, fuzzy ones included.

>>> db = initial_db()
>>> execute(db, "AddAlarm", {"time": "05:15"})
('success', None)
>>> execute(db, "DeleteAlarm", {"time": "05:16"})
(None, 'no alarm at 05:16')
>>> execute(db, "Calculator", {"formula": "(5+6)*3"})
(33.0, None)
>>> tool_search("wake me")
'AddAlarm(time)'
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass
from typing import Any

from genenv_engine.environments.apibank.syntax import norm_value, quiet_parse

KINDS = ("bp", "hr", "steps", "sleep", "weight")
STOCK_CODES = ("ACME", "BOLT", "CORE", "DYNA", "ECHO")
STOCK_DATES = tuple(f"03-{d:02d}" for d in range(20, 32))
MAX_FORMULA_CHARS = 40
_JACCARD_STOP = frozenset({"a", "an", "the", "my", "some", "to"})


class ApiError(Exception):
    """A mock API refused the call (the ``exception`` of an API-Bank result)."""


# ---------------------------------------------------------------- API specs


@dataclass(frozen=True)
class Api:
    """One mock API: typed parameters (``text``/``code``/``formula``/``int``/``time``/``date``/``datetime``)."""

    name: str
    params: tuple[tuple[str, str], ...]
    description: str

    @property
    def signature(self) -> str:
        """The compact form listed in prompts, e.g. ``AddAlarm(time)``."""
        return f"{self.name}({','.join(p for p, _ in self.params)})"

    def tool(self) -> dict[str, Any]:
        """JSON-schema doc in the shared task schema."""
        props = {
            p: ({"type": "integer"} if kind == "int" else {"type": "string", "format": kind}) for p, kind in self.params
        }
        return {
            "name": self.name,
            "description": self.description,
            "parameters": {"type": "object", "properties": props, "required": [p for p, _ in self.params]},
        }


APIS: dict[str, Api] = {
    a.name: a
    for a in (
        Api(
            "Calculator",
            (("formula", "formula"),),
            "calculate compute work out a math formula with numbers + - * / and brackets",
        ),
        Api("AddAlarm", (("time", "time"),), "add set a new alarm clock: wake me at a time"),
        Api("DeleteAlarm", (("time", "time"),), "delete cancel remove the alarm clock at a time"),
        Api("QueryAlarm", (), "query list show all alarms"),
        Api(
            "AddAgenda",
            (("what", "text"), ("date", "date"), ("place", "text")),
            "add plan note down an agenda item: what, date and place",
        ),
        Api("QueryAgenda", (("date", "date"),), "query show agenda items: what is planned on a date"),
        Api(
            "AddMeeting",
            (("topic", "text"), ("time", "datetime")),
            "add book set up a meeting with a topic at a date and time",
        ),
        Api("QueryMeeting", (("date", "date"),), "query list any meetings on a date"),
        Api(
            "RecordHealthData",
            (("kind", "text"), ("value", "int")),
            "record log save health data: a kind and its value",
        ),
        Api("QueryHealthData", (("kind", "text"),), "query show check health data history for a kind"),
        Api("QueryStock", (("code", "code"), ("date", "date")), "query the stock price of a stock code on a date"),
        Api("ToolSearcher", (("keywords", "text"),), "search the api tools by keywords"),
    )
}
SEARCHABLE = tuple(name for name in APIS if name != "ToolSearcher")


# ---------------------------------------------------------------- the database


def _stock_table() -> dict[str, dict[str, float]]:
    bases = (41.0, 12.5, 88.0, 150.0, 7.5)
    return {
        code: {date: base + ((int(date[3:]) * 7 + i * 3) % 11) * 0.5 for date in STOCK_DATES}
        for i, (code, base) in enumerate(zip(STOCK_CODES, bases, strict=False))
    }


_INIT_DB: dict[str, Any] = {
    "alarms": ["06:30", "07:00", "07:45", "12:00", "18:30", "21:15"],
    "agenda": [
        {"what": w, "date": d, "place": p}
        for w, d, p in (
            ("dentist", "03-22", "clinic"),
            ("gym", "03-24", "park"),
            ("lunch", "03-24", "cafe"),
            ("piano", "03-27", "home"),
            ("movie", "04-01", "mall"),
            ("swim", "04-03", "pool"),
        )
    ],
    "meetings": [
        {"topic": t, "time": when}
        for t, when in (
            ("budget", "03-23 10:00"),
            ("sync", "03-24 09:30"),
            ("review", "03-27 14:00"),
            ("demo", "03-30 16:00"),
            ("hiring", "04-04 11:00"),
        )
    ],
    "health": [
        {"kind": k, "value": v}
        for k, v in (("bp", 118), ("bp", 125), ("hr", 72), ("steps", 8400), ("sleep", 420), ("weight", 70))
    ],
    "stocks": _stock_table(),
}


_INIT_JSON = json.dumps(_INIT_DB)


def initial_db() -> dict[str, Any]:
    """A fresh deep copy of the mock database every task starts from (JSON-able)."""
    return json.loads(_INIT_JSON)


def copy_db(db: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of a database state (a JSON round trip: states are plain JSON)."""
    return json.loads(json.dumps(db))


def normalise_args(name: str, args: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """(normalised args, None) or (None, error) with error ``missing_arg``/``unexpected_arg``/``bad_arg_type``."""
    spec = dict(APIS[name].params)
    if any(p not in args for p in spec):
        return None, "missing_arg"
    if any(k not in spec for k in args):
        return None, "unexpected_arg"
    try:
        return {p: norm_value(kind, args[p]) for p, kind in spec.items()}, None
    except TypeError:
        return None, "bad_arg_type"


# ---------------------------------------------------------------- calculator (safe arithmetic, no eval)


def calculate(formula: str) -> float:
    """Evaluate ``+ - * /`` and brackets over numbers by walking the AST; raise ApiError otherwise.

    >>> calculate("(12+7)*3/2"), calculate("-4+1")
    (28.5, -3.0)
    """
    if len(formula) > MAX_FORMULA_CHARS:
        raise ApiError("formula too long")
    try:
        tree = quiet_parse(formula.strip())
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ApiError("invalid formula") from None
    result = float(_arith(tree.body))
    if not math.isfinite(result):
        raise ApiError("result out of range")
    return round(result, 6)


def _arith(node: ast.expr) -> float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        if abs(node.value) > 1e9:
            raise ApiError("number too large")
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _arith(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        left, right = _arith(node.left), _arith(node.right)
        if isinstance(node.op, ast.Div):
            if right == 0:
                raise ApiError("division by zero")
            return left / right
        return (
            left + right
            if isinstance(node.op, ast.Add)
            else left - right
            if isinstance(node.op, ast.Sub)
            else left * right
        )
    raise ApiError("invalid formula")


# ---------------------------------------------------------------- ToolSearcher: BM25 over descriptions


def _tokens(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())


class Bm25:
    """Okapi BM25 (k1=1.5, b=0.75, non-negative idf) over a fixed list of documents."""

    def __init__(self, docs: list[str], k1: float = 1.5, b: float = 0.75) -> None:
        self.docs = [_tokens(d) for d in docs]
        self.k1, self.b = k1, b
        self.avg = sum(map(len, self.docs)) / len(self.docs)
        n = len(self.docs)
        vocab = {t for d in self.docs for t in d}
        self.idf = {
            t: math.log((n - df + 0.5) / (df + 0.5) + 1) for t in vocab for df in [sum(t in d for d in self.docs)]
        }

    def scores(self, query: str) -> list[float]:
        """One score per document for the (deduplicated) query tokens."""
        terms = set(_tokens(query))
        out = []
        for doc in self.docs:
            norm = self.k1 * (1 - self.b + self.b * len(doc) / self.avg)
            out.append(
                sum(self.idf[t] * doc.count(t) * (self.k1 + 1) / (doc.count(t) + norm) for t in terms if t in self.idf)
            )
        return out


_BM25 = Bm25([APIS[name].description for name in SEARCHABLE])


def tool_search(keywords: str) -> str:
    """The signature of the best-matching API (ties go to catalog order); ApiError if nothing matches."""
    scores = _BM25.scores(keywords)
    best = max(range(len(scores)), key=lambda i: (scores[i], -i))
    if scores[best] <= 0:
        raise ApiError("no api matches the keywords")
    return APIS[SEARCHABLE[best]].signature


# ---------------------------------------------------------------- execution


def execute(db: dict[str, Any], name: str, args: dict[str, Any]) -> tuple[Any, str | None]:
    """Run API ``name`` with normalised ``args`` on ``db`` (mutated): (output, None) or (None, exception)."""
    try:
        return _HANDLERS[name](db, **args), None
    except ApiError as err:
        return None, str(err)


def _add_alarm(db: dict[str, Any], time: str) -> str:
    if time in db["alarms"]:
        raise ApiError(f"alarm at {time} exists")
    db["alarms"] = sorted(db["alarms"] + [time])
    return "success"


def _delete_alarm(db: dict[str, Any], time: str) -> str:
    if time not in db["alarms"]:
        raise ApiError(f"no alarm at {time}")
    db["alarms"].remove(time)
    return "success"


def _add_meeting(db: dict[str, Any], topic: str, time: str) -> str:
    if any(m["time"] == time for m in db["meetings"]):
        raise ApiError(f"slot {time} is taken")
    db["meetings"].append({"topic": topic, "time": time})
    return "success"


def _record_health(db: dict[str, Any], kind: str, value: int) -> str:
    if kind not in KINDS:
        raise ApiError(f"unknown kind {kind}")
    if not 0 < value <= 99999:
        raise ApiError("value out of range")
    db["health"].append({"kind": kind, "value": value})
    return "success"


def _query_health(db: dict[str, Any], kind: str) -> list[int]:
    if kind not in KINDS:
        raise ApiError(f"unknown kind {kind}")
    return [h["value"] for h in db["health"] if h["kind"] == kind]


def _query_stock(db: dict[str, Any], code: str, date: str) -> float:
    if code not in db["stocks"]:
        raise ApiError(f"unknown stock {code}")
    if date not in db["stocks"][code]:
        raise ApiError(f"no price on {date}")
    return db["stocks"][code][date]


def _add_agenda(db: dict[str, Any], what: str, date: str, place: str) -> str:
    db["agenda"].append({"what": what, "date": date, "place": place})
    return "success"


_HANDLERS = {
    "Calculator": lambda db, formula: calculate(formula),
    "AddAlarm": _add_alarm,
    "DeleteAlarm": _delete_alarm,
    "QueryAlarm": lambda db: list(db["alarms"]),
    "AddAgenda": _add_agenda,
    "QueryAgenda": lambda db, date: sorted([e["what"], e["place"]] for e in db["agenda"] if e["date"] == date),
    "AddMeeting": _add_meeting,
    "QueryMeeting": lambda db, date: sorted(
        [m["topic"], m["time"]] for m in db["meetings"] if m["time"].startswith(date)
    ),
    "RecordHealthData": _record_health,
    "QueryHealthData": _query_health,
    "QueryStock": _query_stock,
    "ToolSearcher": lambda db, keywords: tool_search(keywords),
}


# ---------------------------------------------------------------- per-API correctness rules


def jaccard(a: str, b: str) -> float:
    """Token Jaccard similarity ignoring a few filler words.

    >>> jaccard("the gym", "gym"), jaccard("gym class", "gym")
    (1.0, 0.5)
    """
    ta, tb = set(_tokens(a)) - _JACCARD_STOP, set(_tokens(b)) - _JACCARD_STOP
    return len(ta & tb) / len(ta | tb) if ta | tb else 1.0


def results_match(name: str, gold_args: dict[str, Any], gold_out: Any, args: dict[str, Any], out: Any) -> bool:
    """API-Bank's per-API rule on two executed calls of ``name`` (normalised args, outputs).

    Calculator: outputs numerically equal (any formula). ToolSearcher: same API retrieved (any keywords).
    AddAgenda: same date and place, ``what`` token Jaccard above 0.5. Others: same inputs and outputs.
    """
    if name == "Calculator":
        return math.isclose(out, gold_out, rel_tol=1e-6, abs_tol=1e-9)
    if name == "ToolSearcher":
        return out == gold_out
    if name == "AddAgenda":
        return (args["date"], args["place"]) == (gold_args["date"], gold_args["place"]) and jaccard(
            args["what"], gold_args["what"]
        ) > 0.5
    return args == gold_args and out == gold_out
