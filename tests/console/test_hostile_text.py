"""Hostile task text in the console: property-based (hypothesis) and fixed hostile strings.

Generated tasks are untrusted text. Every place the console shows task text (tasks table, detail
pane, edit modal, lineage, event log, notifications; an epoch's batches, a batch's tasks, a task's GRPO groups and
its lineage tree; a rejection reason in the compare screen's funnel table) must survive unbalanced markup,
``[@click=…]`` tags, ANSI/OSC escapes, NUL, bidirectional overrides and 200k-character strings: no crash, the
text drawn literally (markup not interpreted), no control or bidi character reaching the terminal,
and long text cut with a marker. The pure sanitiser is checked on a thousand strings; the real
app (Textual Pilot, a real SQLite session) on the fixed hostile strings plus a few hypothesis-drawn ones (each app
run costs about a second: the fixed strings carry every class of hostile input, the drawn ones only mix them, and
the mixing is the sanitiser's, checked on its own above).
"""

from __future__ import annotations

import asyncio
import unicodedata

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text
from textual.widgets import DataTable, Input, Log, Static, TextArea

from genenv_console.__main__ import make_app
from genenv_console.data import table_line, table_row
from genenv_console.messages import TaskRevised
from genenv_console.safe import MAX_CHARS, clean, safe_text
from genenv_console.screens.edit import EDIT_MAX_CHARS, EditScreen
from genenv_console.screens.tasks import TasksScreen, detail_text
from genenv_engine.config import load_config
from genenv_engine.core.records import Task
from genenv_engine.environments import get_environment
from genenv_engine.storage.session import Session

HOSTILE = [
    "[/]",
    "[/bold] unbalanced [",
    "[bold red]RED[/bold red]",
    "[@click=app.quit]click me[/]",
    "[link=file:///etc/passwd]x[/link]",
    "\x1b]0;pwned title\x07",
    "\x1b[2J\x1b[H cleared",
    "\x1b[31mred\x1b[0m",
    "NUL\x00byte",
    "\u202eRTL override\u202c",
    "\u2066isolate\u2069",
    "\x9b2J C1 CSI",
    "\r carriage\rreturn",
    "tab\there\nnew\nline",
    "\u200bzero\ufeffwidth",
    "Z\u0336\u0336\u0336\u0336algo",
    "宽字符😀",
]
"""Fragments an outside tester would try first."""

FORBIDDEN = {
    *range(0x00, 0x20),
    0x7F,
    *range(0x80, 0xA0),
    0x200E,
    0x200F,
    0x061C,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
    0x2028,
    0x2029,
}
"""Code points that must never reach the terminal from task text."""

hostile_text = st.lists(
    st.one_of(st.sampled_from(HOSTILE), st.text(st.characters(exclude_categories=["Cs"]), max_size=40)), max_size=8
).map("".join)
"""Random strings made of hostile fragments and arbitrary (storable) characters."""

any_text = st.one_of(hostile_text, st.text(max_size=200))
"""Also lone surrogates and everything else Python strings can hold (the pure sanitiser must take them)."""


def leaked(text: str, allow_newlines: bool = False) -> set[str]:
    """Forbidden characters in ``text`` (newline allowed where the widget is multi-line)."""
    return {
        f"U+{ord(c):04X}"
        for c in text
        if ord(c) in FORBIDDEN and not (allow_newlines and c == "\n") or 0xD800 <= ord(c) < 0xE000
    }


# -- the sanitiser itself --------------------------------------------------------------------------


def hostile_cases(max_examples: int):
    """A console test run on ``max_examples`` generated hostile strings plus the fixed worst cases (markup, escape
    and control sequences, a 200k-character string), as ``text``."""

    def decorate(test):
        for case in reversed(FIXED_HOSTILE):
            test = example(case)(test)
        return settings(
            max_examples=max_examples,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )(given(text=hostile_text)(test))

    return decorate


FIXED_HOSTILE = (
    "[/]",
    "[bold red]RED[/bold red] [@click=app.quit]click me[/]",
    "\x1b]0;pwned title\x07\x1b[2J\x1b[H NUL\x00 \u202eevil",
    "\r",
    "y" * 200_000,
)
"""The strings every hostile console test is run on (a lone carriage return: whitespace that must still show)."""


# 1000 examples: each class of input (cut or not, one line or not, with escapes) comes up dozens of times or more
@settings(max_examples=1000, deadline=None)
@given(any_text, st.integers(1, 500), st.booleans())
def test_clean_output_is_visible_bounded_and_literal(text, limit, one_line):
    out = clean(text, limit, one_line=one_line)
    assert not leaked(out, allow_newlines=not one_line)
    if one_line:
        assert "\n" not in out and "\t" not in out
    # cut text carries the marker and the count; uncut text keeps every character (made visible)
    if len(text) > limit:
        assert out.endswith("…" if one_line else f"… [{len(text) - limit:,} more characters]")
    else:
        assert "more characters]" not in out or "more characters]" in text
    assert len(out) <= 9 * min(len(text), limit) + 40
    # nothing is interpreted as markup: the Text holds exactly the cleaned string
    assert safe_text(text, limit, one_line=one_line).plain == out
    # rendering through rich (as Textual does) emits no escape sequence that came from the text
    console = Console(width=80, color_system=None, force_terminal=False, legacy_windows=False)
    with console.capture() as cap:
        console.print(safe_text(text, limit, one_line=one_line))
    assert not leaked(cap.get(), allow_newlines=True)


@settings(max_examples=300, deadline=None)
@given(hostile_text)
def test_printable_text_is_unchanged(text):
    printable = "".join(c for c in text if ord(c) not in FORBIDDEN and unicodedata.category(c) != "Cs")
    assert clean(printable, len(printable) + 1) == printable


def test_200k_characters_are_cut_with_a_marker():
    out = clean("x" * 200_000)
    assert out == "x" * MAX_CHARS + f"… [{200_000 - MAX_CHARS:,} more characters]"


def hostile_task(text: str, id: str = "gen/e1/bfcl/0000-0", parent_id: str | None = None) -> Task:
    return Task(
        id=id,
        benchmark="bfcl",
        prompt=text,
        answer=text,
        origin="generated",
        split="generated",
        epoch=1,
        valid=False,
        reason=f"parse_error: {text}",
        parent_id=parent_id,
    )


@settings(max_examples=400, deadline=None)
@given(hostile_text)
def test_table_row_and_detail_pane_show_text_literally(text):
    task = hostile_task(text, parent_id="p")
    parent = hostile_task(text, id="p")
    row = {**task.to_row(), "p_hat": None, "r_env": None, "n_rollouts": 0}
    line = table_line(table_row(row))
    assert not leaked(line) and line.startswith("gen/e1/bfcl/0000-0")
    assert clean(text, 120, one_line=True)[:40].rstrip() in line or len(clean(text, one_line=True)) > 59
    detail = {
        "task": task,
        "stats": {},
        "n_rollouts": 1,
        "lineage": [task, parent],
        "rollouts": [{"epoch": 1, "reward": 0.0, "success": False, "response": text}],
    }
    shown = detail_text(detail)
    assert isinstance(shown, Text) and not leaked(shown.plain, allow_newlines=True)
    assert clean(text) in shown.plain  # the prompt, in full (made visible), no markup swallowed


def test_detail_pane_names_the_weights_that_wrote_and_sampled():
    task = Task(
        id="gen/e3/bfcl/0001-0",
        benchmark="bfcl",
        prompt="q",
        answer="a",
        origin="generated",
        split="generated",
        epoch=3,
        generator="sim@e2",
        simulator_version=2,
    )
    detail = {
        "task": task,
        "stats": {},
        "n_rollouts": 2,
        "lineage": [task],
        "rollouts": [
            {"epoch": 3, "reward": 1.0, "success": True, "response": "a", "policy_version": 2},
            {"epoch": 3, "reward": 0.0, "success": False, "response": "b", "policy_version": None},
        ],
    }
    shown = detail_text(detail).plain
    assert "written by: sim@e2, weights version 2 " in shown
    assert "✔ e3 v2 reward 1.00" in shown and "✘ e3 reward 0.00" in shown  # no version recorded: none shown
    base = Task(id="bfcl/seed/00000", benchmark="bfcl", prompt="q", answer="a")
    assert "written by" not in detail_text({**detail, "task": base, "lineage": [base]}).plain


# -- the real console ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hostile_session(tmp_path_factory):
    """A session folder with real seed tasks; each example writes its hostile tasks into it."""
    session = Session.create(load_config("micro"), tmp_path_factory.mktemp("hostile") / "sessions" / "hostile")
    session.store.insert_tasks(get_environment("bfcl", 0).splits()["seed"][:3])
    session.store.close()
    return session.path


def screen_text(app) -> list[str]:
    """Every segment the app would draw now, as text (what reaches the terminal)."""
    return [seg.text for strip in app.screen._compositor.render_strips() for seg in strip]


async def drive(path, text: str) -> None:
    """Show ``text`` in the table, detail, lineage, edit modal and event log; assert literal, safe display."""
    from genenv_engine.storage.store import Store

    with Store(path / "genenv.db") as store:
        store.db.execute("DELETE FROM rollouts")
        store.db.execute("DELETE FROM tasks WHERE origin = 'generated'")
        store.insert_tasks([hostile_task(text, id="gen/e9/p"), hostile_task(text, parent_id="gen/e9/p")])
        store.insert_rollouts(
            [{"task_id": "gen/e1/bfcl/0000-0", "epoch": 1, "response": text, "reward": 0.0, "success": False}]
        )
    app = make_app(path, sessions_root=path.parent, autostart=False)
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.press("t")
        screen = app.screen
        assert isinstance(screen, TasksScreen)
        screen.query_one("#search").value = ""
        table = screen.query_one(DataTable)
        index = [r["id"] for r in screen.current.rows].index("gen/e1/bfcl/0000-0")
        cell = table.get_row_at(index)[0]
        assert isinstance(cell, Text)
        assert cell.plain == table_line(table_row(screen.current.rows[index]), screen.prompt_chars())
        table.move_cursor(row=index)
        await pilot.pause()
        detail = screen.query_one("#detail", Static).render()
        plain = getattr(detail, "plain", str(detail))
        assert clean(text) in plain and "gen/e9/p" in plain  # prompt in full, and the lineage
        assert not {s for s in screen_text(app) if leaked(s)}
        await pilot.press("enter")
        modal = app.screen
        assert isinstance(modal, EditScreen)
        await pilot.pause()
        assert modal.query_one("#edit-prompt", TextArea).text == clean(text, EDIT_MAX_CHARS)
        assert modal.query_one("#edit-answer", Input).value == clean(text, EDIT_MAX_CHARS, one_line=True)
        assert not {s for s in screen_text(app) if leaked(s)}
        await pilot.press("escape")
        app.post_message(TaskRevised(text, text + "/r1"))
        await pilot.press("d")
        await pilot.pause()
        log = app.dashboard.query_one("#log", Log)
        assert log.lines[-1] == clean(f"edit: {text} → {text}/r1 (used by the next epoch)", 1000, one_line=True)
        assert not {s for s in screen_text(app) if leaked(s)}
        assert app.is_running and app.return_code is None


@hostile_cases(3)
def test_console_shows_hostile_text_literally_everywhere(hostile_session, text):
    asyncio.run(drive(hostile_session, text))


async def drive_drill_views(path, text: str) -> None:
    """Show ``text`` as a batch's prompt note, a variation's prompt and reason, and a rollout's response and error in
    the epoch batches, batch tasks, GRPO group and lineage views; assert literal, safe display."""
    from genenv_console.screens.batch import BatchTasksScreen, GroupScreen
    from genenv_console.screens.drill import EpochBatchesScreen
    from genenv_console.screens.lineage import LineageScreen
    from genenv_console.widgets.plots import PlotPicked
    from genenv_engine.storage.store import Store

    seed = get_environment("bfcl", 0).splits()["seed"][0]
    batch = f"e1/{seed.id}"
    variation = hostile_task(text, id="gen/e1/hostile-0", parent_id=seed.id).with_(simulator_version=0)
    with Store(path / "genenv.db") as store:
        for table in ("rollouts", "batches"):
            store.db.execute(f"DELETE FROM {table}")
        store.db.execute("DELETE FROM tasks WHERE origin = 'generated'")
        store.insert_tasks([variation], batch_id=batch)
        store.upsert_batches(
            [
                {
                    "id": batch,
                    "epoch": 1,
                    "benchmark": "bfcl",
                    "seed_task_id": seed.id,
                    "n_generated": 1,
                    "n_valid": 0,
                    "p_hat": 0.5,
                    "r_env": 1.0,
                    "in_band": True,
                    "prompt_note": {"steer": text, "success_line": None},
                }
            ]
        )
        store.insert_rollouts(
            [
                {
                    "task_id": variation.id,
                    "epoch": 1,
                    "response": text,
                    "reward": float(i % 2),
                    "success": bool(i % 2),
                    "error_type": text,
                }
                for i in range(2)
            ]
        )

    def safe_screen() -> None:
        assert not {s for s in screen_text(app) if leaked(s)}

    app = make_app(path, sessions_root=path.parent, autostart=False)
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.pause()
        app.post_message(PlotPicked("calibration", 1))
        await wait_for(pilot, lambda: isinstance(app.screen, EpochBatchesScreen))
        note = app.screen.query_one(DataTable).get_row_at(0)[8]
        assert isinstance(note, Text) and note.plain == clean(text, 60, one_line=True)
        safe_screen()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, BatchTasksScreen) and app.screen.tasks)
        row = app.screen.query_one(DataTable).get_row_at(1)
        assert [c.plain for c in row][8] == clean(text, 120, one_line=True)
        assert row[4].plain == clean(f"✗ parse_error: {text}", 40, one_line=True)
        safe_screen()
        app.push_screen(GroupScreen(app.ui_store, variation.id, 2))
        await wait_for(pilot, lambda: isinstance(app.screen, GroupScreen) and app.screen.detail)
        table = app.screen.query_one(DataTable)
        assert table.row_count == 2 and table.get_row_at(0)[8].plain == clean(text, 100, one_line=True)
        assert table.get_row_at(1)[7].plain == clean(text or "-", 30, one_line=True)
        safe_screen()
        app.push_screen(LineageScreen(app.ui_store, variation.id))
        await wait_for(pilot, lambda: isinstance(app.screen, LineageScreen) and app.screen.nodes)
        label = app.screen.tree_nodes[variation.id].label
        assert isinstance(label, Text) and clean(text, 80, one_line=True) in label.plain
        safe_screen()
        assert app.is_running and app.return_code is None


async def wait_for(pilot, predicate, timeout: float = 10.0) -> None:
    """Let the app run until ``predicate()`` holds (a thread worker's read)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await pilot.pause(0.02)
    await pilot.pause()


@hostile_cases(2)
def test_drill_views_show_hostile_text_literally(hostile_session, text):
    asyncio.run(drive_drill_views(hostile_session, text))


@pytest.fixture(scope="module")
def hostile_pair(tmp_path_factory):
    """Two session folders to compare; each example writes its hostile drafts into the first."""
    root = tmp_path_factory.mktemp("hostile-compare") / "sessions"
    paths = []
    for name in ("a-run", "b-run"):
        session = Session.create(load_config("micro"), root / name)
        session.store.close()
        paths.append(session.path)
    return paths


async def drive_compare(paths, text: str) -> None:
    """Reject a draft with ``text`` as its reason; open the compare screen on both sessions; assert the funnel
    table's reason cell is that reason (up to its first colon, as the funnel counts it) drawn literally, and that
    nothing unsafe is drawn."""
    from genenv_console.screens.compare import CompareScreen
    from genenv_engine.storage.store import Store, read_only_funnel

    with Store(paths[0] / "genenv.db") as store:
        store.db.execute("DELETE FROM tasks WHERE origin = 'generated'")
        store.insert_tasks([hostile_task(text).with_(reason=text)])
    (entry,) = read_only_funnel(paths[0] / "genenv.db")
    (key,) = entry["rejected"]
    app = make_app(compare=paths, sessions_root=paths[0].parent)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.runs)
        table = app.screen.query_one("#compare-funnel", DataTable)
        cell = table.get_row_at(0)[5]
        assert isinstance(cell, Text) and cell.plain == clean(key or "(no reason)", 40, one_line=True) + " 1"
        assert [c.plain for c in table.get_row_at(1)] == ["b-run", "-", "-", "-", "-", "-"]
        assert not {s for s in screen_text(app) if leaked(s)}
        assert app.is_running and app.return_code is None


@hostile_cases(2)
def test_compare_funnel_shows_a_hostile_rejection_reason_literally(hostile_pair, text):
    asyncio.run(drive_compare(hostile_pair, text))


async def test_markup_in_a_task_is_drawn_as_written(hostile_session):
    from genenv_engine.storage.store import Store

    text = "[bold red]RED[/bold red] [@click=app.quit]Q[/] [/]"
    with Store(hostile_session / "genenv.db") as store:
        store.db.execute("DELETE FROM tasks WHERE origin = 'generated'")
        store.insert_tasks([hostile_task(text)])
    app = make_app(hostile_session, sessions_root=hostile_session.parent, autostart=False)
    async with app.run_test(size=(160, 44)) as pilot:
        await pilot.press("t")
        await pilot.pause()
        drawn = "".join(screen_text(app))
        assert "[bold red]RED[/bold red]" in drawn and "[@click=app.quit]Q[/]" in drawn
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, EditScreen) and app.is_running


def test_status_bar_never_shows_an_epoch_past_the_target_nor_raw_controls():
    from genenv_console.widgets.status_bar import StatusBar

    bar = StatusBar()
    bar.session, bar.epoch, bar.target, bar.run = "s\x1b]0;t\x07[/]", 5, 4, "finished"
    assert "epoch 4/4" in bar.text and "epoch 5/4" not in bar.text
    assert "s␛]0;t␇[/]" in bar.text
    bar.epoch = 3
    assert "epoch 3/4" in bar.text
