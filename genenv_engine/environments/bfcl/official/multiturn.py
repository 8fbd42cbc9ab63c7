"""BFCL multi-turn items scored turn by turn on the official backends, without eval.

The official multi-turn checker runs model and gold calls by ``eval`` of the call strings on BFCL's
stateful pure-Python backends (file system, messaging, trading, travel, vehicle, ...), then compares
backend states and execution results after each turn. genenv never evaluates generated or loaded
text, so this module keeps the official backends and the official comparison functions
(``state_checker`` and ``response_checker`` of ``multi_turn_checker``) but replaces the ``eval``
with a dispatcher: a call is parsed with :mod:`ast` (literal arguments only) and run as
``getattr(instance, method)(*args, **kwargs)`` on the public methods of the item's backend
instances, errors becoming ``"Error during execution: ..."`` as in BFCL.

Turn ``t`` of an item is one step task (the paper scores BFCL turn by turn): the backends load the
item's ``initial_config``, the gold calls of turns ``0..t-1`` are replayed, then the response and
the gold calls of turn ``t`` each run on a copy. Success needs equal public states and every gold
result among the results so far (earlier gold turns plus this response). A turn whose gold is empty
must produce no call. Error types are BFCL's: ``multi_turn:empty_turn_model_response``,
``multi_turn:instance_state_mismatch``, ``multi_turn:execution_response_mismatch``,
``multi_turn:irrelevance_error:decoder_success``.
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import json
from typing import Any

from genenv_engine.environments.bfcl.official.calls import DecodeError, call_name, literal_args, render_call
from genenv_engine.environments.bfcl.official.data import official

Call = tuple[str, list[Any], dict[str, Any]]
"""A call to run: method name, positional and keyword arguments."""


def parse_gold(call_string: str) -> Call:
    """A gold call string (``"sort('a.txt')"``) as a :data:`Call`; its arguments must be literals.

    >>> parse_gold("mv(source='a', destination='b')")
    ('mv', [], {'source': 'a', 'destination': 'b'})
    """
    node = ast.parse(call_string, mode="eval").body
    if not isinstance(node, ast.Call):
        raise DecodeError(f"not a call: {call_string[:40]!r}")
    args, kwargs = literal_args(node)
    return call_name(node.func), args, kwargs


def from_decoded(decoded: list[dict[str, dict[str, Any]]]) -> list[Call]:
    """Decoded response calls ``[{name: {arg: value}}]`` as :data:`Call` tuples (keywords only)."""
    return [(name, [], dict(args)) for call in decoded for name, args in call.items()]


def fresh_instances(initial_config: dict[str, Any], involved_classes: list[str]) -> dict[str, Any]:
    """One backend instance per involved class, loaded with the item's initial configuration."""
    backends = official("backends")
    instances = {}
    for cls_name in involved_classes:
        module = importlib.import_module(backends.CLASS_FILE_PATH_MAPPING[cls_name])
        instance = getattr(module, cls_name)()
        if cls_name not in backends.STATELESS_CLASSES:
            instance._load_scenario(copy.deepcopy(initial_config.get(cls_name, {})), long_context=False)
        instances[cls_name] = instance
    return instances


def _methods(instances: dict[str, Any]) -> dict[str, Any]:
    table = {}
    for instance in instances.values():
        for name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
            if not name.startswith("_"):
                table[name] = method
    return table


def execute(instances: dict[str, Any], calls: list[Call]) -> list[str]:
    """Run calls on the instances' public methods; results as BFCL records them (str, JSON for dicts)."""
    table = _methods(instances)
    results = []
    for name, args, kwargs in calls:
        try:
            if name not in table:
                raise NameError(f"name '{name}' is not defined")
            value = table[name](*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - BFCL records any backend error as a result string
            results.append(f"Error during execution: {err}")
            continue
        results.append(_result_text(value))
    return results


def _result_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


def state_before(expected: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Backends after replaying the gold turns before ``expected['turn']``, and those turns' results."""
    instances = fresh_instances(expected["initial_config"], expected["involved_classes"])
    results: list[str] = []
    for turn in expected["ground_truth"][: expected["turn"]]:
        results += execute(instances, [parse_gold(c) for c in turn])
    return instances, results


def keyword_answer(expected: dict[str, Any], turn_calls: list[str]) -> list[dict[str, dict[str, Any]]]:
    """The gold calls of the turn in keyword form (positional arguments bound to parameter names)."""
    table = _methods(fresh_instances(expected["initial_config"], expected["involved_classes"]))
    calls = []
    for name, args, kwargs in map(parse_gold, turn_calls):
        bound = inspect.signature(table[name]).bind(*args, **kwargs)
        calls.append({name: dict(bound.arguments)})
    return calls


def render_turn(calls: list[dict[str, dict[str, Any]]]) -> str:
    """Canonical text of one turn's calls (``[]`` for an empty turn)."""
    return "; ".join(render_call(n, a) for c in calls for n, a in c.items()) or "[]"


def check_turn(expected: dict[str, Any], decoded: list[dict[str, dict[str, Any]]]) -> tuple[bool, str | None]:
    """The official per-turn verdict for a decoded response: (valid, BFCL error type or None)."""
    gold_turn = expected["ground_truth"][expected["turn"]]
    if not gold_turn:
        return (True, None) if not decoded else (False, "multi_turn:irrelevance_error:decoder_success")
    if not decoded:
        return False, "multi_turn:empty_turn_model_response"
    before, earlier = state_before(expected)
    model, gold = copy.deepcopy(before), copy.deepcopy(before)
    model_results = execute(model, from_decoded(decoded))
    gold_results = execute(gold, [parse_gold(c) for c in gold_turn])
    checker = official("multi_turn")
    verdict = checker.state_checker(model, gold)
    if verdict["valid"]:
        verdict = checker.response_checker(earlier + model_results, gold_results, expected["turn"])
    return bool(verdict["valid"]), None if verdict["valid"] else verdict["error_type"]
