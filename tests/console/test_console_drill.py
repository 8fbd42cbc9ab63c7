"""From a dashboard plot to what is behind it: an epoch's batches, its held-out answers and what flipped."""

from __future__ import annotations

from conftest import first, wait_until

from genenv_console import messages as M
from genenv_console.__main__ import make_app
from genenv_console.screens.drill import EpochBatchesScreen, HeldoutEpochScreen, batch_rows
from genenv_console.widgets.plots import CalibrationPlot, HeldoutPlot
from genenv_engine.storage.session_view import SessionView
from genenv_engine.storage.store import Store


async def test_enter_on_a_plot_opens_the_epoch_behind_its_cursor(tmp_path, scripted_factory):
    app = make_app(preset="micro", overrides={"epochs": 2}, sessions_root=tmp_path, backend_factory=scripted_factory)
    msgs: list = []
    async with app.run_test(size=(160, 48), message_hook=msgs.append) as pilot:
        await wait_until(lambda: first(msgs, M.RunFinished), 120, "the run")
        await pilot.pause()
        plot = app.dashboard.query_one(CalibrationPlot)
        plot.focus()
        await pilot.press("right")  # the cursor starts at the last epoch
        await pilot.press("left")
        assert plot.cursor == 1
        await pilot.press("enter")
        await wait_until(lambda: isinstance(app.screen, EpochBatchesScreen), 10, "the batches")
        with Store(app.session_path / "genenv.db") as store:
            stored = store.batches(1)
            view = SessionView.from_store(store, app.session_config, app.session_path)
        table = app.screen.query_one("#drill-table")
        assert table.row_count == len(stored) > 0 and app.screen.rows == batch_rows(view, 1)
        assert {r[0] for r in app.screen.rows} == {b["id"] for b in stored}
        await pilot.press("escape")

        held = app.dashboard.query_one(HeldoutPlot)
        held.focus()
        await pilot.press("enter")  # the last epoch
        await wait_until(lambda: isinstance(app.screen, HeldoutEpochScreen), 30, "the held-out answers")
        screen = app.screen
        with Store(app.session_path / "genenv.db") as store:
            rows = {m["epoch"]: m for m in store.epoch_metrics()}
            answers = store.heldout_answers(2)
        now, before = rows[2]["heldout_correct"]["bfcl"], rows[1]["heldout_correct"]["bfcl"]
        assert screen.epoch == 2 and screen.now == now and screen.before == before
        all_rows = screen.rows()
        assert len(all_rows) == len(now) == len(answers)
        assert all(r[3] == ("✓" if answers[r[0]]["success"] else "✗") for r in all_rows)  # stored answer, verdict
        flips = sum(a != b for a, b in zip(now, before, strict=False))
        await pilot.press("f")
        assert len(screen.rows()) == flips == screen.query_one("#drill-table").row_count
        await pilot.press("f", "l")
        assert {r[1] for r in screen.rows()} == {str(screen.levels[0])}


def test_a_tasks_grpo_groups_carry_the_trainers_advantages(tmp_path):
    import torch

    from genenv_console.data import task_detail
    from genenv_console.screens.tasks import detail_text
    from genenv_engine.config import load_config
    from genenv_engine.core.algorithms import group_advantages
    from genenv_engine.method.loop import run
    from genenv_engine.storage.session import Session
    from genenv_engine.testing import scripted_backends

    session = Session.create(load_config("micro", overrides={"epochs": 2}), tmp_path / "s")
    run(session, backend_factory=scripted_backends(p=0.5))
    k = session.config.agent.rollouts
    store = session.store
    task_id = store.db.execute(
        "SELECT task_id FROM rollouts WHERE purpose = 'train' GROUP BY task_id ORDER BY count(*) DESC LIMIT 1"
    ).fetchone()[0]
    train = [r for r in store.rollouts_for(task_id) if r["purpose"] == "train"]
    detail = task_detail(store, task_id, group_size=k)
    groups = detail["groups"]
    assert len(groups) == len(train) // k and sum(len(g["rollouts"]) for g in groups) == len(train)
    for g in groups:
        rewards = torch.tensor([[r["reward"] for r in g["rollouts"]]])
        assert g["advantages"] == group_advantages(rewards)[0].tolist()
        assert {r["epoch"] for r in g["rollouts"]} == {g["epoch"]}
    text = detail_text(detail).plain
    assert "GRPO groups" in text and f"epoch {groups[-1]['epoch']}: mean reward" in text
    store.close()


async def test_the_tasks_table_gives_the_prompt_the_free_width(tmp_path, scripted_factory):
    from genenv_console.data import COLUMN_WIDTHS
    from genenv_console.screens.tasks import TasksScreen

    app = make_app(preset="micro", overrides={"epochs": 1}, sessions_root=tmp_path, backend_factory=scripted_factory)
    msgs: list = []
    async with app.run_test(size=(180, 50), message_hook=msgs.append) as pilot:
        await wait_until(lambda: first(msgs, M.RunFinished), 120, "the run")
        await pilot.press("t")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TasksScreen)
        table = screen.query_one("#table")
        width = screen.prompt_chars()
        assert width >= 35 and width > COLUMN_WIDTHS[0]  # the prompt is the widest column
        line = table.get_row_at(0)[0].plain
        assert len(line) <= table.size.width  # nothing cut off by the table's edge
        row = screen.current.rows[0]
        assert row["prompt"].replace("\n", " ")[:20] in line or len(row["prompt"]) < 20
