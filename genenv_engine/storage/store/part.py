"""`StorePart`, the base of the parts `Store` takes its reads from (`TaskReads`, `TaskSearch`, `LineageReads`): what
they use of `Store` (its connection ``db``, ``_rows`` and ``get_task``), declared for the type checker alone. At run
time it is an empty class; `Store` defines them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlite_utils import Database

    from genenv_engine.core.records import Task


class StorePart:
    """A part of `Store`: its methods read through the store's ``db``, ``_rows`` and ``get_task``."""

    if TYPE_CHECKING:

        @property
        def db(self) -> Database:
            """This thread's connection (`Store.db`)."""
            ...

        def _rows(self, sql: str, params: Iterable[Any] = ()) -> Iterator[dict[str, Any]]:
            """Rows of a SELECT as dicts (`Store._rows`)."""
            ...

        def get_task(self, task_id: str) -> Task | None:
            """The task with this id, or None (`TaskReads.get_task`)."""
            ...
