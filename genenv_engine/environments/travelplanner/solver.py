"""TravelPlanner-mini solver: replay a partial plan, check one more field locally, find a min-cost completion.

A partial plan is a tuple of item codes, one per :class:`~.db.Slot` of the query's
schedule, filled in order. :func:`field_error` applies the commonsense and hard constraints that one
new field can break on its own (wrong city, repeated restaurant, flight under ``noflight``, a stay too
short for its minimum nights...); :func:`solve` then proves the rest of the plan can still be filled
and returns the cheapest completion (a gold plan). The search is exact: it enumerates the remaining
city routes, picks legs per mode class (self-driving never mixed with flights or taxis), stays per
city stint (a run of one stay must reach its minimum nights), and meals as a min-cost choice of
distinct restaurants per city that covers the required cuisines; attractions only need to be distinct.
It exists so that every generated query is proved feasible and every step task has a recomputed gold.
Every route, meal split, restaurant combination and sight assignment tried counts against a search
budget (:data:`MAX_NODES`, see :mod:`genenv_engine.core.limits`); past it :func:`solve` raises
:class:`~genenv_engine.core.limits.BudgetExceeded` rather than search on.

>>> from genenv_engine.environments.travelplanner.db import Query, sandbox
>>> q = Query("A", "B", 1, 1, 1, 500)
>>> sol = solve(q, (), sandbox())
>>> len(sol.codes), sol.cost <= 500
(6, True)
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from genenv_engine.core.limits import Budget
from genenv_engine.environments.travelplanner.db import (
    MEALS,
    ROOM_WANTS,
    SLOT_ITEM,
    TRANSPORT_BANS,
    Query,
    Sandbox,
    Slot,
    same_segment,
    schedule,
)

INF = 10**9
MAX_NODES = 50_000
"""Search budget of one :func:`solve`: routes, meal splits, restaurant combinations and sight picks tried."""


@dataclass
class State:
    """What a partial plan has fixed so far."""

    route: list[str]
    """Cities in visiting order, starting with the origin; one more per leg taken."""
    paths: list[list[str]] = field(default_factory=list)
    """Per started day: the cities it touches (start city, then each leg's destination)."""
    modes: set[str] = field(default_factory=set)
    used: set[str] = field(default_factory=set)
    """Restaurants and attractions already in the plan."""
    nights: list[str] = field(default_factory=list)
    """Stay code per night so far."""
    cost: int = 0
    covered: set[str] = field(default_factory=set)
    """Required cuisines already served by a restaurant outside the origin city."""

    def day_path(self, day: int) -> list[str]:
        """Cities of ``day`` (a not-yet-started day starts where the route stands)."""
        return self.paths[day - 1] if day <= len(self.paths) else [self.route[-1]]

    def run(self) -> tuple[str | None, int]:
        """The stay of the last night and how many consecutive nights end with it."""
        if not self.nights:
            return None, 0
        last = self.nights[-1]
        length = len(list(itertools.takewhile(lambda s: s == last, reversed(self.nights))))
        return last, length


@dataclass(frozen=True)
class Solution:
    cost: int
    """Total cost of the completed plan (prefix included)."""
    codes: tuple[str, ...]
    """One code per slot: the prefix followed by the cheapest completion."""


def replay(query: Query, prefix: tuple[str, ...], db: Sandbox) -> State:
    """Rebuild the state of a partial plan (its fields are assumed to have passed :func:`field_error`)."""
    state = State(route=[query.org])
    for slot, code in zip(schedule(query.days, query.cities), prefix, strict=False):
        apply(query, state, slot, code, db)
    return state


def apply(query: Query, state: State, slot: Slot, code: str, db: Sandbox) -> None:
    """Add one field to the state."""
    if slot.day > len(state.paths):
        state.paths.append([state.route[-1]])
    state.cost += db.item_cost(code, query.people)
    if slot.kind == "go":
        leg = db.legs[code]
        state.route.append(leg.dest)
        state.paths[slot.day - 1].append(leg.dest)
        state.modes.add(leg.mode)
    elif slot.kind == "stay":
        state.nights.append(code)
    else:
        state.used.add(code)
        if code in db.restaurants and db.restaurants[code].city != query.org:
            state.covered |= set(db.restaurants[code].cuisines) & set(query.cuisines)


# ---------------------------------------------------------------- one field, checked on its own


def field_error(query: Query, state: State, slot: Slot, code: str, db: Sandbox) -> str | None:
    """The constraint one new field breaks given the plan so far (None if none; feasibility not checked)."""
    if code == "-":
        return "violates_commonsense:complete_information"
    kind = db.kind_of(code)
    if kind is None:
        return "parse_error"
    if kind != SLOT_ITEM[slot.kind]:
        return "wrong_kind"
    if not db.has(code):
        return "not_in_sandbox"
    path = state.day_path(slot.day)
    if slot.kind == "go":
        return _leg_error(query, state, code, db)
    if slot.kind == "stay":
        return _stay_error(query, state, slot, code, path, db)
    if db.city_of(code) not in path:
        return "violates_commonsense:within_current_city"
    if code in state.used:
        return "violates_commonsense:" + ("diverse_restaurants" if kind == "restaurant" else "diverse_attractions")
    return None


def _leg_error(query: Query, state: State, code: str, db: Sandbox) -> str | None:
    leg = db.legs[code]
    final = len(state.route) == query.cities + 1
    allowed = {query.org} if final else set(db.dest_cities(query.dest)) - set(state.route)
    if leg.org != state.route[-1] or leg.dest not in allowed:
        return "violates_commonsense:reasonable_city_route"
    if (leg.mode == "drive" and state.modes - {"drive"}) or (leg.mode != "drive" and "drive" in state.modes):
        return "violates_commonsense:non_conflicting_transportation"
    if TRANSPORT_BANS.get(query.transport or "") == leg.mode:
        return "violates_hard:transportation"
    return None


def _stay_error(query: Query, state: State, slot: Slot, code: str, path: list[str], db: Sandbox) -> str | None:
    stay = db.stays[code]
    if stay.city != path[-1]:
        return "violates_commonsense:within_current_city"
    night = slot.day
    last, length = state.run()
    continues = last is not None and same_segment(night - 1, night, query.days, query.cities)
    if continues and last != code and length < db.stays[last].min_nights:
        return "violates_commonsense:minimum_nights"
    run = length + 1 if continues and last == code else 1
    ahead = sum(same_segment(night, n, query.days, query.cities) for n in range(night + 1, query.days))
    if run + ahead < stay.min_nights:
        return "violates_commonsense:minimum_nights"
    if query.house_rule and query.house_rule in stay.rules:
        return "violates_hard:room_rule"
    if query.room_type and stay.room_type not in ROOM_WANTS[query.room_type]:
        return "violates_hard:room_type"
    return None


def candidates(query: Query, state: State, slot: Slot, db: Sandbox) -> list[str]:
    """Codes that pass :func:`field_error` at ``slot``, cheapest first (ties by code)."""
    path = state.day_path(slot.day)
    if slot.kind == "go":
        pool = [leg.code for leg in db.legs_from(state.route[-1])]
    elif slot.kind == "stay":
        pool = [s.code for s in db.stays.values() if s.city == path[-1]]
    else:
        group = db.attractions if slot.kind == "sight" else db.restaurants
        pool = [item.code for item in group.values() if item.city in path]
    ok = [c for c in pool if field_error(query, state, slot, c, db) is None]
    return sorted(ok, key=lambda c: (db.item_cost(c, query.people), c))


# ---------------------------------------------------------------- the completion search


def solve(
    query: Query, prefix: tuple[str, ...], db: Sandbox, budget: int | None = None, max_nodes: int | None = None
) -> Solution | None:
    """The cheapest completion of ``prefix`` ignoring the budget, or None if no completion exists.

    With ``budget`` it stops at the first completion costing at most ``budget`` (a feasibility proof,
    not necessarily the cheapest); routes are tried cheapest legs-and-stays first. ``max_nodes``
    (default :data:`MAX_NODES`, read at call time) is the search budget; past it
    :class:`~genenv_engine.core.limits.BudgetExceeded` is raised.
    """
    work = Budget(MAX_NODES if max_nodes is None else max_nodes, "solver nodes")
    slots = schedule(query.days, query.cities)
    state = replay(query, prefix, db)
    tried = []
    for route in _routes(query, state, db):
        work.spend()
        paths = _day_paths(query, route)
        legs = _best_legs(
            query, state, list(zip(route[len(state.route) - 1 :], route[len(state.route) :], strict=False)), db
        )
        stays = _best_stays(query, state, paths, db)
        if legs is not None and stays is not None:
            tried.append((legs[0] + stays[0], route, paths, legs, stays))
    best: Solution | None = None
    cache: dict = {}
    for _, _route, paths, legs, stays in sorted(tried, key=lambda t: t[0]):
        found = _complete(query, slots, prefix, state, paths, legs, stays, db, cache, work)
        if found is not None and (best is None or found.cost < best.cost):
            best = found
            if budget is not None and best.cost <= budget:
                break
    return best


def _routes(query: Query, state: State, db: Sandbox) -> list[list[str]]:
    todo = query.cities + 2 - len(state.route)
    if todo <= 0:
        return [list(state.route)]
    pool = [c for c in db.dest_cities(query.dest) if c not in state.route]
    return [state.route + list(mid) + [query.org] for mid in itertools.permutations(pool, todo - 1)]


def _day_paths(query: Query, route: list[str]) -> list[list[str]]:
    paths, leg = [], 0
    for day in range(1, query.days + 1):
        here = route[leg]
        legs_today = [s for s in schedule(query.days, query.cities) if s.day == day and s.kind == "go"]
        paths.append([here] + route[leg + 1 : leg + 1 + len(legs_today)])
        leg += len(legs_today)
    return paths


def _complete(
    query: Query,
    slots: tuple[Slot, ...],
    prefix: tuple[str, ...],
    state: State,
    paths: list[list[str]],
    legs: tuple[int, list[str]],
    stays: tuple[int, list[str]],
    db: Sandbox,
    cache: dict,
    work: Budget,
) -> Solution | None:
    rest = list(range(len(prefix), len(slots)))
    meals = _best_meals(query, state, paths, [i for i in rest if slots[i].kind in MEALS], slots, db, cache, work)
    sights = _assign_sights(state, paths, [i for i in rest if slots[i].kind == "sight"], slots, db, work)
    if meals is None or sights is None:
        return None
    fill = {**meals[1], **sights}
    leg_codes, stay_codes = iter(legs[1]), iter(stays[1])
    codes = list(prefix)
    for i in rest:
        kind = slots[i].kind
        codes.append(next(leg_codes) if kind == "go" else next(stay_codes) if kind == "stay" else fill[i])
    return Solution(state.cost + legs[0] + stays[0] + meals[0], tuple(codes))


def _best_legs(query: Query, state: State, hops: list[tuple[str, str]], db: Sandbox) -> tuple[int, list[str]] | None:
    banned = TRANSPORT_BANS.get(query.transport or "")
    options = []
    for classes in ({"drive"}, {"flight", "taxi"}):
        if state.modes - classes:
            continue
        total, codes = 0, []
        for a, b in hops:
            legs = [leg for leg in db.legs_between(a, b) if leg.mode in classes and leg.mode != banned]
            if not legs:
                break
            leg = min(legs, key=lambda leg: (leg.cost(query.people), leg.code))
            total += leg.cost(query.people)
            codes.append(leg.code)
        else:
            options.append((total, codes))
    return min(options) if options else None


def _best_stays(query: Query, state: State, paths: list[list[str]], db: Sandbox) -> tuple[int, list[str]] | None:
    total, codes = 0, []
    night = len(state.nights) + 1
    last, length = state.run()
    if (
        last is not None
        and not same_segment(night - 1, night, query.days, query.cities)
        and length < db.stays[last].min_nights
    ):
        return None
    while night < query.days:
        end = night
        while end + 1 < query.days and same_segment(night, end + 1, query.days, query.cities):
            end += 1
        open_run = (
            (last, length) if last is not None and same_segment(night - 1, night, query.days, query.cities) else None
        )
        found = _stint(query, paths[night - 1][-1], end - night + 1, open_run, db)
        if found is None:
            return None
        total += found[0]
        codes += found[1]
        night, last, length = end + 1, None, 0
    return total, codes


def _stint(
    query: Query, city: str, nights: int, open_run: tuple[str, int] | None, db: Sandbox
) -> tuple[int, list[str]] | None:
    """Cheapest stays for ``nights`` consecutive nights in ``city``, possibly continuing an open run."""
    allowed = [
        s
        for s in db.stays.values()
        if s.city == city
        and not (query.house_rule and query.house_rule in s.rules)
        and not (query.room_type and s.room_type not in ROOM_WANTS[query.room_type])
    ]

    def fresh(m: int) -> tuple[int, list[str]] | None:
        if m == 0:
            return 0, []
        usable = [s for s in allowed if s.min_nights <= m]
        if not usable:
            return None
        s = min(usable, key=lambda s: (s.night_cost(query.people), s.code))
        return s.night_cost(query.people) * m, [s.code] * m

    if open_run is None:
        return fresh(nights)
    code, length = open_run
    stay = db.stays[code]
    best = None
    for j in range(max(0, stay.min_nights - length), nights + 1):
        tail = fresh(nights - j)
        if tail is not None:
            option = (stay.night_cost(query.people) * j + tail[0], [code] * j + tail[1])
            best = option if best is None or option[0] < best[0] else best
    return best


def _best_meals(
    query: Query,
    state: State,
    paths: list[list[str]],
    todo: list[int],
    slots: tuple[Slot, ...],
    db: Sandbox,
    memo: dict,
    work: Budget,
) -> tuple[int, dict[int, str]] | None:
    """Cheapest distinct restaurants for the open meal slots, covering the still-missing cuisines.

    Slots of a travel day accept either city; every split of those slots between the two cities is
    tried, and per split a small DP over cities decides which city serves which missing cuisine.
    """
    groups: dict[tuple[str, ...], list[int]] = {}
    for i in todo:
        groups.setdefault(tuple(sorted(set(paths[slots[i].day - 1]))), []).append(i)
    cities = sorted({c for key in groups for c in key})
    need = tuple(c for c in query.cuisines if c not in state.covered)

    def pick(city: str, n: int, mask: int) -> tuple[int, list[str]] | None:
        key = (city, n, mask)
        if key not in memo:
            must = tuple(c for k, c in enumerate(need) if mask >> k & 1)
            if must and city == query.org:
                memo[key] = None
            else:
                memo[key] = _city_pick([r for r in db.menus[city] if r.code not in state.used], n, must, work)
        return memo[key]

    def options(city: str, n: int) -> list[tuple[int, int]]:
        key = (city, n)
        if key not in memo:
            memo[key] = [(m, got[0]) for m in range(1 << len(need)) if (got := pick(city, n, m)) is not None]
        return memo[key]

    multi = [key for key in groups if len(key) > 1]
    best: tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None = None
    seen: set[tuple[int, ...]] = set()
    for split in itertools.product(*(range(len(groups[key]) + 1) for key in multi)):
        work.spend()
        demand = dict.fromkeys(cities, 0)
        for key, ids in groups.items():
            if len(key) == 1:
                demand[key[0]] += len(ids)
        for key, x in zip(multi, split, strict=False):
            demand[key[0]] += x
            demand[key[1]] += len(groups[key]) - x
        vector = tuple(demand[c] for c in cities)
        if vector in seen:
            continue
        seen.add(vector)
        found = _cover(cities, vector, len(need), options, work)
        if found is not None and (best is None or found[0] < best[0]):
            best = (found[0], vector, found[1], split)
    if best is None:
        return None
    cost, vector, masks, split = best
    pools = {c: sorted(pick(c, n, m)[1]) for c, n, m in zip(cities, vector, masks, strict=False)}  # type: ignore[index]
    split_of = dict(zip(multi, split, strict=False))
    fill: dict[int, str] = {}
    for key, ids in groups.items():
        first = split_of.get(key, len(ids))
        for n, i in enumerate(ids):
            fill[i] = pools[key[0] if n < first else key[1]].pop(0)
    return cost * query.people, fill


def _cover(
    cities: list[str], demand: tuple[int, ...], nbits: int, options, work: Budget
) -> tuple[int, tuple[int, ...]] | None:
    """Cheapest per-city picks meeting ``demand`` whose cuisine masks together cover all ``nbits`` cuisines.

    ``options(city, n)`` lists (cuisine mask, cost) of that city's cheapest ``n`` picks per mask.
    """
    full = (1 << nbits) - 1
    states: dict[int, tuple[int, tuple[int, ...]]] = {0: (0, ())}
    for city, n in zip(cities, demand, strict=False):
        nxt: dict[int, tuple[int, tuple[int, ...]]] = {}
        for mask, (cost, masks) in states.items():
            work.spend()
            for sub, extra in options(city, n):
                merged, total = mask | sub, cost + extra
                if merged not in nxt or total < nxt[merged][0]:
                    nxt[merged] = (total, masks + (sub,))
        states = nxt
    return states.get(full)


def _city_pick(pool: list, n: int, must: tuple[str, ...], work: Budget) -> tuple[int, list[str]] | None:
    """Cheapest ``n`` distinct restaurants from ``pool`` (sorted by cost) that include every cuisine in ``must``."""
    if n > len(pool) or len(must) > n:
        return None
    if not must:
        return sum(r.cost for r in pool[:n]), [r.code for r in pool[:n]]
    best = None
    witnesses = [r for r in pool if set(r.cuisines) & set(must)]
    for size in range(1, len(must) + 1):
        for combo in itertools.combinations(witnesses, size):
            work.spend()
            if not set(must) <= {c for r in combo for c in r.cuisines}:
                continue
            rest = [r for r in pool if all(r is not w for w in combo)][: n - size]
            cost = sum(r.cost for r in combo) + sum(r.cost for r in rest)
            if best is None or cost < best[0]:
                best = (cost, [r.code for r in (*combo, *rest)])
    return best


def _assign_sights(
    state: State, paths: list[list[str]], todo: list[int], slots: tuple[Slot, ...], db: Sandbox, work: Budget
) -> dict[int, str] | None:
    free = {
        c: sorted(a.code for a in db.attractions.values() if a.city == c and a.code not in state.used)
        for c in db.cities
    }
    options = [sorted(set(paths[slots[i].day - 1])) for i in todo]
    for pick in itertools.product(*options):
        work.spend()
        counts = {c: pick.count(c) for c in set(pick)}
        if all(len(free[c]) >= n for c, n in counts.items()):
            pools = {c: list(free[c]) for c in counts}
            return {i: pools[c].pop(0) for i, c in zip(todo, pick, strict=False)}
    return None
