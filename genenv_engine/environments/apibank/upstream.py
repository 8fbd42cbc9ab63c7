"""Loader for official API-Bank dialogues (the upstream JSONL format) as held-out step tasks.

API-Bank's ``lv1-lv2-samples`` folders hold one dialogue per ``*.jsonl`` file, one turn per line::

    {"role": "User", "text": "Can you calculate (5+6)*3 for me?"}
    {"role": "API", "api_name": "Calculator", "param_dict": {"formula": "(5+6)*3"},
     "result": {"api_name": "Calculator", "input": {"formula": "(5+6)*3"}, "output": 33.0, "exception": null}}
    {"role": "AI", "text": "The result is 33."}

:func:`load_upstream` reads every ``*.jsonl`` under a folder (sorted, recursively) and turns each
``API`` turn into one step task, as GenEnv does: the prompt is the dialogue so far in the mini's
compact rendering (``APIs: <signatures> | U: .. | AI: .. | [Call(..)] | R: <output json>``), the
gold is that API call. Dialogues that use ``ToolSearcher`` (API-Bank level 2) list only
``ToolSearcher``. The upstream APIs are not mocked here, so these tasks use the checker's
``upstream`` mode (loose argument comparison; Calculator executed). Levels follow the mini's
ladder: ToolSearcher dialogues are L3, a step after an earlier non-search call is L4, a first call
with two or more arguments is L3, others L1/L2. Bad input raises :class:`UpstreamFormatError`
naming the file and line. :func:`read_turn` and :func:`step_task` are the per-turn steps, as a task import
uses them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from genenv_engine.core.records import Task
from genenv_engine.environments.apibank.dialogue import HEAD, TURN_SEP, infer_level
from genenv_engine.environments.apibank.syntax import render_call

ROLES = ("User", "AI", "API")


class UpstreamFormatError(ValueError):
    """A file under the data folder is not in API-Bank's dialogue JSONL format."""


def load_upstream(data_dir: str | Path) -> list[Task]:
    """All API calls of all dialogues under ``data_dir`` as ``origin="official"`` held-out tasks."""
    root = Path(data_dir)
    if not root.is_dir():
        raise UpstreamFormatError(f"{root}: not a folder")
    files = sorted(root.rglob("*.jsonl"))
    if not files:
        raise UpstreamFormatError(f"{root}: no *.jsonl dialogue files found")
    tasks: list[Task] = []
    for path in files:
        turns = read_dialogue(path)
        for index, turn in enumerate(turns):
            if turn["role"] == "API":
                tasks.append(step_task(turns, index, path.relative_to(root).as_posix(), len(tasks)))
    if not tasks:
        raise UpstreamFormatError(f"{root}: the dialogue files hold no API calls")
    return tasks


def read_dialogue(path: Path) -> list[dict[str, Any]]:
    """The turns of one dialogue file, checked line by line (blank lines are skipped)."""
    turns = []
    with path.open(encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, 1):
            if line.strip():
                turns.append(_read_turn(line, f"{path}:{lineno}") | {"line": lineno})
    return turns


def _read_turn(line: str, where: str) -> dict[str, Any]:
    try:
        turn = json.loads(line)
    except json.JSONDecodeError as err:
        raise UpstreamFormatError(f"{where}: invalid JSON ({err.msg})") from None
    return read_turn(turn, where)


def read_turn(turn: Any, where: str) -> dict[str, Any]:
    """One parsed dialogue turn, checked (``role`` User/AI with ``text``, or API with ``api_name`` and
    ``param_dict``) and reduced to what the prompt renders; :class:`UpstreamFormatError` says what is wrong."""
    if not isinstance(turn, dict) or turn.get("role") not in ROLES:
        raise UpstreamFormatError(f"{where}: expected an object with role one of {', '.join(ROLES)}")
    if turn["role"] != "API":
        if not isinstance(turn.get("text"), str):
            raise UpstreamFormatError(f"{where}: a {turn['role']} turn needs a string 'text'")
        return {"role": turn["role"], "text": " ".join(turn["text"].split())}
    name, params = turn.get("api_name"), turn.get("param_dict")
    if not isinstance(name, str) or not name.isidentifier():
        raise UpstreamFormatError(f"{where}: an API turn needs an identifier 'api_name'")
    if not isinstance(params, dict) or not all(isinstance(k, str) and k.isidentifier() for k in params):
        raise UpstreamFormatError(f"{where}: an API turn needs a 'param_dict' object with identifier keys")
    result = turn.get("result") or {}
    if not isinstance(result, dict):
        raise UpstreamFormatError(f"{where}: 'result' must be an object")
    return {
        "role": "API",
        "api_name": name,
        "param_dict": params,
        "output": result.get("output"),
        "exception": result.get("exception"),
    }


def _signature(name: str, params: dict[str, Any]) -> str:
    return f"{name}({','.join(params)})"


def _render_turn(turn: dict[str, Any]) -> list[str]:
    if turn["role"] != "API":
        return [f"{'U' if turn['role'] == 'User' else 'AI'}: {turn['text']}"]
    if turn["exception"]:
        result = f"error: {turn['exception']}"
    else:
        result = json.dumps(turn["output"], ensure_ascii=False, separators=(",", ":"), default=str)
    return [f"[{render_call(turn['api_name'], turn['param_dict'])}]", f"R: {result}"]


def step_task(turns: list[dict[str, Any]], index: int, file: str, number: int) -> Task:
    """The step task of the API turn ``turns[index]`` (turns as :func:`read_turn` gives them, each with its
    ``line``): the dialogue before it as the prompt, that call as the gold."""
    gold = turns[index]
    calls = [t for t in turns if t["role"] == "API"]
    searching = any(t["api_name"] == "ToolSearcher" for t in calls)
    listed = {"ToolSearcher": next(t for t in calls if t["api_name"] == "ToolSearcher")} if searching else {}
    if not searching:
        for t in calls:
            listed.setdefault(t["api_name"], t)
    head = HEAD + " ".join(_signature(n, t["param_dict"]) for n, t in listed.items())
    prompt = TURN_SEP.join([head] + [text for t in turns[:index] for text in _render_turn(t)])
    name, params = gold["api_name"], gold["param_dict"]
    earlier = [t for t in turns[:index] if t["role"] == "API"]
    features = {
        "api": name,
        "target": name,
        "n_apis": len(listed),
        "n_args": len(params),
        "synonym": False,
        "nl_value": False,
        "multi_turn": "ref" if any(t["api_name"] != "ToolSearcher" for t in earlier) else "none",
        "retrieval": "search" if name == "ToolSearcher" else "result" if searching else "none",
        "n_turns": prompt.count(TURN_SEP),
        "file": file,
        "line": gold["line"],
    }
    expected = {
        "mode": "upstream",
        "api": name,
        "args": params,
        "available": sorted(set(listed) | {t["api_name"] for t in earlier} | {name}),
        "output": gold["output"],
        "exception": gold["exception"],
        "file": file,
        "line": gold["line"],
    }
    tools = [
        {
            "name": n,
            "description": "",
            "parameters": {
                "type": "object",
                "properties": {k: {"type": _json_type(v)} for k, v in t["param_dict"].items()},
                "required": list(t["param_dict"]),
            },
        }
        for n, t in listed.items()
    ]
    return Task(
        id=f"apibank/heldout/{number:05d}",
        benchmark="apibank",
        prompt=prompt,
        answer=f"API-Request: [{render_call(name, params)}]",
        expected=expected,
        tools=tools,
        difficulty={"level": infer_level(features), "features": features},
        checker="apibank_exec",
        granularity="step",
        split="heldout",
        origin="official",
    )


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), "null")
