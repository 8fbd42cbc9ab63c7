"""Bamboogle-mini prompt grammar: the controlled question language, step prompts, and their strict reader.

A step task is one state of a search trajectory: the question plus the passages retrieved so far,
and the agent's next action is ``search[<query>]`` or ``answer[<text>]``. For a byte-level agent
the prompt is compact: ``Q: <question>`` or ``Q: <question> | E: <passage> <passage> ...``.

Questions (``X`` is a knowledge-base name or a nested noun phrase ``the <noun> of X``)::

    who founded X?  where is X based?  when did X open?  where was X born?
    who is X married to?  which country is X in?
    who is the <noun> of X?  what is the <noun> of X?  which opened first, A or B?

Nouns: founder, CEO, base, birthplace, spouse, country, capital. Both the task generator and the
validator of simulator text go through :func:`read_prompt`, which resolves the question over the
knowledge base (types checked, every hop defined, no entity repeated), checks that every evidence
sentence is a knowledge-base passage, and derives the next action, so gold answers and levels are
computed, never trusted.

>>> from genenv_engine.environments.bamboogle.kb import kb_for
>>> kb = kb_for(0)
>>> company = kb.entities("company")[0]
>>> draft = read_prompt(f"Q: where was the founder of {company} born?", kb)
>>> draft.answer == f"search[{company} founded]", draft.level
(True, 2)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from genenv_engine.environments.bamboogle.kb import RELATIONS, KnowledgeBase

MAX_HOPS = 3
MAX_DISTRACTORS = 2
_PROMPT_RE = re.compile(r"Q: ([^|]+?\?)(?: \| E: (.+))?")
_EVIDENCE_RE = re.compile(r"[^.]+\.(?: [^.]+\.)*")
_COMPARE_RE = re.compile(r"which opened first, (.+) or (.+)\?")
_GENERIC_RE = re.compile(r"(who|what) is (.+)\?")
_NP_RE = re.compile(r"the (\S+) of (.+)")
_YEAR_RE = re.compile(r"[12][0-9]{3}")
TOOLS: list[dict[str, Any]] = [
    {
        "name": "search",
        "description": "Local BM25 search over the knowledge-base passages; returns the top passage.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
    {
        "name": "answer",
        "description": "Give the final answer to the question.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
]
"""The two actions, written ``search[<query>]`` and ``answer[<text>]``."""
NOUNS = {r.noun: r.name for r in RELATIONS.values() if r.noun}
"""Noun of ``the <noun> of X`` -> relation name."""


def _template_re(template: str, slots: tuple[str, ...]) -> re.Pattern[str]:
    pattern = re.escape(template)
    for slot in slots:
        pattern = pattern.replace(re.escape("{" + slot + "}"), "(.+?)" if slot == "x" and "y" in slots else "(.+)")
    return re.compile(pattern)


_VERB_RES = [(r.name, _template_re(r.verb, ("x",))) for r in RELATIONS.values() if r.verb]
_PASSAGE_RES = [(r.name, _template_re(r.passage, ("x", "y"))) for r in RELATIONS.values()]


class PromptError(ValueError):
    """A prompt outside the grammar or the knowledge base; ``str(err)`` is ``reason_code: detail``."""


@dataclass(frozen=True)
class Question:
    """A question resolved over the knowledge base."""

    text: str
    kind: str
    """``chain`` (follow relations from one name) or ``compare`` (which of two opened first)."""
    form: str
    """``verb`` (``who founded X?``), ``np`` (``who is the founder of X?``) or ``compare``."""
    entities: tuple[str, ...]
    """The names on the path: the anchor then each hop's value (chain), or the two compared names."""
    relations: tuple[str, ...]
    """Relations in hop order (innermost first); ``("opened", "opened")`` for a comparison."""
    gold: str
    support: tuple[str, ...]
    """The supporting passages, one per hop, in hop order."""
    queries: tuple[str, ...]
    """The canonical search query of each hop."""

    @property
    def answer_type(self) -> str:
        return "company" if self.kind == "compare" else RELATIONS[self.relations[-1]].range


def noun_phrase(relations: tuple[str, ...] | list[str], anchor: str) -> str:
    """``the <noun> of ...`` for relations in hop order, e.g. ``the birthplace of the founder of X``."""
    text = anchor
    for rel in relations:
        text = f"the {RELATIONS[rel].noun} of {text}"
    return text


def render_question(relations: tuple[str, ...] | list[str], anchor: str, form: str) -> str:
    """The question text of a chain in the ``verb`` or ``np`` form."""
    outer = RELATIONS[relations[-1]]
    if form == "verb":
        assert outer.verb is not None
        return outer.verb.format(x=noun_phrase(relations[:-1], anchor))
    return f"{'who' if outer.range == 'person' else 'what'} is {noun_phrase(relations, anchor)}?"


def render_compare(a: str, b: str) -> str:
    """The comparison question about companies ``a`` and ``b``."""
    return f"which opened first, {a} or {b}?"


def render_prompt(question: str, evidence: list[str] | tuple[str, ...]) -> str:
    """``Q: <question>`` plus `` | E: <passages>`` when any evidence was retrieved."""
    return f"Q: {question}" + (f" | E: {' '.join(evidence)}" if evidence else "")


# ---------------------------------------------------------------- reading questions


def parse_question(text: str, kb: KnowledgeBase) -> Question:
    """Parse and resolve a question; raise :class:`PromptError` when outside the grammar or the KB."""
    match = _COMPARE_RE.fullmatch(text)
    if match:
        return _compare(text, match.group(1), match.group(2), kb)
    for name, pattern in _VERB_RES:
        match = pattern.fullmatch(text)
        if match:
            anchor, inner, kind = _parse_np(match.group(1), kb)
            return _chain(text, "verb", anchor, inner + [_apply(name, kind)], kb)
    match = _GENERIC_RE.fullmatch(text)
    if match is None:
        raise PromptError(f"bad_question: {text[:30]!r}")
    anchor, relations, kind = _parse_np(match.group(2), kb)
    if not relations:
        raise PromptError("bad_question: names no relation")
    if (match.group(1) == "who") != (kind == "person"):
        raise PromptError(f"type_mismatch: '{match.group(1)}' asks for a {kind}")
    return _chain(text, "np", anchor, relations, kb)


def _parse_np(text: str, kb: KnowledgeBase) -> tuple[str, list[str], str]:
    """(anchor, relations in hop order, type of the phrase's value)."""
    match = _NP_RE.fullmatch(text)
    if match is None:
        if text not in kb.types:
            raise PromptError(f"unknown_entity: {text[:30]}")
        return text, [], kb.types[text]
    noun, inner = match.groups()
    if noun not in NOUNS:
        raise PromptError(f"unknown_relation: {noun[:20]}")
    anchor, relations, kind = _parse_np(inner, kb)
    name = _apply(NOUNS[noun], kind)
    return anchor, relations + [name], RELATIONS[name].range


def _apply(relation: str, kind: str) -> str:
    if RELATIONS[relation].domain != kind:
        raise PromptError(f"type_mismatch: {relation} of a {kind}")
    return relation


def _chain(text: str, form: str, anchor: str, relations: list[str], kb: KnowledgeBase) -> Question:
    if len(relations) > MAX_HOPS:
        raise PromptError(f"too_many_hops: {len(relations)}")
    entity, seen, support, queries = anchor, [anchor], [], []
    for rel in relations:
        if (rel, entity) not in kb.facts:
            raise PromptError(f"unanswerable: no {rel} of {entity}")
        support.append(kb.passage_of[(rel, entity)])
        queries.append(RELATIONS[rel].query(entity))
        entity = kb.facts[(rel, entity)]
        if entity in seen:
            raise PromptError(f"degenerate: {entity} repeats")
        seen.append(entity)
    return Question(text, "chain", form, tuple(seen), tuple(relations), entity, tuple(support), tuple(queries))


def _compare(text: str, a: str, b: str, kb: KnowledgeBase) -> Question:
    for name in (a, b):
        if name not in kb.types:
            raise PromptError(f"unknown_entity: {name[:30]}")
        if kb.types[name] != "company":
            raise PromptError(f"type_mismatch: opened of a {kb.types[name]}")
    if a == b:
        raise PromptError(f"degenerate: {a} repeats")
    year_a, year_b = int(kb.facts[("opened", a)]), int(kb.facts[("opened", b)])
    if year_a == year_b:
        raise PromptError("unanswerable: same year")
    opened = RELATIONS["opened"]
    return Question(
        text,
        "compare",
        "compare",
        (a, b),
        ("opened", "opened"),
        a if year_a < year_b else b,
        (kb.passage_of[("opened", a)], kb.passage_of[("opened", b)]),
        (opened.query(a), opened.query(b)),
    )


# ---------------------------------------------------------------- reading evidence


def _check_passage(text: str, kb: KnowledgeBase) -> None:
    """Accept a KB passage; otherwise say whether it names unknown entities, contradicts the KB, or is noise."""
    if text in kb.position:
        return
    unknown = None
    for name, pattern in _PASSAGE_RES:
        match = pattern.fullmatch(text)
        if match is None:
            continue
        x, y = match.groups()
        year = RELATIONS[name].range == "year"
        missing = [n for n, ok in ((x, x in kb.types), (y, _YEAR_RE.fullmatch(y) if year else y in kb.types)) if not ok]
        if missing:
            unknown = unknown or missing[0]
        elif kb.facts.get((name, x)) == y:
            raise PromptError(f"bad_evidence: not a KB passage: {text[:30]}")
        else:
            raise PromptError(f"inconsistent_evidence: contradicts the KB: {text[:30]}")
    if unknown is not None:
        raise PromptError(f"unknown_entity: {unknown[:30]}")
    raise PromptError(f"bad_evidence: {text[:30]!r}")


def _read_evidence(text: str | None, kb: KnowledgeBase) -> tuple[str, ...]:
    if text is None:
        return ()
    if _EVIDENCE_RE.fullmatch(text) is None:
        raise PromptError("bad_evidence: expected sentences ending in '.'")
    passages = tuple(p.strip() for p in re.findall(r"[^.]+\.", text))
    for passage in passages:
        _check_passage(passage, kb)
    if len(set(passages)) != len(passages):
        raise PromptError("duplicate_passage")
    return passages


# ---------------------------------------------------------------- drafts


@dataclass(frozen=True)
class Draft:
    """A prompt read back through the grammar: question, evidence, next action, gold and level."""

    prompt: str
    question: Question
    evidence: tuple[str, ...]
    kb_seed: int

    @property
    def missing(self) -> tuple[str, ...]:
        """Supporting passages not yet in the evidence, in hop order."""
        return tuple(p for p in self.question.support if p not in self.evidence)

    @property
    def step(self) -> int:
        """How many hops are already resolved (searches already made)."""
        return len(self.question.support) - len(self.missing)

    @property
    def action(self) -> str:
        return "search" if self.missing else "answer"

    @property
    def targets(self) -> tuple[str, ...]:
        """Passages a correct search must retrieve: the next hop (either missing side of a comparison)."""
        return self.missing if self.question.kind == "compare" else self.missing[:1]

    @property
    def answer(self) -> str:
        """Canonical next action: the next hop's search query, or the resolved answer."""
        if not self.missing:
            return f"answer[{self.question.gold}]"
        return f"search[{self.question.queries[self.question.support.index(self.missing[0])]}]"

    @property
    def expected(self) -> dict[str, Any]:
        if self.action == "answer":
            return {"action": "answer", "answers": [self.question.gold]}
        return {"action": "search", "targets": list(self.targets), "kb": self.kb_seed}

    @property
    def features(self) -> dict[str, Any]:
        q = self.question
        return {
            "hops": len(q.support),
            "kind": q.kind,
            "form": q.form,
            "relations": ">".join(q.relations),
            "answer_type": q.answer_type,
            "action": self.action,
            "step": self.step,
            "n_evidence": len(self.evidence),
            "n_distractors": len(self.evidence) - self.step,
        }

    @property
    def level(self) -> int:
        return infer_level(self.features)


def infer_level(features: dict[str, Any]) -> int:
    """Level 1-4: comparisons and 3-hop chains are 4; otherwise hops plus one if any distractor, at most 3.

    >>> infer_level({"kind": "chain", "hops": 1, "n_distractors": 0})
    1
    >>> infer_level({"kind": "chain", "hops": 2, "n_distractors": 1})
    3
    >>> infer_level({"kind": "compare", "hops": 2, "n_distractors": 0})
    4
    """
    if features["kind"] == "compare" or features["hops"] >= 3:
        return 4
    return min(3, features["hops"] + (features["n_distractors"] > 0))


def read_prompt(prompt: str, kb: KnowledgeBase) -> Draft:
    """Strictly parse a step prompt into a :class:`Draft`; raise :class:`PromptError` with a reason.

    >>> from genenv_engine.environments.bamboogle.kb import kb_for
    >>> read_prompt("Q: who founded Acme?", kb_for(0))
    Traceback (most recent call last):
    ...
    genenv_engine.environments.bamboogle.prompt.PromptError: unknown_entity: Acme
    """
    match = _PROMPT_RE.fullmatch(prompt)
    if match is None:
        raise PromptError("bad_format: expected 'Q: <question>?' or 'Q: <question>? | E: <passages>'")
    question = parse_question(match.group(1), kb)
    evidence = _read_evidence(match.group(2), kb)
    draft = Draft(prompt, question, evidence, kb.seed)
    present = [p in evidence for p in question.support]
    lead = present.index(False) if False in present else len(present)
    if question.kind == "chain" and any(present[lead:]):
        raise PromptError(f"inconsistent_evidence: hop {present.index(True, lead) + 1} before hop {lead + 1}")
    if draft.features["n_distractors"] > MAX_DISTRACTORS:
        raise PromptError(f"too_many_distractors: {draft.features['n_distractors']}")
    return draft
