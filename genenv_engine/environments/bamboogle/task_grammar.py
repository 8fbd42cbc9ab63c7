"""The Lark grammar (llguidance's dialect) of a Bamboogle-mini task as the simulator writes it.

:func:`task_rules` gives the rules ``prompt`` (``Q: <question>`` and optionally `` | E: <passages>``, see
:mod:`.prompt`) and ``answer`` (``search[<query>]`` or ``answer[<text>]``) for one seed's knowledge base, whose
names and facts are finite, so the grammar lists them:

* a chain question is one of the question forms over a relation path of at most 3 hops, anchored only at the
  names for which every hop is defined and no name repeats (so no unknown entity, type mismatch, unanswerable
  or degenerate question); a comparison names two different companies;
* evidence is the knowledge base's own passages (never a made-up or contradicting sentence): for a chain, the
  supporting passages of its first hops in hop order, with at most 2 others among them (the distractor limit),
  none of them a supporting passage; for a comparison, at most 4 passages, at most 2 of them not on when a
  company opened;
* a search is the canonical query of a fact (``<subject> <keyword>``), an answer a knowledge-base name or year.

Left to the validator: a distractor listed once, a comparison's distractors (which passages are supporting
depends on the pair of names, too many pairs to list), the prompt's length, and whether the answer is the right
action (the answer rule cannot see the prompt).
"""

from __future__ import annotations

import json
from functools import lru_cache

from genenv_engine.environments.bamboogle.kb import RELATIONS, RELATIONS_FROM, KnowledgeBase, kb_for
from genenv_engine.environments.bamboogle.prompt import MAX_DISTRACTORS, MAX_HOPS


def _literal(text: str) -> str:
    return json.dumps(text)


def _choice(texts) -> str:
    return " | ".join(_literal(t) for t in texts)


def relation_paths(hops: int) -> list[tuple[str, ...]]:
    """Every type-compatible relation path of ``hops`` relations (innermost first)."""
    paths: list[tuple[str, ...]] = [(r,) for r in RELATIONS]
    for _ in range(hops - 1):
        paths = [p + (r,) for p in paths for r in RELATIONS_FROM.get(RELATIONS[p[-1]].range, ())]
    return paths


def anchors(kb: KnowledgeBase, path: tuple[str, ...]) -> list[str]:
    """The names from which ``path`` resolves: every hop defined and no name met twice."""
    out = []
    for anchor in kb.entities(RELATIONS[path[0]].domain):
        entity, seen = anchor, {anchor}
        for rel in path:
            entity = kb.facts.get((rel, entity))
            if entity is None or entity in seen:
                break
            seen.add(entity)
        else:
            out.append(anchor)
    return out


BLOCK = 16
"""Passages per block rule: "every passage but these" is then one rule for the untouched blocks and the rest of
the few blocks that hold them."""


class _Rules:
    """Rules built while walking the questions, one per distinct body (so equal evidence chains are shared)."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self.kb = kb
        self.passage = {p: f"p{i}" for i, p in enumerate(kb.passages)}
        self.blocks = [kb.passages[i : i + BLOCK] for i in range(0, len(kb.passages), BLOCK)]
        self.named: dict[str, str] = {}
        """Rule body -> rule name."""

    def rule(self, body: str, prefix: str) -> str:
        if body not in self.named:
            self.named[body] = f"{prefix}{len(self.named)}"
        return self.named[body]

    def others(self, excluded: tuple[str, ...] = ()) -> str:
        """Any knowledge-base passage but the ``excluded`` ones: the blocks holding none of them (one shared rule)
        and the rest of the blocks holding them."""
        hit = [i for i, block in enumerate(self.blocks) if any(p in excluded for p in block)]
        whole = [
            self.rule(" | ".join(self.passage[p] for p in block), "b")
            for i, block in enumerate(self.blocks)
            if i not in hit
        ]
        parts = [self.rule(" | ".join(whole), "w")] if whole else []
        parts += [self.passage[p] for i in hit for p in self.blocks[i] if p not in excluded]
        return self.rule(" | ".join(parts), "d")

    def chain(self, support: tuple[str, ...], budget: int, other: str) -> str:
        """More evidence after some: passages ``other`` (at most ``budget`` of them) and the next supporting
        passages, in hop order; it may end anywhere."""
        more = [f'" " {other} {self.chain(support, budget - 1, other)}'] if budget else []
        if support:
            more.append(f'" " {self.passage[support[0]]} {self.chain(support[1:], budget, other)}')
        if not more:
            return '""'
        return self.rule(f'"" | {" | ".join(more)}', "c")

    def evidence(self, support: tuple[str, ...]) -> str:
        """`` | E: <passages>`` or nothing: the first supporting passages in hop order, with at most
        :data:`MAX_DISTRACTORS` other passages among them."""
        other = self.others(support)
        first = [
            f"{other} {self.chain(support, MAX_DISTRACTORS - 1, other)}",
            f"{self.passage[support[0]]} {self.chain(support[1:], MAX_DISTRACTORS, other)}",
        ]
        return self.rule(f'"" | " | E: " ({" | ".join(first)})', "e")

    def compared(self, opened: list[str]) -> str:
        """A comparison's evidence: at most 4 passages (its 2 supporting ones and 2 distractors), at most 2 of
        them not on when a company opened (every passage but the supporting ones is a distractor)."""
        when = self.rule(" | ".join(self.passage[p] for p in opened), "o")
        other = self.others(tuple(opened))

        def more(left: int, others: int) -> str:
            steps = [f'" " {when} {more(left - 1, others)}'] if left else []
            steps += [f'" " {other} {more(left - 1, others - 1)}'] if left and others else []
            return self.rule(" | ".join(['""', *steps]), "m")

        total = 2 + MAX_DISTRACTORS
        first = f"{when} {more(total - 1, MAX_DISTRACTORS)} | {other} {more(total - 1, MAX_DISTRACTORS - 1)}"
        return self.rule(f'"" | " | E: " ({first})', "e")


def _chains(rules: _Rules) -> list[str]:
    """The chain questions (rule ``chain``): each form of each relation path, then each anchor it resolves from
    with that question's evidence."""
    kb, forms = rules.kb, []
    for hops in range(1, MAX_HOPS + 1):
        for path in relation_paths(hops):
            tails = []
            for anchor in anchors(kb, path):
                entity, support = anchor, []
                for rel in path:
                    support.append(kb.passage_of[(rel, entity)])
                    entity = kb.facts[(rel, entity)]
                tails.append((anchor, rules.evidence(tuple(support))))
            if not tails:
                continue
            inner = "".join(f"the {RELATIONS[r].noun} of " for r in reversed(path[:-1]))
            outer = RELATIONS[path[-1]]
            heads = []
            if outer.verb:
                heads.append(outer.verb.split("{x}"))
            if outer.noun:
                heads.append([f"{'who' if outer.range == 'person' else 'what'} is the {outer.noun} of ", "?"])
            for before, after in heads:
                body = " | ".join(f"{_literal(name + after)} {tail}" for name, tail in tails)
                forms.append(f"{_literal(before + inner)} {rules.rule(body, 'a')}")
    return ["chain: " + " | ".join(forms)]


def task_rules(kb: KnowledgeBase) -> str:
    """The ``prompt`` and ``answer`` rules for knowledge base ``kb``."""
    rules = _Rules(kb)
    chains = _chains(rules)
    companies = kb.entities("company")
    pairs = [f"{_literal(a + ' or ')} ({_choice(b + '?' for b in companies if b != a)})" for a in companies]
    compared = rules.compared([kb.passage_of[("opened", c)] for c in companies])
    years = sorted({obj for (rel, _), obj in kb.facts.items() if RELATIONS[rel].range == "year"})
    queries = sorted({RELATIONS[rel].query(subject) for rel, subject in kb.facts})
    lines = [
        'prompt: "Q: " (chain | compare)',
        *chains,
        'compare: "which opened first, " (' + " | ".join(pairs) + f") {compared}",
        *(f"{name}: {body}" for body, name in rules.named.items()),
        *(f"{name}: {_literal(text)}" for text, name in rules.passage.items()),
        'answer: "search[" query "]" | "answer[" value "]"',
        "query: " + _choice(queries),
        "value: " + _choice([*kb.types, *years]),
    ]
    return "\n".join(lines) + "\n"


@lru_cache(maxsize=8)
def rules_for(seed: int) -> str:
    """:func:`task_rules` of seed ``seed``'s knowledge base (built once per process)."""
    return task_rules(kb_for(seed))
