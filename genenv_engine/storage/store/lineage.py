"""The store's lineage queries: a task's chain of parents, the tree of tasks descended from its first stored
ancestor, and the seed and variations behind one variation batch (`LineageReads`, a part of `Store`).
"""

from __future__ import annotations

from typing import Any

from genenv_engine.core.records import Task
from genenv_engine.storage.store.part import StorePart
from genenv_engine.storage.store.rows import _bools, _decode_row

_COUNTED_TASKS_SQL = (
    "SELECT tasks.*, (SELECT count(*) FROM rollouts r WHERE r.task_id = tasks.id AND r.purpose = 'train') "
    "AS train_rollouts, (SELECT coalesce(sum(r.success), 0) FROM rollouts r WHERE r.task_id = tasks.id "
    "AND r.purpose = 'train') AS train_successes FROM tasks WHERE {where} ORDER BY tasks.id"
)
LINEAGE_COLUMNS = (
    "id",
    "parent_id",
    "benchmark",
    "origin",
    "split",
    "epoch",
    "level",
    "valid",
    "reason",
    "status",
    "p_hat",
    "r_env",
    "n_rollouts",
    "simulator_version",
    "generator",
    "batch_id",
    "superseded_by",
    "prompt",
)
"""The columns of a `Store.lineage_tree` row (and ``depth``)."""
LINEAGE_NODES = 2000
"""The most tasks `Store.lineage_tree` reads."""
LINEAGE_DEPTH = 64
"""The deepest `Store.lineage_tree` follows ``parent_id``."""
LINEAGE_PROMPT_CHARS = 400
"""Characters of each prompt a `Store.lineage_tree` row carries."""


class LineageReads(StorePart):
    """`Store`'s lineage reads (they use its ``db``, ``_rows`` and ``get_task``)."""

    def lineage(self, task_id: str) -> list[Task]:
        """The task, its parent, its parent's parent, ... up to a task with no (stored) parent."""
        chain: list[Task] = []
        seen: set[str] = set()
        current: str | None = task_id
        while current is not None and current not in seen:
            seen.add(current)
            task = self.get_task(current)
            if task is None:
                break
            chain.append(task)
            current = task.parent_id
        return chain

    def batch_tasks(self, batch_id: str) -> list[dict[str, Any]]:
        """The tasks behind one variation batch: its seed task first (``role`` ``seed``; the batch row's
        ``seed_task_id``, else the variations' parent), then every variation written in it, valid or not, by id
        (``role`` ``variation``). Each row holds the task's columns (JSON decoded) and ``train_rollouts`` and
        ``train_successes``: the task's training rollouts over every epoch and how many succeeded. Empty for a batch
        with no stored tasks and no stored seed."""
        variations = [
            {**_decode_row(row), "role": "variation"}
            for row in self._rows(_COUNTED_TASKS_SQL.format(where="tasks.batch_id = ?"), [batch_id])
        ]
        batch = self.db.execute("SELECT seed_task_id FROM batches WHERE id = ?", [batch_id]).fetchone()
        seed_id = batch[0] if batch is not None else None
        if seed_id is None and variations:
            seed_id = variations[0]["parent_id"]
        seed = (
            []
            if seed_id is None
            else [
                {**_decode_row(row), "role": "seed"}
                for row in self._rows(_COUNTED_TASKS_SQL.format(where="tasks.id = ?"), [seed_id])
            ]
        )
        return seed + variations

    def lineage_tree(self, task_id: str, limit: int = LINEAGE_NODES) -> list[dict[str, Any]]:
        """The lineage tree ``task_id`` belongs to: its first stored ancestor (for a generated task, the seed the
        simulator varied), then every task descended from that one through ``parent_id`` (the variations each
        simulator version wrote, their hand edits, ...), nearest first: each row with ``depth`` (0: the root) and
        the columns `LINEAGE_COLUMNS`, the prompt cut to `LINEAGE_PROMPT_CHARS` characters. At most ``limit``
        rows; empty for an unknown id. A ``parent_id`` cycle (a damaged store) ends at `LINEAGE_DEPTH` levels."""
        chain = self.lineage(task_id)
        if not chain:
            return []
        columns = ", ".join(f"tasks.{c}" for c in LINEAGE_COLUMNS)
        sql = (
            "WITH RECURSIVE tree(id, depth) AS (SELECT ?, 0 UNION SELECT t.id, tree.depth + 1 FROM tasks t "
            "JOIN tree ON t.parent_id = tree.id WHERE tree.depth < ?), "
            "nearest(id, depth) AS (SELECT id, min(depth) FROM tree GROUP BY id) "
            f"SELECT {columns}, nearest.depth AS depth FROM nearest "
            "JOIN tasks ON tasks.id = nearest.id ORDER BY nearest.depth, tasks.epoch, tasks.id LIMIT ?"
        )
        rows = self._rows(sql, [chain[-1].id, LINEAGE_DEPTH, int(limit)])
        # cut in Python: SQLite's substr stops at an embedded NUL, which untrusted text may hold
        return [{**_bools(row, "valid"), "prompt": (row["prompt"] or "")[:LINEAGE_PROMPT_CHARS]} for row in rows]
