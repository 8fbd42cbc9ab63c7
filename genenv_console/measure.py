"""Console measurements: ``python -m genenv_console.measure latency|tasks-page|views``.

``latency`` runs the console headless on the micro preset (real tiny models, a temporary session)
and, while the engine runs, sends a key every ``--key-interval`` seconds (open the tasks screen,
move through the table, back to the dashboard); the app's own `LatencyProbe` records its 50 ms timer's lateness
and each key's time from creation to the next screen refresh. ``tasks-page`` fills a temporary
store with 100,000 tasks and times loading and painting one page of the tasks table. ``views`` fills a session
with 100 epochs of history (100,000 generated tasks, their batches, training rollouts and held-out answers:
`genenv_engine.interfaces.benches.session_fill`) and times each drill-down view from the key (or message) that opens it
to the first repaint after its rows are shown. Goal: each view open in at most `VIEW_GOAL_MS` (median).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from genenv_console.latency import percentile

KEY_CYCLE = ("t", "down", "down", "down", "down", "down", "down", "up", "up", "up", "d")
"""What the latency run types, over and over: open the tasks screen, browse the table, back to the dashboard."""

VIEW_GOAL_MS = 200.0
"""The most a drill-down view may take to open on a 100k-task session (median)."""

KEY_GROUPS = {"table moves": ("down", "up"), "screen switches": ("t", "d")}


async def _latency(preset: str, epochs: int, key_interval: float, size: tuple[int, int]) -> dict[str, Any]:
    from genenv_console.__main__ import make_app

    with tempfile.TemporaryDirectory() as tmp:
        app = make_app(preset=preset, overrides={"epochs": epochs}, sessions_root=Path(tmp))
        started = time.monotonic()
        keys = 0
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            while app.state.active:
                app.simulate_key(KEY_CYCLE[keys % len(KEY_CYCLE)])
                keys += 1
                await asyncio.sleep(key_interval)
            await pilot.pause()
        summary: dict[str, Any] = app.latency.summary(KEY_GROUPS)
        summary.update(
            {
                "preset": preset,
                "epochs": epochs,
                "run": app.state.run,
                "keys_sent": keys,
                "key_interval_s": key_interval,
                "wall_s": round(time.monotonic() - started, 1),
                "load_average": [round(x, 2) for x in os.getloadavg()],
                "cpus": os.cpu_count(),
            }
        )
        return summary


async def _next_repaint(app: Any) -> tuple[float, float]:
    """Wall and CPU clock (``perf_counter``, ``process_time``) at the app's next screen refresh."""
    painted = asyncio.Event()
    marks: list[float] = []

    def done() -> None:
        marks[:] = [time.perf_counter(), time.process_time()]
        painted.set()

    app.call_after_refresh(done)
    await asyncio.wait_for(painted.wait(), 10)
    return marks[0], marks[1]


def _summary(results: dict[str, list[float]], digits: int) -> dict[str, dict[str, float]]:
    """Median, p95 and max of each case's milliseconds."""
    return {
        k: {
            "median": round(statistics.median(v), digits),
            "p95": round(percentile(v, 95) or 0, digits),
            "max": round(max(v), digits),
        }
        for k, v in results.items()
    }


def _fill_store(path: Path, n: int, chunk: int = 5000) -> float:
    """Create a session with ``n`` tasks spread over epochs, origins, statuses and p-hats; return seconds."""
    from genenv_engine.config import load_config
    from genenv_engine.interfaces.benches.store import fill
    from genenv_engine.storage.session import Session

    session = Session.create(load_config("micro"), path)
    seconds = fill(session.store, n, seed=0, chunk=chunk)
    session.store.close()
    return seconds


async def _tasks_page(n: int, repeats: int, size: tuple[int, int]) -> dict[str, Any]:
    from genenv_console.__main__ import make_app
    from genenv_console.data import TaskFilter
    from genenv_console.screens.tasks import TasksScreen

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench-100k"
        fill_s = _fill_store(path, n)
        app = make_app(path, sessions_root=Path(tmp), autostart=False)
        results: dict[str, list[float]] = {}
        async with app.run_test(size=size) as pilot:
            await pilot.press("t")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, TasksScreen)
            total = app.ui_store.count_tasks()
            cases = {
                "first page": (TaskFilter(), 0),
                "middle page": (TaskFilter(), total // 100),
                "last page": (TaskFilter(), 10**9),
                "origin=generated valid": (TaskFilter(origin="generated", valid=True), 5),
                "p̂ in [0.4, 0.6], epoch 50": (TaskFilter(p_min=0.4, p_max=0.6, epoch=50), 0),
                "text search 'add'": (TaskFilter(text="add"), 3),
            }
            for name, (filters, page) in cases.items():
                for _ in range(repeats):
                    t0, c0 = time.perf_counter(), time.process_time()
                    screen.filters, screen.page = filters, page
                    screen.load_page()
                    loaded = time.perf_counter()
                    painted, cpu = await _next_repaint(app)
                    results.setdefault(f"{name}: query+table", []).append((loaded - t0) * 1000)
                    results.setdefault(f"{name}: until painted", []).append((painted - t0) * 1000)
                    results.setdefault(f"{name}: CPU until painted", []).append((cpu - c0) * 1000)
                    await asyncio.sleep(0.05)
            rows = screen.query_one("DataTable").row_count
        return {"tasks": total, "fill_seconds": round(fill_s, 1), "rows_per_page": rows, "ms": _summary(results, 2)}


def _view_cases(app: Any, other: Path, epoch: int) -> dict[str, tuple[Any, Any]]:
    """View name -> (open it, is it showing its rows?), each opened the way the console does."""
    from textual.widgets import DataTable

    from genenv_console.messages import CompareSessions
    from genenv_console.screens.batch import BatchTasksScreen, GroupScreen
    from genenv_console.screens.compare import CompareScreen
    from genenv_console.screens.drill import EpochBatchesScreen, HeldoutEpochScreen
    from genenv_console.screens.funnel import FunnelScreen
    from genenv_console.screens.lineage import LineageScreen
    from genenv_console.widgets.plots import PlotPicked

    store = app.ui_store
    batch = store.batches(epoch)[0]["id"]
    task = next(t["id"] for t in store.batch_tasks(batch) if t["role"] == "variation" and t["train_rollouts"])
    seed = store.get_task(task).parent_id

    def rows(kind: type, least: int = 1, table: str = "DataTable") -> Any:
        def shown() -> bool:
            screen = app.screen
            if not isinstance(screen, kind) or not screen.is_mounted:
                return False
            tables = screen.query(table).results(DataTable)
            return any(t.row_count >= least for t in tables)

        return shown

    return {
        f"calibration drill (epoch {epoch}: its batches)": (
            lambda: app.post_message(PlotPicked("calibration", epoch)),
            rows(EpochBatchesScreen),
        ),
        f"held-out drill (epoch {epoch}: answers and verdicts)": (
            lambda: app.post_message(PlotPicked("heldout", epoch)),
            rows(HeldoutEpochScreen),
        ),
        "batch: seed and variations": (
            lambda: app.push_screen(BatchTasksScreen(store, batch, 8)),
            rows(BatchTasksScreen, 2),
        ),
        "GRPO groups of a task": (lambda: app.push_screen(GroupScreen(store, task, 8)), rows(GroupScreen)),
        "lineage tree of a seed": (
            lambda: app.push_screen(LineageScreen(store, seed)),
            lambda: isinstance(app.screen, LineageScreen) and bool(app.screen.nodes),
        ),
        "funnel (every epoch)": (lambda: app.push_screen(FunnelScreen(store, epoch)), rows(FunnelScreen)),
        "compare two sessions": (
            lambda: app.post_message(CompareSessions([app.session_path, other])),
            rows(CompareScreen, 2, "#compare-table"),
        ),
    }


async def _views(epochs: int, repeats: int, size: tuple[int, int]) -> dict[str, Any]:
    import shutil

    from genenv_console.__main__ import make_app
    from genenv_engine.config import load_config
    from genenv_engine.interfaces.benches.session_fill import fill_session
    from genenv_engine.storage.session import Session

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "history"
        session = Session.create(load_config("micro"), path)
        filled = fill_session(session, epochs=epochs)
        session.store.close()
        other = Path(tmp) / "history-copy"
        shutil.copytree(path, other)
        app = make_app(path, sessions_root=Path(tmp), autostart=False)
        results: dict[str, list[float]] = {}
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            cases = _view_cases(app, other, epochs // 2)
            for name, (open_view, shown) in cases.items():
                for _ in range(repeats):
                    base = app.screen
                    t0 = time.perf_counter()
                    app.call_later(open_view)  # in the app's own context, as a key's handler runs
                    while not shown():
                        await asyncio.sleep(0.002)
                        if time.perf_counter() - t0 > 30:
                            raise TimeoutError(f"{name}: not shown within 30 s")
                    painted, _ = await _next_repaint(app)
                    results.setdefault(name, []).append((painted - t0) * 1000)
                    app.pop_screen()
                    while app.screen is not base:
                        await asyncio.sleep(0.002)
                    await pilot.pause()
        ms = _summary(results, 1)
        return {
            "filled": filled,
            "repeats": repeats,
            "goal_ms": VIEW_GOAL_MS,
            "ms": ms,
            "all_met": all(v["median"] <= VIEW_GOAL_MS for v in ms.values()),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "cpus": os.cpu_count(),
        }


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m genenv_console.measure {latency,tasks-page}``."""
    from genenv_engine.backends.openmp import choose_spin

    choose_spin()  # before anything loads torch
    parser = argparse.ArgumentParser(prog="python -m genenv_console.measure", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    lat = sub.add_parser("latency", help="in-app timer lateness and key-to-screen latency while an epoch runs")
    lat.add_argument("--preset", default="micro")
    lat.add_argument("--epochs", type=int, default=8)
    lat.add_argument("--key-interval", type=float, default=0.25, help="seconds between keys")
    page = sub.add_parser("tasks-page", help="time one page of the tasks table over 100k stored tasks")
    page.add_argument("--tasks", type=int, default=100_000)
    page.add_argument("--repeats", type=int, default=5)
    views = sub.add_parser("views", help="time each drill-down view opening on a session of 100 epochs, 100k tasks")
    views.add_argument("--epochs", type=int, default=100, help="epochs of 1,000 drafts each")
    views.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the raw JSON only")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    size = (140, 44)
    if args.command == "latency":
        out = asyncio.run(_latency(args.preset, args.epochs, args.key_interval, size))
        if not args.json:
            print(
                f"preset {out['preset']}, {out['epochs']} epochs, {out['wall_s']}s, run {out['run']}, "
                f"{out['keys_sent']} keys every {out['key_interval_s']}s, {out['cpus']} CPUs, "
                f"load average {out['load_average']}"
            )
            for name, v in out.items():
                if isinstance(v, dict) and "p50_ms" in v:
                    print(f"  {name}: p50 {v['p50_ms']} ms, p95 {v['p95_ms']} ms, max {v['max_ms']} ms (n={v['n']})")
    elif args.command == "views":
        out = asyncio.run(_views(args.epochs, args.repeats, size))
        if not args.json:
            f = out["filled"]
            print(
                f"{f['epochs']} epochs: {f['generated']:,} generated tasks, {f['rollouts']:,} rollouts, "
                f"{f['batches']:,} batches (filled in {f['seconds']}s); load average {out['load_average']}"
            )
            for name, ms in out["ms"].items():
                mark = "met" if ms["median"] <= VIEW_GOAL_MS else "MISSED"
                print(f"  {name}: median {ms['median']} ms, p95 {ms['p95']} ms, max {ms['max']} ms ({mark})")
    else:
        out = asyncio.run(_tasks_page(args.tasks, args.repeats, size))
        if not args.json:
            print(f"{out['tasks']:,} tasks (filled in {out['fill_seconds']}s), {out['rows_per_page']} rows per page")
            for name, ms in out["ms"].items():
                print(f"  {name}: median {ms['median']} ms, p95 {ms['p95']} ms, max {ms['max']} ms")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
