"""TravelPlanner-mini: travel planning decomposed into single plan-field steps over a synthetic sandbox.

Provides :class:`TravelPlannerMini` (seeded splits on a 4-level ladder, the ``tp_constraints`` checker,
a strict validator for simulator-written steps, sibling pairs) and the step grammar helpers
:func:`render_prompt` / :func:`read_prompt`. GenEnv splits TravelPlanner trajectories into steps; here
a step is (query summary + plan so far) -> the next plan field, written for a byte-level agent::

    A>Y*2 5d 2p $2400 h:pets c:thai r:notshared | FAE1 A2 Aa E1 E2 Eh4 / E3 ?sight  =>  Ea

Query head: ``org>dest`` (``dest*k`` for ``k`` cities of a region), days, people, budget, then the local
constraints ``h:<house rule the stay must allow>``, ``c:<cuisine>[,<cuisine>]``, ``r:<room type>``,
``t:noflight|nodrive``. Plan: one chunk of item codes per day (see :mod:`.db`) in the
canonical field order ``[go] bfast sight lunch dinner [stay]`` (a 1-day trip ends with ``go`` home),
then ``?<field>`` names the field to fill. An answer is correct when the item keeps the plan completable
under every commonsense and hard constraint (proved by :mod:`.solver`); the gold answer
is the cheapest such item (ties by code). Whole plans are scored by
:func:`~.constraints.score_plan` (episode level); official upstream queries load with
:func:`~.upstream.load_upstream`.

>>> env = TravelPlannerMini(seed=0, sizes=SplitSizes(seed=2, train=4, heldout=4))
>>> task = env.splits()["train"][0]
>>> env.check(task, task.answer).success, env.check(task, "zz").error_type
(True, 'parse_error')
"""

from __future__ import annotations

import json
import random
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date, timedelta
from functools import partial
from typing import Any

from genenv_engine.core.limits import BudgetExceeded
from genenv_engine.core.records import CheckResult, Task, Validation
from genenv_engine.environments.base import LadderEnvironment, SplitSizes  # noqa: F401 (the docstring's example)
from genenv_engine.environments.travelplanner.constraints import COMMONSENSE, HARD, aggregate, score_plan
from genenv_engine.environments.travelplanner.db import (
    CUISINES,
    HOUSE_RULES,
    ROOM_WANTS,
    SANDBOX_SEED,
    TRANSPORT_BANS,
    Query,
    Sandbox,
    Slot,
    sandbox,
    schedule,
)
from genenv_engine.environments.travelplanner.formats import query_to_upstream, render_compact
from genenv_engine.environments.travelplanner.solver import Solution, apply, candidates, field_error, replay, solve
from genenv_engine.environments.travelplanner.task_grammar import task_grammar_rules
from genenv_engine.environments.travelplanner.upstream import LiteralError, load_upstream, parse_literal

__all__ = [
    "ERROR_TYPES",
    "TravelPlannerMini",
    "aggregate",
    "check_step",
    "generate_step",
    "gold_field",
    "infer_level",
    "load_upstream",
    "read_prompt",
    "render_prompt",
    "score_plan",
]

ERROR_TYPES = (
    "parse_error",
    "wrong_kind",
    "not_in_sandbox",
    *(f"violates_commonsense:{c}" for c in COMMONSENSE[1:]),
    *(f"violates_hard:{h}" for h in HARD),
    "infeasible_continuation",
)
"""Every error type :meth:`TravelPlannerMini.check` can return (None on success)."""
MAX_PROMPT_CHARS = 180
MAX_ANSWER_CHARS = 8
TIGHT_SLACK = 0.15
"""A budget less than 15% above the cheapest complete plan is tight (a level-3 feature)."""
_STAGES = ("parsed", "in_sandbox", "commonsense", "hard", "completable")
_HEAD_RE = re.compile(r"([A-Z])>([A-Z])(?:\*(\d))? (\d)d (\d)p \$([1-9]\d{0,4})((?: [a-z]:[a-z,]+)*)")
_TOKEN_RE = re.compile(r"[A-Za-z0-9-]{1,8}")
_LADDER = {  # level -> (days, cities, people max, constraint counts, budget slack range)
    1: (1, 1, 2, (0,), (0.3, 1.0)),
    2: (3, 1, 4, (1,), (0.3, 1.0)),
    3: (3, 1, 4, (2, 0, 1), (0.03, 0.8)),
    4: (5, 2, 4, (3,), (0.15, 0.6)),
}


class PromptError(ValueError):
    """A step prompt outside the grammar; ``str(err)`` is a short machine-readable reason."""


@dataclass(frozen=True)
class Step:
    """A step prompt read back: the query, the plan so far, and the field asked for."""

    prompt: str
    query: Query
    prefix: tuple[str, ...]

    @property
    def slot(self) -> Slot:
        return schedule(self.query.days, self.query.cities)[len(self.prefix)]


# ---------------------------------------------------------------- the step grammar


def render_head(query: Query) -> str:
    """The compact query summary, e.g. ``A>Y*2 5d 2p $2400 h:pets c:thai``."""
    dest = f"{query.dest}*{query.cities}" if query.cities > 1 else query.dest
    parts = [f"{query.org}>{dest}", f"{query.days}d", f"{query.people}p", f"${query.budget}"]
    parts += [f"h:{query.house_rule}"] if query.house_rule else []
    parts += [f"c:{','.join(query.cuisines)}"] if query.cuisines else []
    parts += [f"r:{query.room_type}"] if query.room_type else []
    parts += [f"t:{query.transport}"] if query.transport else []
    return " ".join(parts)


def render_prompt(query: Query, prefix: tuple[str, ...]) -> str:
    """Query head, the plan so far (days joined by `` / ``) and ``?<field>`` for the next field."""
    nxt = schedule(query.days, query.cities)[len(prefix)]
    text = render_compact(query, prefix)
    days_done = len(text.split(" / ")) if prefix else 0
    if nxt.day > days_done:
        text = (text + " / " if prefix else "") + f"?{nxt.kind}"
    else:
        text += f" ?{nxt.kind}"
    return f"{render_head(query)} | {text}"


def read_prompt(prompt: str, db: Sandbox | None = None) -> Step:
    """Strictly parse a step prompt (grammar, query sanity, field order); no feasibility check.

    >>> read_prompt("A>B 1d 1p $300 | dAB A2 ?sight").slot
    Slot(day=1, kind='sight')
    >>> read_prompt("A>B 1d 1p $300 | dAB ?lunch")
    Traceback (most recent call last):
    ...
    genenv_engine.environments.travelplanner.mini.PromptError: wrong_field: expected ?bfast
    """
    db = db or sandbox()
    head, sep, plan = prompt.partition(" | ")
    match = _HEAD_RE.fullmatch(head)
    if not sep or match is None:
        raise PromptError("bad_format: expected '<org>><dest> <n>d <n>p $<budget> [constraints] | <plan> ?<field>'")
    query = _read_query(match, db)
    prefix = _read_plan(plan, query)
    if render_prompt(query, prefix) != prompt:
        raise PromptError("bad_format: not in canonical form")
    return Step(prompt, query, prefix)


def _read_query(match: re.Match[str], db: Sandbox) -> Query:
    org, dest, k, days, people, budget, extra = match.groups()
    cities = int(k) if k else 1
    if org not in db.cities:
        raise PromptError(f"bad_query: unknown city {org}")
    if k and (dest not in db.regions or cities < 2 or cities > len(db.regions[dest][1]) or org in db.dest_cities(dest)):
        raise PromptError(f"bad_query: bad region destination {dest}*{k}")
    if not k and (dest not in db.cities or dest == org):
        raise PromptError(f"bad_query: bad destination {dest}")
    if not 1 <= int(days) <= 7 or (cities > 1 and int(days) - 1 < cities) or not 1 <= int(people) <= 8:
        raise PromptError("bad_query: days, cities and people do not fit")
    fields = _read_constraints(extra.split(), int(days))
    return with_dates(
        Query(
            org,
            dest,
            int(days),
            cities,
            int(people),
            int(budget),
            fields.get("h"),
            tuple(fields["c"].split(",")) if "c" in fields else (),
            fields.get("r"),
            fields.get("t"),
        )
    )


def _read_constraints(tokens: list[str], days: int) -> dict[str, str]:
    fields: dict[str, str] = {}
    for token in tokens:
        key, _, value = token.partition(":")
        if key not in "hcrt" or (fields and "hcrt".index(key) <= "hcrt".index(list(fields)[-1])):
            raise PromptError(f"bad_query: constraint {token!r} out of order or repeated")
        fields[key] = value
    if (
        fields.get("h", HOUSE_RULES[0]) not in HOUSE_RULES
        or fields.get("r", "notshared") not in ROOM_WANTS
        or fields.get("t", "noflight") not in TRANSPORT_BANS
    ):
        raise PromptError("bad_query: unknown constraint value")
    wanted = fields.get("c", "thai").split(",")
    if len(wanted) > 2 or any(c not in CUISINES for c in wanted) or wanted != sorted(set(wanted), key=CUISINES.index):
        raise PromptError("bad_query: cuisines must be 1-2 known, distinct, in canonical order")
    if days == 1 and ("h" in fields or "r" in fields):
        raise PromptError("bad_query: a 1-day trip has no stay to constrain")
    return fields


def _read_plan(plan: str, query: Query) -> tuple[str, ...]:
    slots = schedule(query.days, query.cities)
    chunks = plan.split(" / ")
    *done, last = chunks
    *tail, ask = last.split(" ")
    if not ask.startswith("?"):
        raise PromptError("bad_plan: must end with ?<field>")
    if len(chunks) > query.days:
        raise PromptError(f"bad_plan: {len(chunks)} days for a {query.days}-day trip")
    prefix: list[str] = []
    for day, words in enumerate([c.split(" ") for c in done] + [tail], 1):
        per_day = sum(s.day == day for s in slots)
        if (day < len(chunks) and len(words) != per_day) or (day == len(chunks) and len(words) >= per_day):
            raise PromptError(f"bad_plan: day {day} has {len(words)} fields")
        if not all(_TOKEN_RE.fullmatch(w) for w in words):
            raise PromptError(f"bad_plan: bad token on day {day}")
        prefix += words
    if ask != f"?{slots[len(prefix)].kind}":
        raise PromptError(f"wrong_field: expected ?{slots[len(prefix)].kind}")
    return tuple(prefix)


# ---------------------------------------------------------------- checking one step


def check_step(query: Query, prefix: tuple[str, ...], response: str, db: Sandbox | None = None) -> CheckResult:
    """Score one field: success iff the plan stays completable under all constraints and the budget."""
    db = db or sandbox()
    text = response.strip()
    if not _TOKEN_RE.fullmatch(text):
        return _step_result("parse_error")
    slot = schedule(query.days, query.cities)[len(prefix)]
    error = field_error(query, replay(query, prefix, db), slot, text, db)
    if error is None:
        found = solve(query, (*prefix, text), db, budget=query.budget)
        error = (
            "infeasible_continuation"
            if found is None
            else "violates_hard:budget"
            if found.cost > query.budget
            else None
        )
    return _step_result(error)


def _step_result(error: str | None) -> CheckResult:
    stage = {
        "parse_error": 0,
        "wrong_kind": 0,
        "not_in_sandbox": 1,
        "infeasible_continuation": 4,
        "violates_hard:budget": 4,
        None: 5,
    }.get(error, 3 if error and error.startswith("violates_hard") else 2)
    sub = {name: float(i < stage) for i, name in enumerate(_STAGES)}
    return CheckResult(error is None, stage / len(_STAGES), sub, error)


def gold_field(query: Query, prefix: tuple[str, ...], db: Sandbox) -> tuple[str, tuple[str, ...]]:
    """The cheapest field that keeps ``prefix`` completable within budget, and that completion."""
    state = replay(query, prefix, db)
    slot = schedule(query.days, query.cities)[len(prefix)]
    for code in candidates(query, state, slot, db):
        found = solve(query, (*prefix, code), db, budget=query.budget)
        if found is not None and found.cost <= query.budget:
            return code, found.codes
    raise ValueError("prefix cannot be completed within budget")


def step_features(step: Step, min_cost: int) -> dict[str, Any]:
    q = step.query
    slack = round(q.budget / min_cost - 1, 3)
    return {
        "days": q.days,
        "cities": q.cities,
        "people": q.people,
        "n_constraints": q.n_constraints,
        "slack": slack,
        "tight": slack < TIGHT_SLACK,
        "step": len(step.prefix),
        "n_steps": len(schedule(q.days, q.cities)),
        "field": step.slot.kind,
    }


def infer_level(features: dict[str, Any]) -> int:
    """Level 1-4 from the query features; the generator and the validator both use this.

    >>> infer_level({"days": 1, "cities": 1, "n_constraints": 0, "tight": False})
    1
    >>> infer_level({"days": 3, "cities": 1, "n_constraints": 0, "tight": True})
    3
    """
    if features["days"] >= 5 or features["cities"] >= 2 or features["n_constraints"] >= 3:
        return 4
    if features["n_constraints"] == 2 or features["tight"]:
        return 3
    if features["days"] >= 2 or features["n_constraints"] == 1:
        return 2
    return 1


# ---------------------------------------------------------------- generation


def sample_query(level: int, rng: random.Random, db: Sandbox, org: str | None = None) -> tuple[Query, Solution]:
    """A feasible query on ``level``'s rung, budgeted from its cheapest plan; returns (query, cheapest plan)."""
    days, cities, max_people, counts, (lo, hi) = _LADDER[level]
    while True:
        if cities == 1:
            start = org or rng.choice(sorted(db.cities))
            dest = rng.choice([c for c in sorted(db.cities) if c != start])
        else:
            dest = rng.choice(
                [r for r in sorted(db.regions) if len(db.regions[r][1]) >= cities and org not in db.regions[r][1]]
            )
            start = org or rng.choice([c for c in sorted(db.cities) if c not in db.regions[dest][1]])
        kinds = rng.sample(("h", "c", "r", "t"), rng.choice(counts))
        q = Query(
            start,
            dest,
            days,
            cities,
            rng.randint(1, max_people),
            0,
            rng.choice(HOUSE_RULES) if "h" in kinds else None,
            tuple(sorted(rng.sample(CUISINES, 1 + (rng.random() < 0.3)), key=CUISINES.index)) if "c" in kinds else (),
            rng.choice(sorted(ROOM_WANTS)) if "r" in kinds else None,
            rng.choice(sorted(TRANSPORT_BANS)) if "t" in kinds else None,
        )
        best = solve(q, (), db)
        if best is not None:
            slack = rng.uniform(0.02, 0.1) if level == 3 and q.n_constraints < 2 else rng.uniform(lo, hi)
            return with_dates(replace(q, budget=-(-int(best.cost * (1 + slack)) // 10) * 10)), best


def with_dates(query: Query) -> Query:
    """The query with its travel dates (consecutive, starting on a day derived from its compact head)."""
    start = date(2022, 3, 1) + timedelta(days=zlib.crc32(render_head(query).encode()) % 60)
    return replace(query, date=tuple(str(start + timedelta(days=i)) for i in range(query.days)))


def generate_step(
    level: int, rng: random.Random, db: Sandbox | None = None, org: str | None = None
) -> tuple[Step, int]:
    """Sample a step on ``level``: a query, a completable random partial plan, and its min plan cost."""
    db = db or sandbox()
    query, cheapest = sample_query(level, rng, db, org)
    prefix = _walk(query, cheapest.codes, rng.randrange(len(cheapest.codes)), rng, db)
    return Step(render_prompt(query, prefix), query, prefix), cheapest.cost


def _walk(query: Query, plan: tuple[str, ...], k: int, rng: random.Random, db: Sandbox) -> tuple[str, ...]:
    """A partial plan of ``k`` fields mixing the cheapest plan with nearby alternatives, kept completable."""
    state, prefix = replay(query, (), db), []
    for slot, cheap in zip(schedule(query.days, query.cities)[:k], plan, strict=False):
        options = candidates(query, state, slot, db)
        code = cheap if cheap in options and rng.random() < 0.5 else rng.choice(options[:4] or [cheap])
        if field_error(query, state, slot, code, db) is not None:
            return plan[:k]
        apply(query, state, slot, code, db)
        prefix.append(code)
    found = solve(query, tuple(prefix), db, budget=query.budget)
    return tuple(prefix) if found is not None and found.cost <= query.budget else plan[:k]


# ---------------------------------------------------------------- the environment


class TravelPlannerMini(LadderEnvironment):
    """Built-in TravelPlanner mini: next-field steps over the synthetic sandbox, checked by constraints."""

    name = "travelplanner"
    granularity = "step"
    source = "built-in mini"

    def draft(self, level: int, rng: random.Random) -> tuple[str, Callable[..., Task]]:
        step, min_cost = generate_step(level, rng)
        return step.prompt, partial(_task, step, min_cost)

    def _official_heldout(self) -> list[Task] | None:
        """With ``data_dir`` the held-out split is the official queries (episode-level, plan scoring only)."""
        return load_upstream(self.data_dir) if self.data_dir else None

    def check(self, task: Task, response: str) -> CheckResult:
        """Step tasks: is the field a completable choice? Official (episode) tasks: score the whole plan."""
        if task.granularity == "episode":
            return score_plan(task.expected["query"], _read_plan_response(response))
        step = read_prompt(task.prompt)
        return check_step(step.query, step.prefix, response)

    def task_grammar(self) -> str:
        """A query head, a plan so far that the sandbox allows, and a code (see :mod:`.task_grammar`)."""
        return task_grammar_rules()

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
        """Accept a generated step if it parses, its plan so far is valid and completable, and the answer works."""
        rejected = self._guard(prompt, answer, parent, MAX_PROMPT_CHARS, MAX_ANSWER_CHARS)
        if rejected:
            return rejected
        db = sandbox()
        try:
            step = read_prompt(prompt, db)
        except PromptError as err:
            return Validation(False, str(err))
        broken = first_violation(step, db)
        if broken is not None:
            i, error, slot = broken
            return Validation(False, f"bad_prefix: {error} at day {slot.day} {slot.kind} {step.prefix[i]}")
        try:
            found = solve(step.query, step.prefix, db, budget=step.query.budget)
            if found is None or found.cost > step.query.budget:
                return Validation(False, "infeasible_prefix: no completion within budget")
            cheapest = solve(step.query, (), db)
            assert cheapest is not None
            return self._accept(
                _task(step, cheapest.cost, task_id, **self._generated(parent, epoch, generator)), answer
            )
        except BudgetExceeded as err:  # a query whose search would explode is rejected, not searched on
            return Validation(False, f"budget: {err}")

    def repair_prompt(self, prompt: str, reason: str) -> str | None:
        """A plan so far that breaks a rule (``bad_prefix``): the plan cut before its first offending field, asking
        for that field (`cut_at_violation`)."""
        return cut_at_violation(prompt) if reason.startswith("bad_prefix") else None

    def sibling(self, source: Task, rng: random.Random, task_id: str) -> Task:
        """A sibling leaving from the source's origin city, at the same level w.p. 0.5 else ±1."""
        level = self._sibling_level(source, rng)
        org = _org_of(source)
        while True:
            step, _ = generate_step(level, rng, org=org)
            sibling = self._as_sibling(source, step.prompt, gold_field(step.query, step.prefix, sandbox())[0], task_id)
            if sibling is not None:
                return sibling


def first_violation(step: Step, db: Sandbox) -> tuple[int, str, Slot] | None:
    """The first field of the plan so far that the sandbox refuses: its index, the error and its slot; or None."""
    state = replay(step.query, (), db)
    for i, (slot, code) in enumerate(zip(schedule(step.query.days, step.query.cities), step.prefix, strict=False)):
        error = field_error(step.query, state, slot, code, db)
        if error is not None:
            return i, error, slot
        apply(step.query, state, slot, code, db)
    return None


def cut_at_violation(prompt: str) -> str | None:
    """The step prompt with its plan cut before the first field that breaks a rule, so that it asks for that field;
    None when the prompt does not parse or breaks no rule.

    >>> cut_at_violation("A>B 2d 1p $600 | dAB A2 Aa A2 ?dinner")  # lunch repeats breakfast's restaurant
    'A>B 2d 1p $600 | dAB A2 Aa ?lunch'
    >>> cut_at_violation("A>B 1d 1p $300 | dAB A2 ?sight") is None, cut_at_violation("A>B 2d | x ?y") is None
    (True, True)
    """
    db = sandbox()
    try:
        step = read_prompt(prompt, db)
    except PromptError:
        return None
    broken = first_violation(step, db)
    return None if broken is None else render_prompt(step.query, step.prefix[: broken[0]])


def _org_of(task: Task) -> str | None:
    head = task.prompt.split(" ", 1)[0]
    return head[0] if len(head) >= 3 and head[1] == ">" and head[0] in sandbox().cities else None


def _read_plan_response(response: str) -> Any:
    """An episode response: a JSON list of day records (or compact text, passed through)."""
    text = response.strip()
    if text.startswith("["):
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            try:
                return parse_literal(text)
            except LiteralError:
                return text
    return text


def _task(step: Step, min_cost: int, task_id: str, **fields: Any) -> Task:
    db = sandbox()
    gold, plan = gold_field(step.query, step.prefix, db)
    features = step_features(step, min_cost)
    expected = {
        "query": query_to_upstream(step.query, db),
        "prefix": list(step.prefix),
        "day": step.slot.day,
        "field": step.slot.kind,
        "gold": gold,
        "gold_plan": render_compact(step.query, plan),
        "min_cost": min_cost,
        "sandbox": SANDBOX_SEED,
    }
    return Task(
        id=task_id,
        benchmark="travelplanner",
        prompt=step.prompt,
        answer=gold,
        expected=expected,
        difficulty={"level": infer_level(features), "features": features},
        checker="tp_constraints",
        granularity="step",
        **fields,
    )
