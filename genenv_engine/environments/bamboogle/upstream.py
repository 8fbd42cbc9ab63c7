"""Loader for the upstream Bamboogle Q/A pairs (125 in the original) from a user file or folder.

Upstream Bamboogle ships no corpus, only questions and answers, so each pair becomes one
closed-book final-answer step task: prompt ``Q: <question>``, gold ``answer[<answer>]``, scored by
SQuAD exact match / token F1 (``origin="official"``, split ``heldout``). Accepted files:

* CSV with a header holding ``Question`` and ``Answer`` (case-insensitive; other columns ignored);
* JSONL (or ``.json``: JSONL, or one JSON array) of objects with ``question``/``answer`` or
  ``Question``/``Answer``, or the veRL form (``prompt``: chat messages, ``reward_model.ground_truth``:
  a string, a list, or ``{"target": ...}``);
* parquet with the same columns, only when ``pyarrow`` is importable (a clear error otherwise).

A folder is searched recursively for those suffixes (sorted); repeated questions keep the first.
Bad input raises :class:`UpstreamError` naming the file and line. Nothing read is ever executed.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from genenv_engine.core.records import Task
from genenv_engine.environments.bamboogle.prompt import TOOLS, infer_level

SUFFIXES = (".csv", ".jsonl", ".json", ".parquet")
OFFICIAL_FEATURES = {
    "hops": 2,
    "kind": "official",
    "form": "official",
    "relations": "",
    "answer_type": "text",
    "action": "answer",
    "step": 0,
    "n_evidence": 0,
    "n_distractors": 0,
}
"""Ladder features of an upstream item: a 2-hop question answered closed-book (no evidence)."""


class UpstreamError(ValueError):
    """The user's Bamboogle data is missing or malformed; the message names the file and line."""


def load_upstream(data_dir: str | Path) -> list[Task]:
    """All Q/A pairs under ``data_dir`` (a file or a folder) as official heldout answer-step tasks."""
    rows: list[tuple[str, list[str]]] = []
    seen: set[str] = set()
    for path in upstream_files(Path(data_dir)):
        for question, answers in _read_file(path):
            key = " ".join(question.lower().split())
            if key not in seen:
                seen.add(key)
                rows.append((question, answers))
    if not rows:
        raise UpstreamError(f"{data_dir}: no question/answer rows found")
    return [official_task(q, a, i) for i, (q, a) in enumerate(rows)]


def upstream_files(path: Path) -> list[Path]:
    """The files to read: ``path`` itself, or every supported file below the folder ``path``."""
    if not path.exists():
        raise UpstreamError(f"{path}: no such file or folder")
    if path.is_file():
        if path.suffix.lower() not in SUFFIXES:
            raise UpstreamError(f"{path}: unsupported file type; use {', '.join(SUFFIXES)}")
        return [path]
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
    if not files:
        raise UpstreamError(f"{path}: no Bamboogle file ({', '.join('*' + s for s in SUFFIXES)}) in this folder")
    return files


def official_task(question: str, answers: list[str], index: int) -> Task:
    """One upstream pair as a closed-book answer step (prompt and gold kept free of `` => `` and brackets)."""
    text = " ".join(question.split()).replace(" => ", " -> ")
    gold = " ".join(answers[0].split()).replace(" => ", " -> ").replace("[", "(").replace("]", ")")
    return Task(
        id=f"bamboogle/heldout/{index:05d}",
        benchmark="bamboogle",
        prompt=f"Q: {text}",
        answer=f"answer[{gold}]",
        expected={"action": "answer", "answers": list(answers)},
        tools=[dict(t) for t in TOOLS],
        difficulty={"level": infer_level(OFFICIAL_FEATURES), "features": dict(OFFICIAL_FEATURES)},
        checker="qa_em_f1",
        granularity="step",
        split="heldout",
        origin="official",
    )


def _read_file(path: Path) -> Iterator[tuple[str, list[str]]]:
    try:
        suffix = path.suffix.lower()
        if suffix == ".csv":
            yield from _read_csv(path)
        elif suffix == ".parquet":
            yield from _read_parquet(path)
        else:
            yield from _read_json(path)
    except UnicodeDecodeError:
        raise UpstreamError(f"{path}: not UTF-8 text") from None


def _read_csv(path: Path) -> Iterator[tuple[str, list[str]]]:
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        header = [h for h in (reader.fieldnames or []) if h]
        columns = {h.strip().lower(): h for h in header}
        for need in ("Question", "Answer"):
            if need.lower() not in columns:
                raise UpstreamError(f"{path}: missing column {need!r} (header: {header})")
        try:
            for row in reader:
                question = (row.get(columns["question"]) or "").strip()
                answer = (row.get(columns["answer"]) or "").strip()
                if not question or not answer:
                    raise UpstreamError(f"{path}:{reader.line_num}: empty Question or Answer")
                yield question, [answer]
        except csv.Error as err:
            raise UpstreamError(f"{path}:{reader.line_num}: bad CSV ({err})") from None


def _read_json(path: Path) -> Iterator[tuple[str, list[str]]]:
    text = path.read_text(encoding="utf-8-sig")
    if path.suffix.lower() == ".json" and text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as err:
            raise UpstreamError(f"{path}:{err.lineno}: invalid JSON ({err.msg})") from None
        for i, item in enumerate(items, start=1):
            yield read_pair(item, f"{path}: item {i}")
        return
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as err:
            raise UpstreamError(f"{path}:{lineno}: invalid JSON ({err.msg})") from None
        yield read_pair(item, f"{path}:{lineno}")


def _read_parquet(path: Path) -> Iterator[tuple[str, list[str]]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UpstreamError(
            f"{path}: reading parquet needs pyarrow, which is not installed; "
            "pip install pyarrow, or convert the file to CSV or JSONL"
        ) from None
    try:
        rows = pq.read_table(path).to_pylist()
    except Exception as err:  # pyarrow raises several error types for unreadable files
        raise UpstreamError(f"{path}: unreadable parquet ({type(err).__name__}: {err})") from None
    for i, row in enumerate(rows, start=1):
        yield read_pair(row, f"{path}: row {i}")


def read_pair(item: Any, where: str) -> tuple[str, list[str]]:
    """(question, answers) from one JSON object, CSV or parquet row; :class:`UpstreamError` (prefixed with
    ``where``) says what is wrong."""
    if not isinstance(item, dict):
        raise UpstreamError(f"{where}: expected a JSON object")
    keys = {str(k).lower(): k for k in item}
    question = item[keys["question"]] if "question" in keys else _verl_question(item.get("prompt"), where)
    if "answer" in keys:
        answers = item[keys["answer"]]
    elif isinstance(item.get("reward_model"), dict) and "ground_truth" in item["reward_model"]:
        answers = item["reward_model"]["ground_truth"]
    else:
        raise UpstreamError(f"{where}: no 'answer'/'Answer' (or reward_model.ground_truth) field")
    if isinstance(answers, dict):
        answers = answers.get("target")
    answers = [answers] if isinstance(answers, (str, int, float)) else answers
    if isinstance(answers, list):
        answers = [str(a) if isinstance(a, (int, float)) and not isinstance(a, bool) else a for a in answers]
    if not isinstance(question, str) or not question.strip():
        raise UpstreamError(f"{where}: the question must be a non-empty string")
    if not isinstance(answers, list) or not answers or not all(isinstance(a, str) and a.strip() for a in answers):
        raise UpstreamError(f"{where}: the answer must be a non-empty string or list of strings")
    return question.strip(), [a.strip() for a in answers]


def _verl_question(prompt: Any, where: str) -> str:
    if not isinstance(prompt, list):
        raise UpstreamError(f"{where}: no 'question'/'Question' (or veRL 'prompt') field")
    users = [m.get("content") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        raise UpstreamError(f"{where}: the veRL 'prompt' has no user message")
    return users[-1]
