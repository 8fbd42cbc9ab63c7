"""Tasks in and out of a session as datasets other RL code reads: JSONL or Parquet in the veRL layout.

veRL, TRL recipes and the GenEnv paper's own code read RL data as rows of ``data_source``, ``prompt`` (chat
messages), ``ability``, ``reward_model: {style, ground_truth}`` and ``extra_info``. `export_tasks` writes a
session's tasks (filtered as on the console's tasks screen) in that layout, with everything genenv knows about a
task in ``extra_info``: benchmark, level, origin, split, lineage, the p̂ and R_env it scored, the simulator version
that wrote it, and what the checker needs as JSON text (``expected``, ``tools``, ``difficulty``) with the prompt, so
the rows can be scored again outside genenv: `genenv_engine.interfaces.interop.rewards` does it for veRL and TRL, and an
export writes ``reward.py`` beside its file (`genenv_engine.interfaces.interop.verifiers_export` writes a verifiers
taskset). A row of a benchmark that is not built in carries how the session found it (``source``: the config's
``[environments]`` text), and every row whether its family is rewarded by success (``structured``), so the reward
is scored where the rows go as genenv scored it. An export holds the admitted tasks (valid ones, and the split
tasks) unless asked for the rejected drafts too (`admitted`).
``ability`` says what the task asks (`ability`). Parquet is written with ``pyarrow`` and reads back with
``datasets.load_dataset("parquet", data_files=...)``; every row has the same scalar-typed columns so that one schema
fits all.

`import_tasks` reads such a file (this layout, plain rows with ``prompt`` and ``answer``, or the benchmark's
upstream layout, converted by `genenv_engine.interfaces.interop.upstream`; JSONL, Parquet, CSV or a JSON document),
validates every task with the benchmark's environment as a hand edit is validated, and adds the accepted ones to the
session's training pool (origin ``imported``: replayed as generated and edited tasks are), or among the
simulator's seeds, in one transaction; rejected rows are reported with their reasons, and a file with a row that
cannot be read at all writes nothing.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from genenv_engine.interfaces.interop.rewards import reward_file, write_reward_file
from genenv_engine.interfaces.interop.upstream import Candidate, candidates, claims
from genenv_engine.storage.store import Store, TaskFilter

FORMATS = ("jsonl", "parquet")
SPLITS = ("train", "seed")
"""Where imported tasks go: the agent's training pool, or the simulator's seeds."""
PAGE = 1000
"""Task rows read per query while exporting."""
TOOL_CALL_CHECKERS = ("bfcl_ast", "bfcl_ast_official", "bfcl_multi_turn_official", "apibank_exec", "chain_exact")
"""Checkers whose tasks ask for function calls."""
PLAN_CHECKERS = ("step_match", "tw_step_match", "tp_constraints")
"""Checkers whose tasks ask for the next step of a plan (an ALFWorld command, a TravelPlanner plan field)."""


def ability(
    granularity: str | None, checker: str | None, expected: dict[str, Any] | None, tools: list[Any] | None
) -> str:
    """veRL's ``ability`` by what a task asks: ``episode`` (a whole episode), ``tool_call`` (function calls, or a
    search action), ``plan`` (a plan's next step) or ``answer`` (a final answer; also any other checker's task
    without tools).

    >>> ability("step", "bfcl_ast", {}, []), ability("episode", "tp_constraints", {}, [])
    ('tool_call', 'episode')
    >>> ability("step", "qa_em_f1", {"action": "answer"}, []), ability("step", "qa_em_f1", {"action": "search"}, [])
    ('answer', 'tool_call')
    >>> ability("step", "tp_constraints", {}, []), ability("step", "countdown", {}, [])
    ('plan', 'answer')
    """
    if granularity == "episode":
        return "episode"
    if checker == "qa_em_f1":
        return "answer" if (expected or {}).get("action") == "answer" else "tool_call"
    if checker in PLAN_CHECKERS:
        return "plan"
    return "tool_call" if checker in TOOL_CALL_CHECKERS or tools else "answer"


def verl_row(row: dict[str, Any], source: str = "", structured: bool | None = None) -> dict[str, Any]:
    """One task row of the store in the veRL layout (all ``extra_info`` values scalars or strings), with how its
    benchmark is found when it is not built in (``source``, `genenv_engine.environments.Source` text) and whether its
    family is rewarded by success (``structured``; None when the exporting process could not import the class).

    >>> r = verl_row({"id": "bfcl/train/00001", "benchmark": "bfcl", "prompt": "Q", "answer": "add(a=1)",
    ...               "expected": {"calls": []}, "granularity": "step", "level": 2, "origin": "seed",
    ...               "checker": "bfcl_ast"})
    >>> r["data_source"], r["prompt"], r["ability"], r["reward_model"]
    ('genenv/bfcl', [{'role': 'user', 'content': 'Q'}], 'tool_call', {'style': 'rule', 'ground_truth': 'add(a=1)'})
    >>> r["extra_info"]["id"], r["extra_info"]["level"], r["extra_info"]["p_hat"], r["extra_info"]["expected"]
    ('bfcl/train/00001', 2, None, '{"calls": []}')
    """

    def num(value: Any) -> float | None:
        return None if value is None else float(value)

    return {
        "data_source": f"genenv/{row['benchmark']}",
        "prompt": [{"role": "user", "content": row["prompt"]}],
        "ability": ability(row.get("granularity") or "step", row.get("checker"), row.get("expected"), row.get("tools")),
        "reward_model": {"style": "rule", "ground_truth": row["answer"]},
        "extra_info": {
            "id": row["id"],
            "benchmark": row["benchmark"],
            "level": row.get("level"),
            "split": row.get("split"),
            "origin": row.get("origin"),
            "status": row.get("status"),
            "parent_id": row.get("parent_id"),
            "epoch": row.get("epoch"),
            "generator": row.get("generator"),
            "simulator_version": row.get("simulator_version"),
            "batch_id": row.get("batch_id"),
            "p_hat": num(row.get("p_hat")),
            "r_env": num(row.get("r_env")),
            "n_rollouts": row.get("n_rollouts"),
            "valid": None if row.get("valid") is None else bool(row["valid"]),
            "checker": row.get("checker"),
            "expected": json.dumps(row.get("expected") or {}, sort_keys=True),
            "granularity": row.get("granularity") or "step",
            "tools": json.dumps(row.get("tools") or []),
            "difficulty": json.dumps(row.get("difficulty") or {}, sort_keys=True),
            "prompt": row["prompt"],
            "source": source,
            "structured": structured,
        },
    }


def admitted(row: dict[str, Any]) -> bool:
    """Whether a stored task was admitted: valid, or one of the environment's split tasks (a rejected draft is
    neither).

    >>> admitted({"valid": False, "split": "generated"}), admitted({"valid": True, "split": "generated"})
    (False, True)
    """
    return bool(row.get("valid")) or row.get("split") in ("seed", "train", "heldout")


def session_sources(session_dir: Path) -> dict[str, str]:
    """How the session found each benchmark that is not built in (its config's ``[environments]``, name ->
    `genenv_engine.environments.Source` text); read without importing a plugin."""
    from genenv_engine.config import config_from_file

    path = session_dir / "config.toml"
    return dict(config_from_file(path).environments) if path.exists() else {}


def is_structured(benchmark: str) -> bool | None:
    """The ``structured`` flag of ``benchmark``'s class; None when its class cannot be imported here."""
    from genenv_engine.environments import environment_class

    try:
        return bool(environment_class(benchmark).structured)
    except Exception:  # a plugin missing here, or one whose import fails: the rows still export
        return None


def task_rows(
    store: Store, where: TaskFilter | None = None, sources: dict[str, str] | None = None, include_rejected: bool = False
) -> list[dict[str, Any]]:
    """Every task matching ``where`` in the veRL layout, in id order (read a page at a time): the admitted ones
    (`admitted`), and the rejected drafts too with ``include_rejected`` or a filter asking for invalid tasks
    (``valid=False``); ``sources`` is `session_sources`."""
    sources = sources or {}
    include_rejected = include_rejected or (where is not None and where.valid is False)
    flags: dict[str, bool | None] = {}
    out, offset = [], 0
    while True:
        rows = store.query_tasks(where, limit=PAGE, offset=offset, order="id")
        for r in rows:
            if include_rejected or admitted(r):
                name = r["benchmark"]
                if name not in flags:
                    flags[name] = is_structured(name)
                out.append(verl_row(r, sources.get(name, ""), flags[name]))
        if len(rows) < PAGE:
            return out
        offset += PAGE


def _pyarrow():
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise ValueError(
            "Parquet needs pyarrow: pip install 'genenv-console[interop]' (or use --format jsonl)"
        ) from None
    return pyarrow


def write_rows(rows: list[dict[str, Any]], path: Path, fmt: str) -> None:
    """Write rows as JSONL or Parquet, to a temporary file renamed into place (never half a file)."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    if fmt == "jsonl":
        with tmp.open("w") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    else:
        pa = _pyarrow()
        table = pa.Table.from_pylist(rows) if rows else pa.table({})
        pa.parquet.write_table(table, tmp)
    tmp.replace(path)


def export_tasks(
    session_dir: str | Path,
    out: str | Path | None = None,
    fmt: str = "jsonl",
    where: TaskFilter | None = None,
    include_rejected: bool = False,
) -> tuple[Path, int]:
    """Write the session's admitted tasks matching ``where`` (the rejected drafts too with ``include_rejected``)
    to ``out`` (default ``SESSION/export/tasks.<fmt>``), and ``reward.py`` beside it
    (`genenv_engine.interfaces.interop.rewards`); return the path and the number of rows."""
    session_dir = Path(session_dir)
    path = Path(out) if out else session_dir / "export" / f"tasks.{fmt}"
    reward_file(path.parent)  # a foreign reward.py there stops the export before anything is written
    sources = session_sources(session_dir)
    with Store(session_dir / "genenv.db") as store:
        rows = task_rows(store, where, sources, include_rejected)
    write_rows(rows, path, fmt)
    write_reward_file(path.parent)
    return path, len(rows)


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a file, by its suffix: ``.parquet`` / ``.pq``; ``.csv`` (a header, then one row a line); ``.json``
    holding one object or an array of objects (else read as JSONL); anything else JSONL. A row that is not a JSON
    object, or a bad CSV line, raises ValueError naming it; a missing file FileNotFoundError ("no such file")."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    if path.is_dir():
        raise ValueError(f"{path} is a folder, not a file of rows")
    if path.suffix in (".parquet", ".pq"):
        return _pyarrow().parquet.read_table(path).to_pylist()
    if path.suffix == ".csv":
        return _read_csv(path)
    if path.suffix == ".json":
        try:
            whole = json.loads(path.read_text())
        except (ValueError, RecursionError):
            whole = None  # BFCL's .json files are JSONL
        if isinstance(whole, dict):
            return [whole]
        if isinstance(whole, list):
            bad = next((i for i, row in enumerate(whole, 1) if not isinstance(row, dict)), None)
            if bad:
                raise ValueError(f"{path}: item {bad} is not a JSON object")
            return whole
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{path}: line {n} is not JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}: line {n} is not a JSON object")
        rows.append(row)
    return rows


def _read_csv(path: Path) -> list[dict[str, Any]]:
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        try:
            rows = [{k: v for k, v in row.items() if k is not None} for row in reader]
        except csv.Error as exc:
            raise ValueError(f"{path}: line {reader.line_num} is not CSV ({exc})") from None
    if not reader.fieldnames:
        raise ValueError(f"{path}: no CSV header")
    return rows


def prompt_and_answer(row: dict[str, Any]) -> tuple[str, str]:
    """A row's prompt text and gold answer: the veRL layout (the last user message, ``reward_model.ground_truth``)
    or plain ``prompt``/``answer`` strings. Raises ValueError saying what is missing.

    >>> prompt_and_answer({"prompt": [{"role": "system", "content": "s"}, {"role": "user", "content": "Q"}],
    ...                    "reward_model": {"ground_truth": "A"}})
    ('Q', 'A')
    >>> prompt_and_answer({"prompt": "Q", "answer": "A"})
    ('Q', 'A')
    """
    prompt = row.get("prompt")
    if isinstance(prompt, list):
        users = [m.get("content") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        prompt = users[-1] if users else None
    reward = row.get("reward_model")
    answer = reward.get("ground_truth") if isinstance(reward, dict) else row.get("answer")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("no prompt (a user message or a 'prompt' string)")
    if not isinstance(answer, str) or not answer.strip():
        raise ValueError("no answer (reward_model.ground_truth or an 'answer' string)")
    return prompt, answer


@dataclass
class ImportResult:
    """What an import did: the ids added, the rows read and, per rejected row (1-based) or step of one, why."""

    added: list[str] = field(default_factory=list)
    rejected: list[tuple[int, str]] = field(default_factory=list)
    rows: int = 0


REASON_CHARS = 400
"""A rejection reason is cut to this length (it may quote row text)."""


def printable(text: str, limit: int = REASON_CHARS) -> str:
    r"""``text`` with control characters escaped and cut to ``limit``: row text is quoted in reasons, and a reason
    is printed to a terminal.

    >>> printable("bad \x1b[2J row\n")
    'bad \\x1b[2J row\\n'
    """
    out = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return out if len(out) <= limit else out[: limit - 3] + "..."


def row_candidates(benchmark: str, rows: list[dict[str, Any]], path: Path) -> list[Candidate]:
    """Every row's candidate tasks in file order: genenv's layouts read here, the benchmark's upstream layout by
    `genenv_engine.interfaces.interop.upstream`."""
    own, upstream = [], []
    for n, row in enumerate(rows, 1):
        if claims(benchmark, row):
            upstream.append((n, row))
            continue
        try:
            prompt, answer = prompt_and_answer(row)
        except ValueError as exc:
            own.append(Candidate(n, reason=str(exc)))
            continue
        info = row.get("extra_info") if isinstance(row.get("extra_info"), dict) else {}
        task_id = info.get("id")
        own.append(Candidate(n, prompt, answer, own_id=task_id if isinstance(task_id, str) and task_id else None))
    return sorted(own + (candidates(benchmark, upstream, path) if upstream else []), key=lambda c: c.row)


def import_tasks(session_dir: str | Path, benchmark: str, path: str | Path, split: str = "train") -> ImportResult:
    """Validate every task the rows of ``path`` give with ``benchmark``'s environment and add the valid ones to the
    session in one transaction (a genenv export's own ids where the session has no task of that id, else
    ``<bench>/import/<n>``): ``split="train"`` puts them in the agent's training pool, ``"seed"`` among the
    simulator's conditioning seeds (from the next epoch on). A row with a held-out task's prompt is refused, whether
    or not the session has stored its held-out split yet. Nothing is written when no task is valid."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    from genenv_engine.config import config_from_file
    from genenv_engine.environments import get_environment

    session_dir = Path(session_dir)
    config = config_from_file(session_dir / "config.toml")
    if benchmark not in config.benchmarks:
        raise ValueError(f"{benchmark!r} is not one of the session's benchmarks ({', '.join(config.benchmarks)})")
    env = get_environment(
        benchmark,
        config.seed,
        data_dir=config.data_dirs.get(benchmark),
        options=config.environments_options.get(benchmark),
    )
    rows = read_rows(path)
    found = row_candidates(benchmark, rows, Path(path))
    result = ImportResult(rows=len(rows))
    with Store(session_dir / "genenv.db") as store:
        taken = store.task_prompts(benchmark)
        ids = store.task_ids()
        start = store.imported_id_count(benchmark)
        epoch = max(store.last_finished_epoch(), 0)
        tasks = []
        heldout = {t.prompt for t in env.splits()["heldout"]}  # stored or not yet: never trained on
        for c in found:
            if c.reason or c.prompt in taken or c.prompt in heldout:
                reason = c.reason or (
                    "heldout_copy: the prompt of a held-out task"
                    if c.prompt in heldout
                    else "duplicate: the session already has a task with this prompt"
                )
                result.rejected.append((c.row, printable(c.label + reason)))
                continue
            task_id = c.own_id if c.own_id and c.own_id not in ids else None
            while task_id is None or task_id in ids:
                task_id, start = f"{benchmark}/import/{start:05d}", start + 1
            verdict = env.validate(c.prompt, c.answer, task_id=task_id, epoch=epoch, generator="import")
            if not verdict.ok:
                result.rejected.append((c.row, printable(c.label + verdict.reason)))
                continue
            taken.add(c.prompt)
            ids.add(task_id)
            tasks.append(verdict.task.with_(origin="imported", split=split, generator="import", epoch=epoch))
        store.insert_tasks(tasks)
    result.added = [t.id for t in tasks]
    return result
