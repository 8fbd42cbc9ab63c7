"""Bamboogle-mini: multi-hop QA with a local search tool, decomposed into steps, scored by EM / token F1.

Provides :class:`BamboogleMini` (seeded splits on a 4-level ladder over an invented knowledge base,
the ``qa_em_f1`` checker, a validator that resolves simulator-written questions over that knowledge
base, sibling pairs, and the upstream loader hook) plus :func:`normalize_answer`, :func:`exact_match`,
:func:`token_f1`, :func:`parse_action` and :func:`generate_draft`. The knowledge base and BM25 live in
:mod:`~genenv_engine.environments.bamboogle.kb`, the question grammar in
:mod:`~genenv_engine.environments.bamboogle.prompt`, the file loader in
:mod:`~genenv_engine.environments.bamboogle.upstream`.

A step task is (question + evidence so far) -> next action, as GenEnv splits tool-using trajectories:

* ``answer[<text>]``: SQuAD normalisation (lower-case, drop punctuation and the articles a/an/the,
  squeeze whitespace); success is exact match with any gold answer, the score is the best token F1
  (``structured = False``: the reward is F1, so the loop's threshold decides soft success);
* ``search[<query>]``: success when the query's BM25 top-1 passage over the whole knowledge base
  (a tie for first place does not count) is the supporting passage of the next hop (for a
  comparison, either passage still missing). Score 1/0; ``rr`` reports the reciprocal rank.

Error types: ``parse_error`` (not ``search[..]`` / ``answer[..]``), ``wrong_action`` (searched when the
evidence sufficed, or answered too early), ``wrong_answer`` (EM 0; the score is F1), ``bad_search``.

>>> env = BamboogleMini(seed=0, sizes=SplitSizes(seed=3, train=8, heldout=4))
>>> task = env.splits()["train"][0]
>>> env.check(task, task.answer).success
True
>>> env.check(task, "tell me").error_type
'parse_error'
"""

from __future__ import annotations

import random
import re
import string
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from genenv_engine.core.records import CheckResult, Task, Validation
from genenv_engine.environments.bamboogle.kb import RELATIONS, RELATIONS_FROM, KnowledgeBase, kb_for
from genenv_engine.environments.bamboogle.prompt import (
    TOOLS,
    Draft,
    PromptError,
    read_prompt,
    render_compare,
    render_prompt,
    render_question,
)
from genenv_engine.environments.bamboogle.task_grammar import rules_for
from genenv_engine.environments.bamboogle.upstream import UpstreamError, load_upstream
from genenv_engine.environments.base import LadderEnvironment, SplitSizes

__all__ = [
    "BamboogleMini",
    "ERROR_TYPES",
    "REJECT_REASONS",
    "UpstreamError",
    "exact_match",
    "generate_draft",
    "load_upstream",
    "normalize_answer",
    "parse_action",
    "token_f1",
]

ERROR_TYPES = ("parse_error", "wrong_action", "wrong_answer", "bad_search")
REJECT_REASONS = (
    "too_long",
    "copy_of_parent",
    "bad_format",
    "bad_question",
    "unknown_relation",
    "unknown_entity",
    "type_mismatch",
    "too_many_hops",
    "unanswerable",
    "degenerate",
    "bad_evidence",
    "inconsistent_evidence",
    "duplicate_passage",
    "too_many_distractors",
    "answer_mismatch",
)
"""Closed set of validator reason codes (the text before ``:`` in ``Validation.reason``)."""
MAX_PROMPT_CHARS = 180
MAX_ANSWER_CHARS = 60
MAX_RESPONSE_CHARS = 300
_ACTION_RE = re.compile(r"(search|answer)\[([^\[\]\n]+)\]")
_ARTICLES_RE = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


class ActionError(ValueError):
    """The response is not exactly one ``search[<query>]`` or ``answer[<text>]``."""


# ---------------------------------------------------------------- SQuAD-style scoring


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, drop punctuation, drop articles, squeeze whitespace.

    >>> normalize_answer("  The Eiffel-Tower, Paris! ")
    'eiffeltower paris'
    """
    text = _ARTICLES_RE.sub(" ", text.lower().translate(_PUNCT))
    return " ".join(text.split())


def exact_match(prediction: str, golds: list[str]) -> float:
    """1.0 when the normalised prediction equals any normalised gold answer."""
    return float(any(normalize_answer(prediction) == normalize_answer(g) for g in golds))


def token_f1(prediction: str, golds: list[str]) -> float:
    """Best SQuAD token F1 of the prediction over the gold answers.

    >>> round(token_f1("Ola", ["Ola Vik"]), 3)
    0.667
    """
    return max((_f1(normalize_answer(prediction).split(), normalize_answer(g).split()) for g in golds), default=0.0)


def _f1(pred: list[str], gold: list[str]) -> float:
    if not pred or not gold:
        return float(pred == gold)
    same = sum((Counter(pred) & Counter(gold)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def parse_action(text: str) -> tuple[str, str]:
    """Strictly read one action into (``search`` | ``answer``, argument).

    >>> parse_action(" search[Zorvex founded] ")
    ('search', 'Zorvex founded')
    """
    match = _ACTION_RE.fullmatch(text.strip()) if len(text) <= MAX_RESPONSE_CHARS else None
    if match is None or not match.group(2).strip():
        raise ActionError("expected search[<query>] or answer[<text>]")
    return match.group(1), match.group(2).strip()


def check_action(expected: dict[str, Any], response: str) -> CheckResult:
    """The ``qa_em_f1`` checker for one step (see the module docstring for the rules)."""
    try:
        kind, arg = parse_action(response)
    except ActionError:
        return CheckResult(False, 0.0, {"action": 0.0}, "parse_error")
    if kind != expected["action"]:
        return CheckResult(False, 0.0, {"action": 0.0}, "wrong_action")
    if kind == "answer":
        em, f1 = exact_match(arg, expected["answers"]), token_f1(arg, expected["answers"])
        return CheckResult(em == 1.0, f1, {"action": 1.0, "em": em, "f1": f1}, None if em else "wrong_answer")
    kb = kb_for(int(expected["kb"]))
    hit = kb.retrieves(arg, expected["targets"])
    sub = {"action": 1.0, "hit": float(hit), "rr": kb.reciprocal_rank(arg, expected["targets"])}
    return CheckResult(hit, float(hit), sub, None if hit else "bad_search")


# ---------------------------------------------------------------- task generation


def _plan(level: int, rng: random.Random) -> tuple[str, int, int, int]:
    """(kind, hops, distractors, step) for one task of ``level``."""
    if level == 1:
        return "chain", 1, 0, 1 if rng.random() < 0.7 else 0
    if level == 2:
        return ("chain", 2, 0, rng.randint(0, 2)) if rng.random() < 0.75 else ("chain", 1, 1, rng.randint(0, 1))
    if level == 3:
        return "chain", 2, rng.randint(1, 2), rng.randint(0, 2)
    if rng.random() < 0.5:
        return "chain", 3, rng.randint(0, 1), rng.randint(0, 3)
    return "compare", 2, rng.randint(0, 1), rng.randint(0, 2)


def _paths(hops: int) -> list[tuple[str, ...]]:
    """Type-compatible relation sequences of length ``hops`` (``opened`` only last, no 2-step cycles)."""
    paths: list[tuple[str, ...]] = [(r,) for r in RELATIONS]
    for _ in range(hops - 1):
        paths = [
            p + (r,) for p in paths for r in RELATIONS_FROM.get(RELATIONS[p[-1]].range, ()) if (p[-1], r) not in _CYCLES
        ]
    return paths


_CYCLES = {("spouse", "spouse"), ("capital", "country")}
PATHS = {hops: _paths(hops) for hops in (1, 2, 3)}
"""Hops -> every relation path the generator may walk (sampled uniformly, so relations stay balanced)."""


def _sample_chain(hops: int, rng: random.Random, kb: KnowledgeBase, first: str | None) -> tuple[str, list[str]] | None:
    """A uniformly chosen relation path from a random name of its type (None when the walk fails)."""
    options = [p for p in PATHS[hops] if first is None or p[0] == first]
    if not options:
        return None
    path = rng.choice(options)
    anchor = rng.choice(kb.entities(RELATIONS[path[0]].domain))
    entity, seen = anchor, {anchor}
    for rel in path:
        if (rel, entity) not in kb.facts or kb.facts[(rel, entity)] in seen:
            return None
        entity = kb.facts[(rel, entity)]
        seen.add(entity)
    return anchor, list(path)


def _question(kind: str, hops: int, rng: random.Random, kb: KnowledgeBase, first: str | None) -> str | None:
    if kind == "compare":
        a, b = rng.sample(kb.entities("company"), 2)
        return render_compare(a, b)
    walk = _sample_chain(hops, rng, kb, first)
    if walk is None:
        return None
    outer = RELATIONS[walk[1][-1]]
    forms = [f for f, ok in (("verb", outer.verb), ("np", outer.noun)) if ok]
    return render_question(walk[1], walk[0], rng.choice(forms))


def _distractors(draft: Draft, n: int, rng: random.Random, kb: KnowledgeBase) -> list[str]:
    """Confusable passages: other facts about names on the path, or the same relations of other names."""
    pool = {
        kb.passage_of[(r, e)]
        for e in draft.question.entities
        if e in kb.types
        for r in RELATIONS_FROM[kb.types[e]]
        if (r, e) in kb.passage_of
    }
    for rel in sorted(set(draft.question.relations)):
        subjects = [s for (r, s) in kb.passage_of if r == rel]
        pool.update(kb.passage_of[(rel, s)] for s in rng.sample(subjects, min(3, len(subjects))))
    pool -= set(draft.question.support)
    return rng.sample(sorted(pool), n)


def generate_draft(level: int, rng: random.Random, kb: KnowledgeBase, first: str | None = None) -> Draft:
    """Sample one step task at ``level`` (optionally with first hop ``first``) and read it back.

    >>> draft = generate_draft(4, random.Random(1), kb_for(0))
    >>> draft.level, draft.features["kind"] in ("chain", "compare")
    (4, True)
    """
    for tries in range(10_000):
        kind, hops, n_distract, step = _plan(level, rng)
        text = _question(kind, hops, rng, kb, first if kind == "chain" and tries < 50 else None)
        if text is None:
            continue
        bare = read_prompt(render_prompt(text, ()), kb)
        support = list(bare.question.support)
        evidence = support[:step] if kind == "chain" or step != 1 else [rng.choice(support)]
        for passage in _distractors(bare, n_distract, rng, kb):
            evidence.insert(rng.randint(0, len(evidence)), passage)
        prompt = render_prompt(text, evidence)
        if len(prompt) <= MAX_PROMPT_CHARS:
            draft = read_prompt(prompt, kb)
            assert draft.level == level and draft.step == step, (prompt, draft.features)
            return draft
    raise RuntimeError(f"could not generate a level-{level} task")


# ---------------------------------------------------------------- the environment


class BamboogleMini(LadderEnvironment):
    """Built-in mini Bamboogle: step-level search/answer tasks over an invented knowledge base."""

    name = "bamboogle"
    granularity = "step"
    source = "built-in mini"
    structured = False

    def __init__(self, seed: int = 0, sizes: SplitSizes = SplitSizes(), data_dir: str | None = None) -> None:
        super().__init__(seed, sizes, data_dir)
        self._official = load_upstream(Path(data_dir)) if data_dir else None

    @property
    def kb(self) -> KnowledgeBase:
        """This seed's knowledge base (entities, facts, passages, BM25 index)."""
        return kb_for(self.seed)

    def search(self, query: str, k: int = 1) -> list[str]:
        """The local search tool: top-``k`` knowledge-base passages for ``query`` by BM25."""
        return self.kb.search(query, k)

    def draft(self, level: int, rng: random.Random) -> tuple[str, Callable[..., Task]]:
        draft = generate_draft(level, rng, self.kb)
        return draft.prompt, partial(_task, draft)

    def _official_heldout(self) -> list[Task] | None:
        """With ``data_dir`` the heldout split is the upstream Q/A, loaded at construction (train/seed unchanged)."""
        return self._official

    def check(self, task: Task, response: str) -> CheckResult:
        """``qa_em_f1``: EM/F1 for an answer step, BM25 top-1 retrieval for a search step."""
        return check_action(task.expected, response)

    def task_grammar(self) -> str:
        """A question over this seed's knowledge base with its passages, and an action (see :mod:`.task_grammar`)."""
        return rules_for(self.seed)

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
        """Accept a generated step only if its question resolves over the KB, its evidence is KB passages
        consistent with the question, and its action passes the checker against the recomputed gold."""
        rejected = self._guard(prompt, answer, parent, MAX_PROMPT_CHARS, MAX_ANSWER_CHARS)
        if rejected:
            return rejected
        try:
            draft = read_prompt(prompt, self.kb)
        except PromptError as err:
            return Validation(False, str(err))
        return self._accept(_task(draft, task_id, **self._generated(parent, epoch, generator)), answer)

    def sibling(self, source: Task, rng: random.Random, task_id: str) -> Task:
        """A sibling with the same action and first relation when possible, at the same level or ±1."""
        level = self._sibling_level(source, rng)
        features = source.difficulty.get("features", {})
        first = features.get("relations", "").split(">")[0] or None
        for attempt in range(200):
            draft = generate_draft(level, rng, self.kb, first=first if attempt < 100 else None)
            if attempt < 150 and draft.action != features.get("action", draft.action):
                continue
            sibling = self._as_sibling(source, draft.prompt, draft.answer, task_id)
            if sibling is not None:
                return sibling
        raise RuntimeError(f"no sibling found for {source.id}")


def _task(draft: Draft, task_id: str, **fields: Any) -> Task:
    return Task(
        id=task_id,
        benchmark="bamboogle",
        prompt=draft.prompt,
        answer=draft.answer,
        expected=draft.expected,
        tools=[dict(t) for t in TOOLS],
        difficulty={"level": draft.level, "features": draft.features},
        checker="qa_em_f1",
        granularity="step",
        **fields,
    )
