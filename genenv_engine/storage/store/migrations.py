"""The store's schema, as named sqlite-utils `Migrations` applied once each, in order (`MIGRATIONS`).

A migration's name is stored in the database when it runs, so a migration is never renamed or edited once
released; a schema change is a new migration at the end.
"""

from __future__ import annotations

from sqlite_utils import Database, Migrations

MIGRATIONS = Migrations("genenv.store")


@MIGRATIONS()
def m001_initial(db: Database) -> None:
    """Create the six tables and the task indexes."""
    db.executescript(
        """
        CREATE TABLE tasks (
            id TEXT PRIMARY KEY, benchmark TEXT NOT NULL, prompt TEXT NOT NULL, answer TEXT NOT NULL,
            expected TEXT, tools TEXT, difficulty TEXT, level INTEGER, checker TEXT, granularity TEXT,
            split TEXT, origin TEXT, parent_id TEXT, epoch INTEGER, generator TEXT,
            valid INTEGER, reason TEXT, status TEXT, batch_id TEXT,
            p_hat REAL, r_env REAL, n_rollouts INTEGER NOT NULL DEFAULT 0, superseded_by TEXT,
            created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
        );
        CREATE TABLE rollouts (
            id INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT NOT NULL, epoch INTEGER,
            response TEXT, reward REAL, success INTEGER, error_type TEXT, purpose TEXT
        );
        CREATE INDEX idx_rollouts_task_id ON rollouts (task_id);
        CREATE INDEX idx_rollouts_epoch ON rollouts (epoch);
        CREATE TABLE batches (
            id TEXT PRIMARY KEY, epoch INTEGER, benchmark TEXT, seed_task_id TEXT,
            n_generated INTEGER, n_valid INTEGER, p_hat REAL, r_env REAL, in_band INTEGER
        );
        CREATE TABLE epochs (
            epoch INTEGER PRIMARY KEY, status TEXT, started_at TEXT, finished_at TEXT, metrics TEXT
        );
        CREATE TABLE events (
            id INTEGER PRIMARY KEY AUTOINCREMENT, ts TEXT, epoch INTEGER, kind TEXT, payload TEXT
        );
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
        """
    )
    for column in ("epoch", "origin", "status", "benchmark", "batch_id", "parent_id"):
        db.table("tasks").create_index([column], f"idx_tasks_{column}")


@MIGRATIONS()
def m002_fts(db: Database) -> None:
    """Full-text index over prompt and answer, kept current by insert/update/delete triggers."""
    # External-content FTS5 keys on the tasks rowid; a VACUUM may renumber rowids of a table with a
    # TEXT primary key, so run `rebuild` on tasks_fts after any VACUUM.
    db.table("tasks").enable_fts(["prompt", "answer"], fts_version="FTS5", create_triggers=True)


@MIGRATIONS()
def m003_page_indexes(db: Database) -> None:
    """Indexes matching the console's task pages (epoch DESC, id), so deep pages and filters stay fast."""
    db.execute("CREATE INDEX IF NOT EXISTS idx_tasks_epoch_desc_id ON tasks (epoch DESC, id)")
    db.execute("CREATE INDEX IF NOT EXISTS idx_tasks_origin_valid_page ON tasks (origin, valid, epoch DESC, id)")


@MIGRATIONS()
def m004_search_indexes(db: Database) -> None:
    """Indexes for the tasks screen's status pages and p̂-range counts (a word search with a p̂ range counts
    its matches along the p̂ index)."""
    db.execute("CREATE INDEX IF NOT EXISTS idx_tasks_status_page ON tasks (status, epoch DESC, id)")
    db.execute("CREATE INDEX IF NOT EXISTS idx_tasks_p_hat ON tasks (p_hat)")


@MIGRATIONS()
def m005_rollout_policy_version(db: Database) -> None:
    """Each rollout records the version of the agent weights that sampled it (the epoch of their update; NULL on
    rollouts stored before versions existed)."""
    db.execute("ALTER TABLE rollouts ADD COLUMN policy_version INTEGER")


@MIGRATIONS()
def m006_task_simulator_version(db: Database) -> None:
    """Each generated task records the version of the simulator weights that wrote it (the epoch of their RWR
    update, 0: the warm start; NULL on tasks no simulator wrote and on those stored before versions existed)."""
    db.execute("ALTER TABLE tasks ADD COLUMN simulator_version INTEGER")


@MIGRATIONS()
def m007_batch_alpha_and_prompt_note(db: Database) -> None:
    """Each variation batch records the alpha its R_env was scored against and the prompt note its simulator
    prompt carried (``prompt_note``: JSON ``{"steer": word, "success_line": line}``, NULL when the prompt had none);
    both NULL on batches stored before they existed (`genenv_engine.storage.session_view` then computes the alpha from
    the session's config)."""
    db.execute("ALTER TABLE batches ADD COLUMN alpha REAL")
    db.execute("ALTER TABLE batches ADD COLUMN prompt_note TEXT")


@MIGRATIONS()
def m008_epoch_funnels(db: Database) -> None:
    """Each finished epoch's funnel (`Store.funnel` entries as JSON), written when the epoch finishes, so reading
    the funnel of a long session does not group every rollout again. Epochs finished before it existed are
    computed from the tasks and rollouts, as before."""
    db.execute("CREATE TABLE IF NOT EXISTS funnels (epoch INTEGER PRIMARY KEY, entries TEXT NOT NULL)")
