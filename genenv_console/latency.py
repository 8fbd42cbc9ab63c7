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
    _keys: dict[int, float] = field(default_factory=dict)
    _names: dict[int, str] = field(default_factory=dict)
    _last_tick: float | None = None

    @property
    def key_latency(self) -> list[float]:
        """Seconds from each recorded key's creation to the last repaint its handling caused."""
        return list(self._keys.values())

    def tick(self, now: float | None = None) -> None:
        """Called by the app's interval timer: record how late this tick is against the previous one."""
        now = time.monotonic() if now is None else now
        if self._last_tick is not None and self.recording:
            self.timer_lateness.append(max(0.0, now - self._last_tick - self.interval))
        self._last_tick = now

    def key_shown(self, key: int, key_time: float, name: str = "", now: float | None = None) -> None:
        """Called after a repaint that followed one handling of key ``key`` (created at ``key_time``, monotonic).

        A key is handled in steps (the app, the focused widget, the bindings when it bubbles back), so the
        latest repaint counts; a key created while not recording is ignored.
        """
        now = time.monotonic() if now is None else now
        if key in self._keys or self.recording:
            self._keys[key] = max(self._keys.get(key, 0.0), now - key_time)
            self._names[key] = name
            if len(self._keys) > 100_000:
                oldest = next(iter(self._keys))
                del self._keys[oldest], self._names[oldest]

    def key_latency_by_name(self) -> dict[str, list[float]]:
        """Key latencies grouped by key name (``down``, ``t``, ...)."""
        out: dict[str, list[float]] = {}
        for key, seconds in self._keys.items():
            out.setdefault(self._names.get(key, ""), []).append(seconds)
        return out

    def summary(self, groups: dict[str, tuple[str, ...]] | None = None) -> dict[str, dict[str, float | int | None]]:
        """p50/p95/max in milliseconds and the sample count: the timer, all keys, and keys grouped by name."""
        series = {"timer_lateness": self.timer_lateness, "key_to_screen": self.key_latency}
        by_name = self.key_latency_by_name()
        for group, names in (groups or {}).items():
            series[f"key_to_screen[{group}]"] = [v for n in names for v in by_name.get(n, [])]
        out: dict[str, dict[str, float | int | None]] = {}
        for name, values in series.items():
            ms = [v * 1000 for v in values]
            out[name] = {
                "n": len(ms),
                "p50_ms": _round(percentile(ms, 50)),
                "p95_ms": _round(percentile(ms, 95)),
                "max_ms": _round(max(ms) if ms else None),
            }
        return out


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
