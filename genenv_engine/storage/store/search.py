"""The tasks screen's queries: one page of tasks under a `TaskFilter` (with a word search over the full-text index),
how many tasks match, and where one task stands in the page order (`TaskSearch`, a part of `Store`).
"""

from __future__ import annotations

from typing import Any

from genenv_engine.storage.store.part import StorePart
from genenv_engine.storage.store.rows import TaskFilter, _decode_row, _filter, _order_sql, fts_query

SCAN_MATCHES = 2000
"""Above this many word-search matches, a page is found by walking the page-order index (see `Store.query_tasks`)."""


class TaskSearch(StorePart):
    """`Store`'s filtered task pages and counts (they use its ``db`` and ``_rows``)."""

    def task_position(self, task_id: str, where: TaskFilter | None = None, **fields: Any) -> int | None:
        """Where ``task_id`` stands among the tasks matching ``where`` (or the `TaskFilter` fields given as keywords)
        in `query_tasks`'s default order (epoch DESC, id): how many matching tasks come before it. None when the
        task is unknown or does not match."""
        where = _filter(where, fields)
        row = self.db.execute("SELECT epoch FROM tasks WHERE id = ?", [task_id]).fetchone()
        if row is None:
            return None
        sql_where, params = self._where(where)
        join = " AND " if sql_where else " WHERE "
        count = f"SELECT count(*) FROM tasks{sql_where}{join}"
        if not self.db.execute(count + "tasks.id = ?", [*params, task_id]).fetchone()[0]:
            return None
        if row[0] is None:  # NULL epochs sort after every epoch in ``epoch DESC``
            before, values = "(tasks.epoch IS NOT NULL OR tasks.id < ?)", [task_id]
        else:
            before, values = "(tasks.epoch > ? OR (tasks.epoch = ? AND tasks.id < ?))", [row[0], row[0], task_id]
        return int(self.db.execute(count + before, [*params, *values]).fetchone()[0])

    def _where(self, where: TaskFilter, scan_matches: bool = False) -> tuple[str, list[Any]]:
        """WHERE clause and parameters of a `TaskFilter`.

        ``scan_matches`` writes the word search so SQLite walks an index of the other filters (or the page
        order) and tests each entry against the matches, instead of fetching every match's row by rowid.
        """
        clauses, params = [], []
        for column in ("benchmark", "origin", "status", "epoch", "batch_id"):
            if getattr(where, column) is not None:
                clauses.append(f"tasks.{column} = ?")
                params.append(getattr(where, column))
        if where.valid is not None:
            clauses.append("tasks.valid = ?")
            params.append(int(where.valid))
        if where.p_min is not None:
            clauses.append("tasks.p_hat >= ?")
            params.append(where.p_min)
        if where.p_max is not None:
            clauses.append("tasks.p_hat <= ?")
            params.append(where.p_max)
        match = fts_query(where.text or "")
        if match:
            rowid = "+tasks.rowid" if scan_matches else "tasks.rowid"  # unary + keeps the rowid lookup out of the plan
            clauses.append(f"{rowid} IN (SELECT rowid FROM tasks_fts WHERE tasks_fts MATCH ?)")
            params.append(match)
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", params

    def query_tasks(
        self,
        where: TaskFilter | None = None,
        *,
        limit: int = 50,
        offset: int = 0,
        order: str = "epoch DESC, id",
        **fields: Any,
    ) -> list[dict[str, Any]]:
        """One page of task rows (all columns, JSON decoded) matching ``where`` (or the `TaskFilter` fields given
        as keywords); ``text`` is a word search.

        The page's rowids are found first (sorting only the index columns), then only those rows are read;
        a word with more than `SCAN_MATCHES` matches is searched along the page-order index.
        """
        where = _filter(where, fields)
        match = fts_query(where.text or "")
        scan = bool(match) and self._word_matches(match) > SCAN_MATCHES
        sql_where, params = self._where(where, scan)
        order_sql = _order_sql(order)
        page = f"SELECT tasks.rowid FROM tasks{sql_where} ORDER BY {order_sql} LIMIT ? OFFSET ?"
        sql = f"SELECT * FROM tasks WHERE rowid IN ({page}) ORDER BY {order_sql}"
        return [_decode_row(row) for row in self._rows(sql, [*params, int(limit), int(offset)])]

    def _word_matches(self, match: str) -> int:
        """How many tasks an FTS query matches (from the full-text index alone)."""
        return int(self.db.execute("SELECT count(*) FROM tasks_fts WHERE tasks_fts MATCH ?", [match]).fetchone()[0])

    def count_tasks(self, where: TaskFilter | None = None, **fields: Any) -> int:
        """How many tasks match the same filter as `query_tasks` (a word search alone: from the full-text index)."""
        where = _filter(where, fields)
        match = fts_query(where.text or "")
        if match and where == TaskFilter(text=where.text):
            return self._word_matches(match)
        scan = bool(match) and self._word_matches(match) > SCAN_MATCHES
        sql_where, params = self._where(where, scan)
        return int(self.db.execute(f"SELECT count(*) FROM tasks{sql_where}", params).fetchone()[0])
