"""API-Bank-mini: next-API-call tasks scored by executing the call against mock APIs, sized for byte-level LMs.

Provides :class:`ApiBankMini` (seeded splits on a 4-level ladder, the ``apibank_exec`` checker, a
strict validator for simulator-written tasks, sibling pairs, and the official API-Bank dialogues as
held-out tasks when ``data_dir`` is given) plus :func:`check_response` and :func:`generate_draft`.
The mock database and APIs live in :mod:`~genenv_engine.environments.apibank.db`, the prompt grammar
in :mod:`~genenv_engine.environments.apibank.dialogue`, the upstream loader in
:mod:`~genenv_engine.environments.apibank.upstream`.

Ladder: L1 one API listed, canonical request; L2 2-4 APIs listed, synonym verbs, natural times and
dates to normalise; L3 ToolSearcher retrieval (BM25) or multi-field arguments; L4 multi-turn: the
values come from an earlier call (``then``, ``that day``) or an AI question is answered.

The agent answers ``API-Request: [Name(k='v')]`` (the prefix and the brackets may be dropped). The
checker parses it with :func:`ast.parse`, executes it on a fresh copy of the task's database (the
initial database plus the dialogue's earlier calls) and applies API-Bank's per-API rule against the
gold call's result. Error types, first failing wins: ``parse_error``, ``unknown_api`` (not available
in this dialogue), ``wrong_api``, ``missing_arg``, ``unexpected_arg``, ``bad_arg_type``,
``exec_error`` (the mock raised), ``wrong_result``.

>>> env = ApiBankMini(seed=0, sizes=SplitSizes(seed=3, train=8, heldout=4))
>>> task = env.splits()["train"][0]
>>> env.check(task, task.answer).success
True
>>> env.check(task, "API-Request: [").error_type
'parse_error'
"""

from __future__ import annotations

import datetime
import math
import random
from collections.abc import Callable
from typing import Any

from genenv_engine.core.records import CheckResult, Task, Validation
from genenv_engine.environments.apibank.db import (
    APIS,
    KINDS,
    SEARCHABLE,
    STOCK_CODES,
    STOCK_DATES,
    ApiError,
    calculate,
    copy_db,
    execute,
    initial_db,
    jaccard,
    normalise_args,
    results_match,
)
from genenv_engine.environments.apibank.dialogue import (
    GRAMMAR,
    QUESTIONS,
    REFS,
    Draft,
    PromptError,
    build_args,
    phrase_value,
    read_prompt,
    render_prompt,
    render_utterance,
    slots_of,
)
from genenv_engine.environments.apibank.syntax import (
    CallSyntaxError,
    norm_date,
    norm_datetime,
    norm_time,
    norm_value,
    parse_call,
    render_call,
)
from genenv_engine.environments.apibank.task_grammar import build_rules
from genenv_engine.environments.base import (  # noqa: F401 (SplitSizes: the docstring's example)
    LadderEnvironment,
    SplitSizes,
)
from genenv_engine.environments.drafts import first_listings, step_draft

ERROR_TYPES = (
    "parse_error",
    "unknown_api",
    "wrong_api",
    "missing_arg",
    "unexpected_arg",
    "bad_arg_type",
    "exec_error",
    "wrong_result",
)
CHECKER = "apibank_exec"
"""The checker name on every task (execution on the mock APIs)."""
MAX_PROMPT_CHARS = 180
MAX_ANSWER_CHARS = 64
MAX_GENERATED_ANSWER_CHARS = 100
MAX_RESPONSE_CHARS = 1000
SIMPLE = tuple(a for a in SEARCHABLE if len(APIS[a].params) <= 1)
MULTI = tuple(a for a in SEARCHABLE if len(APIS[a].params) >= 2)
WHATS = ("gym", "yoga", "swim", "lunch", "movie", "piano", "study", "shop", "walk", "dance")
PLACES = ("park", "cafe", "home", "mall", "club", "pool", "lab", "beach")
TOPICS = ("sync", "demo", "sales", "promo", "intro", "recap", "retro", "audit")
_DATES = tuple((datetime.date(2023, 1, 1) + datetime.timedelta(days=i)).strftime("%m-%d") for i in range(365))
_DB = initial_db()
"""A read-only snapshot of the initial database for sampling values that execute."""
_VALUE_RANGES = {"bp": (90, 160), "hr": (50, 120), "steps": (1000, 20000), "sleep": (300, 600), "weight": (45, 110)}


# ---------------------------------------------------------------- response parsing and checking


def parse_response(text: str) -> tuple[str, dict[str, Any]]:
    """(name, raw args) from ``API-Request: [Call]``, ``[Call]`` or ``Call``; CallSyntaxError otherwise.

    >>> parse_response("API-Request: [AddAlarm(time='7pm')]")
    ('AddAlarm', {'time': '7pm'})
    """
    if len(text) > MAX_RESPONSE_CHARS:
        raise CallSyntaxError("too long")
    body = text.strip()
    if body.startswith("API-Request:"):
        body = body[len("API-Request:") :].strip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1]
    return parse_call(body)


def _result(error: str | None, name: float, args: float, result: float) -> CheckResult:
    sub = {"name": name, "args": args, "result": result}
    return CheckResult(error is None, (name + args + result) / 3, sub, error)


def check_response(expected: dict[str, Any], response: str) -> CheckResult:
    """Score one response against an ``apibank_exec`` gold (``mode`` ``exec`` or ``upstream``)."""
    try:
        name, raw = parse_response(response)
    except CallSyntaxError:
        return _result("parse_error", 0.0, 0.0, 0.0)
    if name not in expected["available"] or (expected["mode"] == "exec" and name not in APIS):
        return _result("unknown_api", 0.0, 0.0, 0.0)
    if name != expected["api"]:
        return _result("wrong_api", 0.0, 0.0, 0.0)
    if expected["mode"] == "upstream":
        return _check_upstream(expected, raw)
    args, error = normalise_args(name, raw)
    if args is None:
        return _result(error, 1.0, _args_fraction(name, raw), 0.0)
    state = initial_db()
    for call in expected["context"]:
        execute(state, call["api"], call["args"])
    gold_out, _ = execute(copy_db(state), name, expected["args"])
    out, exc = execute(state, name, args)
    if exc is not None:
        return _result("exec_error", 1.0, 1.0, 0.0)
    if not results_match(name, expected["args"], gold_out, args, out):
        return _result("wrong_result", 1.0, 1.0, 0.0)
    return _result(None, 1.0, 1.0, 1.0)


def _args_fraction(name: str, raw: dict[str, Any]) -> float:
    """Share of the API's parameters given with a fitting type, over parameters plus unexpected keys."""
    spec = dict(APIS[name].params)
    good = 0
    for param, kind in spec.items():
        try:
            good += param in raw and norm_value(kind, raw[param]) is not None
        except TypeError:
            pass
    extra = sum(k not in spec for k in raw)
    return good / (len(spec) + extra) if spec or extra else 1.0


def _check_upstream(expected: dict[str, Any], raw: dict[str, Any]) -> CheckResult:
    """Official dialogues whose APIs are not mocked here: arguments compared loosely, Calculator executed."""
    gold: dict[str, Any] = expected["args"]
    typed = sum(k in gold and _kind(v) == _kind(gold[k]) for k, v in raw.items())
    fraction = typed / max(len(set(gold) | set(raw)), 1)
    if any(k not in raw for k in gold):
        return _result("missing_arg", 1.0, fraction, 0.0)
    if any(k not in gold for k in raw):
        return _result("unexpected_arg", 1.0, fraction, 0.0)
    if any(gold[k] is not None and _kind(raw[k]) != _kind(gold[k]) for k in gold):
        return _result("bad_arg_type", 1.0, fraction, 0.0)
    if expected["api"] == "Calculator" and "formula" in raw:
        try:
            value = calculate(str(raw["formula"]))
        except ApiError:
            return _result("exec_error", 1.0, 1.0, 0.0)
        ok = _numeric_gold_match(value, expected.get("output"), gold)
    elif expected["api"] == "ToolSearcher":
        ok = jaccard(" ".join(map(str, raw.values())), " ".join(map(str, gold.values()))) >= 0.5
    else:
        ok = all(loose_equal(raw[k], gold[k]) for k in gold)
    return _result(None if ok else "wrong_result", 1.0, 1.0, float(ok))


def _numeric_gold_match(value: float, output: Any, gold: dict[str, Any]) -> bool:
    try:
        target = float(output)
    except (TypeError, ValueError):
        try:
            target = calculate(str(gold["formula"]))
        except ApiError:
            return False
    return math.isclose(value, target, rel_tol=1e-6, abs_tol=1e-9)


def _kind(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return type(value).__name__
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


def loose_equal(a: Any, b: Any) -> bool:
    """Equality after normalising times/dates and standardising strings (case, spaces, punctuation).

    >>> loose_equal("2023-03-26 14:00:00", "2023-03-26 14:00"), loose_equal("Dr. Lee", "dr lee")
    (True, True)
    """
    if isinstance(a, str) and isinstance(b, str):
        for normaliser in (norm_datetime, norm_date, norm_time):
            na, nb = normaliser(a), normaliser(b)
            if na is not None and nb is not None:
                return na == nb
        strip = str.maketrans("", "", " ,./-_*^'\"")
        return a.lower().translate(strip) == b.lower().translate(strip)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(loose_equal(x, y) for x, y in zip(a, b, strict=False))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(loose_equal(a[k], b[k]) for k in a)
    if _kind(a) == _kind(b) == "number":
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    return a == b


# ---------------------------------------------------------------- task generation


def allowed_levels(target: str) -> tuple[int, ...]:
    """Levels whose tasks can have ``target`` as the API the user wants."""
    if target in MULTI:
        return (3, 4)
    return (1, 2, 3) if not APIS[target].params else (1, 2, 3, 4)


def generate_draft(level: int, rng: random.Random, target: str | None = None) -> Draft:
    """Sample a prompt at ``level`` (optionally for the API ``target``) and read it back strictly."""
    if target is not None and level not in allowed_levels(target):
        raise ValueError(f"{target} has no level-{level} tasks")
    for _ in range(500):
        prompt = _sample_prompt(level, rng, target)
        if len(prompt) > MAX_PROMPT_CHARS:
            continue
        try:
            draft = read_prompt(prompt)
        except PromptError:
            continue
        if len(draft.answer) <= MAX_ANSWER_CHARS:
            assert draft.level == level, (prompt, draft.features)
            return draft
    raise RuntimeError(f"could not sample a level-{level} task for {target}")


def _sample_prompt(level: int, rng: random.Random, target: str | None) -> str:
    if level == 1:
        api = target or rng.choice(SIMPLE)
        return render_prompt([api], ["U: " + _utterance(api, rng, synonym=False, nl=0.0)])
    if level == 2:
        api = target or rng.choice(SIMPLE)
        return render_prompt(_listing(api, rng, 1, 3), ["U: " + _utterance(api, rng, rng.random() < 0.5, 0.5)])
    if level == 3:
        return _level3(rng, target)
    target = target or rng.choice([a for a in SEARCHABLE if APIS[a].params])
    return _slot_fill(rng, target) if rng.random() < 0.5 else _follow_up(rng, target)


def _level3(rng: random.Random, target: str | None) -> str:
    mode = rng.choice(
        ("search", "result", "multi", "multi") if target in MULTI or target is None else ("search", "result")
    )
    if mode == "multi":
        api = target or rng.choice(MULTI)
        return render_prompt(_listing(api, rng, 1, 2), ["U: " + _utterance(api, rng, rng.random() < 0.5, 0.5)])
    api = target or rng.choice(SEARCHABLE)
    turns = ["U: " + _utterance(api, rng, rng.random() < 0.5, 0.5)]
    return render_prompt(["ToolSearcher"], turns + ([f"R: {APIS[api].signature}"] if mode == "result" else []))


def _slot_fill(rng: random.Random, api: str) -> str:
    omit = rng.choice(slots_of(api))
    slots = sample_slots(api, rng)
    phrases = {s: phrase_value(s, v, rng.random() < 0.5, rng) for s, v in slots.items()}
    verb = rng.choice(GRAMMAR[api][0])
    turns = ["U: " + render_utterance(api, verb, phrases, omit=omit), f"AI: {QUESTIONS[omit]}", f"U: {phrases[omit]}"]
    return render_prompt(_listing(api, rng, 0, 1), turns)


def _follow_up(rng: random.Random, api: str) -> str:
    slot = rng.choice(_refable(api))
    first = rng.choice([a for a in SEARCHABLE if slot in slots_of(a)])
    first_slots = sample_slots(first, rng)
    first_text = _utterance(first, rng, rng.random() < 0.5, 0.5, first_slots)
    phrases = {s: phrase_value(s, v, rng.random() < 0.5, rng) for s, v in sample_slots(api, rng).items()}
    for s in slots_of(api):
        if s == slot or (s in first_slots and s in REFS and rng.random() < 0.3):
            phrases[s] = f"that{_formula_tail(rng)}" if s == "formula" else REFS[s]
    listing = list(dict.fromkeys([first, api] + rng.sample(SEARCHABLE, int(rng.random() < 0.3))))
    rng.shuffle(listing)
    turns = [
        f"U: {first_text}",
        f"[{render_call(first, build_args(first, first_slots))}]",
        "U: " + render_utterance(api, rng.choice(GRAMMAR[api][0]), phrases),
    ]
    return render_prompt(listing, turns)


def _refable(api: str) -> list[str]:
    return [s for s in slots_of(api) if s in REFS or s == "formula"]


def _listing(api: str, rng: random.Random, lo: int, hi: int) -> list[str]:
    others = rng.sample([a for a in SEARCHABLE if a != api], rng.randint(lo, hi))
    listing = [api] + others
    rng.shuffle(listing)
    return listing


def _utterance(api: str, rng: random.Random, synonym: bool, nl: float, slots: dict[str, Any] | None = None) -> str:
    slots = sample_slots(api, rng) if slots is None else slots
    phrases = {s: phrase_value(s, v, rng.random() < nl, rng) for s, v in slots.items()}
    verbs = GRAMMAR[api][0]
    return render_utterance(api, rng.choice(verbs[1:]) if synonym else verbs[0], phrases)


def sample_slots(api: str, rng: random.Random) -> dict[str, Any]:
    """Canonical slot values for ``api`` that usually execute (existing alarms for DeleteAlarm, ...)."""
    values: dict[str, Any] = {}
    for slot in slots_of(api):
        values[slot] = _sample_slot(api, slot, rng, _DB)
    if api == "RecordHealthData":
        values["value"] = rng.randint(*_VALUE_RANGES[values["kind"]])
    return values


def _sample_slot(api: str, slot: str, rng: random.Random, db: dict[str, Any]) -> Any:
    if slot == "time":
        if api == "DeleteAlarm":
            return rng.choice(db["alarms"])
        hour = rng.randint(8, 18) if api == "AddMeeting" else rng.randint(0, 23)
        return f"{hour:02d}:{rng.choice(range(0, 60, 5 if api == 'AddAlarm' else 30)):02d}"
    if slot == "date":
        if api == "QueryStock":
            return rng.choice(STOCK_DATES)
        busy = [e["date"] for e in db["agenda"]] + [m["time"][:5] for m in db["meetings"]]
        return rng.choice(busy) if api.startswith("Query") and rng.random() < 0.5 else rng.choice(_DATES)
    pools = {"what": WHATS, "place": PLACES, "topic": TOPICS, "kind": KINDS, "code": STOCK_CODES}
    if slot in pools:
        return rng.choice(pools[slot])
    if slot == "formula":
        return _sample_formula(rng)
    return rng.randint(1, 999)


def _sample_formula(rng: random.Random) -> str:
    a, b, c = rng.randint(1, 99), rng.randint(1, 20), rng.randint(1, 9)
    op, op2 = rng.choice("+-*/"), rng.choice("+-*/")
    return rng.choice([f"{a}{op}{b}", f"({a}{op}{b}){op2}{c}", f"{a}{op}{b}{op2}{c}"])


def _formula_tail(rng: random.Random) -> str:
    return f"{rng.choice('+-*/')}{rng.randint(2, 9)}"


def _read_sized(prompt: str) -> Draft:
    """``read_prompt``, with a gold answer over ``MAX_ANSWER_CHARS`` a :class:`PromptError` (``too_long: gold``)."""
    draft = read_prompt(prompt)
    if len(draft.answer) > MAX_ANSWER_CHARS:
        raise PromptError(f"too_long: gold answer {len(draft.answer)} chars")
    return draft


# ---------------------------------------------------------------- the environment


class ApiBankMini(LadderEnvironment):
    """Built-in mini API-Bank: next API call after a short dialogue, checked by executing it on mock APIs."""

    name = "apibank"
    granularity = "step"
    source = "built-in mini"

    def draft(self, level: int, rng: random.Random) -> tuple[str, Callable[..., Task]]:
        return step_draft(generate_draft(level, rng), benchmark=self.name, checker=CHECKER)

    def _official_heldout(self) -> list[Task] | None:
        """With ``data_dir``, the official dialogues' steps are the held-out split (seed/train unchanged)."""
        if self.data_dir is None:
            return None
        from genenv_engine.environments.apibank.upstream import load_upstream

        return load_upstream(self.data_dir)

    def check(self, task: Task, response: str) -> CheckResult:
        """Execute the response's call on the task's database and compare with the gold by API-Bank's rules."""
        return check_response(task.expected, response)

    def validate(
        self,
        prompt: str,
        answer: str,
        *,
        task_id: str,
        parent: Task | None = None,
        epoch: int = 0,
        generator: str | None = None,
    ) -> Validation:
        """Accept a generated pair only if the prompt parses, its gold executes and the answer matches it."""
        return self._validate_step(
            prompt,
            answer,
            _read_sized,
            PromptError,
            MAX_PROMPT_CHARS,
            MAX_GENERATED_ANSWER_CHARS,
            checker=CHECKER,
            task_id=task_id,
            parent=parent,
            epoch=epoch,
            generator=generator,
            too_long="too_long: prompt or answer",
        )

    def repair_prompt(self, prompt: str, reason: str) -> str | None:
        """A signature listed twice: the list with each at its first listing."""
        return first_listings(prompt, "APIs: ") if reason.startswith("duplicate_api") else None

    def task_grammar(self) -> str:
        """The Lark rules of a task as the simulator writes it (see :mod:`.task_grammar`)."""
        return build_rules(MAX_ANSWER_CHARS)

    def sibling(self, source: Task, rng: random.Random, task_id: str) -> Task:
        """A sibling targeting the source's API, at the same level w.p. 0.5 else ±1 (within its levels)."""
        target = source.difficulty.get("features", {}).get("target")
        target = target if target in SEARCHABLE else None
        levels = allowed_levels(target) if target else (1, 2, 3, 4)
        level = self._sibling_level(source, rng, levels[0], levels[-1])
        near = [lv for lv in (source.level, source.level - 1, source.level + 1) if lv in levels and lv != level]
        for candidate in [level] + near:  # a tiny level (one L1 QueryAlarm prompt) may hold only the source
            for _ in range(30):
                draft = generate_draft(candidate, rng, target)
                sibling = self._as_sibling(source, draft.prompt, draft.answer, task_id)
                if sibling is not None:
                    return sibling
        raise RuntimeError(f"no sibling for {source.id}")
