"""A session's tasks as a verifiers (v1) taskset: an importable package whose reward is the environment's checker.

`export_verifiers` writes ``DIR/<name>/``: ``tasks.jsonl`` (the tasks in genenv's veRL layout) and an
``__init__.py`` exporting one ``verifiers.v1.Taskset`` subclass in ``__all__``. Its ``load()`` yields one task per
row (the prompt as the user turn, the gold answer, the row's ``extra_info``); each task's ``@vf.reward`` rebuilds the
genenv task and scores the reply (``trace.last_reply``) through `genenv_engine.interfaces.interop.rewards`, the same
number its ``compute_score`` gives (the checker's success, or its score for a family with ``structured = False``),
a ``@vf.metric`` records the success alone, and its ``validate()`` asks that the stored gold succeed, so
``vf-validate <name>`` checks every gold. With ``DIR`` on ``PYTHONPATH``:
``vf.load_taskset(vf.TasksetConfig(id="<name>"))``. The package imports genenv when a task is scored: genenv, and
the module or package of any benchmark not built in (the row's ``source``), must be importable where it runs. An
export holds the admitted tasks unless asked for the rejected drafts too. This module writes text only; it never
imports verifiers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from genenv_engine.interfaces.interop import session_sources, task_rows
from genenv_engine.storage.store import Store, TaskFilter

NAME_PATTERN = r"[a-z][a-z0-9_]*"
"""A taskset package name: verifiers imports the id lowercased with ``-`` as ``_``, so the name is kept in that form."""
TASKS_FILE = "tasks.jsonl"
"""The rows inside the package."""
PACKAGE = '''"""genenv tasks as a verifiers taskset: {count} tasks of session {session}, scored by genenv's checkers.

Load with vf.load_taskset(vf.TasksetConfig(id="{name}")) (this folder's parent on PYTHONPATH); check every gold
with vf-validate {name} --runtime.type subprocess. Scoring imports genenv (genenv_engine.interfaces.interop.rewards):
genenv, and the module or package of any benchmark not built in (a row's extra_info "source"), must be importable
where the tasks are scored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import verifiers.v1 as vf

__all__ = ["GenenvTaskset"]

TASKS = Path(__file__).with_name("{tasks}")


class GenenvTaskData(vf.TaskData):
    benchmark: str
    answer: str
    """The gold answer genenv's environment recomputed."""
    info: dict[str, Any]
    """The exported row's extra_info: what the checker needs to rebuild the genenv task."""


def _check(data: GenenvTaskData, reply: str) -> tuple[float, bool]:
    """genenv's reward for the reply (its compute_score) and whether the checker accepts it."""
    from genenv_engine.interfaces.interop.rewards import check_task, task_of

    env, result = check_task(task_of(data.prompt_text, data.answer, data.info), reply,
                             str(data.info.get("source") or ""))
    return float(env.reward(result)), bool(result.success)


class GenenvTask(vf.Task[GenenvTaskData]):
    @vf.reward
    async def correct(self, trace: vf.Trace) -> float:
        """The environment's reward: the checker's success (1/0), or its score for structured = False."""
        return _check(self.data, trace.last_reply)[0]

    @vf.metric
    async def success(self, trace: vf.Trace) -> float:
        """1.0 when the environment's checker accepts the reply, else 0.0."""
        return float(_check(self.data, trace.last_reply)[1])

    async def validate(self, runtime: Any = None) -> bool:
        """The stored gold accepted by the reward's checker."""
        return _check(self.data, self.data.answer)[1]


class GenenvTaskset(vf.Taskset[GenenvTask]):
    def load(self):
        for line in TASKS.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            info = row["extra_info"]
            yield GenenvTask(GenenvTaskData(id=info["id"], name=info["id"], prompt=row["prompt"][-1]["content"],
                                            benchmark=info["benchmark"], answer=row["reward_model"]["ground_truth"],
                                            info=info), self.config.task)
'''
"""The text of the package's ``__init__.py``."""


def default_name(session_dir: str | Path) -> str:
    """The package name for a session folder: ``genenv_<folder name>`` in lowercase letters, digits and ``_``.

    >>> default_name("sessions/20261206-0156-tiny")
    'genenv_20261206_0156_tiny'
    """
    return "genenv_" + re.sub(r"[^a-z0-9_]+", "_", Path(session_dir).resolve().name.lower()).strip("_")


def export_verifiers(
    session_dir: str | Path,
    out: str | Path,
    name: str | None = None,
    where: TaskFilter | None = None,
    include_rejected: bool = False,
) -> tuple[Path, int]:
    """Write the session's admitted tasks matching ``where`` (the rejected drafts too with ``include_rejected``) as
    the taskset package ``out/<name>/`` (default name: `default_name`); return the package folder and the number of
    tasks. A folder of that name that is not a taskset genenv wrote is left alone (ValueError)."""
    session_dir = Path(session_dir)
    name = name or default_name(session_dir)
    if not re.fullmatch(NAME_PATTERN, name):
        raise ValueError(f"taskset name {name!r}: lowercase letters, digits and '_', starting with a letter")
    folder = Path(out) / name
    init = folder / "__init__.py"
    if folder.exists() and not (init.is_file() and init.read_text(encoding="utf-8").startswith('"""genenv tasks')):
        raise ValueError(f"{folder} exists and is not a taskset genenv wrote: choose another --out or --name")
    sources = session_sources(session_dir)
    with Store(session_dir / "genenv.db") as store:
        rows = task_rows(store, where, sources, include_rejected)
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    _write(folder / TASKS_FILE, text)
    session = re.sub(r"[^\w.-]", "_", session_dir.resolve().name)
    _write(init, PACKAGE.format(count=len(rows), session=session, name=name, tasks=TASKS_FILE))
    return folder, len(rows)


def _write(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file renamed into place (never half a file)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
