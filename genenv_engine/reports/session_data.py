"""What a report knows of a session, as plain dataclasses: its runs, epochs, tasks and hand edits.

`genenv_engine.reports.data.load_session` fills them from a session folder; the document builder and the plots
read them. An epoch that finished carries the metrics the loop recorded; one that stopped, crashed or is still
running carries what it left in the database and is marked partial.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from genenv_engine.storage.session_view import REWARD_KINDS

MODE_LABELS = {
    "trained": "GenEnv",
    "frozen": "GenEnv-Random",
    "static": "GenEnv-Static",
    "off": "base data only",
    "sampler": "difficulty sampler (no simulator)",
}
"""How the paper names each simulator mode (Fig. 6)."""


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
    plugin_faults: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    """Items a plugin's fault failed: benchmark -> where -> kind -> items (`genenv_engine.method.faults`)."""
    heldout_rescored: list[dict[str, Any]] = field(default_factory=list)
    """Each re-scoring of the epoch's held-out answers (``genenv resume --rescore-heldout``): when, how many
    changed, the held-out success before."""

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
