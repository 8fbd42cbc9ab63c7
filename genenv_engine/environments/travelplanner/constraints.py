"""TravelPlanner's 8 commonsense and 5 hard constraints, re-implemented, with micro/macro/final pass rates.

Provides :func:`score_plan` (episode-level scoring of one whole plan: a :class:`CheckResult` whose
sub-scores hold CS/HD micro and macro, final pass and GenEnv's four-rate mean), :func:`aggregate` (the
benchmark's micro, macro and final pass rates over many plans) and the per-kind check functions
:func:`commonsense` and :func:`hard`. Plans are read by :mod:`.formats`: upstream day
records (``current_city``, ``transportation``, ``breakfast``, ``attraction``, ``lunch``, ``dinner``,
``accommodation``), their JSON text, or the mini's compact form with days joined by `` / ``.

Rules (from the benchmark's published definitions, re-implemented here):
- within_sandbox: every item exists in the database (legs between the stated cities);
- complete_information: ``days`` records, three meals and an attraction each day, a stay every night,
  a leg for every change of city, and a leg on the first and last day;
- within_current_city: meals and attractions in a city the day touches, the stay in the day's last city;
- reasonable_city_route: days chain from the origin back to it, visiting ``visiting_city_number``
  distinct destination cities, with legs matching the cities;
- diverse_restaurants / diverse_attractions: nothing repeated;
- non_conflicting_transportation: self-driving is never mixed with flights or taxis;
- minimum_nights: each run of consecutive nights in one stay lasts at least its minimum nights;
- hard (scored only when within_sandbox and complete_information hold, else failed): budget,
  room_rule, room_type, cuisine (every required cuisine served outside the origin city), transportation.
Micro = checks passed / checks applicable (8 commonsense; budget plus the given local constraints);
macro = all of a kind passed; final = both macros. Without the database (official queries whose
cities are not in the sandbox) the database-dependent checks are skipped and counted in ``unchecked``.

>>> from genenv_engine.environments.travelplanner.db import Query, sandbox
>>> from genenv_engine.environments.travelplanner.formats import render_compact
>>> from genenv_engine.environments.travelplanner.solver import solve
>>> q = Query("A", "B", 1, 1, 1, 500)
>>> plan = render_compact(q, solve(q, (), sandbox()).codes)
>>> r = score_plan(q, plan)
>>> r.success, r.sub_scores["cs_micro"], r.sub_scores["four_rate_mean"]
(True, 1.0, 1.0)
>>> score_plan(q, "nonsense").error_type
'parse_error'
"""

from __future__ import annotations

from typing import Any

from genenv_engine.core.records import CheckResult
from genenv_engine.environments.travelplanner.db import ROOM_WANTS, TRANSPORT_BANS, Query, Sandbox, sandbox
from genenv_engine.environments.travelplanner.formats import DayPlan, PlanError, parse_plan, query_from_upstream

COMMONSENSE = (
    "within_sandbox",
    "complete_information",
    "within_current_city",
    "reasonable_city_route",
    "diverse_restaurants",
    "diverse_attractions",
    "non_conflicting_transportation",
    "minimum_nights",
)
HARD = ("budget", "room_rule", "room_type", "cuisine", "transportation")
_NEEDS_DB = {"within_sandbox", "minimum_nights", "budget", "room_rule", "room_type", "cuisine"}
"""Checks that need the sandbox database (skipped for official queries)."""


# ---------------------------------------------------------------- the checks


def commonsense(query: Query, days: list[DayPlan], db: Sandbox | None) -> dict[str, bool | None]:
    """The 8 commonsense checks (None = needs the database, which is absent)."""
    meals = [m for d in days for m in d.meals if m is not None]
    sights = [s for d in days for s in d.sights]
    items = meals + sights + [d.stay for d in days if d.stay is not None]
    modes = {leg.mode for d in days for leg in d.legs}
    return {
        "within_sandbox": None
        if db is None
        else all(e.known for e in items) and all(leg.known for d in days for leg in d.legs),
        "complete_information": _complete(query, days),
        "within_current_city": all(
            all(e.city in d.path for e in (*d.meals, *d.sights) if e is not None)
            and (d.stay is None or d.stay.city == d.path[-1])
            for d in days
        ),
        "reasonable_city_route": _route(query, days, db),
        "diverse_restaurants": len({m.key for m in meals}) == len(meals),
        "diverse_attractions": len({s.key for s in sights}) == len(sights),
        "non_conflicting_transportation": not ("drive" in modes and modes & {"flight", "taxi"}),
        "minimum_nights": None if db is None else _min_nights(days, db),
    }


def _complete(query: Query, days: list[DayPlan]) -> bool:
    if len(days) != query.days:
        return False
    for n, d in enumerate(days, 1):
        if any(m is None for m in d.meals) or not d.sights or (n < query.days and d.stay is None):
            return False
        if len(d.legs) != len(d.path) - 1 or ((n == 1 or n == query.days) and not d.legs):
            return False
    return True


def _route(query: Query, days: list[DayPlan], db: Sandbox | None) -> bool:
    here, seq = query.org, [query.org]
    for d in days:
        hops = list(zip(d.path, d.path[1:], strict=False))
        if d.path[0] != here or (d.legs and [(leg.org, leg.dest) for leg in d.legs] != hops):
            return False
        seq += d.path[1:]
        here = d.path[-1]
    mid = seq[1:-1]
    if seq[-1] != query.org or len(mid) != query.cities or len(set(mid)) != len(mid) or query.org in mid:
        return False
    if db is not None and (query.dest in db.cities or query.dest in db.regions):
        return all(c in db.dest_cities(query.dest) for c in mid)
    return query.cities > 1 or mid == [query.dest]


def _min_nights(days: list[DayPlan], db: Sandbox) -> bool:
    nights = [d.stay.key if d.stay is not None else None for d in days]
    runs: list[list[Any]] = []
    for key in nights:
        if runs and runs[-1][0] == key:
            runs[-1][1] += 1
        else:
            runs.append([key, 1])
    return all(n >= db.stays[key].min_nights for key, n in runs if key in db.stays)


def hard(query: Query, days: list[DayPlan], db: Sandbox | None, gate: bool) -> dict[str, bool | None]:
    """The applicable hard checks; all fail when ``gate`` (sandbox and completeness) fails."""
    stays = [db.stays[d.stay.key] for d in days if d.stay is not None and db is not None and d.stay.key in db.stays]
    applicable = {
        "budget": True,
        "room_rule": query.house_rule is not None,
        "room_type": query.room_type is not None,
        "cuisine": bool(query.cuisines),
        "transportation": query.transport is not None,
    }
    out: dict[str, bool | None] = {}
    for name in HARD:
        if not applicable[name]:
            continue
        if db is None and name in _NEEDS_DB:
            out[name] = None
        elif not gate:
            out[name] = False
        elif name == "budget":
            out[name] = _plan_cost(query, days, db) <= query.budget  # type: ignore[arg-type]
        elif name == "room_rule":
            out[name] = all(query.house_rule not in s.rules for s in stays)
        elif name == "room_type":
            out[name] = all(s.room_type in ROOM_WANTS[query.room_type or ""] for s in stays)
        elif name == "cuisine":
            served = {
                c
                for d in days
                for m in d.meals
                if m is not None and db is not None and m.key in db.restaurants and m.city != query.org
                for c in db.restaurants[m.key].cuisines
            }
            out[name] = set(query.cuisines) <= served
        else:
            out[name] = TRANSPORT_BANS[query.transport or ""] not in {leg.mode for d in days for leg in d.legs}
    return out


def _plan_cost(query: Query, days: list[DayPlan], db: Sandbox) -> int:
    keys = [leg.key for d in days for leg in d.legs] + [e.key for d in days for e in d.meals if e is not None]
    keys += [d.stay.key for d in days if d.stay is not None]
    return sum(db.item_cost(k, query.people) for k in keys)


# ---------------------------------------------------------------- scoring


def score_plan(query: Query | dict[str, Any], plan: Any, db: Sandbox | None = None) -> CheckResult:
    """Episode-level score of a whole plan: success = final pass; score = the four-rate mean.

    ``query`` may be an upstream query dict. The sandbox is used unless the query's origin is not a
    sandbox city (an official query): then the database-dependent checks are skipped (``unchecked``).
    """
    db = db or sandbox()
    q = query if isinstance(query, Query) else query_from_upstream(query, db)
    if q.org not in db.cities:
        db = None
    try:
        days = parse_plan(plan, q, db)
    except PlanError:
        cs = {k: (None if db is None and k in _NEEDS_DB else False) for k in COMMONSENSE}
        return _result(cs, hard(q, [], db, gate=False), delivered=False)
    cs = commonsense(q, days, db)
    gate = cs["within_sandbox"] is not False and cs["complete_information"] is True
    return _result(cs, hard(q, days, db, gate), delivered=True)


def _result(cs: dict[str, bool | None], hd: dict[str, bool | None], delivered: bool) -> CheckResult:
    cs_done = {k: v for k, v in cs.items() if v is not None}
    hd_done = {k: v for k, v in hd.items() if v is not None}
    cs_micro = sum(cs_done.values()) / len(cs_done) if cs_done else float(delivered)
    hd_micro = sum(hd_done.values()) / len(hd_done) if hd_done else float(delivered)
    cs_macro = float(delivered and all(cs_done.values()))
    hd_macro = float(delivered and all(hd_done.values()))
    sub = {
        "delivered": float(delivered),
        "cs_micro": cs_micro,
        "cs_macro": cs_macro,
        "hd_micro": hd_micro,
        "hd_macro": hd_macro,
        "final": cs_macro * hd_macro,
        "four_rate_mean": (cs_micro + cs_macro + hd_micro + hd_macro) / 4,
        "cs_passed": float(sum(cs_done.values())),
        "cs_total": float(len(cs_done)),
        "hd_passed": float(sum(hd_done.values())),
        "hd_total": float(len(hd_done)),
        "unchecked": float(len(cs) - len(cs_done) + len(hd) - len(hd_done)),
    }
    sub.update({f"cs:{k}": float(v) for k, v in cs_done.items()})
    sub.update({f"hd:{k}": float(v) for k, v in hd_done.items()})
    return CheckResult(
        bool(sub["final"]),
        sub["four_rate_mean"],
        sub,
        None if sub["final"] else _first_error(cs_done, hd_done, delivered),
    )


def _first_error(cs: dict[str, bool], hd: dict[str, bool], delivered: bool) -> str:
    if not delivered:
        return "parse_error"
    failed = [k for k in COMMONSENSE if cs.get(k) is False]
    if failed:
        return "not_in_sandbox" if failed[0] == "within_sandbox" else f"violates_commonsense:{failed[0]}"
    return "violates_hard:" + next(k for k in HARD if hd.get(k) is False)


def aggregate(results: list[CheckResult]) -> dict[str, float]:
    """Benchmark rates over plans scored by :func:`score_plan`: delivery, CS/HD micro and macro, final pass.

    ``four_rate_mean`` is GenEnv's TravelPlanner number: the mean of the four micro/macro rates.

    >>> from genenv_engine.core.records import CheckResult
    >>> a = CheckResult(True, 1.0, {"delivered": 1, "cs_passed": 8, "cs_total": 8, "hd_passed": 2, "hd_total": 2,
    ...                             "cs_macro": 1, "hd_macro": 1, "final": 1})
    >>> b = CheckResult(False, 0.0, {"delivered": 1, "cs_passed": 6, "cs_total": 8, "hd_passed": 0, "hd_total": 2,
    ...                              "cs_macro": 0, "hd_macro": 0, "final": 0})
    >>> aggregate([a, b])["cs_micro"], aggregate([a, b])["final_pass"]
    (0.875, 0.5)
    """
    n = len(results)
    if n == 0:
        return {}

    def total(key: str) -> float:
        return sum(r.sub_scores.get(key, 0.0) for r in results)

    rates = {
        "cs_micro": total("cs_passed") / max(total("cs_total"), 1.0),
        "cs_macro": total("cs_macro") / n,
        "hd_micro": total("hd_passed") / max(total("hd_total"), 1.0),
        "hd_macro": total("hd_macro") / n,
    }
    return {
        "n": float(n),
        "delivery_rate": total("delivered") / n,
        **rates,
        "final_pass": total("final") / n,
        "four_rate_mean": sum(rates.values()) / 4,
    }
