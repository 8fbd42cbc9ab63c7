"""Run records: one arm x seed run of the ablation bench as a small JSON file that outlives its session folder.

A session folder holds checkpoints (megabytes per epoch) and is left on the machine that ran it; a record holds
what the bench's tables need from it: the config, the per-epoch rows, every epoch's per-task held-out results
(the ``0``/``1`` strings that paired comparisons use), the held-out difficulty levels, the agent budget and any
re-scored held-out (`genenv_engine.experiments.rescore`'s cache). Records are a few kilobytes, so the ones behind a
documented result can be committed; a later run on another machine reads them back (``genenv bench ablation
--records DIR``) and is compared with them on the same held-out tasks, since one seed fixes its held-out split.

A recorded run is finished as far as the bench is concerned: it is never re-run or resumed (it has no
checkpoints); held-out can be re-scored on it only at the sizes and epochs its record already carries.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from genenv_engine.config import config_from_dict
from genenv_engine.errors import ConfigError
from genenv_engine.experiments.arms import folder_name
from genenv_engine.experiments.rescore import cached_results


RECORD_VERSION = 1


PUBLIC_FIELDS = ("alpha", "target_epochs", "benchmarks", "heldout_size", "epochs")
"""The run's own fields a record keeps as they are (the rest are rebuilt from the private ones below)."""


def record_path(records: Path, arm: str, seed: int) -> Path:
    """Where the record of ``arm`` on ``seed`` lives in a records folder."""
    return records / f"{folder_name(arm, seed)}.json"


def to_record(run: dict[str, Any]) -> dict[str, Any]:
    """The JSON-ready record of a run read from its session (`genenv_engine.experiments.runs.read_session`)."""
    return {"version": RECORD_VERSION, **{k: run[k] for k in PUBLIC_FIELDS},
            "config": run["_config"].to_dict(), "correct": {str(e): c for e, c in run["_correct"].items()},
            "levels": run["_levels"], "budget": run["_budget"], "rescored": cached_results(run["_folder"])}


def from_record(data: dict[str, Any], source: Path) -> dict[str, Any]:
    """A run (the shape `read_session` returns) rebuilt from a record; ``_folder`` is None: no checkpoints."""
    if data.get("version") != RECORD_VERSION:
        raise ConfigError(str(source), f"is a run record of version {data.get('version')!r}; this genenv reads "
                          f"version {RECORD_VERSION}")
    missing = [k for k in (*PUBLIC_FIELDS, "config", "correct", "levels", "budget") if k not in data]
    if missing:
        raise ConfigError(str(source), f"is not a run record (missing {', '.join(missing)})")
    return {**{k: data[k] for k in PUBLIC_FIELDS}, "recorded": str(source),
            "_correct": {int(e): c for e, c in data["correct"].items()}, "_levels": data["levels"],
            "_budget": data["budget"], "_folder": None, "_config": config_from_dict(data["config"]),
            "_rescored": data.get("rescored", {})}


def read_record(path: Path) -> dict[str, Any] | None:
    """The run recorded at ``path`` (None if there is no such file)."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(str(path), f"is not valid JSON ({exc})") from None
    return from_record(data, path)


def write_record(records: Path, arm: str, seed: int, run: dict[str, Any]) -> Path:
    """Write (atomically) the record of a session-backed run; re-scored results already recorded are kept."""
    path = record_path(records, arm, seed)
    record = to_record(run)
    old = json.loads(path.read_text()) if path.is_file() else {}
    for n, by_epoch in (old.get("rescored") or {}).items():
        record["rescored"][n] = {**by_epoch, **record["rescored"].get(n, {})}
    records.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True))
    tmp.replace(path)
    return path
