"""TravelPlanner-mini formats: upstream query records, upstream plan records and compact plans.

Provides :func:`query_from_upstream` / :func:`query_to_upstream` (the upstream query fields, with
``local_constraint`` strings such as ``"not shared room"``, to and from :class:`~.db.Query`),
:func:`parse_plan` (a plan as upstream day records, their JSON text, or the mini's compact text, read
into :class:`DayPlan` records that the constraint checks consume), the renderers
:func:`render_compact` and :func:`to_upstream_plan`, and :func:`plan_codes` (day records back to
codes). Entities are matched to the sandbox by ``"Name, City"`` text as upstream plans write them; anything unmatched
is kept as normalised text so
the within-sandbox check can fail it, and when no database applies (official queries) names are
compared as text.

>>> from genenv_engine.environments.travelplanner.db import Query, sandbox
>>> days = parse_plan("dAB A2 Aa B1 B7 dBA", Query("A", "B", 1, 1, 1, 500), sandbox())
>>> days[0].path, [m.key for m in days[0].meals], days[0].legs[1].mode
(('A', 'B', 'A'), ['A2', 'B1', 'B7'], 'drive')
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from genenv_engine.environments.travelplanner.db import CUISINE_NAMES, Query, Sandbox, schedule

HOUSE_RULE_IN = {
    "parties": "parties",
    "smoking": "smoking",
    "children under 10": "children",
    "children": "children",
    "pets": "pets",
    "visitors": "visitors",
}
ROOM_TYPE_IN = {
    "entire room": "entire",
    "private room": "private",
    "shared room": "shared",
    "not shared room": "notshared",
}
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

    >>> from genenv_engine.environments.travelplanner.db import sandbox
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
        org=_city(str(row["org"]), db),
        dest=_city(str(row["dest"]), db, region=True),
        days=int(row["days"]),
        cities=int(row["visiting_city_number"]),
        people=int(row["people_number"]),
        budget=int(float(row["budget"])),
        house_rule=_lookup(HOUSE_RULE_IN, lc.get("house rule"), "house rule"),
        cuisines=tuple(_CUISINE_IN.get(str(c).strip().lower(), str(c).strip().lower()) for c in cuisines),
        room_type=_lookup(ROOM_TYPE_IN, lc.get("room type"), "room type"),
        transport=_lookup(TRANSPORT_IN, lc.get("transportation"), "transportation"),
        date=tuple(str(d) for d in row.get("date") or ()),
    )


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
    lc = {
        "house rule": rules.get(query.house_rule or ""),
        "cuisine": [CUISINE_NAMES[c] for c in query.cuisines] or None,
        "room type": rooms.get(query.room_type or ""),
        "transportation": ways.get(query.transport or ""),
    }
    party = f"{query.people} {'person' if query.people == 1 else 'people'}"
    text = (
        f"Plan a {query.days}-day trip for {party} from {org} to {dest}"
        + (f" visiting {query.cities} cities" if query.cities > 1 else "")
        + f" with a budget of ${query.budget}."
    )
    wants = [
        f"the stay must allow {lc['house rule']}" if lc["house rule"] else "",
        f"we want {' and '.join(lc['cuisine'])} food" if lc["cuisine"] else "",
        f"we need a {lc['room type']}" if lc["room type"] else "",
        f"{lc['transportation']} please" if lc["transportation"] else "",
    ]
    text += "".join(f" {w[0].upper()}{w[1:]}." for w in wants if w)
    return {
        "org": org,
        "dest": dest,
        "days": query.days,
        "visiting_city_number": query.cities,
        "date": list(query.date),
        "people_number": query.people,
        "local_constraint": lc,
        "budget": query.budget,
        "query": text,
        "level": query.level_name,
    }


# ---------------------------------------------------------------- plan parsing and rendering


def render_compact(query: Query, codes: tuple[str, ...] | list[str]) -> str:
    """A full (or partial) plan as compact text: one chunk of codes per day, joined by `` / ``."""
    days: list[list[str]] = []
    for slot, code in zip(schedule(query.days, query.cities), codes, strict=False):
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
            except (ValueError, RecursionError) as err:
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
        tail = list(_leading_legs(tokens[len(head) :][::-1]))[::-1]
        mid = tokens[len(head) : len(tokens) - len(tail)]
        if len(mid) not in (4, 5):
            raise PlanError(f"day {len(out) + 1}: expected bfast sight lunch dinner [stay], got {mid}")
        legs = tuple(_code_leg(t, db) for t in head + tail)
        start = out[-1].path[-1] if out else query.org
        path = (legs[0].org, *(leg.dest for leg in legs)) if legs else (start,)
        meals = tuple(_code_item(t, db, "restaurant") for t in (mid[0], mid[2], mid[3]))
        sight = _code_item(mid[1], db, "sight")
        out.append(
            DayPlan(
                path,
                legs,
                meals,
                (sight,) if sight else (),  # type: ignore[arg-type]
                _code_item(mid[4], db, "stay") if len(mid) == 5 else None,
            )
        )
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


def _code_item(code: str, db: Sandbox, kind: str) -> Entity | None:
    if code == "-":
        return None
    if db.kind_of(code) != kind:
        raise PlanError(f"not a {kind} code: {code!r}")
    return Entity(code, db.city_of(code) if db.has(code) else code[0], db.has(code))


def _parse_record(record: dict[str, Any], start: str, db: Sandbox | None) -> DayPlan:
    current = str(record.get("current_city") or "").strip()
    m = re.fullmatch(r"from\s+(.+)", current, re.I)
    if m:
        path = tuple(_city(c, db) for c in re.split(r"\s+to\s+", m.group(1)))
    else:
        path = (_city(current, db),) if current else (start,)
    legs = tuple(_text_leg(t, db) for t in _field(record, "transportation").split(";") if t.strip())
    meals = tuple(_text_item(_field(record, k), db, "restaurant") for k in ("breakfast", "lunch", "dinner"))
    sights = tuple(e for t in _field(record, "attraction").split(";") if (e := _text_item(t, db, "sight")) is not None)
    stay = _text_item(_field(record, "accommodation"), db, "stay")
    return DayPlan(path, legs, meals, sights, stay)  # type: ignore[arg-type]


def _field(record: dict[str, Any], key: str) -> str:
    value = record.get(key)
    return "" if value is None or str(value).strip() == "-" else str(value)


def _text_item(text: str, db: Sandbox | None, kind: str) -> Entity | None:
    text = text.strip()
    if not text or text == "-":
        return None
    name, _, city_name = text.rpartition(", ") if ", " in text else (text, "", "")
    city = _city(city_name, db)
    code = db.code_by_name(kind, name, city) if db is not None else None
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
        records.append(
            {
                "days": len(records) + 1,
                "current_city": names[0] if len(names) == 1 else "from " + " to ".join(names),
                "transportation": "; ".join(_leg_text(leg.key, query, db) for leg in day.legs) or "-",
                "breakfast": _item_text(day.meals[0], db),
                "attraction": "".join(_item_text(s, db) + ";" for s in day.sights) or "-",
                "lunch": _item_text(day.meals[1], db),
                "dinner": _item_text(day.meals[2], db),
                "accommodation": _item_text(day.stay, db),
            }
        )
    return records


def plan_codes(query: Query, days: list[DayPlan]) -> list[str]:
    """The sandbox codes of a parsed plan in the mini's field order (the inverse of :func:`to_upstream_plan`); a
    field left empty is ``-``. ValueError names the first field that is no sandbox entity or does not fit."""
    if len(days) != query.days:
        raise ValueError(f"the plan has {len(days)} day records for a {query.days}-day trip")
    codes: list[str] = []
    legs = [list(day.legs) for day in days]
    for slot in schedule(query.days, query.cities):
        day = days[slot.day - 1]
        if slot.kind == "go":
            if not legs[slot.day - 1]:
                raise ValueError(f"day {slot.day}: no transportation on a travel day")
            item: Entity | TripLeg | None = legs[slot.day - 1].pop(0)
        elif slot.kind == "sight":
            if len(day.sights) > 1:
                raise ValueError(f"day {slot.day}: {len(day.sights)} attractions (a mini plan has one a day)")
            item = day.sights[0] if day.sights else None
        else:
            item = day.stay if slot.kind == "stay" else day.meals[("bfast", "lunch", "dinner").index(slot.kind)]
        if item is not None and not item.known:
            raise ValueError(f"day {slot.day} {slot.kind}: {item.key!r} is not in the mini's sandbox")
        codes.append("-" if item is None else item.key)
    extra = [d + 1 for d, left in enumerate(legs) if left]
    if extra:
        raise ValueError(f"day {extra[0]}: more transportation than the mini's route has")
    return codes


def _item_text(item: Entity | None, db: Sandbox) -> str:
    return "-" if item is None else f"{db.item_name(item.key)}, {db.cities[item.city].name}"


def _leg_text(code: str, query: Query, db: Sandbox) -> str:
    leg = db.legs[code]
    where = f"from {db.cities[leg.org].name} to {db.cities[leg.dest].name}"
    if leg.mode == "flight":
        return f"Flight Number: {code}, {where}, Departure Time: {leg.dep}, Arrival Time: {leg.arr}"
    minutes = leg.distance * 60 // 80
    return (
        f"{'Self-driving' if leg.mode == 'drive' else 'Taxi'}, {where}, duration: {minutes // 60} hours "
        f"{minutes % 60} mins, distance: {leg.distance} km, cost: {leg.cost(query.people)}"
    )
