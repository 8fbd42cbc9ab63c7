"""Run records: one arm x seed run of the ablation bench as a small JSON file that outlives its session folder.

A session folder holds checkpoints (megabytes per epoch) and is left on the machine that ran it; a record holds
what the bench's tables need from it: the config, the per-epoch rows, every epoch's per-task held-out results
(the ``0``/``1`` strings that paired comparisons use), the held-out difficulty levels, the agent budget and any
re-scored held-out (`genenv_engine.ablation.rescore`'s cache). Records are a few kilobytes, so the ones behind a
documented result can be committed; a later run on another machine reads them back (``genenv bench ablation
--records DIR``) and is compared with them on the same held-out tasks, since one seed fixes its held-out split.

A recorded run is finished as far as the bench is concerned: it is never re-run or resumed (it has no
checkpoints); held-out can be re-scored on it only at the sizes and epochs its record already carries. Its config
reads as today's (`recorded_config`: keys of earlier versions moved to their place, quietly).

A record also carries its warm start (the cache key and each role's epoch-0 weight fingerprint), so that the tables
can tell when a new run is paired with a recorded one whose epoch-0 agent differs
(`genenv_engine.ablation.runs.warm_start_mismatches`); records written before that field load with their warm
start unknown. Reading a record checks its per-task results (`check_results`): every string is ``0``/``1`` only, as
long as the held-out sample it stands for, and reproduces the held-out rate its epoch row stores; a record that
fails is refused, naming the file and the first thing wrong.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from genenv_engine.ablation.arms import folder_name
from genenv_engine.ablation.rescore import cached_results
from genenv_engine.config import RenamedSettingWarning, RunConfig, config_from_dict
from genenv_engine.core.errors import ConfigError

RECORD_VERSION = 1


PUBLIC_FIELDS = ("alpha", "target_epochs", "benchmarks", "heldout_size", "epochs")
"""The run's own fields a record keeps as they are (the rest are rebuilt from the private ones below)."""


def record_path(records: Path, arm: str, seed: int) -> Path:
    """Where the record of ``arm`` on ``seed`` lives in a records folder."""
    return records / f"{folder_name(arm, seed)}.json"


def to_record(run: dict[str, Any]) -> dict[str, Any]:
    """The JSON-ready record of a run read from its session (`genenv_engine.ablation.runs.read_session`)."""
    return {
        "version": RECORD_VERSION,
        **{k: run[k] for k in PUBLIC_FIELDS},
        "config": run["_config"].to_dict(),
        "correct": {str(e): c for e, c in run["_correct"].items()},
        "levels": run["_levels"],
        "budget": run["_budget"],
        "rescored": cached_results(run["_folder"]),
        "warm_start": {
            "key": run.get("_warm_start"),
            "fingerprints": run.get("_fingerprints") or {},
            "built_on": run.get("_built_on"),
        },
        "heldout_split": run.get("_heldout_split") or {},
    }


RATE_TOLERANCE = 1e-6
"""How far the held-out rate recomputed from a record's ``0``/``1`` string may be from the rate its epoch row stores
(the loop stores the exact fraction, so only float noise is allowed: one task of a million)."""


def _results_problem(results: Any, size: int, split: int | None) -> str | None:
    """What is wrong with one ``0``/``1`` string standing for a held-out sample of ``size`` tasks from a split of
    ``split`` tasks (None: not known to be smaller), or None.

    >>> _results_problem("0110", 4, None), _results_problem("011", 4, None), _results_problem("01x0", 4, None)
    (None, 'has 3 results, not 4', "holds characters other than 0 and 1 ('x')")
    >>> _results_problem("011", 4, 3)   # the whole split, smaller than the sample asked for
    """
    if not isinstance(results, str):
        return f"is not a string ({type(results).__name__})"
    other = sorted(set(results) - {"0", "1"})
    if other:
        return f"holds characters other than 0 and 1 ({', '.join(map(repr, other))})"
    want = size if split is None else min(size, split)
    if len(results) != want:
        return f"has {len(results)} results, not {want}"
    return None


def check_results(data: dict[str, Any], source: Path) -> None:
    """Refuse a record whose per-task results do not hold up (a ConfigError naming ``source`` and the reason):
    each epoch's string per benchmark must be ``0``/``1`` only, have one result per held-out task the run evaluated
    (``heldout_size``, or the benchmark's whole held-out split where the record says it is smaller), and give the
    held-out rate stored in that epoch's row; the difficulty levels must be as long; each re-scored string must
    be ``0``/``1`` with as many results as the size it was re-scored on."""
    size, split = data["heldout_size"], data.get("heldout_split") or {}
    if not isinstance(size, int) or size < 1:
        raise ConfigError(str(source), f"has no valid heldout_size ({size!r})")
    rows = {r.get("epoch"): r for r in data["epochs"] if isinstance(r, dict)}
    for epoch, by_bench in data["correct"].items():
        if not str(epoch).isdigit() or not isinstance(by_bench, dict):
            raise ConfigError(str(source), f"has per-task held-out results under {epoch!r}, not an epoch number")
        stored = (rows.get(int(epoch)) or {}).get("heldout") or {}
        for bench, results in by_bench.items():
            problem = _results_problem(results, size, split.get(bench))
            if problem:
                raise ConfigError(str(source), f"epoch {epoch}: the {bench} held-out result string {problem}")
            rate = stored.get(bench)
            if not isinstance(rate, (int, float)):
                raise ConfigError(
                    str(source),
                    f"epoch {epoch}: has a {bench} held-out result string but no stored "
                    f"{bench} held-out rate to check it against",
                )
            if results and abs(results.count("1") / len(results) - rate) > RATE_TOLERANCE:
                raise ConfigError(
                    str(source),
                    f"epoch {epoch}: the {bench} held-out result string gives "
                    f"{results.count('1')}/{len(results)} = {results.count('1') / len(results):.6f}, "
                    f"not the stored held-out rate {rate:.6f}",
                )
    for bench, buckets in (data["levels"] or {}).items():
        want = size if bench not in split else min(size, split[bench])
        if not isinstance(buckets, list) or len(buckets) != want:
            got = len(buckets) if isinstance(buckets, list) else repr(buckets)
            raise ConfigError(str(source), f"has {bench} held-out levels for {got} tasks, not {want}")
    for n, by_epoch in (data.get("rescored") or {}).items():
        if not str(n).isdigit() or not isinstance(by_epoch, dict):
            raise ConfigError(str(source), f"has re-scored held-out under {n!r}, not a number of tasks")
        for epoch, by_bench in by_epoch.items():
            for bench, results in (by_bench or {}).items():
                problem = _results_problem(results, int(n), split.get(bench))
                if problem:
                    raise ConfigError(
                        str(source), f"epoch {epoch}: the {bench} result string re-scored on {n} tasks {problem}"
                    )


def from_record(data: dict[str, Any], source: Path) -> dict[str, Any]:
    """A run (the shape `read_session` returns) rebuilt from a record; ``_folder`` is None: no checkpoints.

    A record whose per-task results fail `check_results` is refused; one without a warm start (written before
    records carried it) gives a run whose warm-start key and fingerprints are unknown."""
    if data.get("version") != RECORD_VERSION:
        raise ConfigError(
            str(source),
            f"is a run record of version {data.get('version')!r}; this genenv reads version {RECORD_VERSION}",
        )
    missing = [k for k in (*PUBLIC_FIELDS, "config", "correct", "levels", "budget") if k not in data]
    if missing:
        raise ConfigError(str(source), f"is not a run record (missing {', '.join(missing)})")
    check_results(data, source)
    warm = data.get("warm_start") or {}
    prints = warm.get("fingerprints") or {}
    if not isinstance(prints, dict) or not all(isinstance(v, (int, float)) for v in prints.values()):
        raise ConfigError(str(source), f"has warm-start fingerprints that are not numbers ({prints!r})")
    machine = warm.get("built_on")
    if machine is not None and not isinstance(machine, str):
        raise ConfigError(str(source), f"names the warm start's machine with something that is not text ({machine!r})")
    return {
        **{k: data[k] for k in PUBLIC_FIELDS},
        "recorded": str(source),
        "_correct": {int(e): c for e, c in data["correct"].items()},
        "_levels": data["levels"],
        "_budget": data["budget"],
        "_folder": None,
        "_config": recorded_config(data["config"], source),
        "_rescored": data.get("rescored", {}),
        "_warm_start": warm.get("key"),
        "_fingerprints": {role: float(v) for role, v in prints.items()},
        "_built_on": machine,
        "_heldout_split": data.get("heldout_split") or {},
    }


def recorded_config(table: dict[str, Any], source: Path | str) -> RunConfig:
    """A record's config as today's `RunConfig`: keys of earlier versions (`genenv_engine.config.RENAMED_SETTINGS`)
    moved to their place without a warning, since a record is an archive of a finished run that nobody rewrites."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RenamedSettingWarning)
        return config_from_dict(table, str(source))


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
