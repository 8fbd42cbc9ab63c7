"""TravelPlanner-mini sandbox: a small synthetic travel database, the query record and the day schedule.

Provides the deterministic :func:`sandbox` (8 cities in 3 regions with flights, self-driving and taxi
routes, restaurants with cuisine and cost, attractions, and stays with price, room type, occupancy,
house rules and minimum nights), :class:`Query` (the upstream query fields in compact form) and
:func:`schedule` (the canonical order of plan fields, one :class:`Slot` each). It exists because the
upstream TravelPlanner database is not redistributable here: the mini's tasks, checker and solver
all run over this database instead, which is built from a fixed seed so every process sees the same.

Item codes are short so a byte-level agent can write them: restaurant ``B3`` (city + digit), attraction
``Bc`` (city + letter), stay ``Bh2`` (city + ``h`` + digit), flight ``FAB1`` (``F`` + from + to +
index), self-driving ``dAB`` and taxi ``tAB`` (mode + from + to).

>>> db = sandbox()
>>> sorted(db.cities)
['A', 'B', 'C', 'E', 'G', 'J', 'K', 'L']
>>> db.kind_of("FAB1"), db.kind_of("B3"), db.kind_of("Bc"), db.kind_of("Bh2"), db.kind_of("??")
('leg', 'restaurant', 'sight', 'stay', None)
>>> [s.kind for s in schedule(1, 1)]
['go', 'bfast', 'sight', 'lunch', 'dinner', 'go']
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from functools import lru_cache

SANDBOX_SEED = "travelplanner-sandbox-v1"
CUISINES = ("thai", "ital", "mex", "ind", "jpn", "french", "bbq", "cafe")
CUISINE_NAMES = {
    "thai": "Thai",
    "ital": "Italian",
    "mex": "Mexican",
    "ind": "Indian",
    "jpn": "Japanese",
    "french": "French",
    "bbq": "BBQ",
    "cafe": "Cafe",
}
HOUSE_RULES = ("parties", "smoking", "children", "pets", "visitors")
RULE_TEXT = {
    "parties": "No parties",
    "smoking": "No smoking",
    "children": "No children under 10",
    "pets": "No pets",
    "visitors": "No visitors",
}
ROOM_TYPES = ("entire", "private", "shared")
ROOM_TEXT = {"entire": "Entire home/apt", "private": "Private room", "shared": "Shared room"}
ROOM_WANTS = {"entire": ("entire",), "private": ("private",), "shared": ("shared",), "notshared": ("entire", "private")}
"""Room-type constraint value -> room types that satisfy it."""
TRANSPORT_BANS = {"noflight": "flight", "nodrive": "drive"}
"""Transportation constraint value -> the banned mode."""
MEALS = ("bfast", "lunch", "dinner")
SLOT_ITEM = {
    "go": "leg",
    "bfast": "restaurant",
    "lunch": "restaurant",
    "dinner": "restaurant",
    "sight": "sight",
    "stay": "stay",
}
"""Slot kind -> the kind of sandbox item that fills it."""
MAX_ROAD_KM = 1100
_CODE_RES = (
    ("leg", re.compile(r"F[A-Z]{2}[1-9]|[dt][A-Z]{2}")),
    ("restaurant", re.compile(r"[A-Z][1-9]")),
    ("sight", re.compile(r"[A-Z][a-z]")),
    ("stay", re.compile(r"[A-Z]h[1-9]")),
)
_CITIES = {
    "A": ("Arden", "X"),
    "B": ("Brook", "X"),
    "C": ("Corin", "X"),
    "E": ("Esker", "Y"),
    "G": ("Glenn", "Y"),
    "J": ("Juno", "Y"),
    "K": ("Kestrel", "Z"),
    "L": ("Lyme", "Z"),
}
_REGIONS = {"X": ("Xanthe", (0, 0)), "Y": ("Yarrow", (1300, 250)), "Z": ("Zephyr", (550, 1000))}
_ADJ = ("Golden", "Blue", "Little", "Old", "Red", "Green", "Silver", "Happy", "Lucky", "Rustic", "Urban", "Salty")
_NOUN = ("Spoon", "Wok", "Fork", "Table", "Oven", "Kettle", "Garden", "Lantern", "Harbor", "Corner", "Grill", "Bean")
_SIGHTS = (
    "Museum",
    "Old Mill",
    "Botanic Garden",
    "Clock Tower",
    "Art Gallery",
    "Zoo",
    "Castle",
    "Lighthouse",
    "Market Hall",
    "Observatory",
    "River Walk",
    "Cathedral",
)
_STAY_ADJ = ("Sunny", "Quiet", "Cozy", "Bright", "Modern", "Charming", "Spacious", "Tidy")
_STAY_NOUN = ("Loft", "Studio", "Cottage", "Flat", "Suite", "Bungalow", "Room", "Nook")


@dataclass(frozen=True)
class City:
    code: str
    name: str
    region: str
    x: int
    y: int


@dataclass(frozen=True)
class Restaurant:
    code: str
    name: str
    city: str
    cuisines: tuple[str, ...]
    cost: int
    """Average cost per person of one meal."""


@dataclass(frozen=True)
class Attraction:
    code: str
    name: str
    city: str


@dataclass(frozen=True)
class Stay:
    code: str
    name: str
    city: str
    price: int
    """Price per room per night."""
    room_type: str
    occupancy: int
    rules: frozenset[str]
    """House rules, each a forbidden thing from :data:`HOUSE_RULES`."""
    min_nights: int

    def night_cost(self, people: int) -> int:
        """Cost of one night for ``people`` (rooms = ceil(people / occupancy))."""
        return self.price * math.ceil(people / self.occupancy)


@dataclass(frozen=True)
class Leg:
    """One way of travelling between two cities: a flight or a self-driving/taxi route."""

    code: str
    mode: str
    """``flight``, ``drive`` or ``taxi``."""
    org: str
    dest: str
    unit_cost: int
    """Per person for a flight, per car (5 seats) for self-driving, per cab (4 seats) for a taxi."""
    distance: int
    dep: str = ""
    arr: str = ""

    def cost(self, people: int) -> int:
        seats = {"flight": 1, "drive": 5, "taxi": 4}[self.mode]
        return self.unit_cost * math.ceil(people / seats)


class Sandbox:
    """The database: lookups by code and by (name, city), plus route queries."""

    def __init__(
        self,
        cities: dict[str, City],
        restaurants: list[Restaurant],
        attractions: list[Attraction],
        stays: list[Stay],
        flights: list[Leg],
    ) -> None:
        self.cities = cities
        self.regions = {
            r: (name, tuple(c for c in cities if cities[c].region == r)) for r, (name, _) in _REGIONS.items()
        }
        self.restaurants = {r.code: r for r in restaurants}
        self.attractions = {a.code: a for a in attractions}
        self.stays = {s.code: s for s in stays}
        self.legs = {f.code: f for f in flights}
        for a in cities:
            for b in cities:
                dist = self.distance(a, b)
                if a != b and dist <= MAX_ROAD_KM:
                    self.legs[f"d{a}{b}"] = Leg(f"d{a}{b}", "drive", a, b, math.ceil(dist * 0.06), dist)
                    self.legs[f"t{a}{b}"] = Leg(f"t{a}{b}", "taxi", a, b, math.ceil(dist * 0.5), dist)
        self._from = {
            c: sorted((leg for leg in self.legs.values() if leg.org == c), key=lambda leg: leg.code) for c in cities
        }
        self._by_name = {
            (kind, item.name.lower(), item.city): item.code
            for kind, group in (("restaurant", self.restaurants), ("sight", self.attractions), ("stay", self.stays))
            for item in group.values()
        }
        self.menus = {
            c: sorted((r for r in restaurants if r.city == c), key=lambda r: (r.cost, r.code)) for c in cities
        }
        """City -> its restaurants, cheapest first."""
        self.city_by_name = {c.name.lower(): c.code for c in cities.values()}
        self.region_by_name = {name.lower(): r for r, (name, _) in self.regions.items()}

    def distance(self, a: str, b: str) -> int:
        """Road distance in km (straight-line distance times 1.2)."""
        ca, cb = self.cities[a], self.cities[b]
        return round(math.hypot(ca.x - cb.x, ca.y - cb.y) * 1.2)

    def legs_from(self, city: str) -> list[Leg]:
        return self._from.get(city, [])

    def legs_between(self, a: str, b: str) -> list[Leg]:
        return [leg for leg in self._from.get(a, []) if leg.dest == b]

    def kind_of(self, code: str) -> str | None:
        """The item kind a code is shaped like (whether or not it exists)."""
        return next((kind for kind, pattern in _CODE_RES if pattern.fullmatch(code)), None)

    def has(self, code: str) -> bool:
        return any(code in group for group in (self.legs, self.restaurants, self.attractions, self.stays))

    def city_of(self, code: str) -> str:
        """City of an existing restaurant, attraction or stay."""
        for group in (self.restaurants, self.attractions, self.stays):
            if code in group:
                return group[code].city
        raise KeyError(code)

    def code_by_name(self, kind: str, name: str, city: str) -> str | None:
        """Code of the ``kind`` (restaurant, sight or stay) called ``name`` in city code ``city``."""
        return self._by_name.get((kind, name.strip().lower(), city))

    def item_name(self, code: str) -> str:
        for group in (self.restaurants, self.attractions, self.stays):
            if code in group:
                return group[code].name
        raise KeyError(code)

    def dest_cities(self, dest: str) -> tuple[str, ...]:
        """The cities a destination allows: itself for a city, its member cities for a region."""
        return self.regions[dest][1] if dest in self.regions else (dest,)

    def item_cost(self, code: str, people: int) -> int:
        """What one plan field costs the party: a leg, a meal, a night's stay; attractions are free."""
        if code in self.legs:
            return self.legs[code].cost(people)
        if code in self.restaurants:
            return self.restaurants[code].cost * people
        if code in self.stays:
            return self.stays[code].night_cost(people)
        return 0


@lru_cache(maxsize=1)
def sandbox() -> Sandbox:
    """The one built-in sandbox, generated from :data:`SANDBOX_SEED` (identical in every process)."""
    rng = random.Random(SANDBOX_SEED)
    cities = {}
    for code, (name, region) in _CITIES.items():
        cx, cy = _REGIONS[region][1]
        cities[code] = City(code, name, region, cx + rng.randint(-220, 220), cy + rng.randint(-220, 220))
    restaurants, attractions, stays = [], [], []
    for code, city in cities.items():
        restaurants += _restaurants(code, rng)
        attractions += [
            Attraction(f"{code}{'abcde'[i]}", f"{city.name} {noun}", code)
            for i, noun in enumerate(rng.sample(_SIGHTS, 5))
        ]
        stays += _stays(code, rng)
    return Sandbox(cities, restaurants, attractions, stays, _flights(cities, rng))


def _restaurants(city: str, rng: random.Random) -> list[Restaurant]:
    primaries = rng.sample(CUISINES, 6) + rng.sample(CUISINES, 2)
    names = rng.sample([f"{a} {n}" for a in _ADJ for n in _NOUN], 8)
    out = []
    for i, (name, first) in enumerate(zip(names, primaries, strict=False)):
        cuisines = (first,) if rng.random() < 0.7 else tuple(sorted({first, rng.choice(CUISINES)}, key=CUISINES.index))
        out.append(Restaurant(f"{city}{i + 1}", name, city, cuisines, rng.randint(8, 55)))
    return out


def _stays(city: str, rng: random.Random) -> list[Stay]:
    types = ["entire", "private", "shared", rng.choice(ROOM_TYPES)]
    rng.shuffle(types)
    names = rng.sample([f"{a} {n}" for a in _STAY_ADJ for n in _STAY_NOUN], 4)
    out = []
    for i, (kind, name) in enumerate(zip(types, names, strict=False)):
        price = {"entire": rng.randint(120, 380), "private": rng.randint(50, 160), "shared": rng.randint(25, 80)}[kind]
        occupancy = {"entire": rng.randint(2, 6), "private": rng.randint(1, 3), "shared": rng.randint(1, 2)}[kind]
        rules = frozenset(rule for rule in HOUSE_RULES if rng.random() < 0.3)
        out.append(
            Stay(
                f"{city}h{i + 1}",
                name,
                city,
                price,
                kind,
                occupancy,
                rules,
                rng.choices((1, 2, 3), weights=(6, 3, 1))[0],
            )
        )
    return out


def _flights(cities: dict[str, City], rng: random.Random) -> list[Leg]:
    out = []
    for a in cities:
        for b in cities:
            ca, cb = cities[a], cities[b]
            dist = round(math.hypot(ca.x - cb.x, ca.y - cb.y))
            if a == b or dist < 200:
                continue
            for i in range(rng.choice((0, 1, 1, 2))):
                dep = rng.randint(6 * 60, 20 * 60)
                arr = dep + 30 + dist * 60 // 700
                out.append(
                    Leg(
                        f"F{a}{b}{i + 1}",
                        "flight",
                        a,
                        b,
                        40 + dist // 9 + rng.randint(-15, 25),
                        dist,
                        f"{dep // 60:02d}:{dep % 60:02d}",
                        f"{arr // 60 % 24:02d}:{arr % 60:02d}",
                    )
                )
    return out


# ---------------------------------------------------------------- queries and the day schedule


@dataclass(frozen=True)
class Query:
    """The upstream query fields: cities are sandbox codes (or upstream names for official queries)."""

    org: str
    dest: str
    """A city, or a region when ``cities`` >= 2 (upstream: a state)."""
    days: int
    cities: int
    """``visiting_city_number``."""
    people: int
    budget: int
    house_rule: str | None = None
    """A house rule the stay must allow (e.g. ``pets``), or None."""
    cuisines: tuple[str, ...] = ()
    room_type: str | None = None
    """``entire``, ``private``, ``shared`` or ``notshared``, or None."""
    transport: str | None = None
    """``noflight`` or ``nodrive``, or None."""
    date: tuple[str, ...] = ()

    @property
    def n_constraints(self) -> int:
        """Number of local (hard, non-budget) constraints."""
        return sum(
            (self.house_rule is not None, bool(self.cuisines), self.room_type is not None, self.transport is not None)
        )

    @property
    def level_name(self) -> str:
        """Upstream level label from the number of local constraints."""
        return "easy" if self.n_constraints == 0 else "medium" if self.n_constraints <= 2 else "hard"


@dataclass(frozen=True)
class Slot:
    """One plan field: ``go`` (a leg), a meal, ``sight`` or ``stay`` on ``day``."""

    day: int
    kind: str


def travel_days(days: int, cities: int) -> tuple[int, ...]:
    """Days that start with a leg: day 1, the city switches (nights split evenly), and the last day.

    >>> travel_days(5, 2), travel_days(3, 1), travel_days(1, 1)
    ((1, 3, 5), (1, 3), (1,))
    """
    if days == 1:
        return (1,)
    nights = days - 1
    per_city = [nights // cities + (i < nights % cities) for i in range(cities)]
    return (1, *(1 + sum(per_city[:i]) for i in range(1, cities)), days)


@lru_cache(maxsize=64)
def schedule(days: int, cities: int) -> tuple[Slot, ...]:
    """The canonical field order: per day [go] bfast sight lunch dinner [stay]; a 1-day trip ends with ``go`` back."""
    travel = travel_days(days, cities)
    slots: list[Slot] = []
    for day in range(1, days + 1):
        if day in travel:
            slots.append(Slot(day, "go"))
        slots += [Slot(day, kind) for kind in ("bfast", "sight", "lunch", "dinner")]
        if day < days:
            slots.append(Slot(day, "stay"))
        elif days == 1:
            slots.append(Slot(day, "go"))
    return tuple(slots)


def same_segment(night_a: int, night_b: int, days: int, cities: int) -> bool:
    """Whether two nights (a < b) are spent in the same city stint (no travel day between them)."""
    return not any(night_a < d <= night_b for d in travel_days(days, cities))
