"""Console measurements: ``python -m genenv_console.bench latency`` and ``python -m genenv_console.bench tasks-page``.

``latency`` runs the console headless on the micro preset (real tiny models, a temporary session)
and, while the engine runs, sends a key every ``--key-interval`` seconds (open the tasks screen,
move through the table, back to the dashboard); the app's own `LatencyProbe` records its 50 ms timer's lateness
and each key's time from creation to the next screen refresh. ``tasks-page`` fills a temporary
store with 100,000 tasks and times loading and painting one page of the tasks table.
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
        summary.update({"preset": preset, "epochs": epochs, "run": app.state.run, "keys_sent": keys,
                        "key_interval_s": key_interval, "wall_s": round(time.monotonic() - started, 1),
                        "load_average": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count()})
        return summary


def _fill_store(path: Path, n: int, chunk: int = 5000) -> float:
    """Create a session with ``n`` tasks spread over epochs, origins, statuses and p-hats; return seconds."""
    from genenv_engine.benches.store import fill
    from genenv_engine.config import load_config
    from genenv_engine.session import Session

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
                    painted = asyncio.Event()
                    marks: dict[str, float] = {}
                    t0, c0 = time.perf_counter(), time.process_time()
                    screen.filters, screen.page = filters, page
                    screen.load_page()
                    marks["loaded"] = time.perf_counter()

                    def done() -> None:
                        marks["painted"], marks["cpu"] = time.perf_counter(), time.process_time()
                        painted.set()
                    app.call_after_refresh(done)
                    await asyncio.wait_for(painted.wait(), 10)
                    results.setdefault(f"{name}: query+table", []).append((marks["loaded"] - t0) * 1000)
                    results.setdefault(f"{name}: until painted", []).append((marks["painted"] - t0) * 1000)
                    results.setdefault(f"{name}: CPU until painted", []).append((marks["cpu"] - c0) * 1000)
                    await asyncio.sleep(0.05)
            rows = screen.query_one("DataTable").row_count
        return {"tasks": total, "fill_seconds": round(fill_s, 1), "rows_per_page": rows,
                "ms": {k: {"median": round(statistics.median(v), 2), "p95": round(percentile(v, 95) or 0, 2),
                           "max": round(max(v), 2)} for k, v in results.items()}}


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m genenv_console.bench {latency,tasks-page}``."""
    parser = argparse.ArgumentParser(prog="python -m genenv_console.bench", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    lat = sub.add_parser("latency", help="in-app timer lateness and key-to-screen latency while an epoch runs")
    lat.add_argument("--preset", default="micro")
    lat.add_argument("--epochs", type=int, default=8)
    lat.add_argument("--key-interval", type=float, default=0.25, help="seconds between keys")
    page = sub.add_parser("tasks-page", help="time one page of the tasks table over 100k stored tasks")
    page.add_argument("--tasks", type=int, default=100_000)
    page.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the raw JSON only")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    size = (140, 44)
    if args.command == "latency":
        out = asyncio.run(_latency(args.preset, args.epochs, args.key_interval, size))
        if not args.json:
            print(f"preset {out['preset']}, {out['epochs']} epochs, {out['wall_s']}s, run {out['run']}, "
                  f"{out['keys_sent']} keys every {out['key_interval_s']}s, {out['cpus']} CPUs, "
                  f"load average {out['load_average']}")
            for name, v in out.items():
                if isinstance(v, dict) and "p50_ms" in v:
                    print(f"  {name}: p50 {v['p50_ms']} ms, p95 {v['p95_ms']} ms, max {v['max_ms']} ms (n={v['n']})")
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
