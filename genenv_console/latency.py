"""A latency probe inside the app: a 50 ms timer's lateness and key-to-screen times, while an epoch runs.

Pilot's own round trip waits for the app to go idle, which never happens while the engine trains,
so responsiveness is measured from inside: each tick of a `set_interval` timer records how late it
fired, and each key records the time from the key event's creation to the first screen refresh
after its handler ran (``call_after_refresh``). Only samples taken while the engine is in an
epoch are kept, so an idle app does not flatter the numbers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100) by linear interpolation; None for no values.

    >>> percentile([1.0, 2.0, 3.0, 4.0], 50), percentile([5.0], 95), percentile([], 50)
    (2.5, 5.0, None)
    """
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


@dataclass
class LatencyProbe:
    """Collects timer lateness and key-to-screen latency (seconds) while ``recording`` is on."""

    interval: float = 0.05
    recording: bool = False
    timer_lateness: list[float] = field(default_factory=list)
    key_latency: list[float] = field(default_factory=list)
    _last_tick: float | None = None

    def tick(self, now: float | None = None) -> None:
        """Called by the app's interval timer: record how late this tick is against the previous one."""
        now = time.monotonic() if now is None else now
        if self._last_tick is not None and self.recording:
            self.timer_lateness.append(max(0.0, now - self._last_tick - self.interval))
        self._last_tick = now

    def key_shown(self, key_time: float, now: float | None = None) -> None:
        """Called after the screen refreshed for a key created at ``key_time`` (monotonic)."""
        now = time.monotonic() if now is None else now
        if self.recording:
            self.key_latency.append(max(0.0, now - key_time))

    def summary(self) -> dict[str, dict[str, float | int | None]]:
        """p50/p95/max in milliseconds and the sample count, for the timer and for keys."""
        out: dict[str, dict[str, float | int | None]] = {}
        for name, values in (("timer_lateness", self.timer_lateness), ("key_to_screen", self.key_latency)):
            ms = [v * 1000 for v in values]
            out[name] = {"n": len(ms), "p50_ms": _round(percentile(ms, 50)), "p95_ms": _round(percentile(ms, 95)),
                         "max_ms": _round(max(ms) if ms else None)}
        return out


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
