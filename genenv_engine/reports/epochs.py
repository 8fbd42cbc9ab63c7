"""One epoch as a report shows it (`EpochData`): a done epoch from the metrics the loop recorded, any other one
rebuilt from what it left in the database (generations, scored batches, rollouts) and marked partial.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from genenv_engine.reports.session_data import EpochData
from genenv_engine.storage.session_view import BatchView, EpochView, SessionView
from genenv_engine.storage.store import Store

_METRIC_FIELDS = (
    "generated",
    "valid",
    "valid_fraction",
    "unique_fraction",
    "generated_success",
    "in_band_fraction",
    "calibration_error",
    "tokens_generated",
    "tokens_per_second",
    "tasks_trained",
    "pool_size",
)


def epoch_from_metrics(row: dict[str, Any], batches: tuple[BatchView, ...]) -> EpochData:
    """A done epoch from the metrics row the loop recorded, with the R_env of its scored ``batches``."""
    e = EpochData(
        epoch=row["epoch"], status=row["status"], started_at=row.get("started_at"), finished_at=row.get("finished_at")
    )
    for name in _METRIC_FIELDS:
        if row.get(name) is not None:
            setattr(e, name, row[name])
    e.invalid_reasons = dict(row.get("invalid_reasons") or {})
    e.difficulty_mix = dict(row.get("difficulty_mix") or {})
    e.generated_success_by_benchmark = dict(row.get("generated_success_by_benchmark") or {})
    e.batch_p_hats = list(row.get("batch_p_hats") or [])
    e.task_p_hats = list(row.get("task_p_hats") or [])
    e.heldout = dict(row.get("heldout") or {})
    e.heldout_by_level = dict(row.get("heldout_by_level") or {})
    e.phase_seconds = dict(row.get("phase_seconds") or {})
    e.tasks_trained_by_origin = dict(row.get("tasks_trained_by_origin") or {})
    e.agent_update = dict(row.get("agent_update") or {})
    e.simulator_update = dict(row.get("simulator_update") or {})
    e.warm_start = row.get("warm_start")
    e.plugin_faults = dict(row.get("plugin_faults") or {})
    e.heldout_rescored = list(row.get("heldout_rescored") or [])
    e.r_envs = [b.r_env for b in batches if b.r_env is not None]
    if not e.batch_p_hats:
        e.batch_p_hats = [b.p_hat for b in batches if b.p_hat is not None]
    return e


def epoch_from_database(store: Store, view: SessionView, row: EpochView, seconds: dict[str, float]) -> EpochData:
    """Rebuild what a stopped/crashed/running epoch left behind: generations, scored batches (each against the
    alpha it was scored against), rollouts."""
    epoch = row.epoch
    e = EpochData(
        epoch=epoch, status=row.status, started_at=row.started_at, finished_at=row.finished_at, source="database"
    )
    rows = store.generated_verdicts(epoch)
    if rows:
        e.generated = len(rows)
        e.valid = sum(1 for r in rows if r["valid"])
        e.valid_fraction = e.valid / e.generated
        e.invalid_reasons = dict(Counter((r["reason"] or "").split(":")[0] for r in rows if not r["valid"]))
    e.batch_p_hats = view.p_hats(epoch)
    e.r_envs = view.r_envs(epoch)
    e.in_band_fraction = view.in_band_fraction(epoch)
    e.calibration_error = view.calibration_error(epoch)
    attempts = store.batch_task_successes(epoch)
    if attempts:
        e.generated_success = sum(a["success"] for a in attempts) / len(attempts)
        per_task: dict[str, list[int]] = {}
        per_bench: dict[str, list[int]] = {}
        for a in attempts:
            per_task.setdefault(a["id"], []).append(a["success"])
            per_bench.setdefault(a["benchmark"], []).append(a["success"])
        e.task_p_hats = [round(sum(v) / len(v), 4) for v in per_task.values()]
        e.generated_success_by_benchmark = {b: sum(v) / len(v) for b, v in sorted(per_bench.items())}
    e.phase_seconds = dict(seconds)
    return e
