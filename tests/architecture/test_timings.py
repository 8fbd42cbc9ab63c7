"""The suite's timing record (`tests/timings.py`): what it counts, what it writes, and that the committed record
names only tests that exist."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
from pathlib import Path

from timings import RECORD, Recorder, counting_children, file_order, read_record, recorded_markers


def _nothing() -> None:
    pass


def test_child_processes_are_counted_and_the_patches_undone():
    popen_init = subprocess.Popen.__init__
    with counting_children() as count:
        assert count == [0]
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        process = multiprocessing.get_context("fork").Process(target=_nothing)
        process.start()
        process.join()
    assert count[0] >= 2
    assert subprocess.Popen.__init__ is popen_init
    with counting_children() as count:
        sum(range(1000))
    assert count == [0]


def test_the_recorder_adds_the_phases_and_writes_what_marks_read(tmp_path):
    recorder = Recorder()
    recorder.add("a.py::t", 0.5, [])
    recorder.add("a.py::t", 4.0, [("children", True)])
    recorder.add("a.py::t", 0.25, [])
    recorder.add("b.py::u", 0.1, [("children", False)])
    path = tmp_path / "durations.json"
    recorder.write(path)
    record = read_record(path)
    assert record == {"a.py::t": {"seconds": 4.75, "children": True}, "b.py::u": {"seconds": 0.1, "children": False}}
    assert recorded_markers(record["a.py::t"]) == ["slow", "subprocess"]
    assert recorded_markers(record["b.py::u"]) == []
    assert file_order(["b.py::u", "a.py::t"], record) == {"a.py": 0, "b.py": 1}


def test_the_committed_record_names_files_that_exist():
    """A stale record (files moved or removed) would order and mark nothing: it must be made again."""
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    root = RECORD.parent.parent
    missing = sorted(
        {nodeid.split("::", 1)[0] for nodeid in record}
        - {nodeid.split("::", 1)[0] for nodeid in record if (root / nodeid.split("::", 1)[0]).is_file()}
    )
    assert len(record) > 1000
    assert missing == [], f"tests/durations.json names files that do not exist (run `make durations`): {missing[:5]}"


def test_the_record_path_is_beside_the_suite():
    assert RECORD == Path(__file__).resolve().parents[1] / "durations.json"
