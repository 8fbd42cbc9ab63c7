"""Bamboogle-mini knowledge base: invented entities, relation facts rendered as passages, local BM25 search.

Bamboogle asks 2-hop questions that a search engine must answer hop by hop. Offline, and for a
byte-level agent, this module replaces Wikipedia with a small closed world generated from the seed:
companies, people, cities and countries with invented short names (no real-world facts), eight
relations (``founder``, ``ceo``, ``base``, ``opened``, ``born``, ``spouse``, ``country``, ``capital``),
one short passage per fact, and :class:`BM25` (Okapi BM25, ``k1=1.5``, ``b=0.75``, idf
``ln(1 + (N - df + 0.5) / (df + 0.5))``) written here with no external package.

Tokens are lower-cased alphanumeric runs minus a few stopwords, with a tiny alias table so a
question's own words are good queries (``founder`` -> ``founded``, ``birthplace`` -> ``born``, ...).

>>> kb = kb_for(0)
>>> company = kb.entities("company")[0]
>>> passage = kb.passage_of[("founder", company)]
>>> passage == f"{company} was founded by {kb.facts[('founder', company)]}."
True
>>> kb.search(f"who founded {company}?") == [passage]
True
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

N_COUNTRIES = 10
N_CITIES = 30
N_PEOPLE = 80
N_COUPLES = 24
N_COMPANIES = 60
YEARS = range(1900, 2000)

STOPWORDS = frozenset(
    "a an the of is was in to by and or who what where when which did does do are were at on for it its first".split()
)
ALIASES = {
    "founder": "founded",
    "found": "founded",
    "birthplace": "born",
    "birth": "born",
    "spouse": "married",
    "wife": "married",
    "husband": "married",
    "marry": "married",
    "base": "based",
    "hq": "based",
    "headquarters": "based",
    "open": "opened",
    "opening": "opened",
    "capitol": "capital",
}
_TOKEN_RE = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Relation:
    """A functional relation: its types, how a fact reads as a passage, and how questions name it."""

    name: str
    domain: str
    range: str
    passage: str
    """Passage template with ``{x}`` (subject) and ``{y}`` (object)."""
    keyword: str
    """The passage word that, after the subject's name, makes the canonical search query."""
    noun: str | None
    """Noun of the ``the <noun> of X`` phrase (None: the relation has no noun phrase)."""
    verb: str | None
    """Verb-form question template with ``{x}`` (None: only ``who/what is the <noun> of X?``)."""

    def query(self, subject: str) -> str:
        """The canonical search query for this relation's fact about ``subject``."""
        return f"{subject} {self.keyword}"


RELATIONS: dict[str, Relation] = {
    r.name: r
    for r in (
        Relation("founder", "company", "person", "{x} was founded by {y}.", "founded", "founder", "who founded {x}?"),
        Relation("ceo", "company", "person", "The CEO of {x} is {y}.", "CEO", "CEO", None),
        Relation("base", "company", "city", "{x} is based in {y}.", "based", "base", "where is {x} based?"),
        Relation("opened", "company", "year", "{x} opened in {y}.", "opened", None, "when did {x} open?"),
        Relation("born", "person", "city", "{x} was born in {y}.", "born", "birthplace", "where was {x} born?"),
        Relation("spouse", "person", "person", "{x} is married to {y}.", "married", "spouse", "who is {x} married to?"),
        Relation(
            "country", "city", "country", "{x} is in the country {y}.", "country", "country", "which country is {x} in?"
        ),
        Relation("capital", "country", "city", "The capital of {x} is {y}.", "capital", "capital", None),
    )
}
"""The eight relations, in the order their passages are listed."""
RELATIONS_FROM: dict[str, tuple[str, ...]] = {
    t: tuple(r.name for r in RELATIONS.values() if r.domain == t) for t in ("company", "person", "city", "country")
}
"""Entity type -> the relations defined on it."""

_SHAPES = {  # C consonant, V vowel, L sonorant, F final after a sonorant, E word-final consonant
    "country": ("CVLF", "VCVE"),
    "city": ("CVCV", "CVCVE"),
    "first": ("CVCV", "VCV", "CVE"),
    "last": ("CVLF", "CVE"),
    "company": ("CVLCVE", "CVCVE", "CVLCV"),
}
_LETTERS = {"C": "bdfgklmnprstvz", "V": "aeiou", "L": "lnrs", "F": "ktd", "E": "klnrstx"}
_BLOCKED = (
    "fuk",
    "fuc",
    "sex",
    "nig",
    "fag",
    "cum",
    "tit",
    "dik",
    "pis",
    "pus",
    "ass",
    "rap",
    "naz",
    "gay",
    "kun",
    "ped",
    "poo",
    "vag",
    "bum",
    "sux",
    "fut",
    "dum",
    "pen",
    "pot",
    "kil",
    "rip",
    "gun",
)
"""Substrings a generated name may not contain (keeps the invented words neutral)."""


def tokenize(text: str) -> list[str]:
    """BM25 tokens: lower-cased alphanumeric runs, stopwords dropped, aliases mapped.

    >>> tokenize("Who is the founder of Zorvex?")
    ['founded', 'zorvex']
    """
    words = _TOKEN_RE.findall(text.lower())
    return [ALIASES.get(w, w) for w in words if w not in STOPWORDS]


class BM25:
    """Okapi BM25 over a fixed list of documents, with an inverted index."""

    def __init__(self, docs: Sequence[str], k1: float = 1.5, b: float = 0.75) -> None:
        self.docs = tuple(docs)
        self.k1, self.b = k1, b
        tokens = [tokenize(d) for d in self.docs]
        self._lengths = [len(t) for t in tokens]
        self._avgdl = sum(self._lengths) / max(len(tokens), 1)
        self._postings: dict[str, list[tuple[int, int]]] = {}
        for i, toks in enumerate(tokens):
            for term, tf in Counter(toks).items():
                self._postings.setdefault(term, []).append((i, tf))
        n = len(self.docs)
        self._idf = {t: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5)) for t, p in self._postings.items()}

    def scores(self, query: str) -> dict[int, float]:
        """BM25 score of every document sharing a term with ``query`` (others score 0)."""
        out: dict[int, float] = {}
        for term in set(tokenize(query)):
            for i, tf in self._postings.get(term, ()):
                norm = tf + self.k1 * (1 - self.b + self.b * self._lengths[i] / self._avgdl)
                out[i] = out.get(i, 0.0) + self._idf[term] * tf * (self.k1 + 1) / norm
        return out

    def ranked(self, query: str, k: int = 10) -> list[tuple[int, float]]:
        """The top ``k`` (document index, score) pairs, best first, ties by document order."""
        return sorted(self.scores(query).items(), key=lambda item: (-item[1], item[0]))[:k]

    def top1(self, query: str) -> int | None:
        """The single best document, or None when nothing matches or the best score is tied."""
        best = self.ranked(query, 2)
        if not best or (len(best) == 2 and best[1][1] >= best[0][1] - 1e-9):
            return None
        return best[0][0]


@dataclass(frozen=True)
class KnowledgeBase:
    """The closed world of one seed: typed entities, facts, one passage per fact, and its BM25 index."""

    seed: int
    types: dict[str, str]
    """Entity name -> ``company``, ``person``, ``city`` or ``country``."""
    facts: dict[tuple[str, str], str]
    """(relation, subject) -> object (a name, or a year as text)."""
    passage_of: dict[tuple[str, str], str]
    """(relation, subject) -> the passage stating that fact (a couple shares one spouse passage)."""
    passages: tuple[str, ...]
    """The search corpus, in a fixed order."""
    index: BM25
    position: dict[str, int]
    """Passage text -> its index in :attr:`passages` (membership test for evidence)."""

    def entities(self, kind: str) -> list[str]:
        """All entity names of one type, in creation order."""
        return [name for name, t in self.types.items() if t == kind]

    def search(self, query: str, k: int = 1) -> list[str]:
        """The local search tool: the top-``k`` passages for ``query`` by BM25."""
        return [self.passages[i] for i, _ in self.index.ranked(query, k)]

    def retrieves(self, query: str, targets: Sequence[str]) -> bool:
        """Whether ``query``'s single best passage (BM25 top-1, no tie) is one of ``targets``."""
        top = self.index.top1(query)
        return top is not None and self.passages[top] in targets

    def reciprocal_rank(self, query: str, targets: Sequence[str], k: int = 10) -> float:
        """1/rank of the best-ranked target within the top ``k`` (0.0 when none is there)."""
        for rank, (i, _) in enumerate(self.index.ranked(query, k), start=1):
            if self.passages[i] in targets:
                return 1.0 / rank
        return 0.0


@lru_cache(maxsize=8)
def kb_for(seed: int) -> KnowledgeBase:
    """The knowledge base of ``seed``, built once per process (deterministic in the seed)."""
    return build_kb(seed)


def build_kb(seed: int) -> KnowledgeBase:
    """Generate the invented world of ``seed`` from ``random.Random(f"bamboogle-kb-{seed}")``."""
    rng = random.Random(f"bamboogle-kb-{seed}")
    used: set[str] = set(STOPWORDS) | set(ALIASES) | {r.keyword.lower() for r in RELATIONS.values()}
    countries = [_name(rng, "country", used) for _ in range(N_COUNTRIES)]
    cities = [_name(rng, "city", used) for _ in range(N_CITIES)]
    people = [f"{_name(rng, 'first', used)} {_name(rng, 'last', used)}" for _ in range(N_PEOPLE)]
    companies = [_name(rng, "company", used) for _ in range(N_COMPANIES)]
    types = {
        **{c: "company" for c in companies},
        **{p: "person" for p in people},
        **{c: "city" for c in cities},
        **{c: "country" for c in countries},
    }
    facts: dict[tuple[str, str], str] = {}
    years = rng.sample(list(YEARS), N_COMPANIES)
    for company, year in zip(companies, years, strict=False):
        founder, ceo = rng.sample(people, 2)
        facts.update(
            {
                ("founder", company): founder,
                ("ceo", company): ceo,
                ("base", company): rng.choice(cities),
                ("opened", company): str(year),
            }
        )
    for person in people:
        facts[("born", person)] = rng.choice(cities)
    married = rng.sample(people, 2 * N_COUPLES)
    for a, b in zip(married[::2], married[1::2], strict=False):
        facts[("spouse", a)], facts[("spouse", b)] = b, a
    for i, city in enumerate(cities):
        facts[("country", city)] = countries[i % N_COUNTRIES] if i < 2 * N_COUNTRIES else rng.choice(countries)
    for country in countries:
        facts[("capital", country)] = rng.choice([c for c in cities if facts[("country", c)] == country])
    passage_of = _passages(facts, married)
    passages = tuple(dict.fromkeys(passage_of.values()))
    position = {p: i for i, p in enumerate(passages)}
    return KnowledgeBase(seed, types, facts, passage_of, passages, BM25(passages), position)


def _passages(facts: dict[tuple[str, str], str], married: list[str]) -> dict[tuple[str, str], str]:
    """One passage per fact; both partners of a couple point at the couple's single passage."""
    first_partner = set(married[::2])
    out: dict[tuple[str, str], str] = {}
    for relation in RELATIONS.values():
        for (rel, subject), obj in facts.items():
            if rel != relation.name:
                continue
            if rel == "spouse" and subject not in first_partner:
                out[(rel, subject)] = relation.passage.format(x=obj, y=subject)
            else:
                out[(rel, subject)] = relation.passage.format(x=subject, y=obj)
    return out


def _name(rng: random.Random, kind: str, used: set[str]) -> str:
    """A fresh capitalised invented word of the kind's shape, unique over the whole world."""
    while True:
        shape = rng.choice(_SHAPES[kind])
        word = "".join(rng.choice(_LETTERS[c]) for c in shape)
        clean = all(a != b for a, b in zip(word, word[1:], strict=False)) and not any(b in word for b in _BLOCKED)
        if clean and word not in used:
            used.add(word)
            return word.capitalize()
