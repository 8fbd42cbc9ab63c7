"""The real BFCL benchmark: items from the pinned ``bfcl-eval`` wheel scored by BFCL's own checkers.

Provides :class:`BfclOfficial` (name ``bfcl_official``, source ``package``): seeded splits over the
real items, the ``bfcl_ast_official`` checker (the official ``ast_checker`` on a safe stdlib-``ast``
decoding of the response), the official relevance rule, multi-turn turns scored with the official
backends and state/response checkers (:mod:`~genenv_engine.environments.bfcl.official.multiturn`),
a validator for simulator-written tasks, and sibling pairs. It needs the optional package
(``make setup-bfcl``, i.e. ``pip install --no-deps bfcl-eval==2026.3.23``); the module itself
imports without it, and constructing the environment without it raises :class:`BfclUnavailable`.

Categories: simple_python, multiple, parallel, parallel_multiple and their live_* versions (AST);
irrelevance and live_irrelevance (success iff no call decodes); multi_turn_base, one task per turn.
Left out: web_search (live URLs), memory (embedding models), Java/JavaScript (their type converters
expect BFCL's tree_sitter decoder), live_relevance (16 items), format_sensitivity, and the
miss_func/miss_param/long_context multi-turn variants (turn by turn without tool results their
prompts mostly repeat multi_turn_base's).

Tasks: ids ``bfcl_official/<category>/<item id>`` (``.../<item id>/t<turn>`` for multi-turn turns);
the prompt is :func:`~genenv_engine.environments.bfcl.official.data.render_prompt` (JSON function
docs plus the messages, earlier turns with their gold calls as ``assistant`` lines); the answer is
one canonical gold call set in Python call syntax, calls joined by ``"; "``, ``[]`` for no call;
``expected`` holds the category, the BFCL id and the ``possible_answer`` ground truth (multi-turn:
``ground_truth`` up to the turn, ``turn``, ``initial_config``, ``involved_classes``); ``origin`` is
``official``. Levels: 1 one function listed and one call; 2 several functions listed or no call
(multiple, irrelevance); 3 several calls (parallel); 4 multi-turn.

Error types are BFCL's own strings (see :data:`ERROR_TYPES`), plus ``checker_error`` when the
official checker raises on a response.

Reward-hacking guard (:meth:`BfclOfficial.reward`): on a task whose gold is "no call" (irrelevance,
live_irrelevance, generated irrelevance tasks, multi-turn turns with no gold call) BFCL counts any
response that does not decode to a call as a success, so an empty string or junk would earn the
full reward. The checker keeps BFCL's verdict (``CheckResult.success``, ``error_type``), but the
reward is 1 only for an explicit abstention: a non-empty response that decodes to an empty call
list (``[]``, the gold answer's rendering). Every genenv rollout, the held-out evaluation included,
is scored by that reward, so its irrelevance success is this stricter rule, not BFCL's.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

from genenv_engine.core.records import CheckResult, Task, Validation
from genenv_engine.environments.base import Environment, SplitSizes
from genenv_engine.environments.bfcl.official import multiturn
from genenv_engine.environments.bfcl.official.calls import DecodeError, decode_calls, render_calls
from genenv_engine.environments.bfcl.official.data import (
    CATEGORIES,
    IRRELEVANCE_CATEGORIES,
    MULTI_TURN_CATEGORIES,
    BfclUnavailable,
    Item,
    PromptError,
    gold_calls,
    item_messages,
    load_items,
    official,
    read_prompt,
    render_prompt,
    require_package,
)

__all__ = ["BfclOfficial", "BfclUnavailable", "ERROR_TYPES", "ast_verdict", "infer_level"]

NAME = "bfcl_official"
MODEL_NAME = "genenv"
"""Model name passed to the official checker (only its stubbed config is ever read)."""
ERROR_TYPES = (
    "ast_decoder:decoder_failed",
    "simple_function_checker:wrong_count",
    "simple_function_checker:wrong_func_name",
    "simple_function_checker:missing_required",
    "simple_function_checker:unexpected_param",
    "simple_function_checker:missing_optional",
    "type_error:simple",
    "type_error:nested",
    "value_error:string",
    "value_error:list/tuple",
    "value_error:dict_key",
    "value_error:dict_value",
    "value_error:list_dict_count",
    "value_error:others",
    "dict_checker:unclear",
    "list_dict_checker:unclear",
    "multiple_function_checker:wrong_count",
    "parallel_function_checker_no_order:wrong_count",
    "parallel_function_checker_no_order:cannot_find_match",
    "irrelevance_error:decoder_success",
    "multi_turn:empty_turn_model_response",
    "multi_turn:instance_state_mismatch",
    "multi_turn:execution_response_mismatch",
    "multi_turn:irrelevance_error:decoder_success",
    "checker_error",
)
"""Every error type :meth:`BfclOfficial.check` can return (BFCL's strings plus ``checker_error``)."""
MAX_PROMPT_CHARS = 60_000
MAX_ANSWER_CHARS = 10_000
_PY_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "float": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "tuple": (list, tuple),
    "dict": (dict,),
    "any": (str,),
}


def infer_level(features: dict[str, Any]) -> int:
    """Level 1-4 from task features; real items and validated generated tasks both use this.

    >>> infer_level({"multi_turn": False, "n_calls": 1, "n_functions": 3})
    2
    """
    if features["multi_turn"]:
        return 4
    if features["n_calls"] >= 2:
        return 3
    if features["n_functions"] >= 2 or features["n_calls"] == 0:
        return 2
    return 1


def ast_verdict(
    functions: list[dict[str, Any]], decoded: list[dict[str, Any]], possible_answer: list[dict[str, Any]], category: str
) -> dict[str, Any]:
    """The official ``ast_checker`` verdict (``{"valid": bool, "error_type": ...}``) for decoded calls."""
    checker = official("ast")
    language = official("enums").Language.PYTHON
    try:
        return checker.ast_checker(functions, decoded, possible_answer, language, category, MODEL_NAME)
    except Exception as err:  # noqa: BLE001 - a crash of the official checker is a failed check
        return {"valid": False, "error": [repr(err)], "error_type": "checker_error"}


def _name_recall(gold: list[dict[str, Any]], decoded: list[dict[str, Any]]) -> float:
    names = [n for call in decoded for n in call]
    wanted = [n for call in gold for n in call]
    hits = 0
    for name in wanted:
        if name in names:
            names.remove(name)
            hits += 1
    return hits / len(wanted) if wanted else float(not names)


class BfclOfficial(Environment):
    """Real BFCL categories from the pinned wheel, checked by the official BFCL checkers."""

    name = NAME
    granularity = "step"
    source = "package"

    def __init__(self, seed: int = 0, sizes: SplitSizes = SplitSizes(), data_dir: str | None = None) -> None:
        super().__init__(seed, sizes, data_dir)
        self.version = require_package()
        self._splits: dict[str, list[Task]] | None = None
        self.excluded: list[str] = []
        """Ids of real tasks left out of the splits because the official checker rejects their gold."""

    # ------------------------------------------------------------ splits

    def items(self) -> tuple[Item, ...]:
        """Every loaded real item (all categories, before splitting)."""
        return load_items(self.data_dir)

    def splits(self) -> dict[str, list[Task]]:
        """Seeded splits over the real items, category-stratified, heldout filled first, the rest unused.

        Items whose gold the official checker rejects (a few data bugs of the pinned release) and
        repeated prompts are skipped.
        """
        if self._splits is None:
            order = self._stratified_order(random.Random(f"{NAME}-splits-{self.seed}"))
            sizes = {"heldout": self.sizes.heldout, "train": self.sizes.train, "seed": self.sizes.seed}
            self._splits = self._fill(order, sizes)
        return {split: list(tasks) for split, tasks in self._splits.items()}

    def _stratified_order(self, rng: random.Random) -> list[Item]:
        """Items in an order whose every prefix holds the categories in proportion (systematic sampling)."""
        by_category: dict[str, list[Item]] = defaultdict(list)
        for item in self.items():
            by_category[item.category].append(item)
        keyed = []
        for rank, category in enumerate(CATEGORIES):
            items = by_category.get(category, [])
            rng.shuffle(items)
            offset = rng.random()
            keyed += [((i + offset) / len(items), rank, item) for i, item in enumerate(items)]
        return [item for *_, item in sorted(keyed, key=lambda k: (k[0], k[1]))]

    def _fill(self, order: list[Item], sizes: dict[str, int]) -> dict[str, list[Task]]:
        out: dict[str, list[Task]] = {split: [] for split in sizes}
        splits = iter(sizes)
        split = next(splits)
        seen: set[str] = set()
        for item in order:
            while split is not None and len(out[split]) >= sizes[split]:
                split = next(splits, None)
            if split is None:
                break
            for task in self.item_tasks(item, split):
                if len(out[split]) >= sizes[split] or task.prompt in seen:
                    continue
                if not self.check(task, task.answer).success:
                    self.excluded.append(task.id)
                    continue
                seen.add(task.prompt)
                out[split].append(task)
        return out

    def item_tasks(self, item: Item, split: str = "heldout") -> list[Task]:
        """The tasks of one real item: one per item, or one per turn for multi-turn items."""
        if item.category in MULTI_TURN_CATEGORIES:
            return self._turn_tasks(item, split)
        truth = [] if item.category in IRRELEVANCE_CATEGORIES else item.ground_truth
        answer = render_calls(gold_calls(truth, item.functions))
        messages = item_messages(item)
        expected = {"category": item.category, "bfcl_id": item.id, "possible_answer": truth}
        features = self._features(item.category, item.functions, messages, len(truth))
        return [
            self._task(
                f"{NAME}/{item.category}/{item.id}",
                render_prompt(item.functions, messages),
                answer,
                expected,
                item.functions,
                features,
                split=split,
                origin="official",
            )
        ]

    def _turn_tasks(self, item: Item, split: str) -> list[Task]:
        tasks, history = [], []
        base = {"category": item.category, "bfcl_id": item.id, **item.extra}
        for turn, gold in enumerate(item.ground_truth):
            expected = {**base, "turn": turn, "ground_truth": item.ground_truth[: turn + 1]}
            answer = multiturn.render_turn(multiturn.keyword_answer(expected, gold))
            messages = item_messages(item, turn, history)
            features = self._features(item.category, item.functions, messages, len(gold))
            tasks.append(
                self._task(
                    f"{NAME}/{item.category}/{item.id}/t{turn}",
                    render_prompt(item.functions, messages),
                    answer,
                    expected,
                    item.functions,
                    features,
                    split=split,
                    origin="official",
                )
            )
            history.append(answer)
        return tasks

    @staticmethod
    def _features(
        category: str, functions: list[dict[str, Any]], messages: list[dict[str, str]], n_calls: int
    ) -> dict[str, Any]:
        history = sum(m["role"] == "assistant" for m in messages)
        return {
            "category": category,
            "n_functions": len(functions),
            "n_calls": n_calls,
            "n_messages": len(messages),
            "history": history,
            "live": category.startswith("live_"),
            "multi_turn": category in MULTI_TURN_CATEGORIES or (category not in CATEGORIES and history > 0),
        }

    def _task(
        self,
        task_id: str,
        prompt: str,
        answer: str,
        expected: dict[str, Any],
        tools: list[dict[str, Any]],
        features: dict[str, Any],
        **fields: Any,
    ) -> Task:
        checker = "bfcl_multi_turn_official" if expected["category"] in MULTI_TURN_CATEGORIES else "bfcl_ast_official"
        features = {**features, "prompt_chars": len(prompt)}
        return Task(
            id=task_id,
            benchmark=NAME,
            prompt=prompt,
            answer=answer,
            expected=expected,
            tools=tools,
            difficulty={"level": infer_level(features), "features": features},
            checker=checker,
            granularity="step",
            **fields,
        )

    # ------------------------------------------------------------ checker

    def check(self, task: Task, response: str) -> CheckResult:
        """Score a response with the official BFCL rule of the task's category."""
        category = task.expected["category"]
        try:
            decoded: list[dict[str, Any]] | None = decode_calls(response)
        except DecodeError:
            decoded = None
        if category in MULTI_TURN_CATEGORIES:
            turn = task.expected["ground_truth"][task.expected["turn"]]
            gold = [{multiturn.parse_gold(c)[0]: {}} for c in turn]
            valid, error = multiturn.check_turn(task.expected, decoded or [])
            return self._result(valid, error, decoded, gold, no_call_gold=not turn, response=response)
        if category in IRRELEVANCE_CATEGORIES or not task.expected["possible_answer"]:
            called = bool(decoded)  # BFCL: a decodable, non-empty call list is a function call
            return self._result(
                not called,
                "irrelevance_error:decoder_success" if called else None,
                decoded,
                [],
                no_call_gold=True,
                response=response,
            )
        gold = task.expected["possible_answer"]
        if decoded is None:
            return self._result(False, "ast_decoder:decoder_failed", decoded, gold)
        verdict = ast_verdict(task.tools, decoded, gold, category)
        return self._result(bool(verdict["valid"]), None if verdict["valid"] else verdict["error_type"], decoded, gold)

    @staticmethod
    def _result(
        valid: bool,
        error: str | None,
        decoded: list[dict[str, Any]] | None,
        gold: list[dict[str, Any]],
        no_call_gold: bool = False,
        response: str = "",
    ) -> CheckResult:
        sub = {"decoded": float(decoded is not None), "name": _name_recall(gold, decoded or [])}
        if no_call_gold:
            sub["no_call_gold"] = 1.0
            sub["explicit_no_call"] = float(decoded == [] and bool(response.strip()))
        return CheckResult(valid, float(valid), sub, error)

    def reward(self, result: CheckResult) -> float:
        """BFCL's verdict, except that a no-call gold is rewarded only for an explicit ``[]`` (see the module doc).

        Empty or undecodable text passes BFCL's irrelevance rule but earns nothing here.
        """
        if result.sub_scores.get("no_call_gold"):
            return float(result.success and bool(result.sub_scores.get("explicit_no_call")))
        return float(result.success)

    # ------------------------------------------------------------ validator

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
        """Accept a generated task whose docs are well formed and whose gold call is consistent with them.

        The environment cannot execute a real API, so "recomputed" means: the gold answer is decoded,
        checked against the docs (function exists, required arguments present, no undeclared
        argument, types and enums as documented), re-rendered canonically, turned into a possible
        answer (given values, plus ``[default, ""]`` or ``[""]`` for optional arguments left out),
        and must pass the official checker against it. An answer with no call makes an irrelevance task.
        """
        if len(prompt) > MAX_PROMPT_CHARS or len(answer) > MAX_ANSWER_CHARS:
            return Validation(False, "too_long: prompt or answer over the limit")
        if parent is not None and prompt == parent.prompt:
            return Validation(False, "copy_of_parent")
        try:
            functions, messages = read_prompt(prompt)
            decoded = decode_calls(answer)
        except PromptError as err:
            return Validation(False, str(err))
        except DecodeError as err:
            return Validation(False, f"answer_parse_error: {err}")
        problem = _doc_problem(functions, decoded)
        if problem:
            return Validation(False, problem)
        category = (
            "irrelevance"
            if not decoded
            else "parallel_multiple"
            if len(decoded) >= 2
            else "multiple"
            if len(functions) >= 2
            else "simple"
        )
        possible = [_possible_call(call, functions) for call in decoded]
        if decoded:
            verdict = ast_verdict(functions, decoded, possible, category)
            if not verdict["valid"]:
                return Validation(False, f"answer_mismatch: {verdict['error_type']}")
        features = self._features(f"generated_{category}", functions, messages, len(decoded))
        expected = {"category": category, "bfcl_id": None, "possible_answer": possible}
        task = self._task(
            task_id,
            prompt,
            render_calls(decoded),
            expected,
            functions,
            features,
            split="generated",
            origin="generated",
            parent_id=parent.id if parent else None,
            epoch=epoch,
            generator=generator,
        )
        return Validation(True, "", task)

    # ------------------------------------------------------------ siblings

    def sibling_pairs(self, tasks: list[Task], rng: random.Random, n: int) -> list[tuple[Task, Task]]:
        """(source, sibling) pairs of real tasks: w.p. 0.5 the same category, else a level ±1 one when present."""
        if n > 0 and len(tasks) < 2:
            raise ValueError("sibling_pairs needs at least two tasks")
        by_category: dict[str, list[Task]] = defaultdict(list)
        by_level: dict[int, list[Task]] = defaultdict(list)
        for task in tasks:
            by_category[task.expected["category"]].append(task)
            by_level[task.level].append(task)
        pairs = []
        for _ in range(n):
            source = rng.choice(tasks)
            near = [t for d in (-1, 1) for t in by_level.get(source.level + d, [])]
            same = [t for t in by_category[source.expected["category"]] if t.id != source.id]
            pool = near if near and (rng.random() >= 0.5 or not same) else same
            pool = pool or [t for t in tasks if t.id != source.id]
            pairs.append((source, rng.choice(pool)))
        return pairs


# ---------------------------------------------------------------- validator helpers


def _doc_problem(functions: list[dict[str, Any]], decoded: list[dict[str, Any]]) -> str | None:
    """The first inconsistency of the decoded calls with the docs, as ``reason_code: detail``."""
    docs = {doc["name"]: doc for doc in functions}
    for call in decoded:
        ((name, args),) = call.items()
        if name not in docs:
            return f"unknown_function: {name}"
        params = docs[name]["parameters"]
        props = params["properties"]
        missing = [p for p in params.get("required", []) if p not in args]
        if missing:
            return f"missing_required: {name}.{missing[0]}"
        for arg, value in args.items():
            problem = _arg_problem(name, arg, value, props.get(arg))
            if problem:
                return problem
    return None


def _arg_problem(name: str, arg: str, value: Any, prop: dict[str, Any] | None) -> str | None:
    if prop is None:
        return f"unexpected_arg: {name}.{arg}"
    if not _type_ok(value, prop["type"]):
        return f"type_error: {name}.{arg} must be {prop['type']}"
    item_type = (prop.get("items") or {}).get("type")
    if prop["type"] in ("array", "tuple") and not all(_type_ok(v, item_type) for v in value):
        return f"type_error: {name}.{arg} items must be {item_type}"
    enum = prop.get("enum") or (prop.get("items") or {}).get("enum")
    values = value if prop["type"] in ("array", "tuple") else [value]
    if enum and any(v not in enum for v in values):
        return f"enum_error: {name}.{arg} must be in {enum[:8]}"
    return None


def _type_ok(value: Any, kind: str) -> bool:
    kinds = _PY_TYPES[kind]
    return isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool))


def _possible_call(call: dict[str, Any], functions: list[dict[str, Any]]) -> dict[str, Any]:
    """A BFCL possible answer accepting exactly this call (optional arguments may also be omitted)."""
    ((name, args),) = call.items()
    props = next(doc for doc in functions if doc["name"] == name)["parameters"]["properties"]
    allowed: dict[str, list[Any]] = {arg: [_allowed(value, props[arg])] for arg, value in args.items()}
    for param, prop in props.items():
        if param not in args:
            allowed[param] = [prop["default"], ""] if "default" in prop else [""]
    return {name: allowed}


def _allowed(value: Any, prop: dict[str, Any]) -> Any:
    """One allowed value in possible-answer form (dicts as ``{key: [value]}``)."""
    if prop["type"] == "dict" and isinstance(value, dict):
        return {k: [v] for k, v in value.items()}
    if prop["type"] == "array" and (prop.get("items") or {}).get("type") == "dict":
        return [{k: [v] for k, v in item.items()} if isinstance(item, dict) else item for item in value]
    if isinstance(value, tuple):
        return list(value)
    return value
