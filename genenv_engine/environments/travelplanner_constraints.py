"""TravelPlanner's 8 commonsense and 5 hard constraints, re-implemented, with micro/macro/final pass rates.

Provides :func:`score_plan` (episode-level scoring of one whole plan: a :class:`CheckResult` whose
sub-scores hold CS/HD micro and macro, final pass and GenEnv's four-rate mean), :func:`aggregate` (the
benchmark's micro, macro and final pass rates over many plans) and the converters between a
:class:`~.travelplanner_db.Query` or plan and the upstream formats (query dict with
``local_constraint``; plan as a list of day records with ``current_city``, ``transportation``,
``breakfast``, ``attraction``, ``lunch``, ``dinner``, ``accommodation``). Plans may also be written in
the mini's compact form, days joined by `` / ``: ``FAB1 A2 Aa B1 B7 dBA``.

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

>>> from genenv_engine.environments.travelplanner_db import Query, sandbox
>>> from genenv_engine.environments.travelplanner_solver import solve
>>> q = Query("A", "B", 1, 1, 1, 500)
>>> plan = render_compact(q, solve(q, (), sandbox()).codes)
>>> r = score_plan(q, plan)
>>> r.success, r.sub_scores["cs_micro"], r.sub_scores["four_rate_mean"]
(True, 1.0, 1.0)
>>> score_plan(q, "nonsense").error_type
'parse_error'
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from genenv_engine.environments.travelplanner_db import (
    CUISINE_NAMES, ROOM_WANTS, TRANSPORT_BANS, Query, Sandbox, sandbox, schedule)
from genenv_engine.records import CheckResult

COMMONSENSE = ("within_sandbox", "complete_information", "within_current_city", "reasonable_city_route",
               "diverse_restaurants", "diverse_attractions", "non_conflicting_transportation", "minimum_nights")
HARD = ("budget", "room_rule", "room_type", "cuisine", "transportation")
_NEEDS_DB = {"within_sandbox", "minimum_nights", "budget", "room_rule", "room_type", "cuisine"}
HOUSE_RULE_IN = {"parties": "parties", "smoking": "smoking", "children under 10": "children", "children": "children",
                 "pets": "pets", "visitors": "visitors"}
ROOM_TYPE_IN = {"entire room": "entire", "private room": "private", "shared room": "shared",
                "not shared room": "notshared"}
TRANSPORT_IN = {"no flight": "noflight", "no self-driving": "nodrive"}
_CUISINE_IN = {name.lower(): code for code, name in CUISINE_NAMES.items()}
_LEG_CODE = re.compile(r"(F)([A-Z])([A-Z])[1-9]|([dt])([A-Z])([A-Z])")
_FLIGHT_TEXT = re.compile(r"\s*Flight Number:\s*([^,]+),\s*from\s+(.+?)\s+to\s+(.+?)\s*(?:,|$)", re.I)
_GROUND_TEXT = re.compile(r"\s*(Self-driving|Taxi)\s*,\s*from\s+(.+?)\s+to\s+(.+?)\s*(?:,|$)", re.I)


class PlanError(ValueError):
    """A plan that cannot be read at all (not delivered)."""


@dataclass(frozen=True)
class Entity:
    """A restaurant, attraction or stay in a plan: its sandbox code, or its normalised text if unknown."""

    key: str
    city: str
    known: bool


@dataclass(frozen=True)
class TripLeg:
    key: str
    mode: str
    """``flight``, ``drive``, ``taxi`` or ``unknown``."""
    org: str
    dest: str
    known: bool


@dataclass(frozen=True)
class DayPlan:
    path: tuple[str, ...]
    """The cities the day touches, in order (one city on a day without travel)."""
    legs: tuple[TripLeg, ...]
    meals: tuple[Entity | None, Entity | None, Entity | None]
    sights: tuple[Entity, ...]
    stay: Entity | None


# ---------------------------------------------------------------- query conversion

def query_from_upstream(row: dict[str, Any], db: Sandbox | None = None) -> Query:
    """Build a :class:`Query` from upstream fields; cities become sandbox codes when ``db`` knows them.

    >>> q = query_from_upstream({"org": "Arden", "dest": "Yarrow", "days": 5, "visiting_city_number": 2,
    ...     "people_number": 2, "budget": 2400, "local_constraint": {"house rule": "pets",
    ...     "cuisine": ["Thai"], "room type": "not shared room", "transportation": None}}, sandbox())
    >>> q.org, q.dest, q.house_rule, q.cuisines, q.room_type, q.transport
    ('A', 'Y', 'pets', ('thai',), 'notshared', None)
    """
    lc = row.get("local_constraint") or {}
    if not isinstance(lc, dict):
        raise ValueError("local_constraint is not a dict")
    cuisines = lc.get("cuisine") or []
    if isinstance(cuisines, str):
        cuisines = [cuisines]
    return Query(
        org=_city(str(row["org"]), db), dest=_city(str(row["dest"]), db, region=True),
        days=int(row["days"]), cities=int(row["visiting_city_number"]), people=int(row["people_number"]),
        budget=int(float(row["budget"])), house_rule=_lookup(HOUSE_RULE_IN, lc.get("house rule"), "house rule"),
        cuisines=tuple(_CUISINE_IN.get(str(c).strip().lower(), str(c).strip().lower()) for c in cuisines),
        room_type=_lookup(ROOM_TYPE_IN, lc.get("room type"), "room type"),
        transport=_lookup(TRANSPORT_IN, lc.get("transportation"), "transportation"),
        date=tuple(str(d) for d in row.get("date") or ()))


def _lookup(table: dict[str, str], value: Any, what: str) -> str | None:
    if value is None or value == "":
        return None
    key = str(value).strip().lower()
    if key not in table:
        raise ValueError(f"unknown {what} {value!r}; expected one of {sorted(table)}")
    return table[key]


def _city(name: str, db: Sandbox | None, region: bool = False) -> str:
    key = name.strip().lower()
    if db is not None and key in db.city_by_name:
        return db.city_by_name[key]
    if db is not None and region and key in db.region_by_name:
        return db.region_by_name[key]
    return key


def query_to_upstream(query: Query, db: Sandbox) -> dict[str, Any]:
    """The upstream query record of a sandbox query (names, ``local_constraint`` strings, NL text, level)."""
    rules = {v: k for k, v in HOUSE_RULE_IN.items() if k != "children"}
    rooms = {v: k for k, v in ROOM_TYPE_IN.items()}
    ways = {v: k for k, v in TRANSPORT_IN.items()}
    org = db.cities[query.org].name
    dest = db.regions[query.dest][0] if query.dest in db.regions else db.cities[query.dest].name
    lc = {"house rule": rules.get(query.house_rule or ""),
          "cuisine": [CUISINE_NAMES[c] for c in query.cuisines] or None,
          "room type": rooms.get(query.room_type or ""), "transportation": ways.get(query.transport or "")}
    text = (f"Plan a {query.days}-day trip for {query.people} from {org} to {dest}"
            + (f" visiting {query.cities} cities" if query.cities > 1 else "")
            + f" with a budget of ${query.budget}.")
    wants = [f"the stay must allow {lc['house rule']}" if lc["house rule"] else "",
             f"we want {' and '.join(lc['cuisine'])} food" if lc["cuisine"] else "",
             f"we need a {lc['room type']}" if lc["room type"] else "",
             f"{lc['transportation']} please" if lc["transportation"] else ""]
    text += "".join(f" {w[0].upper()}{w[1:]}." for w in wants if w)
    return {"org": org, "dest": dest, "days": query.days, "visiting_city_number": query.cities,
            "date": list(query.date), "people_number": query.people, "local_constraint": lc,
            "budget": query.budget, "query": text, "level": query.level_name}


# ---------------------------------------------------------------- plan parsing and rendering

def render_compact(query: Query, codes: tuple[str, ...] | list[str]) -> str:
    """A full (or partial) plan as compact text: one chunk of codes per day, joined by `` / ``."""
    days: list[list[str]] = []
    for slot, code in zip(schedule(query.days, query.cities), codes):
        while len(days) < slot.day:
            days.append([])
        days[-1].append(code)
    return " / ".join(" ".join(day) for day in days)


def parse_plan(plan: Any, query: Query, db: Sandbox | None) -> list[DayPlan]:
    """Read a plan: a list of upstream day records, a JSON text of one, or compact text."""
    if isinstance(plan, str):
        text = plan.strip()
        if text.startswith("["):
            try:
                plan = json.loads(text)
            except ValueError as err:
                raise PlanError(f"bad JSON plan: {err}") from None
        else:
            return _parse_compact(text, query, db)
    if not isinstance(plan, list) or not plan:
        raise PlanError("a plan is a non-empty list of day records")
    records = [r for r in plan if isinstance(r, dict) and "current_city" in r]
    if not records:
        raise PlanError("no day records (dicts with 'current_city')")
    out: list[DayPlan] = []
    for record in records:
        out.append(_parse_record(record, out[-1].path[-1] if out else query.org, db))
    return out


def _parse_compact(text: str, query: Query, db: Sandbox | None) -> list[DayPlan]:
    if db is None or not text:
        raise PlanError("compact plans need the sandbox")
    out: list[DayPlan] = []
    for chunk in text.split(" / "):
        tokens = chunk.split()
        head = list(_leading_legs(tokens))
        tail = list(_leading_legs(tokens[len(head):][::-1]))[::-1]
        mid = tokens[len(head): len(tokens) - len(tail)]
        if len(mid) not in (4, 5):
            raise PlanError(f"day {len(out) + 1}: expected bfast sight lunch dinner [stay], got {mid}")
        legs = tuple(_code_leg(t, db) for t in head + tail)
        start = out[-1].path[-1] if out else query.org
        path = (legs[0].org, *(leg.dest for leg in legs)) if legs else (start,)
        meals = tuple(_code_item(t, db) for t in (mid[0], mid[2], mid[3]))
        sight = _code_item(mid[1], db)
        out.append(DayPlan(path, legs, meals, (sight,) if sight else (),  # type: ignore[arg-type]
                           _code_item(mid[4], db) if len(mid) == 5 else None))
    return out


def _leading_legs(tokens: list[str]):
    for token in tokens:
        if not _LEG_CODE.fullmatch(token):
            return
        yield token


def _code_leg(code: str, db: Sandbox) -> TripLeg:
    if code in db.legs:
        leg = db.legs[code]
        return TripLeg(code, leg.mode, leg.org, leg.dest, True)
    m = _LEG_CODE.fullmatch(code)
    assert m is not None
    mode, org, dest = (m.group(1), m.group(2), m.group(3)) if m.group(1) else (m.group(4), m.group(5), m.group(6))
    return TripLeg(code, {"F": "flight", "d": "drive", "t": "taxi"}[mode], org, dest, False)


def _code_item(code: str, db: Sandbox) -> Entity | None:
    if code == "-":
        return None
    if db.kind_of(code) in (None, "leg"):
        raise PlanError(f"not an item code: {code!r}")
    return Entity(code, db.city_of(code) if db.has(code) else code[0], db.has(code))


def _parse_record(record: dict[str, Any], start: str, db: Sandbox | None) -> DayPlan:
    current = str(record.get("current_city") or "").strip()
    m = re.fullmatch(r"from\s+(.+)", current, re.I)
    path = tuple(_city(c, db) for c in re.split(r"\s+to\s+", m.group(1))) if m else (_city(current or start, db),)
    legs = tuple(_text_leg(t, db) for t in _field(record, "transportation").split(";") if t.strip())
    meals = tuple(_text_item(_field(record, k), db) for k in ("breakfast", "lunch", "dinner"))
    sights = tuple(e for t in _field(record, "attraction").split(";") if (e := _text_item(t, db)) is not None)
    return DayPlan(path, legs, meals, sights, _text_item(_field(record, "accommodation"), db))  # type: ignore[arg-type]


def _field(record: dict[str, Any], key: str) -> str:
    value = record.get(key)
    return "" if value is None or str(value).strip() == "-" else str(value)


def _text_item(text: str, db: Sandbox | None) -> Entity | None:
    text = text.strip()
    if not text or text == "-":
        return None
    name, _, city_name = text.rpartition(", ") if ", " in text else (text, "", "")
    city = _city(city_name, db)
    code = db.code_by_name(name, city) if db is not None else None
    if code is not None:
        return Entity(code, city, True)
    return Entity(f"{name.strip().lower()}, {city}", city, False)


def _text_leg(text: str, db: Sandbox | None) -> TripLeg:
    if m := _FLIGHT_TEXT.match(text):
        key, org, dest = m.group(1).strip(), _city(m.group(2), db), _city(m.group(3), db)
        known = db is not None and key in db.legs and (db.legs[key].org, db.legs[key].dest) == (org, dest)
        return TripLeg(key, "flight", org, dest, known)
    if m := _GROUND_TEXT.match(text):
        mode = "drive" if m.group(1).lower() == "self-driving" else "taxi"
        org, dest = _city(m.group(2), db), _city(m.group(3), db)
        key = f"{mode[0]}{org}{dest}"
        return TripLeg(key, mode, org, dest, db is not None and key in db.legs)
    return TripLeg(text.strip().lower(), "unknown", "", "", False)


def to_upstream_plan(query: Query, codes: tuple[str, ...] | list[str], db: Sandbox) -> list[dict[str, Any]]:
    """Render a complete plan of codes as upstream day records (names, costs and times as text)."""
    records = []
    for day in parse_plan(render_compact(query, codes), query, db):
        names = [db.cities[c].name for c in day.path]
        records.append({
            "days": len(records) + 1,
            "current_city": names[0] if len(names) == 1 else "from " + " to ".join(names),
            "transportation": "; ".join(_leg_text(leg.key, query, db) for leg in day.legs) or "-",
            "breakfast": _item_text(day.meals[0], db), "attraction": "".join(
                _item_text(s, db) + ";" for s in day.sights) or "-",
            "lunch": _item_text(day.meals[1], db), "dinner": _item_text(day.meals[2], db),
            "accommodation": _item_text(day.stay, db)})
    return records


def _item_text(item: Entity | None, db: Sandbox) -> str:
    return "-" if item is None else f"{db.item_name(item.key)}, {db.cities[item.city].name}"


def _leg_text(code: str, query: Query, db: Sandbox) -> str:
    leg = db.legs[code]
    where = f"from {db.cities[leg.org].name} to {db.cities[leg.dest].name}"
    if leg.mode == "flight":
        return f"Flight Number: {code}, {where}, Departure Time: {leg.dep}, Arrival Time: {leg.arr}"
    minutes = leg.distance * 60 // 80
    return (f"{'Self-driving' if leg.mode == 'drive' else 'Taxi'}, {where}, duration: {minutes // 60} hours "
            f"{minutes % 60} mins, distance: {leg.distance} km, cost: {leg.cost(query.people)}")


# ---------------------------------------------------------------- the checks

def commonsense(query: Query, days: list[DayPlan], db: Sandbox | None) -> dict[str, bool | None]:
    """The 8 commonsense checks (None = needs the database, which is absent)."""
    meals = [m for d in days for m in d.meals if m is not None]
    sights = [s for d in days for s in d.sights]
    items = meals + sights + [d.stay for d in days if d.stay is not None]
    modes = {leg.mode for d in days for leg in d.legs}
    return {
        "within_sandbox": None if db is None else all(e.known for e in items)
        and all(leg.known for d in days for leg in d.legs),
        "complete_information": _complete(query, days),
        "within_current_city": all(all(e.city in d.path for e in (*d.meals, *d.sights) if e is not None)
                                   and (d.stay is None or d.stay.city == d.path[-1]) for d in days),
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
        hops = list(zip(d.path, d.path[1:]))
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
    applicable = {"budget": True, "room_rule": query.house_rule is not None, "room_type": query.room_type is not None,
                  "cuisine": bool(query.cuisines), "transportation": query.transport is not None}
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
            served = {c for d in days for m in d.meals if m is not None and db is not None and m.key in db.restaurants
                      and m.city != query.org for c in db.restaurants[m.key].cuisines}
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
    cs_micro = sum(cs_done.values()) / len(cs_done) if cs_done else 1.0
    hd_micro = sum(hd_done.values()) / len(hd_done) if hd_done else 1.0
    cs_macro, hd_macro = float(all(cs_done.values())), float(all(hd_done.values()))
    sub = {"delivered": float(delivered), "cs_micro": cs_micro, "cs_macro": cs_macro, "hd_micro": hd_micro,
           "hd_macro": hd_macro, "final": cs_macro * hd_macro,
           "four_rate_mean": (cs_micro + cs_macro + hd_micro + hd_macro) / 4,
           "cs_passed": float(sum(cs_done.values())), "cs_total": float(len(cs_done)),
           "hd_passed": float(sum(hd_done.values())), "hd_total": float(len(hd_done)),
           "unchecked": float(len(cs) - len(cs_done) + len(hd) - len(hd_done))}
    sub.update({f"cs:{k}": float(v) for k, v in cs_done.items()})
    sub.update({f"hd:{k}": float(v) for k, v in hd_done.items()})
    return CheckResult(bool(sub["final"]), sub["four_rate_mean"], sub, None if sub["final"] else
                       _first_error(cs_done, hd_done, delivered))


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

    >>> from genenv_engine.records import CheckResult
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

    rates = {"cs_micro": total("cs_passed") / max(total("cs_total"), 1.0), "cs_macro": total("cs_macro") / n,
             "hd_micro": total("hd_passed") / max(total("hd_total"), 1.0), "hd_macro": total("hd_macro") / n}
    return {"n": float(n), "delivery_rate": total("delivered") / n, **rates, "final_pass": total("final") / n,
            "four_rate_mean": sum(rates.values()) / 4}
