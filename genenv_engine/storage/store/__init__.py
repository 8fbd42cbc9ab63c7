"""The run's SQLite store, the only package that holds SQL: `Store` (one session's database, as verb methods) and the
read-only readers of a database file.

Modules: `core` (`Store`: connections, write transactions, the writes), `reads`, `search` and `lineage` (the reads
`Store` inherits, each a `part.StorePart`), `migrations` (the schema), `readers` (read-only connections and the
funnel's queries), `funnel` (the funnel arithmetic, pure) and `rows` (row encoding, `TaskFilter`). Every public name
is re-exported here.
"""

from genenv_engine.storage.store.core import Store
from genenv_engine.storage.store.funnel import CAP_REASONS, FUNNEL_STAGES, TRAIN_SOURCES, funnel_validity, with_admitted
from genenv_engine.storage.store.lineage import LINEAGE_COLUMNS, LINEAGE_DEPTH, LINEAGE_NODES, LINEAGE_PROMPT_CHARS
from genenv_engine.storage.store.migrations import MIGRATIONS
from genenv_engine.storage.store.readers import (
    BUSY_TIMEOUT_MS,
    probe_database,
    read_only,
    read_only_funnel,
    read_only_rows,
)
from genenv_engine.storage.store.rows import GENERATED_ORIGINS, TaskFilter, fts_query
from genenv_engine.storage.store.search import SCAN_MATCHES

__all__ = [
    "BUSY_TIMEOUT_MS",
    "CAP_REASONS",
    "FUNNEL_STAGES",
    "GENERATED_ORIGINS",
    "LINEAGE_COLUMNS",
    "LINEAGE_DEPTH",
    "LINEAGE_NODES",
    "LINEAGE_PROMPT_CHARS",
    "MIGRATIONS",
    "SCAN_MATCHES",
    "TRAIN_SOURCES",
    "Store",
    "TaskFilter",
    "fts_query",
    "funnel_validity",
    "probe_database",
    "read_only",
    "read_only_funnel",
    "read_only_rows",
    "with_admitted",
]
