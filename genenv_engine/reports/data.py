"""Read a session folder into plain dataclasses for reports: config, runs, epochs, calibration, tasks.

Everything comes from the session's files (``config.toml`` read by `config.saved_config`, which checks no
paths, so a session copied from another machine still reports even when its model or data paths do not exist
here, and keeps settings of another genenv version; and ``genenv.db``). Done epochs take their numbers from the
metrics the loop recorded; an epoch that stopped, crashed or is still running has no metrics, so what it left in
the database (generated tasks, scored batches, rollouts, phase events) is summarised instead and the epoch is
marked partial. Epochs and variation batches are read through `genenv_engine.storage.session_view.SessionView`: each
batch's stored R_env and the alpha it was scored against (for an older database, computed from the session's own
curriculum settings).

The records are in `genenv_engine.reports.session_data`, and each part of the reading in its own module: the
config (`config_table`), the event log (`timeline`), epochs (`epochs`), tasks (`tasks`) and training volume
(`volume`); the records and the tasks' limits are importable from here too.
"""

from __future__ import annotations

import re
from pathlib import Path

from genenv_engine.core.machine import local_machine, local_versions
from genenv_engine.reports.config_table import config_rows, read_config
from genenv_engine.reports.epochs import epoch_from_database, epoch_from_metrics
from genenv_engine.reports.session_data import MODE_LABELS, Edit, EpochData, RunSpan, SessionData, TaskView
from genenv_engine.reports.tasks import (
    REJECTED_SAMPLES,
    SAMPLES_PER_BUCKET,
    TEXT_LIMIT,
    TaskReader,
    hand_edits,
    sample_tasks,
    tasks_with_status,
)
from genenv_engine.reports.timeline import all_events, phase_attempts, recorded, run_spans
from genenv_engine.reports.volume import training_volume
from genenv_engine.storage.session_view import SessionView
from genenv_engine.storage.store import Store

__all__ = [
    "MODE_LABELS",
    "REJECTED_SAMPLES",
    "SAMPLES_PER_BUCKET",
    "TEXT_LIMIT",
    "Edit",
    "EpochData",
    "RunSpan",
    "SessionData",
    "TaskView",
    "load_session",
    "read_config",
    "slug",
]


def load_session(session_dir: str | Path) -> SessionData:
    """Read one session folder into a SessionData (raises FileNotFoundError when it is not a session)."""
    folder = Path(session_dir)
    if not (folder / "config.toml").exists() or not (folder / "genenv.db").exists():
        raise FileNotFoundError(f"{folder} is not a genenv session (needs config.toml and genenv.db)")
    from genenv_engine.config import saved_config

    run_config, unknown = saved_config(folder / "config.toml")
    config, rows = config_rows(run_config, unknown)
    store = Store(folder / "genenv.db")
    try:
        view = SessionView.from_store(store, run_config, folder)
        events = all_events(store)
        started = [e for e in events if e["kind"] == "RunStarted"]
        versions = recorded(store, started, "versions")
        machine = recorded(store, started, "machine")
        attempts = phase_attempts(events)
        last_attempt = {epoch: seconds for epoch, seconds in attempts}
        epochs = []
        for row in view.epochs:
            if row.done:
                epochs.append(epoch_from_metrics(row.row(), view.batches_of(row.epoch)))
            else:
                epochs.append(epoch_from_database(store, view, row, last_attempt.get(row.epoch, {})))
        counted = {r.epoch for r in view.epochs if r.done and r.row().get("plugin_faults") is not None}
        stored = store.plugin_faults([e.epoch for e in epochs if e.epoch not in counted])  # metrics lack them
        for e in epochs:
            e.plugin_faults = e.plugin_faults if e.epoch in counted else stored.get(e.epoch, {})
        phase_totals: dict[str, float] = {}
        for e in epochs:
            if e.complete:
                for phase, sec in e.phase_seconds.items():
                    phase_totals[phase] = phase_totals.get(phase, 0.0) + float(sec)
        phase_all: dict[str, float] = {}
        for _, seconds in attempts:
            for phase, sec in seconds.items():
                phase_all[phase] = phase_all.get(phase, 0.0) + sec
        discarded = [
            {"epoch": ev["epoch"], "at": ev["ts"], "reason": ev["payload"].get("reason", "")}
            for ev in events
            if ev["kind"] == "PartialEpochDiscarded"
        ]
        reader = TaskReader(
            store,
            int(config.get("seed", 0)),
            dict(config.get("data_dirs") or {}),
            sources=dict(config.get("environments") or {}),
            options=dict(config.get("environments_options") or {}),
        )
        samples, rejected = sample_tasks(store, reader)
        return SessionData(
            path=folder,
            name=folder.resolve().name,
            config=config,
            config_rows=rows,
            created_at=store.get_meta("created_at"),
            versions=versions or local_versions(),
            versions_recorded=versions is not None,
            machine=machine or local_machine(),
            machine_recorded=machine is not None,
            runs=run_spans(events),
            epochs=epochs,
            phase_totals=phase_totals,
            phase_totals_all=phase_all,
            discarded=discarded,
            trained=training_volume(folder, store, epochs, int(config["agent"]["update_epochs"])),
            task_counts=store.task_census(),
            samples=samples,
            rejected=rejected,
            edits=hand_edits(store, reader),
            pinned=tasks_with_status(store, reader, "pinned"),
            banned=tasks_with_status(store, reader, "banned"),
            funnel=store.funnel(),
        )
    finally:
        store.close()


def slug(text: str) -> str:
    """A filename-safe form of a name.

    >>> slug("micro-trained 2026/11")
    'micro-trained-2026-11'
    """
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "session"
