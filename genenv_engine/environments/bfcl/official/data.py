"""The real BFCL data from the pinned ``bfcl-eval`` wheel: package access, prompt rendering, task building.

Provides the lazy, stubbed import of the official checker modules (:func:`official`), the loader of
the real categories (:func:`load_items`, from the installed wheel through :mod:`importlib.resources`
or from a folder with the same layout), the prompt format with its strict reader
(:func:`render_prompt`, :func:`read_prompt`), the conversion of possible answers into canonical
gold calls (:func:`gold_calls`), and one entry of a category file as (prompt, answer)
(:func:`entry_pair`). Nothing here imports ``bfcl_eval`` at module import time, so the module loads
without the optional package.

Why the stub: ``bfcl_eval.constants.model_config`` imports every provider SDK (150 packages with
``pip install bfcl-eval``), while the AST checker only reads ``MODEL_CONFIG_MAPPING[model].underscore_to_dot``.
A stand-in module whose mapping answers ``underscore_to_dot=False`` for every model goes into
:data:`sys.modules` before the checker is imported; then ``ast_checker`` and the multi-turn
sub-checkers run on the standard library alone.

Prompt format (one line each; JSON strings keep every message on its line)::

    Functions you may call (JSON):
    [{"name": "calculate_triangle_area", "description": "...", "parameters": {...}}]
    Answer with the call(s) only, as name(arg=value, ...); join several calls with "; "; answer [] if no function fits.
    user: "Find the area of a triangle with a base of 10 units and height of 5 units."

Earlier turns of a multi-turn item appear as ``user:`` / ``assistant:`` lines before the last
``user:`` line; ``system:`` lines carry the item's system messages. Every ``=>`` inside JSON is
written ``=\\u003e`` so a prompt never contains the simulator separator.

>>> p = render_prompt([{"name": "f", "parameters": {"type": "dict", "properties": {}, "required": []}}],
...                   [{"role": "user", "content": "Say a => b"}])
>>> " => " in p, read_prompt(p)[1]
(False, [{'role': 'user', 'content': 'Say a => b'}])
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import re
import sys
import types
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

PINNED_VERSION = "2026.3.23"
"""The bfcl-eval release this environment is built and tested against (data and answers change)."""
INSTALL_HINT = f"run `make setup-bfcl` (pip install --no-deps bfcl-eval=={PINNED_VERSION})"
AST_CATEGORIES = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
)
IRRELEVANCE_CATEGORIES = ("irrelevance", "live_irrelevance")
MULTI_TURN_CATEGORIES = ("multi_turn_base",)
CATEGORIES = AST_CATEGORIES + IRRELEVANCE_CATEGORIES + MULTI_TURN_CATEGORIES
"""Categories loaded; web_search (live URLs), memory (embedding models), Java/JS (tree_sitter types),
format_sensitivity and the other multi-turn variants are left out (see the environment docstring)."""
TYPES = ("string", "integer", "float", "boolean", "array", "tuple", "dict", "any")
"""Parameter types the official Python AST checker knows."""
HEADER = "Functions you may call (JSON):"
INSTRUCTION = (
    'Answer with the call(s) only, as name(arg=value, ...); join several calls with "; "; '
    "answer [] if no function fits."
)
ROLES = ("system", "user", "assistant")
MAX_FUNCTIONS = 64
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_STUB_NAME = "bfcl_eval.constants.model_config"


class BfclUnavailable(RuntimeError):
    """bfcl-eval is not installed (or not the pinned version)."""


class PromptError(ValueError):
    """A prompt outside the rendering; ``str(err)`` is a short machine-readable reason."""


# ---------------------------------------------------------------- the package (lazy)


class _AnyModelConfig(dict):
    """Stub ``MODEL_CONFIG_MAPPING``: every model name keeps dotted function names as they are."""

    def __missing__(self, key: str) -> types.SimpleNamespace:
        return types.SimpleNamespace(model_name=key, underscore_to_dot=False)


def require_package() -> str:
    """Return the installed bfcl-eval version; raise :class:`BfclUnavailable` unless it is the pinned one."""
    if importlib.util.find_spec("bfcl_eval") is None:
        raise BfclUnavailable(f"bfcl_official needs the optional package bfcl-eval: {INSTALL_HINT}")
    version = importlib.metadata.version("bfcl-eval")
    if version != PINNED_VERSION:
        raise BfclUnavailable(f"bfcl_official is pinned to bfcl-eval {PINNED_VERSION}, found {version}: {INSTALL_HINT}")
    return version


@cache
def official(module: str) -> types.ModuleType:
    """Import an official checker module (``ast`` or ``multi_turn``) behind the provider-config stub."""
    require_package()
    if _STUB_NAME not in sys.modules:
        stub = types.ModuleType(_STUB_NAME, "genenv stand-in: the checker needs only MODEL_CONFIG_MAPPING.")
        stub.MODEL_CONFIG_MAPPING = _AnyModelConfig()  # type: ignore[attr-defined]
        sys.modules[_STUB_NAME] = stub
    names = {
        "ast": "bfcl_eval.eval_checker.ast_eval.ast_checker",
        "multi_turn": "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker",
        "backends": "bfcl_eval.constants.executable_backend_config",
        "enums": "bfcl_eval.constants.enums",
    }
    return importlib.import_module(names[module])


def package_data_dir() -> Path:
    """The ``data`` folder inside the installed wheel."""
    require_package()
    import importlib.resources

    return Path(str(importlib.resources.files("bfcl_eval") / "data"))


# ---------------------------------------------------------------- loading


@dataclass(frozen=True)
class Item:
    """One real BFCL entry with its ground truth."""

    category: str
    id: str
    question: list[list[dict[str, str]]]
    functions: list[dict[str, Any]]
    ground_truth: list[Any]
    extra: dict[str, Any] = field(default_factory=dict)
    """Multi-turn only: ``initial_config``, ``involved_classes``."""


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """JSON objects, one per line; a bad line raises ValueError naming the file and line."""
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{number}: not JSON ({err.msg})") from None
            if not isinstance(row, dict) or not isinstance(row.get("id"), str):
                raise ValueError(f"{path}:{number}: expected an object with a string 'id'")
            rows.append(row)
    return rows


@lru_cache(maxsize=4)
def load_items(data_dir: str | None = None) -> tuple[Item, ...]:
    """Every item of :data:`CATEGORIES` from the wheel (or ``data_dir`` with the wheel's layout)."""
    root = Path(data_dir) if data_dir else package_data_dir()
    items: list[Item] = []
    for category in CATEGORIES:
        path = root / f"BFCL_v4_{category}.json"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: missing BFCL category file")
        entries = read_jsonl(path)
        answers = _answers(root, category, entries)
        docs = _multi_turn_docs(root) if category in MULTI_TURN_CATEGORIES else {}
        items += [_item(category, entry, answers.get(entry["id"], []), docs, path) for entry in entries]
    return tuple(items)


def _answers(root: Path, category: str, entries: list[dict[str, Any]]) -> dict[str, list[Any]]:
    if category in IRRELEVANCE_CATEGORIES:
        return {}
    path = root / "possible_answer" / f"BFCL_v4_{category}.json"
    answers = {row["id"]: row.get("ground_truth") for row in read_jsonl(path)}
    missing = [e["id"] for e in entries if not isinstance(answers.get(e["id"]), list)]
    if missing:
        raise ValueError(f"{path}: no list 'ground_truth' for {missing[0]} ({len(missing)} entries)")
    return answers  # type: ignore[return-value]


def _multi_turn_docs(root: Path) -> dict[str, list[dict[str, Any]]]:
    mapping = official("backends").MULTI_TURN_FUNC_DOC_FILE_MAPPING
    return {
        cls: read_jsonl_docs(root / "multi_turn_func_doc" / name)
        for cls, name in mapping.items()
        if (root / "multi_turn_func_doc" / name).is_file()
    }


def read_jsonl_docs(path: Path) -> list[dict[str, Any]]:
    """Function docs, one JSON object per line."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _item(
    category: str, entry: dict[str, Any], truth: list[Any], docs: dict[str, list[dict[str, Any]]], path: Path
) -> Item:
    question = entry.get("question")
    if not isinstance(question, list) or not all(isinstance(turn, list) for turn in question):
        raise ValueError(f"{path}: {entry['id']}: 'question' must be a list of message lists")
    if category not in MULTI_TURN_CATEGORIES:
        return Item(category, entry["id"], question, entry.get("function") or [], truth)
    excluded = set(entry.get("excluded_function") or [])
    functions = [doc for cls in entry["involved_classes"] for doc in docs.get(cls, []) if doc["name"] not in excluded]
    extra = {"initial_config": entry.get("initial_config") or {}, "involved_classes": entry["involved_classes"]}
    return Item(category, entry["id"], question, functions, truth, extra)


def category_of(item_id: str) -> str:
    """The category of a BFCL id (``simple_python_0`` -> ``simple_python``, ``live_simple_0-0-0`` ->
    ``live_simple``).

    >>> category_of("live_parallel_multiple_3-1-0"), category_of("irrelevance_12")
    ('live_parallel_multiple', 'irrelevance')
    """
    return re.sub(r"_\d+(-\d+)*$", "", item_id)


def entry_pair(entry: dict[str, Any], truth: list[Any] | None) -> tuple[str, str]:
    """(prompt, gold answer) of one single-turn BFCL entry with its ``possible_answer`` ground truth, as the
    environment renders its own items (irrelevance entries need no truth: the gold is no call); ValueError says
    why an entry does not map (multi-turn, no ground truth, a malformed field)."""
    from genenv_engine.environments.bfcl.official.calls import render_calls

    category = category_of(entry["id"])
    if category.startswith("multi_turn") or "involved_classes" in entry:
        raise ValueError(
            "multi-turn entries do not map: their turns are scored on BFCL's stateful backends from "
            "initial_config and their function docs are not in the row (bfcl_official loads them "
            "from the wheel itself)"
        )
    if category in IRRELEVANCE_CATEGORIES:
        truth = []
    elif not isinstance(truth, list) or not truth or not all(isinstance(c, dict) and len(c) == 1 for c in truth):
        raise ValueError(
            "no ground truth: BFCL keeps it in possible_answer/<the same file name> beside the data "
            "file (put that folder beside the imported file, or give the row a 'ground_truth' list)"
        )
    functions = entry.get("function")
    if not isinstance(functions, list):
        raise ValueError("'function' must be a list of function docs")
    item = _item(category, entry, truth, {}, Path(entry["id"]))
    if len(item.question) != 1:
        raise ValueError("a single-turn entry has one message list in 'question'")
    return render_prompt(item.functions, item_messages(item)), render_calls(gold_calls(truth, item.functions))


# ---------------------------------------------------------------- prompt rendering and reading


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False).replace("=>", "=\\u003e")


def render_prompt(functions: list[dict[str, Any]], messages: list[dict[str, str]]) -> str:
    """The agent prompt: header, function docs as one JSON line, the instruction, one line per message."""
    lines = [HEADER, _json(functions), INSTRUCTION]
    lines += [f"{m['role']}: {_json(m['content'])}" for m in messages]
    return "\n".join(lines)


def read_prompt(prompt: str) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Strictly read a prompt back into (function docs, messages); raise :class:`PromptError`.

    >>> read_prompt("Functions: []")
    Traceback (most recent call last):
    ...
    genenv_engine.environments.bfcl.official.data.PromptError: bad_format: expected header, docs, instruction and message lines
    """  # noqa: E501
    lines = prompt.split("\n")
    if len(lines) < 4 or lines[0] != HEADER or lines[2] != INSTRUCTION:
        raise PromptError("bad_format: expected header, docs, instruction and message lines")
    try:
        functions = json.loads(lines[1])
    except json.JSONDecodeError:
        raise PromptError("bad_json: the function docs line is not JSON") from None
    check_function_docs(functions)
    messages = [_read_message(number, line) for number, line in enumerate(lines[3:], 4)]
    if messages[-1]["role"] != "user":
        raise PromptError("no_user_message: the last message must be from the user")
    return functions, messages


def _read_message(number: int, line: str) -> dict[str, str]:
    role, sep, text = line.partition(": ")
    if not sep or role not in ROLES:
        raise PromptError(f"bad_message: line {number} must be '<system|user|assistant>: <JSON string>'")
    try:
        content = json.loads(text)
    except json.JSONDecodeError:
        content = None
    if not isinstance(content, str) or not content.strip():
        raise PromptError(f"bad_message: line {number} content must be a non-empty JSON string")
    return {"role": role, "content": content}


def check_function_docs(functions: Any) -> None:
    """Require BFCL-shaped docs the official checker can use; raise :class:`PromptError` with a reason."""
    if not isinstance(functions, list) or len(functions) > MAX_FUNCTIONS:
        raise PromptError(f"bad_function_doc: expected a list of at most {MAX_FUNCTIONS} function docs")
    names = set()
    for doc in functions:
        name = doc.get("name") if isinstance(doc, dict) else None
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            raise PromptError("bad_function_doc: each doc needs a 'name' that is a (dotted) identifier")
        if name in names:
            raise PromptError(f"bad_function_doc: duplicate function {name}")
        names.add(name)
        _check_parameters(name, doc.get("parameters"))


def _check_parameters(name: str, params: Any) -> None:
    if not isinstance(params, dict) or params.get("type") != "dict" or not isinstance(params.get("properties"), dict):
        raise PromptError(f"bad_function_doc: {name}: parameters must be {{'type': 'dict', 'properties': {{...}}}}")
    props = params["properties"]
    required = params.get("required")
    if not isinstance(required, list) or any(r not in props for r in required):
        raise PromptError(f"bad_function_doc: {name}: 'required' must be a list of declared parameters")
    for pname, prop in props.items():
        kind = prop.get("type") if isinstance(prop, dict) else None
        if kind not in TYPES:
            raise PromptError(f"bad_function_doc: {name}.{pname}: type must be one of {'/'.join(TYPES)}")
        if kind in ("array", "tuple") and (prop.get("items") or {}).get("type") not in TYPES:
            raise PromptError(f"bad_function_doc: {name}.{pname}: {kind} needs items.type")
        if "enum" in prop and not isinstance(prop["enum"], list):
            raise PromptError(f"bad_function_doc: {name}.{pname}: enum must be a list")


def item_messages(item: Item, turn: int = 0, history: list[str] | None = None) -> list[dict[str, str]]:
    """The messages up to ``turn``: earlier user turns each followed by the gold calls in ``history``."""
    messages: list[dict[str, str]] = []
    for t in range(turn + 1):
        messages += [{"role": m["role"], "content": m["content"]} for m in item.question[t]]
        if t < turn:
            messages.append({"role": "assistant", "content": (history or [])[t]})
    return messages


# ---------------------------------------------------------------- gold calls from possible answers


def gold_calls(
    truth: list[dict[str, dict[str, list[Any]]]], functions: list[dict[str, Any]]
) -> list[dict[str, dict[str, Any]]]:
    """One canonical call set from BFCL possible answers: the first allowed value of each argument.

    An argument is left out when ``""`` (may be omitted) is allowed and the doc does not require it.
    Dict arguments pick a value per key the same way; lists of dicts per element.

    >>> docs = [{"name": "area", "parameters": {"type": "dict", "required": ["b"],
    ...          "properties": {"b": {"type": "integer"}, "unit": {"type": "string"}}}}]
    >>> gold_calls([{"area": {"b": [10], "unit": ["units", ""]}}], docs)
    [{'area': {'b': 10}}]
    """
    by_name = {doc["name"]: doc for doc in functions}
    calls = []
    for call in truth:
        ((name, allowed_by_arg),) = call.items()
        params = by_name.get(name, {}).get("parameters", {})
        props, required = params.get("properties", {}), set(params.get("required", []))
        args = {}
        for arg, allowed in allowed_by_arg.items():
            if "" in allowed and arg not in required:
                continue
            args[arg] = _pick(next((a for a in allowed if a != ""), ""), props.get(arg, {}))
        calls.append({name: args})
    return calls


def _pick(value: Any, prop: dict[str, Any]) -> Any:
    kind = prop.get("type")
    if kind == "dict" and isinstance(value, dict):
        return _pick_dict(value)
    if kind == "array" and (prop.get("items") or {}).get("type") == "dict" and isinstance(value, list):
        return [_pick_dict(v) if isinstance(v, dict) else v for v in value]
    return value


def _pick_dict(allowed_by_key: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, allowed in allowed_by_key.items():
        if not isinstance(allowed, list):
            out[key] = allowed
        elif "" not in allowed:
            out[key] = allowed[0]
    return out
