"""``genenv bench store``: the console's task queries (page, filters, word search) over a store of 100k tasks.

A temporary store is filled with ``--tasks`` bfcl-shaped tasks spread over epochs, origins, statuses,
validity and p̂; each case then loads one console page the way the tasks screen does (the matching
count, then one page of rows: ``Store.count_tasks`` + ``Store.query_tasks``), ``--repeats`` times.
Goal: every case, the word searches included, at most 50 ms (median).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from genenv_engine.interfaces.benches.common import goal, median, rich_table

PAGE_SIZE = 50
GOAL_MS = 50.0


def fill(store, n: int, seed: int = 0, chunk: int = 5000) -> float:
    """Insert ``n`` tasks (1,000 per epoch; 80 % generated, 10 % edited, 10 % static; 80 % valid) and set p̂."""
    from genenv_engine.environments import get_environment

    env = get_environment("bfcl", seed)
    templates = env.splits()["seed"] + env.splits()["train"][:300]
    rng = random.Random(seed)
    origins = ("generated",) * 8 + ("edited", "static")
    statuses = ("active",) * 18 + ("pinned", "banned")
    start = time.perf_counter()
    for lo in range(0, n, chunk):
        batch = []
        for i in range(lo, min(n, lo + chunk)):
            t = templates[i % len(templates)]
            epoch = 1 + i // 1000
            batch.append(
                t.with_(
                    id=f"gen/e{epoch}/bfcl/{i:06d}",
                    origin=rng.choice(origins),
                    split="generated",
                    epoch=epoch,
                    parent_id=t.id,
                    valid=rng.random() < 0.8,
                    status=rng.choice(statuses),
                )
            )
        store.insert_tasks(batch)
        store.set_rollout_scores((t.id, round(rng.random(), 3), round(rng.random(), 3), 8) for t in batch)
    return time.perf_counter() - start


def page(store, filters: dict[str, Any], page_no: int) -> tuple[int, int]:
    """What the tasks screen does for one page: count the matches, clamp the page, read its rows."""
    total = store.count_tasks(**filters)
    pages = max(1, -(-total // PAGE_SIZE))
    page_no = min(max(page_no, 0), pages - 1)
    rows = store.query_tasks(**filters, limit=PAGE_SIZE, offset=page_no * PAGE_SIZE)
    return total, len(rows)


def cases(n: int) -> dict[str, tuple[str, dict[str, Any], int]]:
    """Case name -> (kind: page/filter/search, filters, page number)."""
    return {
        "first page": ("page", {}, 0),
        "middle page": ("page", {}, n // PAGE_SIZE // 2),
        "last page": ("page", {}, 10**9),
        "origin=generated, valid": ("filter", {"origin": "generated", "valid": True}, 5),
        "p̂ in [0.4, 0.6], epoch 50": ("filter", {"p_min": 0.4, "p_max": 0.6, "epoch": 50}, 0),
        "status=pinned, page 10": ("filter", {"status": "pinned"}, 10),
        "search 'add' (common word)": ("search", {"text": "add"}, 3),
        "search 'add', last page": ("search", {"text": "add"}, 10**9),
        "search 'square' + generated, valid": ("search", {"text": "square", "origin": "generated", "valid": True}, 2),
        "search 'add' + p̂ in [0.4, 0.6]": ("search", {"text": "add", "p_min": 0.4, "p_max": 0.6}, 0),
        "search rare word": ("search", {"text": "zzzqqq"}, 0),
    }


def measure(store, n: int, repeats: int) -> list[dict[str, Any]]:
    """Median and max ms of each case (one warm-up call first)."""
    rows = []
    for name, (kind, filters, page_no) in cases(n).items():
        page(store, filters, page_no)
        ms = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            total, got = page(store, filters, page_no)
            ms.append((time.perf_counter() - t0) * 1000)
        rows.append(
            {
                "case": name,
                "kind": kind,
                "matches": total,
                "rows": got,
                "median_ms": round(median(ms), 2),
                "max_ms": round(max(ms), 2),
            }
        )
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``genenv bench store``."""
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Entry point."""
    from genenv_engine.storage.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "genenv.db")
        fill_s = fill(store, args.tasks)
        rows = measure(store, args.tasks, args.repeats)
        store.close()
    by_kind = {k: max(r["median_ms"] for r in rows if r["kind"] == k) for k in ("page", "filter", "search")}
    return {
        "tasks": args.tasks,
        "repeats": args.repeats,
        "fill_seconds": round(fill_s, 1),
        "cases": rows,
        "page_ms": by_kind["page"],
        "filter_ms": by_kind["filter"],
        "search_ms": by_kind["search"],
        "goals": [goal(f"{k}_ms (worst case, median)", by_kind[k], GOAL_MS, at_most=True) for k in by_kind],
    }


def table(result: dict[str, Any]):
    """Rich table: one row per case."""
    t = rich_table(
        f"store: one console page over {result['tasks']:,} tasks (count + {PAGE_SIZE} rows), "
        f"median of {result['repeats']}",
        ("case", "matches", "rows", "median ms", "max ms"),
        left=("case",),
    )
    for r in result["cases"]:
        t.add_row(r["case"], f"{r['matches']:,}", str(r["rows"]), f"{r['median_ms']:.1f}", f"{r['max_ms']:.1f}")
    return t
