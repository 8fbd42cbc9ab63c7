"""Whether the cores are free for a small model's decoding threads: other processes' CPU use, read from Linux's /proc.

A small model's decoding step is a few hundred tiny operations: split over two threads on idle cores it runs faster
than on one, but when another process holds a core every operation waits for the descheduled thread.
`decode_threads` therefore grants the configured threads only when other processes used less than `OTHERS_MAX` cores
since it last looked, and one thread otherwise or wherever /proc cannot be read (the measurements: the repository's
OpenMP spin page among its performance results). `cores_idle` is the same look over a short wait, which an entry point
takes once through `genenv_engine.backends.openmp.choose_spin`. `cpu_bfloat16` reads whether the CPU has bfloat16
matrix units (the check of ``runtime.inference_dtype``). Nothing here imports torch.
"""

from __future__ import annotations

import os
import time

OTHERS_MAX = 0.25
"""Cores other processes may have used, on average since the previous look, for the cores to count as free."""
FIRST_LOOK_SECONDS = 0.2
"""The first look of a process has no earlier reading: it samples this long (the kernel counts in 10 ms ticks)."""

_previous: list[tuple[float, int, int]] = []
"""The last reading: (monotonic seconds, busy ticks of all cores, ticks of this process)."""


def _ticks() -> tuple[int, int] | None:
    """(busy ticks of all cores, user + system ticks of this process), or None where /proc cannot be read."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            cores = [int(v) for v in f.readline().split()[1:]]
        with open("/proc/self/stat", encoding="ascii") as f:
            own = f.read().rsplit(")", 1)[1].split()
    except (OSError, ValueError, IndexError):
        return None
    if len(cores) < 8 or len(own) < 13:
        return None
    # user, nice, system, then irq, softirq, steal (time another guest took); idle and iowait are not busy
    return sum(cores[0:3]) + sum(cores[5:8]), int(own[11]) + int(own[12])


def _prime(seconds: float) -> bool:
    """Take a reading now and wait ``seconds``, so that the next `others_cores` covers them; False without /proc."""
    now = _ticks()
    if now is None:
        return False
    _previous[:] = [(time.monotonic(), *now)]
    time.sleep(seconds)
    return True


def others_cores() -> float | None:
    """Cores that other processes used, on average, since the previous call (over `FIRST_LOOK_SECONDS` on a
    process's first call); None where /proc cannot be read."""
    if not _previous and not _prime(FIRST_LOOK_SECONDS):
        return None
    now = _ticks()
    if now is None:
        return None
    wall = time.monotonic()
    (then, busy0, own0), (busy1, own1) = _previous[0], now
    _previous[0] = (wall, busy1, own1)
    ticks = (wall - then) * os.sysconf("SC_CLK_TCK")
    if ticks <= 0:
        return None
    return max(0.0, (busy1 - busy0) - (own1 - own0)) / ticks


def free(others: float | None) -> bool:
    """Whether cores where other processes took ``others`` cores (None: unknown) count as free.

    >>> free(0.1), free(0.9), free(None)
    (True, False, False)
    """
    return others is not None and others < OTHERS_MAX


def cores_idle(seconds: float = 0.1) -> bool:
    """Whether other processes used under `OTHERS_MAX` cores over the next ``seconds`` (False where /proc cannot be
    read); the reading is kept as `others_cores`'s previous one."""
    return _prime(seconds) and free(others_cores())


def threads_for(threads: int, others: float | None) -> int:
    """The threads to decode with when other processes took ``others`` cores (None: unknown).

    >>> threads_for(2, 0.1), threads_for(2, 0.9), threads_for(2, None), threads_for(1, 0.0)
    (2, 1, 1, 1)
    """
    return threads if free(others) else 1


def decode_threads(threads: int) -> int:
    """`threads_for` now: ``threads`` on otherwise idle cores, else 1 (1 without looking when ``threads`` is 1)."""
    return 1 if threads <= 1 else threads_for(threads, others_cores())


BF16_FLAGS = ("avx512_bf16", "amx_bf16")
"""CPU flags (``/proc/cpuinfo``) of bfloat16 matrix units."""


def cpu_bfloat16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether the CPU has bfloat16 matrix instructions (False where /proc cannot be read)."""
    try:
        with open(cpuinfo, encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return any(flag in line.split() for flag in BF16_FLAGS)
    except OSError:
        pass
    return False
