"""Read a session folder into plain dataclasses for reports: config, runs, epochs, calibration, tasks.

Everything comes from the session's files (``config.toml`` read by `config.saved_config`, which checks no
paths, so a session copied from another machine still reports even when its model or data paths do not exist
here, and keeps settings of another genenv version; and ``genenv.db``). Done epochs take their numbers from the metrics the loop recorded; an epoch that
stopped, crashed or is still running has no metrics, so what it left in the database (generated
tasks, scored batches, rollouts, phase events) is summarised instead and the epoch is marked partial. Epochs
and variation batches are read through `genenv_engine.session_view.SessionView`: each batch's stored R_env and the
alpha it was scored against (for an older database, computed from the session's own curriculum settings).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from genenv_engine.machine import local_machine, local_versions
from genenv_engine.records import Task
from genenv_engine.session_view import REWARD_KINDS, BatchView, EpochView, SessionView
from genenv_engine.store import Store

if TYPE_CHECKING:
    from genenv_engine.config import RunConfig

MODE_LABELS = {"trained": "GenEnv", "frozen": "GenEnv-Random", "static": "GenEnv-Static", "off": "base data only",
               "sampler": "difficulty sampler (no simulator)"}
"""How the paper names each simulator mode (Fig. 6)."""
SAMPLES_PER_BUCKET = 3
"""Generated tasks shown per difficulty bucket."""
REJECTED_SAMPLES = 5
"""Rejected generations shown with their reason."""
TEXT_LIMIT = 4000
"""Task text longer than this many characters is cut in reports (the cut is said)."""


# -- records ---------------------------------------------------------------------------------------


@dataclass
class RunSpan:
    """One process run of the session: from a RunStarted event to its end event (if any was recorded)."""

    started_at: str
    start_epoch: int
    ended_at: str | None = None
    end: str | None = None
    """``finished``, ``stopped``, ``failed`` or None when nothing was recorded (killed, or still running)."""
    end_epoch: int | None = None
    detail: str = ""

    @property
    def seconds(self) -> float | None:
        """Wall-clock length of the run, when it ended."""
        return _span(self.started_at, self.ended_at)


@dataclass
class EpochData:
    """One epoch as reported: recorded metrics for done epochs, database leftovers for the others."""

    epoch: int
    status: str
    """``done``, ``partial`` (stopped or crashed mid-epoch) or ``running`` (no end recorded)."""
    started_at: str | None = None
    finished_at: str | None = None
    source: str = "metrics"
    """``metrics`` (what the loop recorded at the end of the epoch) or ``database`` (rebuilt for a partial epoch)."""
    generated: int | None = None
    valid: int | None = None
    valid_fraction: float | None = None
    unique_fraction: float | None = None
    invalid_reasons: dict[str, int] = field(default_factory=dict)
    difficulty_mix: dict[str, int] = field(default_factory=dict)
    generated_success: float | None = None
    generated_success_by_benchmark: dict[str, float | None] = field(default_factory=dict)
    batch_p_hats: list[float] = field(default_factory=list)
    task_p_hats: list[float] = field(default_factory=list)
    r_envs: list[float] = field(default_factory=list)
    in_band_fraction: float | None = None
    calibration_error: float | None = None
    heldout: dict[str, float] = field(default_factory=dict)
    heldout_by_level: dict[str, dict[str, float]] = field(default_factory=dict)
    phase_seconds: dict[str, float] = field(default_factory=dict)
    tokens_generated: int | None = None
    tokens_per_second: float | None = None
    tasks_trained: int | None = None
    tasks_trained_by_origin: dict[str, int] = field(default_factory=dict)
    agent_update: dict[str, Any] = field(default_factory=dict)
    simulator_update: dict[str, Any] = field(default_factory=dict)
    pool_size: int | None = None
    warm_start: dict[str, Any] | None = None

    @property
    def complete(self) -> bool:
        """Whether the epoch finished (its numbers are the recorded metrics)."""
        return self.status == "done"

    @property
    def r_env_mean(self) -> float | None:
        """Mean R_env over the epoch's scored variation batches."""
        return _mean(self.r_envs)

    @property
    def batch_p_hat_mean(self) -> float | None:
        """Mean p-hat over the epoch's variation batches."""
        return _mean(self.batch_p_hats)


@dataclass
class TaskView:
    """A task as a report shows it: text, verdicts, scores, checker result, agent attempts and lineage."""

    id: str
    benchmark: str
    origin: str
    split: str | None
    status: str
    epoch: int | None
    valid: bool
    reason: str
    prompt: str
    answer: str
    bucket: str = ""
    generator: str | None = None
    p_hat: float | None = None
    r_env: float | None = None
    n_rollouts: int = 0
    batch_id: str | None = None
    superseded_by: str | None = None
    parent_id: str | None = None
    created_at: str | None = None
    check: str = ""
    """What the benchmark's checker says about the task's own gold answer."""
    attempts: str = ""
    """The agent's stored rollouts on this task: successes, mean reward, error types."""
    lineage: list[tuple[str, str, int | None]] = field(default_factory=list)
    """(id, origin, epoch) from this task back to its root (the seed it descends from)."""
    root_prompt: str | None = None
    root_answer: str | None = None


@dataclass
class Edit:
    """A hand edit: the revision and the task it replaced."""

    before: TaskView
    after: TaskView


@dataclass
class SessionData:
    """Everything a report says about one session."""

    path: Path
    name: str
    config: dict[str, Any]
    config_rows: list[tuple[str, str, str]]
    created_at: str | None
    versions: dict[str, str]
    versions_recorded: bool
    machine: dict[str, str]
    machine_recorded: bool
    runs: list[RunSpan]
    epochs: list[EpochData]
    phase_totals: dict[str, float]
    phase_totals_all: dict[str, float]
    discarded: list[dict[str, Any]]
    trained: dict[str, Any]
    task_counts: list[dict[str, Any]]
    samples: dict[str, list[TaskView]]
    rejected: list[TaskView]
    edits: list[Edit]
    pinned: list[TaskView]
    banned: list[TaskView]
    funnel: list[dict[str, Any]] = field(default_factory=list)
    """`Store.funnel`: drafts -> admitted -> trained per (epoch, benchmark)."""

    # -- convenient views of the config ---------------------------------------------------------

    @property
    def mode(self) -> str:
        return str(self.config["simulator"]["mode"])

    @property
    def reward(self) -> str:
        """The curriculum reward kind (``alpha``, ``agent0`` or ``uniform``)."""
        return str(self.config["curriculum"]["reward"])

    @property
    def reward_formula(self) -> str:
        """R_env's formula under the session's reward kind (`session_view.REWARD_KINDS`)."""
        return REWARD_KINDS.get(self.reward, f"the {self.reward} reward")

    @property
    def alpha(self) -> float:
        return float(self.config["curriculum"]["alpha"])

    @property
    def k_min(self) -> float:
        return float(self.config["curriculum"]["k_min"])

    @property
    def beta(self) -> float:
        return float(self.config["curriculum"]["beta"])

    @property
    def benchmarks(self) -> list[str]:
        return list(self.config["benchmarks"])

    @property
    def label(self) -> str:
        """The paper's name for the simulator mode, e.g. ``GenEnv-Random (frozen)``; names a curriculum reward other
        than the paper's alpha reward by its kind (``, agent0 R_env``, ``, uniform R_env``)."""
        text = f"{MODE_LABELS.get(self.mode, self.mode)} ({self.mode})"
        return text + (f", {self.reward} R_env" if self.reward != "alpha" else "")

    @property
    def done_epochs(self) -> list[EpochData]:
        return [e for e in self.epochs if e.complete]

    @property
    def incomplete_epochs(self) -> list[EpochData]:
        return [e for e in self.epochs if not e.complete]

    @property
    def started_at(self) -> str | None:
        return self.runs[0].started_at if self.runs else self.created_at

    @property
    def ended_at(self) -> str | None:
        stamps = [r.ended_at for r in self.runs if r.ended_at] + [e.finished_at for e in self.epochs if e.finished_at]
        return max(stamps, key=_parse_time) if stamps else None

    @property
    def wall_seconds(self) -> float | None:
        """Wall-clock time of all runs that recorded an end."""
        spans = [r.seconds for r in self.runs if r.seconds is not None]
        return sum(spans) if spans else None

    @property
    def tokens_generated(self) -> int:
        return sum(e.tokens_generated or 0 for e in self.done_epochs)

    def heldout_series(self, benchmark: str) -> list[tuple[int, float]]:
        """(epoch, held-out success) of every done epoch that evaluated ``benchmark``."""
        return [(e.epoch, e.heldout[benchmark]) for e in self.done_epochs if benchmark in e.heldout]

    def heldout_best(self, benchmark: str) -> tuple[int, float] | None:
        """(epoch, rate) of the best held-out success (earliest epoch on ties)."""
        series = self.heldout_series(benchmark)
        return max(series, key=lambda p: (p[1], -p[0])) if series else None

    def heldout_final(self, benchmark: str) -> tuple[int, float] | None:
        """(epoch, rate) of the last done epoch's held-out success."""
        series = self.heldout_series(benchmark)
        return series[-1] if series else None


# -- helpers ---------------------------------------------------------------------------------------


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _parse_time(text: str) -> datetime:
    """Parse the ISO stamps the store writes (``...Z`` or ``+00:00``)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _span(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    try:
        return (_parse_time(end) - _parse_time(start)).total_seconds()
    except ValueError:
        return None


def _json(text: str | None) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _fmt_value(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) if value else "(none)"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) if value else "(none)"
    if value is None:
        return "(unset)"
    return str(value)


# -- config ----------------------------------------------------------------------------------------


def read_config(session_dir: Path) -> tuple[dict[str, Any], list[tuple[str, str, str]]]:
    """The session's config as nested dicts (defaults filled in) and one (key, value, meaning) row per setting;
    settings this genenv version does not know are listed too, marked as such."""
    from genenv_engine.config import saved_config

    return _config_rows(*saved_config(session_dir / "config.toml"))


def _config_rows(config: RunConfig, unknown: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str, str]]]:
    """`read_config`'s nested dicts and rows of a config read by `config.saved_config`."""
    from genenv_engine.config import RunConfig, field_docs

    merged: dict[str, Any] = asdict(config)
    rows: list[tuple[str, str, str]] = []
    top_docs = field_docs(RunConfig)
    for f in fields(RunConfig):
        value = getattr(config, f.name)
        if is_dataclass(value):
            docs = field_docs(type(value))
            rows.extend((f"{f.name}.{sf.name}", _fmt_value(getattr(value, sf.name)), docs.get(sf.name, "").replace("``", ""))
                        for sf in fields(value))
        else:
            rows.append((f.name, _fmt_value(value), top_docs.get(f.name, "").replace("``", "")))
    for key, value in unknown.items():
        *sections, name = key.split(".")
        table = merged
        for section in sections:
            table = table.setdefault(section, {})
        table[name] = value
        rows.append((key, _fmt_value(value), "(not a setting of this genenv version)"))
    rows.sort(key=lambda r: ("." in r[0], r[0]))
    return merged, rows


# -- versions and machine --------------------------------------------------------------------------


def _recorded(store: Store, started: list[dict[str, Any]], key: str) -> dict[str, str] | None:
    """A versions/machine dict the engine recorded (meta key or RunStarted payload), when it did."""
    value = _json(store.get_meta(key))
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    for event in started:
        value = event["payload"].get(key)
        if isinstance(value, dict):
            return {str(k): str(v) for k, v in value.items()}
    return None


# -- events: runs, phase totals, discarded attempts --------------------------------------------------


def _all_events(store: Store) -> list[dict[str, Any]]:
    out, after = [], 0
    while True:
        page = store.events(after_id=after, limit=5000)
        out.extend(page)
        if len(page) < 5000:
            return out
        after = page[-1]["id"]


_ENDS = {"RunFinished": "finished", "RunStopped": "stopped", "RunFailed": "failed"}


def _runs(events: list[dict[str, Any]]) -> list[RunSpan]:
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


def _phase_attempts(events: list[dict[str, Any]]) -> list[tuple[int, dict[str, float]]]:
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
            current[ev["epoch"]][phase] = current[ev["epoch"]].get(phase, 0.0) + float(ev["payload"].get("seconds", 0.0))
    return attempts


# -- epochs ----------------------------------------------------------------------------------------


_METRIC_FIELDS = ("generated", "valid", "valid_fraction", "unique_fraction", "generated_success",
                  "in_band_fraction", "calibration_error", "tokens_generated", "tokens_per_second",
                  "tasks_trained", "pool_size")


def _epoch_from_metrics(row: dict[str, Any], batches: tuple[BatchView, ...]) -> EpochData:
    e = EpochData(epoch=row["epoch"], status=row["status"], started_at=row.get("started_at"),
                  finished_at=row.get("finished_at"))
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
    e.r_envs = [b.r_env for b in batches if b.r_env is not None]
    if not e.batch_p_hats:
        e.batch_p_hats = [b.p_hat for b in batches if b.p_hat is not None]
    return e


def _epoch_from_database(store: Store, view: SessionView, row: EpochView, seconds: dict[str, float]) -> EpochData:
    """Rebuild what a stopped/crashed/running epoch left behind: generations, scored batches (each against the
    alpha it was scored against), rollouts."""
    epoch = row.epoch
    e = EpochData(epoch=epoch, status=row.status, started_at=row.started_at, finished_at=row.finished_at,
                  source="database")
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


# -- tasks -----------------------------------------------------------------------------------------


def _cut(text: str | None) -> str:
    text = text or ""
    if len(text) <= TEXT_LIMIT:
        return text
    return text[:TEXT_LIMIT] + f"\n… ({len(text) - TEXT_LIMIT} more characters not shown)"


class _TaskReader:
    """Turns task rows into TaskViews, loading each benchmark's environment once for buckets and checks."""

    def __init__(self, store: Store, seed: int, data_dirs: dict[str, str]) -> None:
        self.store, self.seed, self.data_dirs = store, seed, data_dirs
        self._envs: dict[str, Any] = {}

    def env(self, name: str) -> Any:
        if name not in self._envs:
            from genenv_engine.environments import get_environment

            try:
                self._envs[name] = get_environment(name, self.seed)
            except Exception:  # an unknown or broken benchmark must not stop the report
                self._envs[name] = None
        return self._envs[name]

    def bucket(self, task: Task) -> str:
        env = self.env(task.benchmark)
        try:
            return str(env.bucket(task)) if env is not None else f"L{task.level}"
        except Exception:
            return f"L{task.level}"

    def view(self, task_id: str, full: bool = True) -> TaskView | None:
        task = self.store.get_task(task_id)
        if task is None:
            return None
        stats = self.store.task_stats(task_id) or {}
        created = self.store.created_at(task_id)
        v = TaskView(id=task.id, benchmark=task.benchmark, origin=task.origin, split=task.split, status=task.status,
                     epoch=task.epoch, valid=task.valid, reason=task.reason, prompt=_cut(task.prompt),
                     answer=_cut(task.answer), bucket=self.bucket(task), generator=task.generator,
                     p_hat=stats.get("p_hat"), r_env=stats.get("r_env"), n_rollouts=stats.get("n_rollouts") or 0,
                     batch_id=stats.get("batch_id"), superseded_by=stats.get("superseded_by"),
                     parent_id=task.parent_id, created_at=created)
        if not full:
            return v
        v.check = self.check(task)
        v.attempts = self.attempts(task_id)
        chain = self.store.lineage(task_id)
        v.lineage = [(t.id, t.origin, t.epoch) for t in chain]
        if len(chain) > 1:
            v.root_prompt, v.root_answer = _cut(chain[-1].prompt), _cut(chain[-1].answer)
        return v

    def check(self, task: Task) -> str:
        if not task.valid:
            return f"rejected by the validator: {task.reason or 'no reason recorded'}"
        env = self.env(task.benchmark)
        if env is None:
            return f"not checked (benchmark {task.benchmark!r} is not available here)"
        try:
            result = env.check(task, task.answer)
        except Exception as exc:  # a checker error is reported, not raised
            return f"checker error on the gold answer: {type(exc).__name__}: {exc}"
        verdict = "accepts" if result.success else "REJECTS"
        extra = f", error {result.error_type}" if result.error_type else ""
        return f"checker {verdict} the gold answer (score {result.score:.3f}{extra})"

    def attempts(self, task_id: str) -> str:
        rows = self.store.rollouts_for(task_id)
        if not rows:
            return "no agent rollouts recorded"
        epochs = sorted({r["epoch"] for r in rows if r["epoch"] is not None})
        wins = sum(1 for r in rows if r["success"])
        mean = sum(r["reward"] or 0.0 for r in rows) / len(rows)
        errors = Counter(r["error_type"] for r in rows if r["error_type"])
        text = f"{wins}/{len(rows)} rollouts succeeded (mean reward {mean:.3f}; epochs {', '.join(map(str, epochs))})"
        if errors:
            text += "; errors: " + ", ".join(f"{k} x{n}" for k, n in errors.most_common())
        return text


def _samples(store: Store, reader: _TaskReader) -> tuple[dict[str, list[TaskView]], list[TaskView]]:
    """Up to SAMPLES_PER_BUCKET valid generated tasks per difficulty bucket (spread over epochs, newest
    first), and a few rejected generations."""
    by_bucket: dict[str, dict[int, list[str]]] = {}
    for row in store.generated_summaries():
        difficulty = row["difficulty"] or {}
        stub = Task(id=row["id"], benchmark=row["benchmark"], prompt="", answer="", difficulty=difficulty)
        by_bucket.setdefault(reader.bucket(stub), {}).setdefault(row["epoch"], []).append(row["id"])
    samples: dict[str, list[TaskView]] = {}
    for bucket in sorted(by_bucket):
        queues = [list(ids) for _, ids in sorted(by_bucket[bucket].items(), reverse=True)]
        chosen: list[str] = []
        while len(chosen) < SAMPLES_PER_BUCKET and any(queues):
            for q in queues:
                if q and len(chosen) < SAMPLES_PER_BUCKET:
                    chosen.append(q.pop(0))
        samples[bucket] = [v for v in (reader.view(i) for i in chosen) if v is not None]
    rejected = [reader.view(i) for i in store.rejected_ids(REJECTED_SAMPLES)]
    return samples, [v for v in rejected if v is not None]


def _edits(store: Store, reader: _TaskReader) -> list[Edit]:
    """Every hand edit (an ``edited`` task and the task it revised), oldest first."""
    out = []
    for edited_id, parent_id in store.edits():
        after = reader.view(edited_id)
        before = reader.view(parent_id, full=False) if parent_id else None
        if after is None:
            continue
        if before is None:
            before = TaskView(id=parent_id or "?", benchmark=after.benchmark, origin="?", split=None,
                              status="?", epoch=None, valid=False, reason="the edited task is no longer stored",
                              prompt="", answer="")
        out.append(Edit(before, after))
    return out


def _with_status(store: Store, reader: _TaskReader, status: str) -> list[TaskView]:
    return [v for v in (reader.view(i, full=False) for i in store.ids_with_status(status)) if v is not None]


def _task_counts(store: Store) -> list[dict[str, Any]]:
    return store.task_census()


# -- training volume -------------------------------------------------------------------------------


def _trained(session_dir: Path, store: Store, epochs: list[EpochData], update_epochs: int) -> dict[str, Any]:
    """Sequences the two updates trained on (recorded), and an estimate of the agent's trained tokens."""
    done = [e for e in epochs if e.complete and e.epoch > 0]
    agent_seq = sum(int(e.agent_update.get("sequences", 0) or 0) for e in done)
    agent_steps = sum(int(e.agent_update.get("steps", 0) or 0) for e in done)
    sim_examples = sum(int(e.simulator_update.get("examples", 0) or 0) for e in done
                       if e.simulator_update.get("steps"))
    sim_steps = sum(int(e.simulator_update.get("steps", 0) or 0) for e in done)
    warm = next((e.warm_start for e in epochs if e.warm_start), None) or {}
    recorded = [e.agent_update.get("tokens") for e in done]
    sim_recorded = [e.simulator_update.get("tokens") for e in done if e.simulator_update.get("steps")]
    return {"agent_tokens": sum(recorded) if done and all(t is not None for t in recorded) else None,
            "simulator_tokens": sum(sim_recorded) if all(t is not None for t in sim_recorded) else None,
            "agent_sequences": agent_seq, "agent_steps": agent_steps, "simulator_examples": sim_examples,
            "simulator_steps": sim_steps, "agent_tokens_estimate": _agent_tokens(session_dir, store, done, update_epochs),
            "warm_start": warm}


def _agent_tokens(session_dir: Path, store: Store, done: list[EpochData], update_epochs: int) -> int | None:
    """Completion tokens in the agent's GRPO updates, re-tokenised from the stored rollouts of groups with
    differing rewards (the others are dropped by GRPO), times the update passes. None without a tokenizer."""
    files = sorted(session_dir.glob("checkpoints/epoch_*/agent/tokenizer.json"))
    if not files or not done:
        return None
    try:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(files[0]))
    except Exception:
        return None
    total = 0
    for e in done:
        groups: dict[str, list[tuple[float, str]]] = {}
        for r in store.train_rollouts(e.epoch):
            groups.setdefault(r["task_id"], []).append((r["reward"] or 0.0, r["response"] or ""))
        texts = [t for g in groups.values() if len({x[0] for x in g}) > 1 for _, t in g]
        if texts:
            total += sum(len(enc.ids) for enc in tok.encode_batch(texts, add_special_tokens=False))
    return total * max(1, update_epochs)


# -- entry point -----------------------------------------------------------------------------------


def load_session(session_dir: str | Path) -> SessionData:
    """Read one session folder into a SessionData (raises FileNotFoundError when it is not a session)."""
    folder = Path(session_dir)
    if not (folder / "config.toml").exists() or not (folder / "genenv.db").exists():
        raise FileNotFoundError(f"{folder} is not a genenv session (needs config.toml and genenv.db)")
    from genenv_engine.config import saved_config

    run_config, unknown = saved_config(folder / "config.toml")
    config, rows = _config_rows(run_config, unknown)
    store = Store(folder / "genenv.db")
    try:
        view = SessionView.from_store(store, run_config, folder)
        events = _all_events(store)
        started = [e for e in events if e["kind"] == "RunStarted"]
        versions = _recorded(store, started, "versions")
        machine = _recorded(store, started, "machine")
        attempts = _phase_attempts(events)
        last_attempt = {epoch: seconds for epoch, seconds in attempts}
        epochs = []
        for row in view.epochs:
            if row.done:
                epochs.append(_epoch_from_metrics(row.row(), view.batches_of(row.epoch)))
            else:
                epochs.append(_epoch_from_database(store, view, row, last_attempt.get(row.epoch, {})))
        phase_totals: dict[str, float] = {}
        for e in epochs:
            if e.complete:
                for phase, sec in e.phase_seconds.items():
                    phase_totals[phase] = phase_totals.get(phase, 0.0) + float(sec)
        phase_all: dict[str, float] = {}
        for _, seconds in attempts:
            for phase, sec in seconds.items():
                phase_all[phase] = phase_all.get(phase, 0.0) + sec
        discarded = [{"epoch": ev["epoch"], "at": ev["ts"], "reason": ev["payload"].get("reason", "")}
                     for ev in events if ev["kind"] == "PartialEpochDiscarded"]
        reader = _TaskReader(store, int(config.get("seed", 0)), dict(config.get("data_dirs") or {}))
        samples, rejected = _samples(store, reader)
        return SessionData(
            path=folder, name=folder.resolve().name, config=config, config_rows=rows,
            created_at=store.get_meta("created_at"),
            versions=versions or local_versions(), versions_recorded=versions is not None,
            machine=machine or local_machine(), machine_recorded=machine is not None,
            runs=_runs(events), epochs=epochs, phase_totals=phase_totals, phase_totals_all=phase_all,
            discarded=discarded, trained=_trained(folder, store, epochs, int(config["agent"]["update_epochs"])),
            task_counts=_task_counts(store), samples=samples, rejected=rejected, edits=_edits(store, reader),
            pinned=_with_status(store, reader, "pinned"), banned=_with_status(store, reader, "banned"),
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
