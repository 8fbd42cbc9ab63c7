"""The suite's recorded timings (``tests/durations.json``), written by a tool and read to order and mark the tests.

``make durations`` runs the whole suite with ``GENENV_RECORD_DURATIONS`` set: each test's seconds (setup, call and
teardown together) and whether it started a child process (`subprocess.Popen`, `os.fork`, `multiprocessing`) are
written there, one entry per test id. Every later run reads the file (`tests/conftest.py`):

- the test files go to the pytest-xdist workers longest first (`file_order`), so a long file is not started last;
- a test recorded at `SLOW_SECONDS` or more gets the ``slow`` marker and one that started a child process the
  ``subprocess`` marker (`recorded_markers`), so ``make check`` (``-m "not slow and not ray and not subprocess"``)
  picks the quick set from the record instead of a hand-kept list.

A test with no entry yet (new, or renamed) is neither marked nor ranked until the record is made again.
"""

from __future__ import annotations

import json
import multiprocessing.process
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

RECORD = Path(__file__).resolve().parent / "durations.json"
"""The committed record: test id -> ``{"seconds": float, "children": bool}``."""

RECORD_ENV = "GENENV_RECORD_DURATIONS"
"""Set (to any value) to record this run's timings into `RECORD` at its end."""

SLOW_SECONDS = 4.0
"""A test recorded at this many seconds or more is ``slow``."""


def read_record(path: Path = RECORD) -> dict[str, dict[str, object]]:
    """The record at ``path``; empty when there is none.

    >>> read_record(Path("/nonexistent/durations.json"))
    {}
    """
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}


def recorded_markers(entry: dict[str, object] | None) -> list[str]:
    """The markers a test's record gives it.

    >>> recorded_markers({"seconds": 12.5, "children": True}), recorded_markers({"seconds": 0.1, "children": False})
    (['slow', 'subprocess'], [])
    >>> recorded_markers(None)
    []
    """
    if not entry:
        return []
    marks = []
    if float(entry.get("seconds", 0.0)) >= SLOW_SECONDS:  # type: ignore[arg-type]
        marks.append("slow")
    if entry.get("children"):
        marks.append("subprocess")
    return marks


def file_order(nodeids: list[str], record: dict[str, dict[str, object]]) -> dict[str, int]:
    """Each file of ``nodeids`` -> its rank by recorded seconds, longest first (files without a record last, in
    their collection order).

    >>> record = {"a.py::t": {"seconds": 1.0}, "b.py::t": {"seconds": 3.0}, "b.py::u": {"seconds": 0.5}}
    >>> file_order(["a.py::t", "b.py::t", "b.py::u", "c.py::t"], record)
    {'b.py': 0, 'a.py': 1, 'c.py': 2}
    """
    totals: dict[str, float] = {}
    for nodeid in nodeids:
        path = nodeid.split("::", 1)[0]
        entry = record.get(nodeid) or {}
        totals[path] = totals.get(path, 0.0) + float(entry.get("seconds", 0.0))  # type: ignore[arg-type]
    ranked = sorted(totals, key=lambda path: -totals[path])  # stable: unrecorded files keep their order
    return {path: i for i, path in enumerate(ranked)}


@contextmanager
def counting_children() -> Iterator[list[int]]:
    """Count the child processes started inside the block (the count is the list's one element)."""
    count = [0]
    popen_init, fork, start = subprocess.Popen.__init__, os.fork, multiprocessing.process.BaseProcess.start

    def counted_popen(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        count[0] += 1
        popen_init(self, *args, **kwargs)

    def counted_fork() -> int:
        count[0] += 1
        return fork()

    def counted_start(self):  # type: ignore[no-untyped-def]
        count[0] += 1
        return start(self)

    subprocess.Popen.__init__ = counted_popen  # type: ignore[method-assign]
    os.fork = counted_fork
    multiprocessing.process.BaseProcess.start = counted_start  # type: ignore[method-assign]
    try:
        yield count
    finally:
        subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]
        os.fork = fork
        multiprocessing.process.BaseProcess.start = start  # type: ignore[method-assign]


class Recorder:
    """Adds up each test's seconds over its phases as the reports arrive (on the pytest-xdist controller, or the
    only process) and writes the record."""

    def __init__(self) -> None:
        self.entries: dict[str, dict[str, object]] = {}

    def add(self, nodeid: str, seconds: float, user_properties: list[tuple[str, object]]) -> None:
        entry = self.entries.setdefault(nodeid, {"seconds": 0.0, "children": False})
        entry["seconds"] = float(entry["seconds"]) + seconds  # type: ignore[arg-type]
        if any(key == "children" and value for key, value in user_properties):
            entry["children"] = True

    def write(self, path: Path = RECORD) -> None:
        rounded = {
            nodeid: {"seconds": round(float(e["seconds"]), 2), "children": e["children"]}  # type: ignore[arg-type]
            for nodeid, e in sorted(self.entries.items())
        }
        path.write_text(json.dumps(rounded, indent=0, sort_keys=True) + "\n", encoding="utf-8")
