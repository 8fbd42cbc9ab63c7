"""What every ``genenv bench`` result shares: the machine's state, a goal verdict, JSON output and the tables.

Timings on a shared 2-core machine are noisy, so each result records ``os.getloadavg()`` before and
after the measurement next to the CPU count and torch's thread count.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import time
from collections.abc import Callable, Container, Iterable
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    """CPU count, torch threads, load average and the versions that matter for speed."""
    import torch
    import transformers

    return {
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MB (Linux reports KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def goal(name: str, value: float | None, target: float, *, at_most: bool) -> dict[str, Any]:
    """A goal verdict: ``value`` against ``target`` (``at_most``: smaller is better).

    >>> goal("median_seconds", 12.0, 15.0, at_most=True)["met"]
    True
    >>> goal("ratio", 3.0, 8.0, at_most=False)["met"]
    False
    """
    met = None if value is None else (value <= target if at_most else value >= target)
    return {"name": name, "value": value, "target": target, "op": "<=" if at_most else ">=", "met": met}


def timed(fn: Callable[[], Any], repeats: int) -> tuple[list[float], Any]:
    """Run ``fn`` ``repeats`` times; return the wall seconds of each run and the last result."""
    seconds, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        seconds.append(time.perf_counter() - start)
    return seconds, out


def median(values: list[float]) -> float:
    """The median, rounded to 4 digits (0.0 for an empty list)."""
    return round(statistics.median(values), 4) if values else 0.0


def finish(name: str, result: dict[str, Any], load_before: list[float], out_dir: Path | None) -> dict[str, Any]:
    """Add the bench name and machine state to ``result`` and write ``bench-NAME.json`` under ``out_dir``."""
    result = {
        "bench": name,
        **result,
        "machine": {**machine(), "load_average_before": load_before},
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / f"bench-{name}.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    return result


def rich_table(title: str, columns: Iterable[str], *, left: Container[str] | None = None, **options: Any):
    """A rich table with ``title`` and ``columns`` (``options`` go to ``rich.table.Table``): every column
    left-justified, or with ``left`` only those in it and the others right-justified."""
    from rich.table import Table

    table = Table(title=title, **options)
    for col in columns:
        table.add_column(col, justify="left" if left is None or col in left else "right")
    return table


def goals_table(result: dict[str, Any]):
    """A small rich table of the result's goals (empty when it has none)."""
    table = rich_table("goals", ("goal", "measured", "target", "met"))
    for g in result.get("goals", []):
        met = "-" if g["met"] is None else ("yes" if g["met"] else "no")
        table.add_row(g["name"], str(g["value"]), f"{g['op']} {g['target']}", met)
    return table
