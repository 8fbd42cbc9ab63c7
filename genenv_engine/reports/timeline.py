"""A session's event log as a report reads it: each process run (`RunSpan`), the seconds of every phase per epoch
attempt, and the versions and machine the engine recorded.
"""

from __future__ import annotations

import json
from typing import Any

from genenv_engine.reports.session_data import RunSpan
from genenv_engine.storage.store import Store


def recorded(store: Store, started: list[dict[str, Any]], key: str) -> dict[str, str] | None:
    """A versions/machine dict the engine recorded (meta key or RunStarted payload), when it did."""
    value = _json(store.get_meta(key))
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    for event in started:
        value = event["payload"].get(key)
        if isinstance(value, dict):
            return {str(k): str(v) for k, v in value.items()}
    return None


def all_events(store: Store) -> list[dict[str, Any]]:
    """Every event the session recorded, oldest first (read in pages)."""
    out, after = [], 0
    while True:
        page = store.events(after_id=after, limit=5000)
        out.extend(page)
        if len(page) < 5000:
            return out
        after = page[-1]["id"]


_ENDS = {"RunFinished": "finished", "RunStopped": "stopped", "RunFailed": "failed"}


def run_spans(events: list[dict[str, Any]]) -> list[RunSpan]:
    """One `RunSpan` per RunStarted event, closed by the first end event after it."""
    runs: list[RunSpan] = []
    for ev in events:
        if ev["kind"] == "RunStarted":
            runs.append(RunSpan(ev["ts"], int(ev["payload"].get("start_epoch", ev["epoch"] or 0))))
        elif ev["kind"] in _ENDS and runs and runs[-1].end is None:
            run = runs[-1]
            run.ended_at, run.end, run.end_epoch = ev["ts"], _ENDS[ev["kind"]], ev["epoch"]
            payload = ev["payload"]
            run.detail = str(payload.get("reason") or payload.get("error") or "")
    return runs


def phase_attempts(events: list[dict[str, Any]]) -> list[tuple[int, dict[str, float]]]:
    """Per epoch attempt (each EpochStarted), the seconds of every phase that finished in it."""
    attempts: list[tuple[int, dict[str, float]]] = []
    current: dict[int, dict[str, float]] = {}
    for ev in events:
        if ev["kind"] == "EpochStarted":
            seconds: dict[str, float] = {}
            attempts.append((ev["epoch"], seconds))
            current[ev["epoch"]] = seconds
        elif ev["kind"] == "PhaseFinished" and ev["epoch"] in current:
            phase = ev["payload"].get("phase", "?")
            current[ev["epoch"]][phase] = current[ev["epoch"]].get(phase, 0.0) + float(
                ev["payload"].get("seconds", 0.0)
            )
    return attempts


def _json(text: str | None) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
