"""A session's tasks as a verifiers (v1) taskset: an importable package whose reward is the environment's checker.

`export_verifiers` writes ``DIR/<name>/``: ``tasks.jsonl`` (the tasks in genenv's veRL layout) and an
``__init__.py`` exporting one ``verifiers.v1.Taskset`` subclass in ``__all__``. Its ``load()`` yields one task per
row (the prompt as the user turn, the gold answer, the row's ``extra_info``); each task's ``@vf.reward`` rebuilds the
genenv task and scores the reply (``trace.last_reply``) with the environment's checker through
`genenv_engine.interfaces.interop.rewards` (1.0 accepted, 0.0 not), and its ``validate()`` scores the stored gold
through the same function, so ``vf-validate <name>`` checks every gold. With ``DIR`` on ``PYTHONPATH``:
``vf.load_taskset(vf.TasksetConfig(id="<name>"))``. The package imports genenv when a task is scored: genenv, and
any plugin providing a benchmark, must be installed where it runs. This module writes text only; it never imports
verifiers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from genenv_engine.interfaces.interop import task_rows
from genenv_engine.storage.store import Store, TaskFilter

NAME_PATTERN = r"[a-z][a-z0-9_]*"
"""A taskset package name: verifiers imports the id lowercased with ``-`` as ``_``, so the name is kept in that form."""
TASKS_FILE = "tasks.jsonl"
"""The rows inside the package."""
PACKAGE = '''"""genenv tasks as a verifiers taskset: {count} tasks of session {session}, scored by genenv's checkers.

Load with vf.load_taskset(vf.TasksetConfig(id="{name}")) (this folder's parent on PYTHONPATH); check every gold
with vf-validate {name} --runtime.type subprocess. Scoring imports genenv (genenv_engine.interfaces.interop.rewards):
genenv, and any plugin package providing a benchmark, must be installed where the tasks are scored.
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


def _score(data: GenenvTaskData, reply: str) -> float:
    from genenv_engine.interfaces.interop.rewards import score_task, task_of

    return score_task(task_of(data.prompt_text, data.answer, data.info), reply)


class GenenvTask(vf.Task[GenenvTaskData]):
    @vf.reward
    async def correct(self, trace: vf.Trace) -> float:
        """1.0 when the environment's checker accepts the reply, else 0.0."""
        return _score(self.data, trace.last_reply)

    async def validate(self, runtime: Any = None) -> bool:
        """The stored gold scored through the reward's checker."""
        return _score(self.data, self.data.answer) == 1.0


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


def export_verifiers(session_dir: str | Path, out: str | Path, name: str | None = None,
                     where: TaskFilter | None = None) -> tuple[Path, int]:
    """Write the session's tasks matching ``where`` as the taskset package ``out/<name>/`` (default name:
    `default_name`); return the package folder and the number of tasks. A folder of that name that is not a taskset
    genenv wrote is left alone (ValueError)."""
    session_dir = Path(session_dir)
    name = name or default_name(session_dir)
    if not re.fullmatch(NAME_PATTERN, name):
        raise ValueError(f"taskset name {name!r}: lowercase letters, digits and '_', starting with a letter")
    folder = Path(out) / name
    init = folder / "__init__.py"
    if folder.exists() and not (init.is_file() and init.read_text(encoding="utf-8").startswith('"""genenv tasks')):
        raise ValueError(f"{folder} exists and is not a taskset genenv wrote: choose another --out or --name")
    with Store(session_dir / "genenv.db") as store:
        rows = task_rows(store, where)
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
