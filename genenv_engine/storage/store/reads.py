"""The store's named reads of tasks, rollouts and funnels: the training pool, pinned and imported tasks, census
counts, an epoch's verdicts, rollouts and batch scores, and what the importer and the loggers need to know
(`TaskReads`, a part of `Store`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from genenv_engine.core.records import Task
from genenv_engine.storage.store.part import StorePart
from genenv_engine.storage.store.readers import _FUNNEL_TABLES, _funnel_read
from genenv_engine.storage.store.rows import (
    _POOL_ORIGINS,
    _STAT_FIELDS,
    GENERATED_ORIGINS,
    _bools,
    _json_or_none,
    _marks,
    _to_task,
)


class TaskReads(StorePart):
    """`Store`'s reads of tasks and rollouts (they use its ``_rows``)."""

    def get_task(self, task_id: str) -> Task | None:
        """The task with this id, or None."""
        rows = list(self._rows("SELECT * FROM tasks WHERE id = ?", [task_id]))
        return _to_task(rows[0]) if rows else None

    def task_stats(self, task_id: str) -> dict[str, Any] | None:
        """The store-only fields of a task (p_hat, r_env, n_rollouts, batch_id, superseded_by), or None."""
        sql = f"SELECT {', '.join(_STAT_FIELDS)} FROM tasks WHERE id = ?"
        rows = list(self._rows(sql, [task_id]))
        return rows[0] if rows else None

    def tasks_in_batches(self, batch_ids: Iterable[str], *, origin: str, valid: bool = True) -> dict[str, list[Task]]:
        """Tasks of the given origin and validity grouped by variation batch, in one query (ordered by id)."""
        ids = list(batch_ids)
        out: dict[str, list[Task]] = {b: [] for b in ids}
        if ids:
            sql = (
                f"SELECT * FROM tasks WHERE origin = ? AND valid = ? AND batch_id IN ({', '.join('?' * len(ids))}) "
                "ORDER BY id"
            )
            for row in self._rows(sql, [origin, int(valid), *ids]):
                out[row["batch_id"]].append(_to_task(row))
        return out

    def imported_seeds(self, benchmark: str, levels: Sequence[int] = ()) -> list[Task]:
        """Tasks imported into the simulator's seed split (`genenv_engine.interfaces.interop`): valid, active,
        unsuperseded, at ``levels`` (all when empty), in id order."""
        sql = (
            "SELECT * FROM tasks WHERE origin = 'imported' AND split = 'seed' AND benchmark = ? AND valid = 1 "
            "AND status = 'active' AND superseded_by IS NULL"
        )
        params: list[Any] = [benchmark]
        if levels:
            sql += f" AND level IN ({', '.join('?' for _ in levels)})"
            params += list(levels)
        return [_to_task(row) for row in self._rows(sql + " ORDER BY id", params)]

    def pool(self, benchmarks: list[str] | None = None) -> list[Task]:
        """The agent's training pool: valid, unsuperseded, not banned tasks that are generated,
        edited or static, plus every pinned task whatever its origin."""
        marks = ", ".join("?" for _ in _POOL_ORIGINS)
        sql = (
            "SELECT * FROM tasks WHERE valid = 1 AND superseded_by IS NULL AND ("
            f"(origin IN ({marks}) AND status = 'active' AND NOT (origin = 'imported' AND split = 'seed')) "
            "OR status = 'pinned')"
        )
        params: list[Any] = list(_POOL_ORIGINS)
        if benchmarks is not None:
            sql += f" AND benchmark IN ({', '.join('?' for _ in benchmarks)})"
            params += benchmarks
        return [_to_task(row) for row in self._rows(sql + " ORDER BY epoch, id", params)]

    def pinned_tasks(self) -> list[Task]:
        """Every pinned task that has not been superseded by an edit."""
        sql = "SELECT * FROM tasks WHERE status = 'pinned' AND superseded_by IS NULL ORDER BY id"
        return [_to_task(row) for row in self._rows(sql)]

    def counts_by_epoch(self) -> list[dict[str, Any]]:
        """Task counts grouped by (epoch, origin, status, valid)."""
        sql = (
            "SELECT epoch, origin, status, valid, count(*) AS n FROM tasks "
            "GROUP BY epoch, origin, status, valid ORDER BY epoch, origin, status, valid"
        )
        return [_bools(row, "valid") for row in self._rows(sql)]

    def static_batch_ids(self) -> list[str]:
        """Ids of the variation batches holding at least one valid, active static task, sorted."""
        sql = (
            "SELECT DISTINCT batch_id FROM tasks WHERE origin = 'static' AND valid = 1 AND status = 'active' "
            "ORDER BY batch_id"
        )
        return [row["batch_id"] for row in self._rows(sql)]

    def inactive_train_ids(self) -> set[str]:
        """Base-data task ids (the train split and the ``unseen`` pool) the user banned, pinned or superseded by an
        edit (not plain base data)."""
        sql = (
            "SELECT id FROM tasks WHERE split IN ('train', 'unseen') "
            "AND (status != 'active' OR superseded_by IS NOT NULL)"
        )
        return {row["id"] for row in self._rows(sql)}

    def generated_verdicts(self, epoch: int, origins: Sequence[str] = GENERATED_ORIGINS) -> list[dict[str, Any]]:
        """(valid, reason) of every task of the given origins made in ``epoch``, in id order."""
        sql = f"SELECT valid, reason FROM tasks WHERE epoch = ? AND origin IN ({_marks(origins)}) ORDER BY id"
        return [_bools(row, "valid") for row in self._rows(sql, [epoch, *origins])]

    def batch_task_successes(self, epoch: int) -> list[dict[str, Any]]:
        """(id, benchmark, success) of every rollout made in ``epoch`` of a task in one of that epoch's
        variation batches: what p-hat of the generated tasks is computed from."""
        sql = (
            "SELECT t.id AS id, t.benchmark AS benchmark, r.success AS success FROM rollouts r "
            "JOIN tasks t ON t.id = r.task_id WHERE r.epoch = ? AND t.batch_id IN "
            "(SELECT id FROM batches WHERE epoch = ?) ORDER BY r.id"
        )
        return list(self._rows(sql, [epoch, epoch]))

    def created_at(self, task_id: str) -> str | None:
        """When the task row was first stored, or None for an unknown id."""
        rows = list(self._rows("SELECT created_at FROM tasks WHERE id = ?", [task_id]))
        return rows[0]["created_at"] if rows else None

    def generated_summaries(self, origins: Sequence[str] = GENERATED_ORIGINS) -> list[dict[str, Any]]:
        """(id, benchmark, difficulty, epoch) of every valid task of the given origins, newest epoch first;
        ``difficulty`` decoded."""
        sql = (
            f"SELECT id, benchmark, difficulty, epoch FROM tasks WHERE origin IN ({_marks(origins)}) "
            "AND valid = 1 ORDER BY epoch DESC, id"
        )
        return [{**row, "difficulty": _json_or_none(row["difficulty"])} for row in self._rows(sql, list(origins))]

    def rejected_ids(self, limit: int, origins: Sequence[str] = GENERATED_ORIGINS) -> list[str]:
        """Ids of up to ``limit`` rejected tasks of the given origins, newest epoch first."""
        sql = f"SELECT id FROM tasks WHERE origin IN ({_marks(origins)}) AND valid = 0 ORDER BY epoch DESC, id LIMIT ?"
        return [row["id"] for row in self._rows(sql, [*origins, limit])]

    def edits(self) -> list[tuple[str, str | None]]:
        """(edited task id, the id of the task it revised) of every hand edit, oldest first."""
        sql = "SELECT id, parent_id FROM tasks WHERE origin = 'edited' ORDER BY created_at, id"
        return [(row["id"], row["parent_id"]) for row in self._rows(sql)]

    def ids_with_status(self, status: str) -> list[str]:
        """Ids of the tasks with this status (pinned, banned, ...), by epoch then id."""
        return [row["id"] for row in self._rows("SELECT id FROM tasks WHERE status = ? ORDER BY epoch, id", [status])]

    def task_census(self) -> list[dict[str, Any]]:
        """Task counts grouped by (epoch, origin, split, status, valid, superseded), ordered by them."""
        sql = (
            "SELECT epoch, origin, split, status, valid, superseded_by IS NOT NULL AS superseded, count(*) AS n "
            "FROM tasks GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6"
        )
        return list(self._rows(sql))

    def funnel(self, epoch: int | None = None) -> list[dict[str, Any]]:
        """The generated -> admitted -> trained funnel per (epoch, benchmark), of one epoch or all, in order.

        Each entry: ``drafts`` (tasks the simulator wrote, or a static augmentation, stored with that epoch),
        ``passed`` (admitted by the validator), ``valid`` (kept by the duplicate cap too: what the store holds as
        valid), ``rejected`` (count per reason prefix, the text before ``:``; the cap's are `CAP_REASONS`),
        ``trained`` (distinct tasks with training rollouts that epoch), ``train_rollouts``, ``trained_by_origin``
        (the tasks' origin column), ``trained_by_source`` (`TRAIN_SOURCES`) and ``levels`` (``{"L<level>": n}``
        per stage of `FUNNEL_STAGES`, ``L?`` for a draft with no level).

        ``drafts``/``valid``/``rejected`` sum to the epoch metrics' ``generated``/``valid``/``invalid_reasons``;
        ``trained`` to ``tasks_trained`` unless a small base pool repeated a task within the epoch (it counts
        once here). A finished epoch's funnel is the snapshot `finish_epoch` stored: a task pinned after that
        epoch shows as it stood when the epoch ended.
        """
        return _funnel_read(lambda sql, params: self._rows(sql, params), _FUNNEL_TABLES, epoch)

    def rollouts_for(self, task_id: str) -> list[dict[str, Any]]:
        """All rollouts of a task, oldest first."""
        rows = self._rows("SELECT * FROM rollouts WHERE task_id = ? ORDER BY id", [task_id])
        return [_bools(row, "success") for row in rows]

    def heldout_answers(self, epoch: int) -> dict[str, dict[str, Any]]:
        """The agent's greedy held-out answer of ``epoch`` per task id: response, success, error type (empty for
        an epoch evaluated before answers were stored)."""
        sql = (
            "SELECT task_id, response, success, error_type FROM rollouts WHERE epoch = ? AND purpose = 'heldout' "
            "ORDER BY id"
        )
        return {row["task_id"]: _bools(row, "success") for row in self._rows(sql, [epoch])}

    def heldout_rollouts(self, epoch: int) -> list[dict[str, Any]]:
        """The stored held-out answers of ``epoch`` in the order they were evaluated: id, task_id, response,
        reward, success (0/1 as stored) and error_type."""
        sql = (
            "SELECT id, task_id, response, reward, success, error_type FROM rollouts "
            "WHERE epoch = ? AND purpose = 'heldout' ORDER BY id"
        )
        return list(self._rows(sql, [epoch]))

    def plugin_faults(self, epochs: Sequence[int]) -> dict[int, dict[str, dict[str, dict[str, int]]]]:
        """Per epoch of ``epochs``: benchmark -> where -> fault kind -> items that a plugin's fault failed, from the
        stored rows (an epoch's metrics count them since they exist): training rollouts (``rollouts``, an outside
        trainer's ``late`` ones too), held-out answers (``heldout``), the grounded reward's probe answers
        (``probes``) and drafts (``drafts``)."""
        out: dict[int, dict[str, dict[str, dict[str, int]]]] = {}
        if not epochs:
            return out
        marks = ", ".join("?" * len(epochs))
        kind = "CASE WHEN {0} = 'plugin_timeout' THEN 'plugin_timeout' ELSE 'plugin_error' END"
        fault = "({0} = 'plugin_timeout' OR {0} LIKE 'plugin\\_error%' ESCAPE '\\')"
        where = "CASE WHEN r.purpose IN ('train', 'late') THEN 'rollouts' WHEN r.purpose = 'heldout' THEN 'heldout' "
        where += "ELSE 'probes' END"
        sqls = (
            f"SELECT r.epoch AS epoch, t.benchmark AS benchmark, {where} AS place, "
            f"{kind.format('r.error_type')} AS kind, count(*) AS n "
            f"FROM rollouts r JOIN tasks t ON t.id = r.task_id "
            f"WHERE r.epoch IN ({marks}) AND {fault.format('r.error_type')} GROUP BY 1, 2, 3, 4",
            f"SELECT epoch, benchmark, 'drafts' AS place, {kind.format('reason')} AS kind, count(*) AS n "
            f"FROM tasks WHERE origin IN ({', '.join(repr(o) for o in GENERATED_ORIGINS)}) AND epoch IN ({marks}) "
            f"AND {fault.format('reason')} GROUP BY 1, 2, 3, 4",
        )
        for sql in sqls:
            for row in self._rows(sql, list(epochs)):
                places = out.setdefault(int(row["epoch"]), {}).setdefault(row["benchmark"], {})
                places.setdefault(row["place"], {})[row["kind"]] = int(row["n"])
        return out

    def training_tallies(self, epoch: int, since: int = 0) -> list[dict[str, Any]]:
        """The agent's training attempts per (task, epoch) from ``since`` up to ``epoch``: task_id, benchmark,
        level, origin, batch_id, epoch, attempts and successes, by epoch then task id; attempts a plugin's fault
        failed are left out (as p-hat leaves them out). What a reward's success estimators
        (`genenv_engine.core.estimators`) learn from."""
        sql = (
            "SELECT t.id AS task_id, t.benchmark AS benchmark, t.level AS level, t.origin AS origin, "
            "t.batch_id AS batch_id, r.epoch AS epoch, count(*) AS attempts, sum(r.success) AS successes "
            "FROM rollouts r JOIN tasks t ON t.id = r.task_id WHERE r.epoch BETWEEN ? AND ? AND r.purpose = 'train' "
            "AND (r.error_type IS NULL OR NOT (r.error_type = 'plugin_timeout' "
            "OR r.error_type LIKE 'plugin\\_error%' ESCAPE '\\')) "
            "GROUP BY t.id, r.epoch ORDER BY r.epoch, t.id"
        )
        return [{**row, "successes": int(row["successes"] or 0)} for row in self._rows(sql, [since, epoch])]

    def train_rollouts(self, epoch: int) -> list[dict[str, Any]]:
        """(task_id, reward, response) of the agent's training rollouts of ``epoch``, in insertion order."""
        sql = "SELECT task_id, reward, response FROM rollouts WHERE epoch = ? AND purpose = 'train' ORDER BY id"
        return list(self._rows(sql, [epoch]))

    def task_prompts(self, benchmark: str) -> set[str]:
        """The prompts of every stored task of ``benchmark`` (any origin, split or status)."""
        return {row["prompt"] for row in self._rows("SELECT prompt FROM tasks WHERE benchmark = ?", [benchmark])}

    def task_ids(self) -> set[str]:
        """The id of every stored task."""
        return {row["id"] for row in self._rows("SELECT id FROM tasks")}

    def imported_id_count(self, benchmark: str) -> int:
        """How many task ids look like the importer's ``<benchmark>/import/<n>`` (SQL ``LIKE``: letters of any case,
        ``_`` in the benchmark matching any one character); the importer numbers new ids from there."""
        sql = "SELECT count(*) AS n FROM tasks WHERE id LIKE ?"
        return int(list(self._rows(sql, [f"{benchmark}/import/%"]))[0]["n"])

    def rollout_counts(self) -> dict[int, dict[str, int]]:
        """Stored rollouts per epoch and purpose (``train``, ``heldout``, the grounded reward's ``probe_before`` and
        ``probe_after``): what each epoch generated, counted."""
        out: dict[int, dict[str, int]] = {}
        sql = "SELECT epoch, purpose, count(*) AS n FROM rollouts WHERE epoch IS NOT NULL GROUP BY epoch, purpose"
        for row in self._rows(sql):
            out.setdefault(int(row["epoch"]), {})[str(row["purpose"])] = int(row["n"])
        return out

    def batch_scores(self, epoch: int) -> list[dict[str, Any]]:
        """(p_hat, r_env) of each variation batch of ``epoch`` that has a p̂, in storage order."""
        return list(self._rows("SELECT p_hat, r_env FROM batches WHERE epoch = ? AND p_hat IS NOT NULL", [epoch]))

    def sample_rollouts(self, epoch: int, limit: int) -> list[dict[str, Any]]:
        """The first ``limit`` rollouts of ``epoch`` that are not held-out answers, oldest first, each with its task:
        benchmark, level, origin, prompt, response, reward, success (0/1 as stored)."""
        sql = (
            "SELECT t.benchmark AS benchmark, t.level AS level, t.origin AS origin, t.prompt AS prompt, "
            "r.response AS response, r.reward AS reward, r.success AS success FROM rollouts r "
            "JOIN tasks t ON t.id = r.task_id WHERE r.epoch = ? AND r.purpose != 'heldout' ORDER BY r.id LIMIT ?"
        )
        return list(self._rows(sql, [epoch, limit]))
