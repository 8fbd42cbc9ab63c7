"""The Lark grammar (llguidance's dialect) of an API-Bank-mini task as the simulator writes it.

:func:`build_rules` writes the rules ``prompt`` and ``answer`` from the dialogue grammar of
:mod:`~genenv_engine.environments.apibank.dialogue` and the mock database of
:mod:`~genenv_engine.environments.apibank.db`, so that signatures, verbs, cues, reference phrases and questions are
exactly theirs. A prompt is ``APIs: <signatures> | <turns>`` in one of the reader's dialogue shapes:

* ``ToolSearcher(keywords)`` listed alone, then a request (any verb: each retrieves its own API), optionally
  followed by ``R: <the requested API's signature>``;
* 1-5 other signatures, the first request's API among them, then a request; or a request, the replayed call of
  that API and a follow-up request that refers (``then``, ``that day``, ``that*2``...) to a slot the call has;
  or a request missing one slot, the AI's question for that slot and the user's value.

Values are what the reader reads and the gold call executes on the initial database: times and dates valid
(``7:30pm``, ``mar 26``, ``3/26``, ``03-26``), an existing alarm to delete and a new one to add, stock codes and
price dates of the database, health kinds, arithmetic formulas that compute, words that are not reserved, and
an agenda item whose words keep the gold answer within the reader's length cap. The answer is the canonical
``API-Request: [Name(k='v')]`` call.

What a context-free grammar cannot carry stays with the validator: a signature listed twice, the follow-up's
API being listed, the replayed call agreeing with the request, the prompt's length cap, and the answer agreeing
with the prompt.
"""

from __future__ import annotations

import calendar
import functools
import itertools
import json
import re

from genenv_engine.environments.apibank.db import APIS, KINDS, SEARCHABLE, STOCK_CODES, STOCK_DATES, initial_db
from genenv_engine.environments.apibank.dialogue import (
    _TIME,
    GRAMMAR,
    HEAD,
    MAX_APIS,
    QUESTIONS,
    REFS,
    RESERVED,
    TURN_SEP,
    answer_text,
    call_slots,
    slots_of,
)
from genenv_engine.environments.apibank.syntax import MONTHS, YEAR, norm_time

ALARMS = tuple(initial_db()["alarms"])
"""The alarms of the initial database (the ones a request may delete, and may not add)."""
NO_REFERENCE = {("AddAlarm", "AddAlarm"), ("DeleteAlarm", "DeleteAlarm")}
"""(first, follow-up) API pairs whose follow-up cannot execute: the alarm exists, or is already gone."""
TIME = _TIME.pattern.replace(r"\d", "[0-9]")
"""The reader's time pattern over ASCII digits (its ``\\d`` also takes other scripts' digits)."""
WORD_MAX = 8
"""The longest word the reader takes for a ``what``, ``place`` or ``topic``."""


def _lit(text: str) -> str:
    return json.dumps(text)


def _regex(text: str) -> str:
    """``text`` as a literal in a Lark regex (``/.../``)."""
    return re.sub(r"([()|.*+?\[\]{}^$\\/])", r"\\\1", text)


def _alternation(strings) -> str:
    """A Lark regex body matching exactly ``strings``."""
    return "|".join(map(_regex, strings))


def _time_forms(times) -> list[str]:
    """Every way the reader takes to write one of ``times`` (``HH:MM``)."""
    forms = [f"{h}:{m:02d}" for h in range(24) for m in range(60)]
    forms += [f"{h:02d}:{m:02d}" for h in range(10) for m in range(60)]
    forms += [
        f"{h}{m}{half}" for h in range(1, 13) for m in ["", *(f":{m:02d}" for m in range(60))] for half in ("am", "pm")
    ]
    return sorted({f for f in forms if _TIME.fullmatch(f) and norm_time(f) in times})


def date_forms(dates=None) -> list[str]:
    """The ways the reader takes to write each day of the year (``03-26``, ``3/26``, ``mar 26``), or of ``dates``."""
    days = [
        (m, d)
        for m in range(1, 13)
        for d in range(1, calendar.monthrange(YEAR, m)[1] + 1)
        if dates is None or f"{m:02d}-{d:02d}" in dates
    ]
    return [form for m, d in days for form in (f"{m:02d}-{d:02d}", f"{m}/{d}", f"{MONTHS[m - 1]} {d}")]


def _terminals(budget: int) -> list[str]:
    canonical_dates = [f for f in date_forms() if "-" in f]
    reserved = _alternation(sorted(RESERVED))
    lines = [
        f"TIME: /{TIME}/",
        f"TIME_SET: /{_alternation(_time_forms(ALARMS))}/",
        "TIME_NEW: TIME & ~TIME_SET",
        f"DATE: /{_alternation(date_forms())}/",
        f"DATE_STOCK: /{_alternation(date_forms(STOCK_DATES))}/",
        "CTIME: /([01][0-9]|2[0-3]):[0-5][0-9]/",
        f"CTIME_SET: /{_alternation(ALARMS)}/",
        "CTIME_NEW: CTIME & ~CTIME_SET",
        f"CDATE: /{_alternation(canonical_dates)}/",
        f"CDATE_STOCK: /{_alternation(STOCK_DATES)}/",
        "VALUE: /[1-9][0-9]{0,4}/",
        "NUM: /0|[1-9][0-9]?/",
        "NZ: /[1-9][0-9]?/",
    ]
    spans = {(2, WORD_MAX)} | {(i, i) for i in range(2, budget - 1)} | {(2, budget - i) for i in range(2, budget - 1)}
    lines += [f"W{lo}_{hi}: /[a-z]{{{lo},{hi}}}/ & ~/{reserved}/" for lo, hi in sorted(spans)]
    return lines


def _formula_rules() -> list[str]:
    """Arithmetic that computes: up to three terms of numbers 0-99 or bracketed pairs, no literal division by 0.

    ``fref`` is a follow-up's formula (``that`` once, as a term); ``aformula`` the gold's, with ``that`` replaced
    by the bracketed earlier formula."""
    step = '(("+" | "-" | "*") term | "/" nzterm)'
    op = '("+" | "-" | "*" | "/")'
    lines = [
        'group: "(" NUM ("+" | "-" | "*") NUM ")" | "(" NUM "/" NZ ")"',
        "term: NUM | group",
        "nzterm: NZ | group",
        f"formula: term {step}{{0,2}}",
    ]
    for name, that in (("fref", '"that"'), ("aref", '"(" formula ")"')):
        lines.append(f"{name}: {that} {step}{{0,2}} | term {op} {that} {step}? | term {step} {op} {that}")
    lines.append("aformula: formula | aref")
    return lines


def _value(api: str, slot: str, mode: str) -> str:
    """The symbol of a slot's value in a request: in ``exec`` mode one the gold call executes with on the initial
    database, in ``search`` mode (a request ToolSearcher only retrieves an API for) one the reader reads; the
    agenda words are placeholders for `_couple`."""
    state = mode == "exec"
    if slot == "time":
        return {"AddAlarm": "TIME_NEW", "DeleteAlarm": "TIME_SET"}.get(api, "TIME") if state else "TIME"
    if slot == "date":
        return "DATE_STOCK" if state and api == "QueryStock" else "DATE"
    if slot in ("what", "place"):
        return "{" + slot + "}"
    return {"topic": f"W2_{WORD_MAX}", "kind": "kind", "value": "VALUE", "code": "code", "formula": "formula"}[slot]


def _couple(alt: list[str], budget: int | None) -> list[list[str]]:
    """An alternative with its agenda words filled in: both within ``budget`` characters together when both are
    written and the gold answer holds them (``budget`` given), any words otherwise."""
    if budget and "{what}" in alt and "{place}" in alt:
        return [
            [{"{what}": f"W{i}_{i}", "{place}": f"W2_{budget - i}"}.get(t, t) for t in alt]
            for i in range(2, budget - 1)
        ]
    return [[f"W2_{WORD_MAX}" if t in ("{what}", "{place}") else t for t in alt]]


def _utterances(
    api: str, mode: str, omit: str | None = None, refs: frozenset[str] = frozenset(), tail: tuple[str, ...] = ()
) -> list[list[str]]:
    """Alternatives of a request for ``api``: its verb, each slot (but ``omit``) as its cue and value, or as its
    reference phrase for a slot in ``refs`` (then at least one is), then the ``tail`` tokens."""
    options = []
    for cue, slot in GRAMMAR[api][1]:
        if slot == omit:
            continue
        written = [(_lit(" "), *([_lit(f"{cue} ")] if cue else []), _value(api, slot, mode)), False]
        if slot in refs:
            ref = (_lit(" "), "fref" if slot == "formula" else _lit(REFS[slot]))
            options.append([written, (ref, True)])
        else:
            options.append([written])
    alts = []
    for combo in itertools.product(*options):
        if refs and not any(is_ref for _, is_ref in combo):
            continue
        alts.append([f"verb_{api.lower()}", *(t for tokens, _ in combo for t in tokens), *tail])
    return alts


def _call(api: str, budget: int | None) -> list[list[str]]:
    """The canonical call of ``api``: the gold one (``budget``: its agenda words' characters), or without a
    ``budget`` the replayed one of a follow-up, its values executing on the initial database."""
    context = budget is None
    values = {
        "formula": "formula" if context else "aformula",
        "date": "CDATE",
        "topic": f"W2_{WORD_MAX}",
        "kind": "kind",
        "value": "VALUE",
        "code": "code",
        "what": "{what}",
        "place": "{place}",
        "keywords": "verb",
        "time": "CTIME",
    }
    if api == "AddAlarm" and context:
        values["time"] = "CTIME_NEW"
    if api == "DeleteAlarm" and context:
        values["time"] = "CTIME_SET"
    if api == "QueryStock":
        values["date"] = "CDATE_STOCK"
    tokens = [_lit(f"{api}(")]
    for i, (param, kind) in enumerate(APIS[api].params):
        head = ("," if i else "") + f"{param}="
        if api == "AddMeeting" and param == "time":
            tokens += [_lit(f"{head}'"), "CDATE", _lit(" "), "CTIME", _lit("'")]
        elif kind == "int":
            tokens += [_lit(head), values[param]]
        else:
            tokens += [_lit(f"{head}'"), values[param], _lit("'")]
    return _couple(tokens + [_lit(")")], budget)


def _rule(name: str, alts: list[list[str]]) -> str:
    return f"{name}: " + " | ".join(" ".join(alt) for alt in alts)


def _heads() -> list[str]:
    """Terminals ``HEAD_<API>``: 1-5 signatures other than ToolSearcher's, ``api``'s among them, and the `` | ``
    after them (one terminal each, regexes intersected: the parser does not track which is the requested API)."""
    sig = "(" + "|".join(_regex(APIS[a].signature) for a in SEARCHABLE) + ")"
    tail = _regex(TURN_SEP)
    lines = [f"SIGS: /{sig}( {sig}){{0,{MAX_APIS - 1}}}{tail}/"]
    lines += [f"HEAD_{a.upper()}: SIGS & /({sig} )*{_regex(APIS[a].signature)}( {sig})*{tail}/" for a in SEARCHABLE]
    return lines


def _turns(api: str, budget: int) -> list[list[str]]:
    """The dialogues after a listing holding ``api``: a request; a request, its replayed call and a follow-up
    referring to it; a request missing a slot, the question for it and its value."""
    sep, user = TURN_SEP, _lit("U: ")
    alts = [[user, *alt] for utt in _utterances(api, "exec") for alt in _couple(utt, budget)]
    if _follow_ups(api, budget):
        alts += [
            [user, *first, _lit(f"{sep}["), f"ctx_{api.lower()}", _lit(f"]{sep}U: "), f"follow_{api.lower()}"]
            for utt in _utterances(api, "exec")
            for first in _couple(utt, None)
        ]
    for slot in slots_of(api):
        tail = (_lit(f"{sep}AI: {QUESTIONS[slot]}{sep}U: "), _value(api, slot, "exec"))
        alts += [[user, *alt] for utt in _utterances(api, "exec", omit=slot, tail=tail) for alt in _couple(utt, budget)]
    return alts


def _follow_ups(first: str, budget: int) -> list[list[str]]:
    """Follow-up requests after a call of ``first``: any API with a slot it can take from that call."""
    context = set(call_slots(first, {p: "01-01 00:00" for p, _ in APIS[first].params}))
    alts = []
    for api in SEARCHABLE:
        refs = frozenset(s for s in slots_of(api) if s in context and (s in REFS or s == "formula"))
        if refs and (first, api) not in NO_REFERENCE:
            alts += [alt for utt in _utterances(api, "exec", refs=refs) for alt in _couple(utt, budget)]
    return alts


@functools.cache
def build_rules(answer_cap: int) -> str:
    """The grammar's rules, ``prompt``, ``answer`` and the per-API rules they use, for gold answers of at most
    ``answer_cap`` characters (the reader's cap)."""
    budget = answer_cap - len(answer_text("AddAgenda", {"what": "", "date": "01-01", "place": ""}))
    search = _lit(f"{HEAD}{APIS['ToolSearcher'].signature}{TURN_SEP}U: ")
    lines = [
        "prompt: search | " + " | ".join(f"{_lit(HEAD)} HEAD_{a.upper()} turns_{a.lower()}" for a in SEARCHABLE),
        f"search: {search} (" + " | ".join(f"request_{a.lower()} | retrieved_{a.lower()}" for a in SEARCHABLE) + ")",
        'answer: "API-Request: [" call "]"',
        "call: " + " | ".join(f"call_{a.lower()}" for a in APIS),
        "verb: " + " | ".join(f"verb_{a.lower()}" for a in SEARCHABLE),
        "kind: " + " | ".join(map(_lit, KINDS)),
        "code: " + " | ".join(map(_lit, STOCK_CODES)),
    ]
    for api in SEARCHABLE:
        low = api.lower()
        lines += [
            "verb_" + low + ": " + " | ".join(map(_lit, GRAMMAR[api][0])),
            _rule(f"turns_{low}", _turns(api, budget)),
            _rule(f"request_{low}", [alt for utt in _utterances(api, "search") for alt in _couple(utt, None)]),
            _rule(
                f"retrieved_{low}",
                [
                    alt + [_lit(f"{TURN_SEP}R: {APIS[api].signature}")]
                    for utt in _utterances(api, "exec")
                    for alt in _couple(utt, budget)
                ],
            ),
        ]
        if _follow_ups(api, budget):
            lines += [_rule(f"ctx_{low}", _call(api, None)), _rule(f"follow_{low}", _follow_ups(api, budget))]
    lines += [_rule(f"call_{a.lower()}", _call(a, budget)) for a in APIS]
    return "\n".join(lines + _formula_rules() + _heads() + _terminals(budget)) + "\n"
