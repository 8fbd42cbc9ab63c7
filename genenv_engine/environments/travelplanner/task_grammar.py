"""The Lark grammar (llguidance's dialect) of a TravelPlanner-mini step as the simulator writes it.

:func:`task_rules` gives the rules ``prompt`` (query head, plan so far, ``?<field>``; see :mod:`.mini`) and
``answer`` (one sandbox code), built from the sandbox of :mod:`.db`. The head is an origin and a destination
(a city, or a region with ``*k`` cities) for which some plan of that many days exists (the solver proves it),
people 1-8, a budget no lower than that trip's cheapest plan for one person (to two significant digits), and
the constraints in their order with their known values (``c:`` one or two distinct cuisines in canonical order;
a 1-day trip has no ``h:`` or ``r:``). The plan follows the day schedule of the head's days and cities, and every
field is a sandbox code of the slot's kind that the plan so far allows: legs chain from the origin through the
destination's cities (each once) and back, in one mode class (self-driving never mixed with flights or taxis),
never of a banned mode, and only where legs can still finish the route; meals and attractions lie in a city of
that day's path, a stay in the city where the day ends, with no more minimum nights than the stint has.
``?<field>`` is always the next slot's kind.

Left to the validator: a restaurant or attraction used once, a stay's house rules and room type (the plan would
need a copy per pair of them), the minimum nights of a run of stays, whether the rest fits the budget and the
cuisines, the prompt's length, and whether the answer fits the slot (the answer rule cannot see the prompt).
"""

from __future__ import annotations

from functools import lru_cache

from genenv_engine.environments.travelplanner.db import (
    CUISINES,
    HOUSE_RULES,
    ROOM_WANTS,
    TRANSPORT_BANS,
    Query,
    Sandbox,
    same_segment,
    sandbox,
    schedule,
)
from genenv_engine.environments.travelplanner.solver import solve

MAX_DAYS = 7
MAX_PEOPLE = 8
MAX_BUDGET_DIGITS = 5
ALL_MODES = ("flight", "drive", "taxi")
MODES = {"any": ALL_MODES, **{ban: tuple(m for m in ALL_MODES if m != mode) for ban, mode in TRANSPORT_BANS.items()}}
"""Transport constraint (``any`` for none) -> the leg modes the first leg may use."""


def _after(modes: tuple[str, ...], mode: str) -> tuple[str, ...]:
    """The modes later legs may use once one of ``mode`` is taken (self-driving never mixes with the others)."""
    return ("drive",) if mode == "drive" else tuple(m for m in modes if m != "drive")


class _Plans:
    """Plan rules, one per state of a partial plan, built from the end so equal remainders share a rule."""

    def __init__(self, db: Sandbox) -> None:
        self.db = db
        self.named: dict[str, str] = {}
        """Rule body -> rule name."""
        self.done: dict[tuple, str | None] = {}
        """(trip, slot, route, path, modes) -> the name of that state's rule (None: a dead end)."""

    def rule(self, body: str, prefix: str) -> str:
        if body not in self.named:
            self.named[body] = f"{prefix}{len(self.named)}"
        return self.named[body]

    def codes(self, codes) -> str:
        return self.rule(" | ".join(f'"{c}"' for c in sorted(codes)), "k")

    def stays(self, city: str, longest: int) -> str:
        return self.codes(s.code for s in self.db.stays.values() if s.city == city and s.min_nights <= longest)

    def items(self, group: dict, path: tuple[str, ...]) -> str:
        return self.codes(item.code for item in group.values() if item.city in path)

    def node(
        self, query: Query, i: int, route: tuple[str, ...], path: tuple[str, ...], modes: tuple[str, ...]
    ) -> str | None:
        """The rest of the plan from slot ``i`` (``route`` so far, ``path`` of the day, ``modes`` still open), or
        None when no legs can finish the route from there."""
        key = (query.org, query.dest, query.days, query.cities, i, route, path, modes)
        if key not in self.done:
            self.done[key] = self._node(query, i, route, path, modes)
        return self.done[key]

    def _node(
        self, query: Query, i: int, route: tuple[str, ...], path: tuple[str, ...], modes: tuple[str, ...]
    ) -> str | None:
        slots = schedule(query.days, query.cities)
        slot = slots[i]
        ask = f'"?{slot.kind}"'
        if i == len(slots) - 1:
            return self.rule(ask, "n")
        sep = '" "' if slots[i + 1].day == slot.day else '" / "'
        new_day = slots[i + 1].day != slot.day
        alternatives = []
        if slot.kind == "go":
            final = len(route) == query.cities + 1
            targets = (query.org,) if final else [c for c in self.db.dest_cities(query.dest) if c not in route]
            for city in targets:
                by_modes: dict[tuple[str, ...], list[str]] = {}
                for leg in self.db.legs_between(route[-1], city):
                    if leg.mode in modes:
                        by_modes.setdefault(_after(modes, leg.mode), []).append(leg.code)
                for later, legs in by_modes.items():
                    rest = self.node(query, i + 1, route + (city,), (city,) if new_day else path + (city,), later)
                    if rest is not None:
                        alternatives.append(f"{self.codes(legs)} {sep} {rest}")
        else:
            if slot.kind == "stay":
                stint = sum(
                    same_segment(*sorted((slot.day, n)), query.days, query.cities) or n == slot.day
                    for n in range(1, query.days)
                )
                here = self.stays(path[-1], stint)
            else:
                here = self.items(self.db.attractions if slot.kind == "sight" else self.db.restaurants, path)
            rest = self.node(query, i + 1, route, (route[-1],) if new_day else path, modes)
            if rest is not None:
                alternatives.append(f"{here} {sep} {rest}")
        return self.rule(" | ".join([ask, *alternatives]), "n") if alternatives else None


def at_least(cost: int) -> str:
    """A regex of the budgets (1-5 digits, no leading zero) of at least ``cost`` rounded down to two significant
    digits.

    >>> at_least(1234)
    '[2-9][0-9]{3}|1[3-9][0-9]{2}|12[0-9]{2}|[1-9][0-9]{4,4}'
    """
    text = str(cost)
    text = text[:2] + "0" * (len(text) - 2)
    digits = len(text)
    alternatives = [
        text[:i] + f"[{int(text[i]) + 1}-9]" + (f"[0-9]{{{digits - i - 1}}}" if i < digits - 1 else "")
        for i in range(min(2, digits))
        if text[i] != "9"
    ]
    alternatives.append(text[:2] + (f"[0-9]{{{digits - 2}}}" if digits > 2 else ""))
    if digits < MAX_BUDGET_DIGITS:
        alternatives.append(f"[1-9][0-9]{{{digits},{MAX_BUDGET_DIGITS - 1}}}")
    return "|".join(alternatives)


def _trips(db: Sandbox):
    """Every (origin, destination, cities) the head may name: a city, or 2+ cities of a region without it."""
    for org in sorted(db.cities):
        yield from ((org, dest, 1) for dest in sorted(db.cities) if dest != org)
        for region, (_, members) in sorted(db.regions.items()):
            if org not in members:
                yield from ((org, region, k) for k in range(2, len(members) + 1))


def task_rules(db: Sandbox) -> str:
    """The ``prompt`` and ``answer`` rules for sandbox ``db``."""
    plans = _Plans(db)
    heads = []
    for org, dest, k in _trips(db):
        name = f"{dest}*{k}" if k > 1 else dest
        for days in range(1, MAX_DAYS + 1):
            if k > 1 and days - 1 < k:
                continue
            cheapest = solve(Query(org, dest, days, k, 1, 0), (), db)
            if cheapest is None:
                continue
            tails = []
            for ban, modes in MODES.items():
                plan = plans.node(Query(org, dest, days, k, 1, 0), 0, (org,), (org,), modes)
                if plan is not None:
                    tails.append(f'"{"" if ban == "any" else " t:" + ban} | " {plan}')
            local = "day_one" if days == 1 else "stays"
            party = f'/[1-{MAX_PEOPLE}]/ "p $" /{at_least(cheapest.cost)}/'
            heads.append(f'"{org}>{name} {days}d " {plans.rule(party, "b")} {local} ({" | ".join(tails)})')
    cuisines = [*CUISINES] + [f"{a},{b}" for i, a in enumerate(CUISINES) for b in CUISINES[i + 1 :]]
    codes = sorted([*db.legs, *db.restaurants, *db.attractions, *db.stays])
    rules = [
        "prompt: " + " | ".join(heads),
        'day_one: (" c:" cuisine)?',
        'stays: (" h:" ('
        + " | ".join(f'"{r}"' for r in HOUSE_RULES)
        + '))? (" c:" cuisine)? (" r:" ('
        + " | ".join(f'"{r}"' for r in sorted(ROOM_WANTS))
        + "))?",
        "cuisine: " + " | ".join(f'"{c}"' for c in cuisines),
        *(f"{name}: {body}" for body, name in plans.named.items()),
        "answer: " + " | ".join(f'"{c}"' for c in codes),
    ]
    return "\n".join(rules) + "\n"


@lru_cache(maxsize=1)
def task_grammar_rules() -> str:
    """:func:`task_rules` of the built-in sandbox (built once per process)."""
    return task_rules(sandbox())
