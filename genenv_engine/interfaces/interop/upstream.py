"""Rows of a benchmark's upstream files as import candidates: (prompt, answer) pairs, or why a row does not map.

`genenv_engine.interfaces.interop.import_tasks` reads rows in genenv's own layouts itself; a row it does not recognise
and :func:`claims` places in the benchmark's upstream layout comes here. Each adapter converts with the benchmark's
own upstream reader (the conversion its ``data_dir`` loader uses), and the environment's validator then judges
every candidate as it judges a hand edit:

- ``alfworld``, ``alfworld_textworld``: ``traj_data.json`` objects, one step per expert action;
- ``apibank``: one dialogue file, a turn a row; a step per ``API`` turn, the dialogue before it as the prompt;
- ``travelplanner``: query rows whose cities and ``annotated_plan`` are the mini's sandbox's, a step per plan field;
- ``bfcl_official``: ``BFCL_v4_<category>.json`` entries, the gold from the row's ``ground_truth`` or from
  ``possible_answer/<the same name>`` beside the file (irrelevance entries: no call);
- ``bfcl`` and ``bamboogle``: read, then rejected with the reason they cannot map (:data:`UNMAPPABLE`).

Row text is parsed as JSON or as Python literals by walking the syntax tree; nothing in a row is ever run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Candidate:
    """One task an import may add: the file's row (1-based) it comes from, and its prompt and answer, or the
    ``reason`` it cannot be imported; ``label`` names the step of a multi-step row."""

    row: int
    prompt: str = ""
    answer: str = ""
    reason: str = ""
    label: str = ""
    own_id: str | None = None
    """A genenv export's own task id (``extra_info.id``), kept where the session has none of that id."""


UNMAPPABLE = {
    "bfcl": "BFCL items do not map to bfcl (the mini): its tasks are compact queries over its own function catalog "
    "('F: <signatures> | Q: <query>'), while a BFCL item brings its own functions and a free-text "
    "question; import BFCL files into a bfcl_official session",
    "bamboogle": "Bamboogle rows do not map to bamboogle (the mini): its task is one step of a search over the "
    "mini's invented knowledge base (the question and the passages found so far -> the next "
    "action, a search first), while an upstream row is a real-world question with only its final "
    "answer: no passages, no search steps, no knowledge-base entities",
}
"""Why each benchmark whose upstream rows cannot be converted rejects them."""
_FLAT_APIBANK = (
    "API-Bank's flattened test rows (instruction/input/expected_output) and level-3 rows do not map: "
    "their API docs and dialogue are one free-text prompt; import the dialogue files "
    "(lv1-lv2-samples/*/*.jsonl, a turn a row) instead"
)
_MALFORMED = (TypeError, KeyError, AttributeError, IndexError, RecursionError)
"""Errors an upstream reader may raise on a hostile row beside its own ValueError."""
Pairs = list[tuple[str, str, str]]
"""(label, prompt, answer) of the steps one upstream row gives."""


def claims(benchmark: str, row: dict[str, Any]) -> bool:
    """Whether ``row`` is in ``benchmark``'s upstream layout (not veRL's ``reward_model`` nor a plain
    ``prompt`` string, and holding a key of the upstream rows)."""
    keys = _KEYS.get(benchmark)
    if not keys or "reward_model" in row or isinstance(row.get("prompt"), str):
        return False
    return bool(keys & {str(k).lower() for k in row})


def candidates(benchmark: str, rows: list[tuple[int, dict[str, Any]]], path: Path) -> list[Candidate]:
    """The candidates of the upstream ``rows`` (numbered as in the file) of ``path``, in row order."""
    if benchmark == "apibank":
        return _dialogue(rows)
    read = _ROW_READERS[benchmark]
    context = _bfcl_answers(path) if benchmark == "bfcl_official" else {}
    out = []
    for n, row in rows:
        try:
            pairs = read(row, context)
        except ValueError as err:
            out.append(Candidate(n, reason=str(err)))
            continue
        except _MALFORMED as err:
            out.append(Candidate(n, reason=f"malformed row ({type(err).__name__}: {err})"))
            continue
        out += [Candidate(n, prompt, answer, label=label) for label, prompt, answer in pairs]
    return out


# ---------------------------------------------------------------- one row at a time


def _alfworld(row: dict[str, Any], _: dict[str, Any]) -> Pairs:
    from genenv_engine.environments.alfworld.upstream import SkipTrial, trial_pairs

    try:
        pairs = trial_pairs(row)
    except SkipTrial as why:
        raise ValueError(f"the trial does not map: {why}") from None
    return [(f"step {k + 1} of {len(pairs)}: ", p, a) for k, (p, a) in enumerate(pairs)]


def _travelplanner(row: dict[str, Any], _: dict[str, Any]) -> Pairs:
    """A step per plan field of a query row whose cities and ``annotated_plan`` entities are the mini's sandbox's."""
    from genenv_engine.environments.travelplanner.db import sandbox
    from genenv_engine.environments.travelplanner.formats import parse_plan, plan_codes, query_from_upstream
    from genenv_engine.environments.travelplanner.mini import render_prompt
    from genenv_engine.environments.travelplanner.upstream import read_row

    query, plan = read_row(row)
    db = sandbox()
    parsed = query_from_upstream(query, db)
    for name, code in ((query["org"], parsed.org), (query["dest"], parsed.dest)):
        if code not in db.cities and code not in db.regions:
            cities = ", ".join(sorted(c.name for c in db.cities.values()))
            regions = ", ".join(sorted(r[0] for r in db.regions.values()))
            raise ValueError(
                f"{name!r} is not a city or region of the mini's sandbox ({cities}; regions {regions}): "
                "travelplanner tasks are plan steps over that synthetic sandbox, and the real "
                "TravelPlanner database is not supported"
            )
    if plan is None:
        raise ValueError(
            "no annotated_plan: a travelplanner task is one step of a plan, its gold that step's "
            "field (of the upstream splits only train carries plans)"
        )
    codes = plan_codes(parsed, parse_plan(plan, parsed, db))
    return [
        (f"step {k + 1} of {len(codes)}: ", render_prompt(parsed, tuple(codes[:k])), code)
        for k, code in enumerate(codes)
    ]


def _bfcl_official(row: dict[str, Any], answers: dict[str, Any]) -> Pairs:
    from genenv_engine.environments.bfcl.official.data import entry_pair

    if not isinstance(row.get("id"), str) or not isinstance(row.get("question"), list):
        raise ValueError("not a BFCL entry: expected a string 'id' and a 'question' list")
    prompt, answer = entry_pair(row, row["ground_truth"] if "ground_truth" in row else answers.get(row["id"]))
    return [("", prompt, answer)]


def _bfcl_answers(path: Path) -> dict[str, Any]:
    """The ground truths of ``possible_answer/<name>`` beside a BFCL category file (none when it is absent)."""
    from genenv_engine.environments.bfcl.official.data import read_jsonl

    beside = path.parent / "possible_answer" / path.name
    return {r["id"]: r.get("ground_truth") for r in read_jsonl(beside)} if beside.is_file() else {}


def _unmappable(benchmark: str) -> Callable[[dict[str, Any], dict[str, Any]], Pairs]:
    def read(row: dict[str, Any], _: dict[str, Any]) -> Pairs:
        if benchmark == "bamboogle":
            from genenv_engine.environments.bamboogle.upstream import read_pair

            read_pair(row, "Bamboogle row")  # a malformed row is reported as such
        raise ValueError(UNMAPPABLE[benchmark])

    return read


# ---------------------------------------------------------------- API-Bank: the rows are one dialogue


def _dialogue(rows: list[tuple[int, dict[str, Any]]]) -> list[Candidate]:
    """A step per API turn of the dialogue the rows make, converted as `load_upstream` converts a dialogue file
    (all its turns read first); the dialogue ends at a malformed turn, and the calls after it are rejected."""
    from genenv_engine.environments.apibank.upstream import read_turn, step_task

    out, turns, broken = [], [], 0
    for n, row in rows:
        if {"expected_output", "apis"} & set(row):
            out.append(Candidate(n, reason=_FLAT_APIBANK))
            continue
        try:
            turn = read_turn(row, "API-Bank turn") | {"line": n}
        except ValueError as err:
            out.append(Candidate(n, reason=str(err)))
            broken = broken or n
            continue
        if not broken:
            turns.append(turn)
        elif turn["role"] == "API":
            out.append(Candidate(n, reason=f"the dialogue is broken at row {broken}"))
    for index, turn in enumerate(turns):
        if turn["role"] != "API":
            continue
        try:
            task = step_task(turns, index, "import", 0)
        except (ValueError, *_MALFORMED) as err:
            out.append(Candidate(turn["line"], reason=f"malformed API turn ({type(err).__name__}: {err})"))
            continue
        out.append(Candidate(turn["line"], task.prompt, task.answer))
    return sorted(out, key=lambda c: c.row)


_KEYS: dict[str, set[str]] = {
    "alfworld": {"task_type", "pddl_params", "plan"},
    "alfworld_textworld": {"task_type", "pddl_params", "plan"},
    "apibank": {"role", "expected_output", "apis"},
    "bamboogle": {"question", "answer"},
    "travelplanner": {"query", "org", "dest", "annotated_plan"},
    "bfcl": {"question", "function", "ground_truth"},
    "bfcl_official": {"question", "function", "ground_truth"},
}
"""Keys (lower-case) that mark a row as in each benchmark's upstream layout."""
_ROW_READERS: dict[str, Callable[[dict[str, Any], dict[str, Any]], Pairs]] = {
    "alfworld": _alfworld,
    "alfworld_textworld": _alfworld,
    "travelplanner": _travelplanner,
    "bfcl_official": _bfcl_official,
    "bfcl": _unmappable("bfcl"),
    "bamboogle": _unmappable("bamboogle"),
}

__all__ = ["Candidate", "UNMAPPABLE", "candidates", "claims"]
