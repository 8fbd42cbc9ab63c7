"""Comparing runs: marking sessions and opening the compare screen, ``--compare`` (a bench folder expanding into
its sessions, and the refusals), the read-only reads, the funnel table, the exported report, hostile session names,
a snapshot.

Each session is written through the store with its own metrics, so a curve drawn for the wrong session, or in the
wrong order, shows.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import pytest
from conftest import wait_until, write_fixed_session
from textual.widgets import DataTable

from genenv_console.__main__ import main, make_app
from genenv_console.compare import CompareError, expand_compare, read_runs, report_path
from genenv_console.safe import clean
from genenv_console.screens.compare import CompareScreen
from genenv_console.screens.help import HelpScreen
from genenv_console.screens.sessions import SessionsScreen
from genenv_engine.config import load_config
from genenv_engine.core.records import Task
from genenv_engine.storage import lease
from genenv_engine.storage.session import Session
from genenv_engine.storage.session_view import SessionView
from genenv_engine.storage.store import Store, read_only_funnel, read_only_rows

SIZE = (150, 44)


DRAFT_REASONS = (None, "parse_error: no call", None, "duplicate_cap: like gen/0", "parse_error: eof", "bad_args: x")
"""Validator verdicts of a written session's drafts, in turn (None: admitted)."""


def write_drafts(store: Store, epoch: int, n: int) -> None:
    """``n`` generated tasks of ``epoch`` with `DRAFT_REASONS` in turn; two train rollouts on all but the last
    admitted one."""
    tasks = [
        Task(
            id=f"gen/e{epoch}/bfcl/{i:04d}",
            benchmark="bfcl",
            prompt=f"q{i}",
            answer="a",
            origin="generated",
            split="generated",
            epoch=epoch,
            valid=DRAFT_REASONS[i % len(DRAFT_REASONS)] is None,
            reason=DRAFT_REASONS[i % len(DRAFT_REASONS)],
        )
        for i in range(n)
    ]
    store.insert_tasks(tasks)
    store.insert_rollouts(
        [
            {"task_id": t.id, "epoch": epoch, "response": "a", "reward": 1.0, "success": True}
            for t in [t for t in tasks if t.valid][:-1]
            for _ in range(2)
        ]
    )


def write_run(folder: Path, k: int, *, epochs: int = 3, seed: int = 0, mode: str = "trained", drafts: int = 0) -> Path:
    """A session whose held-out and calibration values depend on ``k`` (epochs 0..epochs-1 finished); with
    ``drafts``, each epoch after the first wrote ``drafts + k + epoch`` tasks (`write_drafts`)."""
    config = load_config("micro", overrides={"epochs": epochs, "seed": seed, "simulator.mode": mode})
    session = Session.create(config, folder)
    store = session.store
    for epoch in range(epochs):
        store.start_epoch(epoch)
        metrics = {"heldout": {"bfcl": round(0.1 * k + 0.125 * epoch, 4)}}
        if epoch > 0:
            p = round(0.3 + 0.05 * k + 0.1 * epoch, 4)
            metrics.update(generated_success=p, generated_success_by_benchmark={"bfcl": p})
            store.upsert_batches(
                [
                    {
                        "id": f"e{epoch}/b0",
                        "epoch": epoch,
                        "benchmark": "bfcl",
                        "seed_task_id": "s",
                        "n_generated": 2,
                        "n_valid": 2,
                        "p_hat": p,
                        "r_env": None,
                        "in_band": True,
                    }
                ]
            )
            if drafts:
                write_drafts(store, epoch, drafts + k + epoch)
        store.finish_epoch(epoch, metrics)
    store.close()
    return session.path


def db_curves(path: Path) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """(calibration, held-out) points of a session straight from its database."""
    with Store(path / "genenv.db") as store:
        rows = [r for r in store.epoch_metrics() if r["status"] == "done"]
    calibration = [
        (r["epoch"], r["generated_success_by_benchmark"]["bfcl"]) for r in rows if "generated_success_by_benchmark" in r
    ]
    return calibration, [(r["epoch"], r["heldout"]["bfcl"]) for r in rows]


def digest(path: Path) -> str:
    return hashlib.sha256((path / "genenv.db").read_bytes()).hexdigest()


def plotted(screen: CompareScreen) -> tuple[list, list]:
    cal = screen.query_one("#compare-calibration").data
    held = screen.query_one("#compare-heldout").data
    return ([(s.label, s.points) for s in cal.lines], [(s.label, s.points) for s in held.lines])


def screen_text(app) -> list[str]:
    return [seg.text for strip in app.screen._compositor.render_strips() for seg in strip]


@pytest.fixture
def three_runs(tmp_path: Path) -> list[Path]:
    root = tmp_path / "sessions"
    return [write_run(root / name, k, seed=k) for k, name in enumerate(("alpha-run", "beta-run", "gamma-run"))]


# -- the sessions screen -------------------------------------------------------------------------------------------


async def test_mark_sessions_and_open_the_comparison(three_runs):
    alpha, beta, gamma = three_runs
    before = {p: digest(p) for p in three_runs}
    app = make_app(sessions_root=alpha.parent, browse=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        assert [s.path for s in screen.sessions] == [gamma, beta, alpha]  # newest name first
        await pilot.press("C")  # nothing marked: a warning, no screen
        assert app.screen is screen
        await pilot.press("m", "down", "m", "m", "down", "m")  # gamma marked, beta marked and unmarked, alpha
        assert screen.marked == [gamma, alpha]
        table = screen.query_one("#sessions-table", DataTable)
        assert [table.get_row_at(i)[0].plain for i in range(3)] == ["[1]", "", "[2]"]
        await pilot.press("C")
        await wait_until(lambda: isinstance(app.screen, CompareScreen) and app.screen.runs, 30, "the comparison")
        compare = app.screen
        assert compare.paths == [gamma, alpha]
        cal, held = plotted(compare)
        assert cal == [("gamma-run", db_curves(gamma)[0]), ("alpha-run", db_curves(alpha)[0])]
        assert held == [("gamma-run", db_curves(gamma)[1]), ("alpha-run", db_curves(alpha)[1])]
        rows = [compare.query_one(DataTable).get_row_at(i) for i in range(compare.query_one(DataTable).row_count)]
        assert [[c.plain for c in r] for r in rows] == [
            ["gamma-run", "micro/trained", "2", "2/3", "bfcl", "0.200", "0.450 (e2)", "+0.250"],
            ["alpha-run", "micro/trained", "0", "2/3", "bfcl", "0.000", "0.250 (e2)", "+0.250"],
        ]
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        help_rows = [
            app.screen.query_one(DataTable).get_row_at(i) for i in range(app.screen.query_one(DataTable).row_count)
        ]
        assert ["compare", "x", "Export comparison"] in help_rows and ["compare", "escape", "Back"] in help_rows
        await pilot.press("escape", "escape")
        assert app.screen is screen
        await pilot.press("question_mark")
        help_rows = [
            app.screen.query_one(DataTable).get_row_at(i) for i in range(app.screen.query_one(DataTable).row_count)
        ]
        assert ["sessions", "m", "Mark to compare"] in help_rows and ["sessions", "C", "Compare marked"] in help_rows
        await pilot.press("escape")
    assert {p: digest(p) for p in three_runs} == before  # read, never written
    assert all(lease.holder(p) is None and not (p / lease.LOCK_NAME).exists() for p in three_runs)


async def test_at_most_four_sessions_are_marked(tmp_path):
    root = tmp_path / "sessions"
    paths = [write_run(root / f"run-{i}", i, epochs=1) for i in range(5)]
    app = make_app(sessions_root=root, browse=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        await pilot.press("m", "down", "m", "down", "m", "down", "m", "down", "m")
        assert screen.marked == paths[::-1][:4]  # the fifth is refused
        await pilot.press("C")
        await wait_until(lambda: isinstance(app.screen, CompareScreen) and app.screen.runs, 30, "the comparison")
        assert [r.path for r in app.screen.runs] == paths[::-1][:4]


# -- --compare -----------------------------------------------------------------------------------------------------


def test_a_bench_folder_expands_into_its_sessions_and_bad_folders_are_refused(tmp_path, capsys):
    bench = tmp_path / "bench"
    arms = [
        write_run(bench / name, k, epochs=1, mode=mode)
        for k, (name, mode) in enumerate((("trained-s0", "trained"), ("off-s1", "off"), ("frozen-s0", "frozen")))
    ]
    (bench / "records").mkdir()  # what else a bench folder holds
    (bench / "ablation.md").write_text("x")
    assert expand_compare([bench]) == sorted(arms)
    assert expand_compare([arms[0], bench]) == [arms[0], *sorted(arms[1:])]  # in order, no duplicates
    assert [r.arm for r in read_runs(sorted(arms))] == ["frozen", "off", "trained"]

    for extra in ("static-s0", "uniform-s0"):
        write_run(bench / extra, 9, epochs=1)
    with pytest.raises(CompareError, match="5 sessions to compare") as info:
        expand_compare([bench])
    assert all(name in str(info.value) for name in ("frozen-s0", "off-s1", "static-s0", "trained-s0", "uniform-s0"))
    assert main(["--compare", str(bench)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("genenv-console: 5 sessions to compare (") and "at most 4" in err
    assert "Traceback" not in err

    lone = tmp_path / "lone"
    write_run(lone / "only-s0", 1, epochs=1)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("x")
    cases = {
        (str(lone),): "needs 2 to 4 sessions; got 1 (only-s0)",
        (str(empty),): "is neither a genenv session",
        (str(arms[0]), str(tmp_path / "missing")): "no such folder",
        (str(arms[0] / "config.toml"), str(arms[1])): "no such folder",
        (str(arms[0]), str(arms[0])): "got 1",
    }
    for args, text in cases.items():
        assert main(["--compare", *args]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("genenv-console: ") and text in err and "Traceback" not in err, err
    assert main(["--compare", str(arms[0]), str(arms[1]), "--preset", "micro"]) == 2
    assert "--compare takes only session folders" in capsys.readouterr().err


async def test_compare_opens_directly_on_a_bench_folder(tmp_path):
    bench = tmp_path / "bench"
    arms = [write_run(bench / name, k, seed=k) for k, name in enumerate(("trained-s0", "off-s1"))]
    app = make_app(compare=[bench], sessions_root=None)  # --compare without --sessions-root
    assert app.initial_compare == sorted(arms) and app.sessions_root == bench
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: isinstance(app.screen, CompareScreen) and app.screen.runs, 30, "the comparison")
        off, trained = sorted(arms)
        cal, held = plotted(app.screen)
        assert cal == [("off-s1", db_curves(off)[0]), ("trained-s0", db_curves(trained)[0])]
        assert held == [("off-s1", db_curves(off)[1]), ("trained-s0", db_curves(trained)[1])]
        assert app.session_path is None and app.ui_store is None and app.runner is None  # no session opened
        await pilot.press("escape")
        assert isinstance(app.screen, SessionsScreen)
        assert [i.path for i in app.screen.sessions] == sorted(arms, reverse=True)  # the bench's sessions


# -- read-only -----------------------------------------------------------------------------------------------------


def test_read_only_view_equals_the_stores_and_writes_nothing(fixed_session):
    assert (fixed_session / "genenv.db").exists()
    plain = SessionView.open(fixed_session)
    before = digest(fixed_session)
    with lease.acquire(fixed_session, "a running engine"):  # someone else runs it: reading needs no lease
        view = SessionView.open(fixed_session, read_only=True)
        runs = read_runs([fixed_session, fixed_session])
    assert view.epochs == plain.epochs and view.batches == plain.batches and view.config == plain.config
    assert digest(fixed_session) == before
    epochs, batches = read_only_rows(fixed_session / "genenv.db")
    with Store(fixed_session / "genenv.db") as store:
        assert epochs == store.epoch_metrics() and batches == store.batches()
    assert runs[0].heldout == {"bfcl": [(0, 0.125), (1, 0.25), (2, 0.375)]}
    with pytest.raises(FileNotFoundError):
        read_only_rows(fixed_session / "missing.db")


def test_an_older_database_is_read_without_being_migrated(tmp_path, monkeypatch):
    import sqlite3

    import genenv_engine.storage.store.readers as store_module

    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    conn.executescript("""
        CREATE TABLE epochs (epoch INTEGER PRIMARY KEY, status TEXT, started_at TEXT, finished_at TEXT, metrics TEXT);
        CREATE TABLE batches (id TEXT PRIMARY KEY, epoch INTEGER, benchmark TEXT, seed_task_id TEXT,
                              n_generated INTEGER, n_valid INTEGER, p_hat REAL, r_env REAL, in_band INTEGER);
        INSERT INTO epochs VALUES (0, 'done', NULL, NULL, '{"heldout": {"bfcl": 0.5}}');
        INSERT INTO batches VALUES ('e1/b', 1, 'bfcl', 's', 2, 2, 0.5, NULL, 1);
    """)
    conn.commit()
    conn.close()
    before = db.read_bytes()
    epochs, batches = read_only_rows(db)
    assert epochs == [{"epoch": 0, "status": "done", "started_at": None, "finished_at": None, "heldout": {"bfcl": 0.5}}]
    assert batches[0]["in_band"] is True and batches[0]["prompt_note"] is None
    assert db.read_bytes() == before  # no migration, no meta row

    calls = []
    real = store_module._read_only

    def refuse_plain(path, query, read):  # what SQLite does for a WAL file in a folder nobody may write
        calls.append(query)
        if "immutable" not in query:
            raise sqlite3.OperationalError("attempt to write a readonly database")
        return real(path, query, read)

    monkeypatch.setattr(store_module, "_read_only", refuse_plain)
    monkeypatch.setattr(store_module.os, "access", lambda path, mode: False)
    assert read_only_rows(db) == (epochs, batches) and calls == ["?mode=ro", "?mode=ro&immutable=1"]
    monkeypatch.setattr(store_module.os, "access", lambda path, mode: True)
    with pytest.raises(sqlite3.OperationalError):  # a writable folder: the error is real
        read_only_rows(db)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_session_in_a_read_only_folder_compares(tmp_path):
    runs = [write_run(tmp_path / "ro" / name, k) for k, name in enumerate(("a-run", "b-run"))]
    for p in runs:  # checkpoint the WAL so the database file holds everything, then forbid writes
        with Store(p / "genenv.db") as store:
            store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    expected = [db_curves(p)[1] for p in runs]
    for p in [*runs, runs[0].parent]:
        p.chmod(0o555)
    try:
        read = read_runs(runs)
        assert [r.heldout["bfcl"] for r in read] == expected
    finally:
        for p in [runs[0].parent, *runs]:
            p.chmod(0o755)


# -- the funnel table ----------------------------------------------------------------------------------------------


def funnel_figures(path: Path) -> list[list[str]]:
    """Per benchmark, the session's `read_only_funnel` summed over its epochs: drafts, kept/drafts, trained and the
    two most frequent rejection reasons (then how many others)."""
    entries = read_only_funnel(path / "genenv.db")
    rows = []
    for bench in sorted({e["benchmark"] for e in entries}):
        es = [e for e in entries if e["benchmark"] == bench]
        drafts, kept, trained = (sum(e[k] for e in es) for k in ("drafts", "valid", "trained"))
        reasons: dict[str, int] = {}
        for e in es:
            for reason, n in e["rejected"].items():
                reasons[reason] = reasons.get(reason, 0) + n
        ranked = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        top = [f"{r} {n}" for r, n in ranked[:2]] + ([f"+{len(ranked) - 2} more"] if len(ranked) > 2 else [])
        rows.append([path.name, bench, str(drafts), f"{kept / drafts:.3f}", str(trained), ", ".join(top)])
    return rows


async def test_the_funnel_table_shows_each_sessions_read_only_funnel(tmp_path):
    root = tmp_path / "sessions"
    runs = [write_run(root / name, k, seed=k, drafts=4) for k, name in enumerate(("left-run", "right-run"))]
    expected = [row for p in runs for row in funnel_figures(p)]
    assert len(expected) == 2 and expected[0][2:] != expected[1][2:]  # a swapped row would show
    assert [row[5] for row in expected] == [
        "parse_error 4, duplicate_cap 2, +1 more",  # three reasons: two named
        "parse_error 4, bad_args 2, +1 more",
    ]  # a tie goes by name
    before = [digest(p) for p in runs]
    app = make_app(compare=runs, sessions_root=root)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(lambda: isinstance(app.screen, CompareScreen) and app.screen.runs, 30, "the comparison")
        await pilot.pause()
        screen = app.screen
        table = screen.query_one("#compare-funnel", DataTable)
        assert [str(c.label) for c in table.columns.values()] == [
            "session",
            "bench",
            "drafts",
            "valid (kept/drafts)",
            "trained",
            "top rejections",
        ]
        assert [[c.plain for c in table.get_row_at(i)] for i in range(table.row_count)] == expected
        for size in ((120, 40), (180, 50)):  # the plots keep most of the height; every row of both tables shows
            await pilot.resize_terminal(*size)
            await pilot.pause()
            assert screen.query_one("#compare-plots").size.height > size[1] / 2, size
            for name in ("#compare-table", "#compare-funnel"):
                assert screen.query_one(name).size.height == 3, (name, size)  # header and two rows
    assert [digest(p) for p in runs] == before  # read, never written


# -- the report ----------------------------------------------------------------------------------------------------


async def test_export_writes_the_table_and_every_epochs_values(three_runs):
    alpha, beta, gamma = three_runs
    app = make_app(compare=[beta, gamma, alpha], sessions_root=alpha.parent)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: isinstance(app.screen, CompareScreen) and app.screen.runs, 30, "the comparison")
        await pilot.press("x")
        await wait_until(lambda: app.screen.exported is not None, 30, "the report")
        path, runs = app.screen.exported, app.screen.runs
        status = str(app.screen.query_one("#compare-status").render())
    assert path == alpha.parent / "compare-beta-run-gamma-run-alpha-run.md" == report_path(runs)
    assert str(path) in status
    text = path.read_text()
    order = [beta, gamma, alpha]
    for p in order:
        cal, held = db_curves(p)
        e0, (last_epoch, last) = held[0][1], held[-1]
        row = (
            f"| {p.name} | micro/trained | {[alpha, beta, gamma].index(p)} | 2/3 | bfcl | {e0:.3f} | "
            f"{last:.3f} (e{last_epoch}) | {last - e0:+.3f} |"
        )
        assert row in text, row
    cal_section = text.split("## Calibration")[1].split("## Held-out")[0]
    held_section = text.split("## Held-out")[1]
    assert "| epoch | beta-run | gamma-run | alpha-run |" in cal_section
    assert "| epoch | beta-run | gamma-run | alpha-run |" in held_section
    for epoch in (1, 2):
        values = [dict(db_curves(p)[0])[epoch] for p in order]
        assert f"| {epoch} | " + " | ".join(f"{v:.3f}" for v in values) + " |" in cal_section
    for epoch in (0, 1, 2):
        values = [dict(db_curves(p)[1])[epoch] for p in order]
        assert f"| {epoch} | " + " | ".join(f"{v:.3f}" for v in values) + " |" in held_section
    assert "α=0.5 ± 0.1" in text


def test_the_report_carries_each_sessions_funnel_from_its_database(tmp_path):
    from genenv_console.compare import comparison_markdown

    paths = []
    for name in ("a-run", "b-run"):
        session = write_fixed_session(tmp_path / "cmp" / name)
        session.store.close()
        paths.append(session.path)
    with Store(paths[1] / "genenv.db") as store:  # the second differs: a capped draft, an untrained variation
        store.db.execute("UPDATE tasks SET valid = 0, reason = 'duplicate_cap: x' WHERE id = 'gen/e2/bfcl/0000-0'")
        store.db.execute("DELETE FROM rollouts WHERE task_id = 'gen/e1/bfcl/0000-0'")
        store.db.execute("DELETE FROM funnels")  # computed from the edited rows, not the epochs' snapshots
    before = [digest(p) for p in paths]
    runs = read_runs(paths)
    assert [digest(p) for p in paths] == before  # read read-only
    cells = {}
    for path, run in zip(paths, runs, strict=False):
        with Store(path / "genenv.db") as store:
            assert run.funnel == store.funnel()
            q = lambda sql, *a: store.db.execute(sql, a).fetchone()[0]  # noqa: E731
            for epoch in (1, 2):
                gen = "FROM tasks WHERE origin = 'generated' AND epoch = ?"
                cells[path.name, epoch] = (
                    q(f"SELECT count(*) {gen}", epoch),
                    q(f"SELECT count(*) {gen} AND valid = 1", epoch),
                    q(f"SELECT count(*) {gen} AND (valid = 1 OR reason LIKE 'duplicate_cap%')", epoch),
                    q("SELECT count(DISTINCT task_id) FROM rollouts WHERE purpose = 'train' AND epoch = ?", epoch),
                )
    assert cells["a-run", 2] != cells["b-run", 2] and cells["a-run", 1] != cells["b-run", 1]
    text = comparison_markdown(runs).split("## Funnel")[1]
    for path in paths:
        drafts, kept, passed, trained = (sum(cells[path.name, e][i] for e in (1, 2)) for i in range(4))
        row = f"| {path.name} | bfcl | 2 | {drafts} | {passed} | {kept} | {kept / drafts:.3f} | {trained} |"
        assert row in text, row
    assert "| epoch | a-run | b-run |" in text
    for epoch in (1, 2):
        per = [cells[name, epoch] for name in ("a-run", "b-run")]
        assert f"| {epoch} | " + " | ".join(f"{k}/{d} → {t}" for d, k, _, t in per) + " |" in text


# -- hostile names -------------------------------------------------------------------------------------------------

FORBIDDEN = {
    *range(0x00, 0x20),
    0x7F,
    *range(0x80, 0xA0),
    0x202A,
    0x202B,
    0x202C,
    0x202D,
    0x202E,
    0x2066,
    0x2067,
    0x2068,
    0x2069,
}
HOSTILE_NAMES = ("[bold red]RED [@click=app.quit]q", "\x1b]0;pwned\x07\x1b[2J|pipe|\u202eevil [link=x]")
"""Folder names (no ``/``: it would nest) that are markup, escapes, a bidi override and table pipes."""


async def test_hostile_session_names_are_drawn_literally(tmp_path):
    root = tmp_path / "sessions"
    runs = [write_run(root / name, k) for k, name in enumerate(HOSTILE_NAMES)]
    app = make_app(compare=runs, sessions_root=root)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(lambda: isinstance(app.screen, CompareScreen) and app.screen.runs, 30, "the comparison")
        screen = app.screen
        await pilot.pause()
        drawn = screen_text(app)
        assert not {s for s in drawn if any(ord(c) in FORBIDDEN for c in s)}
        table = screen.query_one(DataTable)
        assert [table.get_row_at(i)[0].plain for i in range(2)] == [clean(n, 60, one_line=True) for n in HOSTILE_NAMES]
        assert "[bold red]RED [@click=app.quit]q" in "".join(drawn)  # markup drawn as written
        cal, _ = plotted(screen)
        assert [label for label, _ in cal] == [clean(n, 40, one_line=True) for n in HOSTILE_NAMES]
        await pilot.press("x")
        await wait_until(lambda: screen.exported is not None, 30, "the report")
        assert app.is_running
    path = screen.exported
    assert path.parent == root and re.fullmatch(r"compare-[A-Za-z0-9._-]+\.md", path.name)
    text = path.read_text()
    assert not {c for c in text if ord(c) in FORBIDDEN - {0x0A}}
    assert "\\|pipe\\|" in text  # a pipe in a name does not split a table cell

    app = make_app(sessions_root=root, browse=True)  # the same names on the sessions screen, marked
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("m", "down", "m")
        assert not {s for s in screen_text(app) if any(ord(c) in FORBIDDEN for c in s)}
        await pilot.press("C")
        await wait_until(lambda: isinstance(app.screen, CompareScreen) and app.screen.runs, 30, "the comparison")
        await pilot.pause()
        assert not {s for s in screen_text(app) if any(ord(c) in FORBIDDEN for c in s)}
        assert app.is_running


# -- snapshot ------------------------------------------------------------------------------------------------------


def test_compare_snapshot(tmp_path, snap_compare):
    bench = tmp_path / "bench"
    runs = [
        write_run(bench / name, k, seed=k, mode=name.split("-")[0], drafts=4)
        for k, name in enumerate(("trained-s0", "off-s1", "frozen-s2"))
    ]
    app = make_app(compare=runs, sessions_root=tmp_path)

    async def run_before(pilot) -> None:
        await wait_until(lambda: isinstance(app.screen, CompareScreen) and app.screen.runs, 30, "the comparison")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(140, 44), run_before=run_before)
