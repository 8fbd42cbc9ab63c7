"""API-Bank-mini prompt grammar: compact dialogue rendering and the strict reader that recomputes gold.

A byte-level agent sees every character, so a task is one line::

    APIs: <signature> ... | <turn> | <turn> ...

Turns are ``U: <user text>``, ``AI: <question>``, ``[Name(k='v')]`` (an API call made earlier in the
dialogue, replayed on the database) or ``R: <signature>`` (what ToolSearcher returned). User text
is ``<verb> <segment>...``: each API has a canonical verb (its name in words) and two synonyms, and
a fixed list of slots, each written as ``<cue> <value>`` (``at 7pm``, ``on mar 26``) or, in a
follow-up turn, as a reference to the previous call (``then``, ``that day``, ``there``, ``same``,
``that stock``; ``that`` inside a formula). The gold call, its execution result and the difficulty
features are all recomputed here by :func:`read_prompt`, for built-in and simulator tasks alike.

>>> read_prompt("APIs: AddAlarm(time) | U: add alarm at 07:30").answer
"API-Request: [AddAlarm(time='07:30')]"
>>> d = read_prompt("APIs: AddAlarm(time) DeleteAlarm(time) | U: wake me at 5pm"
...                 " | [AddAlarm(time='17:00')] | U: cancel alarm then")
>>> d.answer, d.level
("API-Request: [DeleteAlarm(time='17:00')]", 4)
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from genenv_engine.environments.apibank.db import APIS, KINDS, SEARCHABLE, execute, initial_db, tool_search
from genenv_engine.environments.apibank.syntax import MONTHS, norm_date, norm_time, render_call
from genenv_engine.environments.drafts import read_signatures

HEAD = "APIs: "
TURN_SEP = " | "
MAX_APIS = 5
GRAMMAR: dict[str, tuple[tuple[str, ...], tuple[tuple[str, str], ...]]] = {
    "Calculator": (("calculate", "compute", "work out"), (("", "formula"),)),
    "AddAlarm": (("add alarm", "wake me", "set alarm"), (("at", "time"),)),
    "DeleteAlarm": (("delete alarm", "cancel alarm", "remove alarm"), (("at", "time"),)),
    "QueryAlarm": (("query alarms", "list alarms", "show alarms"), ()),
    "AddAgenda": (("add agenda", "plan", "note down"), (("", "what"), ("on", "date"), ("at", "place"))),
    "QueryAgenda": (("query agenda", "show agenda", "what is planned"), (("on", "date"),)),
    "AddMeeting": (("add meeting", "book meeting", "set up meeting"), (("", "topic"), ("on", "date"), ("at", "time"))),
    "QueryMeeting": (("query meetings", "list meetings", "any meetings"), (("on", "date"),)),
    "RecordHealthData": (("record health", "log health", "save health"), (("", "kind"), ("", "value"))),
    "QueryHealthData": (("query health", "show health", "check health"), (("", "kind"),)),
    "QueryStock": (("query stock", "stock price", "price of"), (("", "code"), ("on", "date"))),
}
"""API -> (verbs, canonical first; slots in order as (cue, slot))."""
VERBS: dict[str, tuple[str, int]] = {v: (api, i) for api, (verbs, _) in GRAMMAR.items() for i, v in enumerate(verbs)}
REFS = {
    "time": "then",
    "date": "that day",
    "place": "there",
    "what": "same",
    "topic": "same",
    "kind": "same",
    "code": "that stock",
}
"""Slot -> the phrase that takes its value from the previous call (replaces cue and value)."""
QUESTIONS = {
    "time": "what time?",
    "date": "which day?",
    "place": "where?",
    "what": "what is it?",
    "topic": "what topic?",
    "kind": "which kind?",
    "value": "what value?",
    "code": "which stock?",
    "formula": "what formula?",
}
"""Slot -> the AI turn that asks for it (slot filling)."""
RESERVED = frozenset({"on", "at", "then", "there", "same", "that"})
_WORD = re.compile(r"[a-z]{2,8}")
_TIME = re.compile(r"(?:[01]\d|2[0-3]):[0-5]\d|(?:\d|1\d|2[0-3]):[0-5]\d|(?:1[0-2]|[1-9])(?::[0-5]\d)?[ap]m")
_DATE = re.compile(r"\d\d-\d\d|(?:1[0-2]|[1-9])/(?:3[01]|[12]\d|[1-9])")
_MON_DAY = re.compile(rf"(?:{'|'.join(MONTHS)}) (?:3[01]|[12]\d|[1-9])")
_FORMULA = re.compile(r"[0-9+\-*/().]{1,24}")


class PromptError(ValueError):
    """A prompt outside the grammar; ``str(err)`` is a short ``reason_code: detail``."""


# ---------------------------------------------------------------- slots <-> arguments


def build_args(api: str, slots: dict[str, Any]) -> dict[str, Any]:
    """Canonical call arguments from slot values (AddMeeting joins date and time)."""
    if api == "AddMeeting":
        return {"topic": slots["topic"], "time": f"{slots['date']} {slots['time']}"}
    return {p: slots[p] for p, _ in APIS[api].params}


def call_slots(api: str, args: dict[str, Any]) -> dict[str, Any]:
    """Slot values a call offers to a follow-up turn's references (inverse of :func:`build_args`)."""
    if api == "AddMeeting":
        date, time = args["time"].split(" ")
        return {"topic": args["topic"], "date": date, "time": time}
    return dict(args)


def slots_of(api: str) -> tuple[str, ...]:
    """The slot names of an API's utterances, in order."""
    return tuple(slot for _, slot in GRAMMAR[api][1])


# ---------------------------------------------------------------- rendering (used by the generator)


def phrase_value(slot: str, value: Any, nl: bool, rng: random.Random) -> str:
    """The text of a canonical slot value; ``nl`` picks a natural form for times and dates.

    >>> phrase_value("time", "19:30", True, random.Random(0)), phrase_value("date", "03-26", True, random.Random(1))
    ('7:30pm', 'mar 26')
    """
    if nl and slot == "time":
        hour, minute = int(value[:2]), int(value[3:])
        half = f"{hour % 12 or 12}{'' if minute == 0 and rng.random() < 0.5 else f':{minute:02d}'}"
        forms = [f"{half}{'pm' if hour >= 12 else 'am'}"] + ([f"{hour}:{minute:02d}"] if hour < 10 else [])
        return rng.choice(forms)
    if nl and slot == "date":
        month, day = int(value[:2]), int(value[3:])
        return rng.choice([f"{MONTHS[month - 1]} {day}", f"{month}/{day}"])
    return str(value)


def render_utterance(api: str, verb: str, phrases: dict[str, str], omit: str | None = None) -> str:
    """``<verb> <cue> <phrase> ...``; a phrase equal to the slot's reference phrase drops the cue."""
    words = [verb]
    for cue, slot in GRAMMAR[api][1]:
        if slot == omit:
            continue
        phrase = phrases[slot]
        words.append(phrase if not cue or phrase == REFS.get(slot) else f"{cue} {phrase}")
    return " ".join(words)


def render_prompt(apis: list[str] | tuple[str, ...], turns: list[str]) -> str:
    """``APIs: <signatures> | <turn> | ...``."""
    return HEAD + " ".join(APIS[a].signature for a in apis) + TURN_SEP + TURN_SEP.join(turns)


def answer_text(api: str, args: dict[str, Any]) -> str:
    """The canonical gold answer ``API-Request: [Name(k='v')]``."""
    return f"API-Request: [{render_call(api, args)}]"


# ---------------------------------------------------------------- the parsed task


@dataclass(frozen=True)
class Draft:
    """A prompt read back through the grammar: gold call, its executed output, context and features."""

    prompt: str
    apis: tuple[str, ...]
    available: tuple[str, ...]
    api: str
    args: dict[str, Any]
    output: Any
    context: tuple[tuple[str, dict[str, Any]], ...] = ()
    features: dict[str, Any] = field(default_factory=dict)

    @property
    def answer(self) -> str:
        return answer_text(self.api, self.args)

    @property
    def level(self) -> int:
        return infer_level(self.features)

    @property
    def expected(self) -> dict[str, Any]:
        """The checker's gold: API, args, the context calls to replay, available APIs and the output."""
        return {
            "mode": "exec",
            "api": self.api,
            "args": dict(self.args),
            "context": [{"api": a, "args": dict(k)} for a, k in self.context],
            "available": list(self.available),
            "output": self.output,
        }

    @property
    def tools(self) -> list[dict[str, Any]]:
        return [APIS[a].tool() for a in self.available]


def infer_level(features: dict[str, Any]) -> int:
    """Level 1-4 from the features; the generator and the validator both use this.

    >>> base = {"multi_turn": "none", "retrieval": "none", "n_args": 1, "n_apis": 1,
    ...         "synonym": False, "nl_value": False}
    >>> infer_level(base), infer_level({**base, "nl_value": True}), infer_level({**base, "n_args": 3})
    (1, 2, 3)
    """
    if features["multi_turn"] != "none":
        return 4
    if features["retrieval"] != "none" or features["n_args"] >= 2:
        return 3
    if features["n_apis"] >= 2 or features["synonym"] or features["nl_value"]:
        return 2
    return 1


@dataclass
class _Utterance:
    api: str
    verb: str
    slots: dict[str, Any] = field(default_factory=dict)
    forms: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------- the strict reader


def read_prompt(prompt: str) -> Draft:
    """Strictly parse a prompt, execute its context and gold call; raise :class:`PromptError`.

    >>> read_prompt("APIs: QueryAlarm() | U: wake me at 7pm")
    Traceback (most recent call last):
    ...
    genenv_engine.environments.apibank.dialogue.PromptError: api_not_listed: AddAlarm
    """
    parts = prompt.split(TURN_SEP)
    if not prompt.startswith(HEAD) or len(parts) < 2 or " => " in prompt:
        raise PromptError("bad_format: expected 'APIs: <signatures> | U: <text>'")
    apis = _read_apis(parts[0][len(HEAD) :])
    turns = parts[1:]
    shape = "".join(_turn_kind(t) for t in turns)
    searching = apis == ("ToolSearcher",)
    if shape not in (("U", "UR") if searching else ("U", "UCU", "UAU")):
        raise PromptError(f"bad_dialogue: turn pattern {shape} with {'ToolSearcher' if searching else 'APIs'}")
    reader = {"U": _single, "UR": _retrieved, "UCU": _follow_up, "UAU": _slot_fill}[shape]
    return reader(prompt, apis, turns)


def _read_apis(text: str) -> tuple[str, ...]:
    names = read_signatures(
        text, APIS, pattern=r"[A-Za-z]+\([a-z,]*\)", noun="api", limit=MAX_APIS, error=PromptError, clip=24
    )
    if "ToolSearcher" in names and len(names) > 1:
        raise PromptError("bad_api_list: ToolSearcher is listed alone")
    return names


def _turn_kind(turn: str) -> str:
    for prefix, kind in (("U: ", "U"), ("AI: ", "A"), ("R: ", "R")):
        if turn.startswith(prefix) and len(turn) > len(prefix):
            return kind
    if turn.startswith("[") and turn.endswith("]"):
        return "C"
    raise PromptError(f"bad_dialogue: unknown turn {turn[:16]!r}")


def _single(prompt: str, apis: tuple[str, ...], turns: list[str]) -> Draft:
    if apis == ("ToolSearcher",):
        utt = _read_utterance(turns[0][3:], set(SEARCHABLE))
        found = tool_search(utt.verb)
        if found != APIS[utt.api].signature:
            raise PromptError(f"retrieval_mismatch: {utt.verb!r} finds {found}")
        return _finish(
            prompt, apis, apis, "ToolSearcher", {"keywords": utt.verb}, (), [utt], retrieval="search", target=utt.api
        )
    utt = _read_utterance(turns[0][3:], set(apis))
    return _finish(prompt, apis, apis, utt.api, build_args(utt.api, utt.slots), (), [utt])


def _retrieved(prompt: str, apis: tuple[str, ...], turns: list[str]) -> Draft:
    sig = turns[1][3:]
    name = sig.split("(", 1)[0]
    if name not in SEARCHABLE or APIS[name].signature != sig:
        raise PromptError(f"bad_dialogue: R: must be one API signature, got {sig[:24]!r}")
    utt = _read_utterance(turns[0][3:], set(SEARCHABLE))
    if utt.api != name:
        raise PromptError(f"retrieval_mismatch: request needs {utt.api}, retrieved {name}")
    return _finish(prompt, apis, apis + (name,), name, build_args(name, utt.slots), (), [utt], retrieval="result")


def _follow_up(prompt: str, apis: tuple[str, ...], turns: list[str]) -> Draft:
    first = _read_utterance(turns[0][3:], set(apis))
    first_args = build_args(first.api, first.slots)
    if turns[1] != f"[{render_call(first.api, first_args)}]":
        raise PromptError(f"context_mismatch: expected [{render_call(first.api, first_args)}]")
    utt = _read_utterance(turns[2][3:], set(apis), ctx=call_slots(first.api, first_args))
    if "ref" not in utt.forms.values():
        raise PromptError("no_ref: the follow-up must refer to the previous call")
    return _finish(
        prompt,
        apis,
        apis,
        utt.api,
        build_args(utt.api, utt.slots),
        ((first.api, first_args),),
        [first, utt],
        multi_turn="ref",
    )


def _slot_fill(prompt: str, apis: tuple[str, ...], turns: list[str]) -> Draft:
    asked = [slot for slot, q in QUESTIONS.items() if turns[1] == f"AI: {q}"]
    if not asked:
        raise PromptError(f"bad_dialogue: unknown question {turns[1][:20]!r}")
    utt = _read_utterance(turns[0][3:], set(apis), omit=asked[0])
    value, used, nl = _read_value(asked[0], turns[2][3:].split(" "), None)
    if used != len(turns[2][3:].split(" ")):
        raise PromptError(f"unparseable_query: answer to {turns[1][4:]!r}")
    utt.slots[asked[0]] = value
    utt.forms[asked[0]] = "nl" if nl else "canon"
    return _finish(prompt, apis, apis, utt.api, build_args(utt.api, utt.slots), (), [utt], multi_turn="fill")


def _finish(
    prompt: str,
    apis: tuple[str, ...],
    available: tuple[str, ...],
    api: str,
    args: dict[str, Any],
    context: tuple[tuple[str, dict[str, Any]], ...],
    utts: list[_Utterance],
    *,
    retrieval: str = "none",
    multi_turn: str = "none",
    target: str | None = None,
) -> Draft:
    db = initial_db()
    for name, ctx_args in context:
        error = execute(db, name, ctx_args)[1]
        if error is not None:
            raise PromptError(f"context_exec_error: {error}")
    output, error = execute(db, api, args)
    if error is not None:
        raise PromptError(f"gold_exec_error: {error}")
    features = {
        "api": api,
        "target": target or api,
        "n_apis": len(apis),
        "n_args": len(args),
        "synonym": any(VERBS[u.verb][1] > 0 for u in utts),
        "nl_value": any(form == "nl" for u in utts for form in u.forms.values()),
        "retrieval": retrieval,
        "multi_turn": multi_turn,
        "n_turns": prompt.count(TURN_SEP),
    }
    return Draft(prompt, apis, available, api, args, output, context, features)


def _read_utterance(
    text: str, allowed: set[str], ctx: dict[str, Any] | None = None, omit: str | None = None
) -> _Utterance:
    words = text.split(" ")
    verb = next((v for v in sorted(VERBS, key=len, reverse=True) if words[: len(v.split())] == v.split()), None)
    if verb is None:
        raise PromptError(f"unknown_verb: {words[0][:20]}")
    api = VERBS[verb][0]
    if api not in allowed:
        raise PromptError(f"api_not_listed: {api}")
    if omit is not None and omit not in slots_of(api):
        raise PromptError(f"bad_dialogue: {api} has no {omit} to ask for")
    utt, rest = _Utterance(api, verb), words[len(verb.split()) :]
    for cue, slot in GRAMMAR[api][1]:
        if slot != omit:
            rest = _read_segment(utt, cue, slot, rest, ctx)
    if rest:
        raise PromptError(f"unparseable_query: trailing {' '.join(rest)[:20]!r}")
    return utt


def _read_segment(utt: _Utterance, cue: str, slot: str, rest: list[str], ctx: dict[str, Any] | None) -> list[str]:
    ref = REFS.get(slot, "\0").split(" ")
    if rest[: len(ref)] == ref:
        if ctx is None or slot not in ctx:
            raise PromptError(f"unresolved_ref: {slot}")
        utt.slots[slot], utt.forms[slot] = ctx[slot], "ref"
        return rest[len(ref) :]
    if cue:
        if rest[:1] != [cue]:
            raise PromptError(f"unparseable_query: {utt.api} needs '{cue} <{slot}>'")
        rest = rest[1:]
    value, used, nl = _read_value(slot, rest, ctx)
    if slot == "formula" and "that" in rest[0]:
        utt.forms[slot] = "ref"
    else:
        utt.forms[slot] = "nl" if nl else "canon"
    utt.slots[slot] = value
    return rest[used:]


def _read_value(slot: str, words: list[str], ctx: dict[str, Any] | None) -> tuple[Any, int, bool]:
    """(canonical value, words used, natural-language form?) for one slot; PromptError if it does not fit."""
    if not words or not words[0]:
        raise PromptError(f"unparseable_query: missing {slot}")
    word = words[0]
    if slot == "date" and len(words) > 1 and _MON_DAY.fullmatch(f"{word} {words[1]}"):
        return _checked(norm_date(f"{word} {words[1]}"), slot), 2, True
    if slot in ("time", "date"):
        pattern, normaliser = (_TIME, norm_time) if slot == "time" else (_DATE, norm_date)
        value = _checked(normaliser(word) if pattern.fullmatch(word) else None, slot)
        return value, 1, value != word
    if slot == "formula":
        return _formula(word, ctx), 1, False
    fits = {
        "kind": lambda w: w in KINDS,
        "value": lambda w: re.fullmatch(r"[1-9]\d{0,4}", w) is not None,
        "code": lambda w: re.fullmatch(r"[A-Z]{3,5}", w) is not None,
    }.get(slot, lambda w: _WORD.fullmatch(w) is not None and w not in RESERVED)
    if not fits(word):
        raise PromptError(f"bad_value: {slot} {word[:12]!r}")
    return (int(word) if slot == "value" else word), 1, False


def _checked(value: str | None, slot: str) -> str:
    if value is None:
        raise PromptError(f"bad_value: not a valid {slot}")
    return value


def _formula(word: str, ctx: dict[str, Any] | None) -> str:
    if word.count("that") > 1 or not _FORMULA.fullmatch(word.replace("that", "0")) or not re.search(r"\d|that", word):
        raise PromptError(f"bad_value: formula {word[:12]!r}")
    if "that" not in word:
        return word
    if ctx is None or "formula" not in ctx:
        raise PromptError("unresolved_ref: formula")
    return word.replace("that", f"({ctx['formula']})")
