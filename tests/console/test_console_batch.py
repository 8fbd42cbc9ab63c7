"""From an epoch's batches to a batch's seed and variations, a task's GRPO groups and its lineage tree: the rows
shown equal the database's, the advantages are the group-normalised rewards, a lineage node opens in the tasks
screen; and an SVG snapshot of each view on the fixed session."""

from __future__ import annotations

import sqlite3
import statistics

from conftest import wait_until
from textual.widgets import Select, Tree

from genenv_console.__main__ import make_app
from genenv_console.data import fmt
from genenv_console.safe import clean
from genenv_console.screens.batch import BatchTasksScreen, GroupScreen
from genenv_console.screens.drill import EpochBatchesScreen
from genenv_console.screens.help import HelpScreen
from genenv_console.screens.lineage import LineageScreen
from genenv_console.screens.tasks import TasksScreen
from genenv_console.widgets.plots import CalibrationPlot
from genenv_engine.core.records import Task
from genenv_engine.storage.store import Store, TaskFilter

SIZE = (140, 44)


def _db(path) -> sqlite3.Connection:
    conn = sqlite3.connect(path / "genenv.db")
    conn.row_factory = sqlite3.Row
    return conn


def _cells(table, row: int) -> list[str]:
    return [c.plain for c in table.get_row_at(row)]


def _add_lineage(path) -> None:
    """Simulator versions on the fixed session's variations, a later version's variation of an epoch-1 seed and a
    hand edit of one variation: a tree of three levels written by two simulator versions."""
    with Store(path / "genenv.db") as store:
        store.db.execute("UPDATE tasks SET simulator_version = epoch - 1 WHERE origin = 'generated'")
        seed = store.batches(1)[0]["seed_task_id"]
        later = Task(
            id="gen/e2/bfcl/0099-0",
            benchmark="bfcl",
            prompt="F: add(a:int,b:int) | Q: add 1 and 2",
            answer="add(a=1,b=2)",
            origin="generated",
            split="generated",
            parent_id=seed,
            epoch=2,
            simulator_version=1,
            generator="simulator@e1",
        )
        store.insert_tasks([later], batch_id=f"e2/{seed}")
        store.set_task_stats(later.id, p_hat=0.875)
        first = store.batch_tasks(f"e1/{seed}")[1]["id"]
        store.revise_task(
            first,
            store.get_task(first).with_(
                id=first + "/r1", prompt="F: add(a:int) | Q: add 9", simulator_version=None, generator="hand-edit"
            ),
        )


async def _open_batches(app, pilot, epoch: int = 1) -> EpochBatchesScreen:
    await pilot.pause()
    plot = app.dashboard.query_one(CalibrationPlot)
    plot.focus()
    await pilot.press("right", *["left"] * (2 - epoch))  # the first key puts the cursor on the last epoch (2)
    assert plot.cursor == epoch
    await pilot.press("enter")
    await wait_until(lambda: isinstance(app.screen, EpochBatchesScreen), 10, "the batches")
    return app.screen


async def test_enter_walks_from_a_batch_to_its_tasks_and_a_tasks_grpo_groups(fixed_session):
    app = make_app(fixed_session, sessions_root=fixed_session.parent, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        batches = await _open_batches(app, pilot, 1)
        db = _db(fixed_session)
        stored = db.execute("SELECT id, seed_task_id FROM batches WHERE epoch = 1 ORDER BY id").fetchall()
        assert batches.ids == [b["id"] for b in stored]
        await pilot.press("down", "enter")  # the second batch
        await wait_until(lambda: isinstance(app.screen, BatchTasksScreen) and app.screen.tasks, 10, "its tasks")
        screen = app.screen
        batch = stored[1]
        assert screen.batch_id == batch["id"]
        variations = db.execute("SELECT * FROM tasks WHERE batch_id = ? ORDER BY id", [batch["id"]]).fetchall()
        assert [t["id"] for t in screen.tasks] == [batch["seed_task_id"], *[v["id"] for v in variations]]
        table = screen.query_one("#drill-table")
        assert table.row_count == 1 + len(variations) == 3
        for i, v in enumerate(variations, 1):
            wins = db.execute(
                "SELECT count(*), sum(success) FROM rollouts WHERE task_id = ? AND purpose = 'train'", [v["id"]]
            ).fetchone()
            cells = _cells(table, i)
            assert cells[0] == "var" and cells[1] == v["id"] and cells[5] == fmt(v["p_hat"])
            assert cells[4] == ("valid" if v["valid"] else clean(f"✗ {v['reason']}", 40, one_line=True))
            assert cells[7] == (f"{wins[1]}/{wins[0]}" if wins[0] else "-")
        assert _cells(table, 0)[:2] == ["seed", batch["seed_task_id"]]

        await pilot.press("down", "enter")  # the first variation
        await wait_until(lambda: isinstance(app.screen, GroupScreen) and app.screen.detail, 10, "its groups")
        group = app.screen
        k = app.session_config.agent.rollouts
        rewards = [
            r[0]
            for r in db.execute(
                "SELECT reward FROM rollouts WHERE task_id = ? AND purpose = 'train' ORDER BY id", [variations[0]["id"]]
            )
        ]
        assert len(rewards) == k == 4 and len(group.groups()) == 1
        mean, std = statistics.mean(rewards), statistics.stdev(rewards)
        expected = [(r - mean) / (std + 1e-6) for r in rewards]
        assert group.groups()[0]["advantages"] == [float(a) for a in group.groups()[0]["advantages"]]
        assert all(abs(a - e) < 1e-5 for a, e in zip(group.groups()[0]["advantages"], expected, strict=False))
        shown = group.query_one("#drill-table")
        assert shown.row_count == k
        assert [_cells(shown, i)[5] for i in range(k)] == [f"{e:+.2f}" for e in expected]
        assert [_cells(shown, i)[4] for i in range(k)] == [fmt(r) for r in rewards]
        await pilot.press("escape")
        assert app.screen is screen
        await pilot.press("l")  # the variation's lineage; enter on it (the cursor starts there) shows it in the tasks
        await wait_until(lambda: isinstance(app.screen, LineageScreen) and app.screen.nodes, 10, "the lineage")
        assert app.screen.tree_nodes.keys() == {batch["seed_task_id"], *[v["id"] for v in variations]}
        await wait_until(lambda: app.screen.query_one(Tree).cursor_node.data == variations[0]["id"], 5, "the cursor")
        await pilot.press("enter")
        await wait_until(
            lambda: isinstance(app.screen, TasksScreen) and app.screen.selected_id == variations[0]["id"],
            10,
            "the variation in the tasks screen",
        )
        tasks = app.screen
        assert tasks.current.rows[tasks.query_one("#table").cursor_row]["id"] == variations[0]["id"]
        await pilot.press("d")
        await pilot.pause()
        assert app.screen is screen  # the dashboard's drill-down stays where it was
        await pilot.press("escape", "question_mark")
        await pilot.pause()
        help_rows = app.screen.query_one("#help-table")
        assert isinstance(app.screen, HelpScreen)
        assert ("epochbatches", "⏎") in [tuple(help_rows.get_row_at(i)[:2]) for i in range(help_rows.row_count)]
        db.close()


async def test_l_draws_the_lineage_tree_and_enter_opens_a_node_in_the_tasks_screen(fixed_session):
    _add_lineage(fixed_session)
    db = _db(fixed_session)
    seed = db.execute("SELECT seed_task_id FROM batches WHERE epoch = 1 ORDER BY id").fetchone()[0]
    app = make_app(fixed_session, sessions_root=fixed_session.parent, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("t")
        await pilot.pause()
        tasks = app.screen
        assert isinstance(tasks, TasksScreen)
        tasks.query_one("#origin", Select).value = "generated"  # a filter that hides the seed
        await wait_until(lambda: tasks.filters.origin == "generated", 10, "the filter")
        start = "gen/e2/bfcl/0099-0"
        tasks.query_one("#table").move_cursor(row=[r["id"] for r in tasks.current.rows].index(start))
        await pilot.pause()
        await pilot.press("l")
        await wait_until(lambda: isinstance(app.screen, LineageScreen) and app.screen.nodes, 10, "the lineage")
        lineage = app.screen
        tree = lineage.query_one(Tree)
        # every descendant of the seed in the database is a node, under its parent's writer group
        children: dict[str, list[sqlite3.Row]] = {}
        for row in db.execute("SELECT * FROM tasks WHERE parent_id IS NOT NULL"):
            children.setdefault(row["parent_id"], []).append(row)
        expected, todo = {seed}, [seed]
        while todo:
            for kid in children.get(todo.pop(), []):
                expected.add(kid["id"])
                todo.append(kid["id"])
        assert set(lineage.tree_nodes) == expected and len(expected) == 5
        assert tree.root.data == seed
        for task_id, node in lineage.tree_nodes.items():
            row = db.execute("SELECT * FROM tasks WHERE id = ?", [task_id]).fetchone()
            label = node.label.plain
            assert label.startswith(task_id) and f"p̂ {fmt(row['p_hat'])}" in label
            assert (f"sim v{row['simulator_version']}" in label) == (row["simulator_version"] is not None)
            if node is not tree.root:
                assert node.parent.parent.data == row["parent_id"]  # parent → writer group → child
        writers = sorted(str(n.label.plain).split(":")[0] for n in tree.root.children)
        assert writers == ["simulator v0 · epoch 1", "simulator v1 · epoch 2"]
        assert "p̂ 0.88" in lineage.tree_nodes[start].label.plain
        await wait_until(lambda: tree.cursor_node is lineage.tree_nodes[start], 5, "the cursor on the task")

        tree.move_cursor(tree.root)
        await pilot.press("enter")  # the seed: the filter that hides it is cleared
        await wait_until(lambda: app.screen is tasks and tasks.selected_id == seed, 10, "the seed in the tasks")
        assert tasks.filters == TaskFilter() and tasks.query_one("#origin", Select).is_blank()
        table = tasks.query_one("#table")
        assert tasks.current.rows[table.cursor_row]["id"] == seed
        await pilot.press("question_mark")
        help_rows = app.screen.query_one("#help-table")
        assert ("tasks", "l", "Lineage tree") in [tuple(help_rows.get_row_at(i)) for i in range(help_rows.row_count)]
    db.close()


def test_batch_tasks_snapshot(fixed_session, snap_compare):
    app = make_app(fixed_session, sessions_root=fixed_session.parent, autostart=False)

    async def run_before(pilot) -> None:
        await _open_batches(app, pilot, 1)
        await pilot.press("down", "down", "down", "enter")  # the batch with an invalid variation
        await wait_until(lambda: isinstance(app.screen, BatchTasksScreen) and app.screen.tasks, 10, "its tasks")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_group_snapshot(fixed_session, snap_compare):
    app = make_app(fixed_session, sessions_root=fixed_session.parent, autostart=False)

    async def run_before(pilot) -> None:
        await _open_batches(app, pilot, 1)
        await pilot.press("down", "enter")
        await wait_until(lambda: isinstance(app.screen, BatchTasksScreen) and app.screen.tasks, 10, "its tasks")
        await pilot.press("down", "enter")
        await wait_until(lambda: isinstance(app.screen, GroupScreen) and app.screen.detail, 10, "its groups")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_lineage_snapshot(fixed_session, snap_compare):
    _add_lineage(fixed_session)
    app = make_app(fixed_session, sessions_root=fixed_session.parent, autostart=False)

    async def run_before(pilot) -> None:
        await pilot.press("t")
        await pilot.pause()
        tasks = app.screen
        tasks.query_one("#table").move_cursor(row=[r["id"] for r in tasks.current.rows].index("gen/e2/bfcl/0099-0"))
        await pilot.pause()
        await pilot.press("l")
        await wait_until(lambda: isinstance(app.screen, LineageScreen) and app.screen.nodes, 10, "the lineage")
        await pilot.pause()
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
