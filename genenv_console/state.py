"""The dashboard's model of a run: what the engine's events say, as plain data the plots can draw.

`RunState` is folded from engine events on the UI thread (and seeded from the store when a
session is opened, through `genenv_engine.storage.session_view.SessionView`: each batch's stored R_env and band flag,
never a recomputation), so the widgets never read the engine or the database to redraw. The series
functions turn it into exactly what each plot shows; tests assert on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from genenv_engine.config import RunConfig
from genenv_engine.core import events as ev
from genenv_engine.core.curriculum import env_reward, in_band
from genenv_engine.storage.progress import fault_text, sample_line, worker_summary
from genenv_engine.storage.session_view import SessionView

PHASES = (
    "warm_start",
    "generate",
    "validate",
    "rollout",
    "agent_update",
    "simulator_update",
    "heldout_eval",
    "checkpoint",
)
"""Phases in loop order (the phase plot's stacking order)."""

ACTIVE = ("running", "pausing", "paused", "stopping")
"""Run states in which the engine worker is alive."""


@dataclass
class Calibration:
    """Mean p-hat of generated tasks per benchmark per epoch, against alpha and its band."""

    alpha: float
    k_min: float
    points: dict[str, list[tuple[int, float]]]


@dataclass
class Histogram:
    """Batch p-hats of one epoch with the R_env they earned."""

    epoch: int | None
    p_hats: list[float]
    r_envs: list[float]
    alpha: float
    beta: float
    k_min: float
    in_band: list[bool] | None = None
    """Whether the band kept each batch, as the engine stored it (None: judged from p-hat, alpha and k_min)."""

    def counts(self, bins: int = 10) -> list[int]:
        """How many p-hats fall in each of ``bins`` equal bins of [0, 1] (1.0 goes in the last).

        >>> Histogram(1, [0.0, 0.5, 0.55, 1.0], [], 0.5, 2.0, 0.1).counts(4)
        [1, 0, 2, 1]
        """
        out = [0] * bins
        for p in self.p_hats:
            out[min(bins - 1, int(p * bins))] += 1
        return out

    def r_env_mean(self) -> float | None:
        """Mean R_env of the epoch's batches (None without batches)."""
        return sum(self.r_envs) / len(self.r_envs) if self.r_envs else None

    def in_band_fraction(self) -> float | None:
        """Share of batches the band kept (stored flags), else whose p-hat lies in [alpha - k_min, alpha + k_min].

        >>> Histogram(1, [0.5, 0.9], [1.0, 0.2], 0.5, 2.0, 0.1).in_band_fraction()
        0.5
        >>> Histogram(1, [0.5, 0.9], [1.0, 0.2], 0.5, 2.0, 0.1, [True, True]).in_band_fraction()
        1.0
        """
        if not self.p_hats:
            return None
        if self.in_band is not None and len(self.in_band) == len(self.p_hats):
            return sum(self.in_band) / len(self.in_band)
        return sum(in_band(p, self.alpha, self.k_min) for p in self.p_hats) / len(self.p_hats)


@dataclass
class WarmStart:
    """Loss curves of both roles' warm-start SFT, with each role's latest rate and ETA."""

    points: dict[str, list[tuple[int, float]]]
    rates: dict[str, tuple[int, int, float | None, float | None]]
    samples: dict[str, ev.WarmStartSample] = field(default_factory=dict)
    """Each role's latest greedy sample (what it writes now), from WarmStartSample."""

    def summary(self) -> str:
        """One line per role in training order: steps, steps/s and ETA of the role still running (or done).

        >>> WarmStart({}, {"agent": (700, 700, 2.5, 0.0), "simulator": (50, 500, 2.0, 225.0)}).summary()
        'agent done · simulator 50/500 2.0 steps/s ETA 3m45s'
        """
        parts = []
        for role, (step, steps, rate, eta) in self.rates.items():
            if step >= steps:
                parts.append(f"{role} done")
                continue
            text = f"{role} {step}/{steps}"
            if rate:
                text += f" {rate:.1f} steps/s"
            if eta is not None:
                text += f" ETA {int(eta) // 60}m{int(eta) % 60:02d}s"
            parts.append(text)
        return " · ".join(parts)


@dataclass
class RunState:
    """Everything the dashboard shows about the session's run."""

    session: str = ""
    target_epochs: int = 0
    benchmarks: tuple[str, ...] = ()
    alpha: float = 0.5
    beta: float = 2.0
    k_min: float = 0.1
    reward: str = "alpha"
    """``curriculum.reward``: the kind of R_env a batch without a stored one is shown with."""
    run: str = "idle"
    """idle, running, pausing, paused, stopping, stopped, finished or failed."""
    epoch: int | None = None
    phase: str = ""
    progress: tuple[str, int, int] | None = None
    error: str = ""
    pause_after_epoch: bool = False
    metrics: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Finished epochs' metrics."""
    scored: dict[int, tuple[list[float], list[float]]] = field(default_factory=dict)
    """(batch p-hats, R_envs) per epoch, live from AttemptsScored."""
    stored: dict[int, tuple[list[float], list[float], list[bool]]] = field(default_factory=dict)
    """(batch p-hats, R_envs, in-band flags) per epoch, as the session's batches table held them when it was
    opened (`from_view`)."""
    warm: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    """Warm-start (step, loss) points per role, live from WarmStartProgressed (never stored)."""
    warm_rate: dict[str, tuple[int, int, float | None, float | None]] = field(default_factory=dict)
    """Per role: (step, steps, steps/s, ETA seconds) of its latest warm-start report."""
    warm_samples: dict[str, ev.WarmStartSample] = field(default_factory=dict)
    """Per role: its latest warm-start sample."""

    @classmethod
    def from_session(cls, name: str, config: RunConfig, epoch_rows: list[dict[str, Any]]) -> RunState:
        """State of a session at rest: its config and the metrics of its finished epochs."""
        state = cls(
            session=name,
            target_epochs=config.epochs,
            benchmarks=tuple(config.benchmarks),
            alpha=config.curriculum.alpha,
            beta=config.curriculum.beta,
            k_min=config.curriculum.k_min,
            reward=config.curriculum.reward,
        )
        for row in epoch_rows:
            if row.get("status") == "done":
                state.metrics[row["epoch"]] = row
        if state.metrics:
            state.epoch = max(state.metrics)
        partial = [r for r in epoch_rows if r.get("status") in ("partial", "running")]
        if partial:
            state.run, state.epoch = "stopped", partial[-1]["epoch"]
        elif state.metrics and max(state.metrics) >= state.target_epochs:
            state.run = "finished"
        return state

    @classmethod
    def from_view(cls, name: str, view: SessionView) -> RunState:
        """State of a session at rest read through a `SessionView`: `from_session` plus every epoch's scored
        batches with the R_env and band flag the engine stored (the histogram of a reopened session)."""
        state = cls.from_session(name, view.config, [e.row() for e in view.epochs])
        for epoch in sorted({b.epoch for b in view.batches}):
            scored = [b for b in view.scored_batches(epoch) if b.p_hat is not None and b.r_env is not None]
            if scored:
                state.stored[epoch] = (
                    [float(b.p_hat) for b in scored],
                    [float(b.r_env) for b in scored],
                    [bool(b.in_band) for b in scored],
                )
        return state

    @property
    def active(self) -> bool:
        """Whether the engine worker is running the open session."""
        return self.run in ACTIVE

    def epochs_done(self) -> int:
        """The highest finished epoch (0 when only the warm start is done, -1 when none)."""
        return max(self.metrics) if self.metrics else -1

    # -- folding events ------------------------------------------------------------------------

    def apply(self, event: ev.Event) -> set[str]:
        """Fold one engine event in; return what changed: ``status``, ``plots`` and/or ``log``."""
        handler = getattr(self, f"_on_{event.kind}", None)
        changed = handler(event) if handler else set()
        return changed | {"log"}

    def _on_RunStarted(self, e: ev.RunStarted) -> set[str]:
        self.warm, self.warm_rate, self.warm_samples = {}, {}, {}
        self.metrics = {k: v for k, v in self.metrics.items() if k < e.start_epoch}
        self.scored = {k: v for k, v in self.scored.items() if k < e.start_epoch}
        self.stored = {k: v for k, v in self.stored.items() if k < e.start_epoch}
        self.run = "pausing" if self.run == "pausing" else "running"
        self.epoch, self.phase, self.progress, self.error = e.start_epoch, "", None, ""
        return {"status", "plots"}

    def _on_EpochStarted(self, e: ev.EpochStarted) -> set[str]:
        self.epoch, self.phase, self.progress = e.epoch, "", None
        return {"status"}

    def _on_PhaseStarted(self, e: ev.PhaseStarted) -> set[str]:
        self.phase, self.progress = e.phase, None
        return {"status"}

    def _on_BatchProgressed(self, e: ev.BatchProgressed) -> set[str]:
        self.progress = (e.phase, e.done, e.total)
        return {"status"}

    def _on_WarmStartProgressed(self, e: ev.WarmStartProgressed) -> set[str]:
        self.progress = (f"warm start {e.role}", e.step, e.steps)
        points = self.warm.setdefault(e.role, [])
        if points and points[-1][0] >= e.step:  # the role started over (a resumed warm start)
            points.clear()
        points.append((e.step, e.loss))
        self.warm_rate[e.role] = (e.step, e.steps, e.steps_per_second, e.eta)
        return {"status", "warm"}

    def _on_WarmStartSample(self, e: ev.WarmStartSample) -> set[str]:
        self.warm_samples[e.role] = e
        return {"warm"}

    def _on_AttemptsScored(self, e: ev.AttemptsScored) -> set[str]:
        self.scored[e.epoch] = (list(e.p_hats), list(e.r_envs))
        return {"plots"}

    def _on_EpochFinished(self, e: ev.EpochFinished) -> set[str]:
        self.metrics[e.epoch] = {"epoch": e.epoch, "status": "done", **e.metrics}
        self.phase, self.progress = "", None
        return {"status", "plots"}

    def _on_RunPaused(self, e: ev.RunPaused) -> set[str]:
        self.run = "stopping" if self.run == "stopping" else "paused"
        return {"status"}

    def _on_RunResumed(self, e: ev.RunResumed) -> set[str]:
        if self.run != "stopping":
            self.run = "pausing" if self.run == "pausing" else "running"
        return {"status"}

    def _on_RunStopped(self, e: ev.RunStopped) -> set[str]:
        self.run, self.phase, self.progress = "stopped", "", None
        return {"status"}

    def _on_RunFinished(self, e: ev.RunFinished) -> set[str]:
        self.run, self.phase, self.progress = "finished", "", None
        return {"status"}

    def _on_RunFailed(self, e: ev.RunFailed) -> set[str]:
        self.run, self.error, self.progress = "failed", e.error, None
        return {"status"}

    # -- requests from the user ----------------------------------------------------------------

    def request_pause(self) -> None:
        """The user asked to pause (the engine confirms with RunPaused)."""
        if self.run == "running":
            self.run = "pausing"

    def request_resume(self) -> None:
        """The user asked to continue."""
        if self.run in ("pausing", "paused"):
            self.run = "running"

    def request_stop(self) -> None:
        """The user asked to stop (the engine confirms with RunStopped)."""
        if self.active:
            self.run = "stopping"

    # -- what the plots show -------------------------------------------------------------------

    def warm_start(self) -> WarmStart:
        """The warm start's loss curves and rates (empty when none was seen in this run)."""
        return WarmStart({r: list(p) for r, p in self.warm.items()}, dict(self.warm_rate), dict(self.warm_samples))

    def calibration(self) -> Calibration:
        """Per benchmark, (epoch, mean p-hat of that epoch's fresh generated tasks)."""
        points: dict[str, list[tuple[int, float]]] = {b: [] for b in self.benchmarks}
        for epoch in sorted(self.metrics):
            for bench, value in (self.metrics[epoch].get("generated_success_by_benchmark") or {}).items():
                if value is not None:
                    points.setdefault(bench, []).append((epoch, float(value)))
        return Calibration(self.alpha, self.k_min, points)

    def heldout(self) -> dict[str, list[tuple[int, float]]]:
        """Per benchmark, (epoch, held-out success), epoch 0 being the warm start."""
        points: dict[str, list[tuple[int, float]]] = {b: [] for b in self.benchmarks}
        for epoch in sorted(self.metrics):
            for bench, value in (self.metrics[epoch].get("heldout") or {}).items():
                if value is not None:
                    points.setdefault(bench, []).append((epoch, float(value)))
        return points

    def histogram(self) -> Histogram:
        """Batch p-hats and R_env of the latest epoch that scored any: live events first (the engine's R_env), then
        the batches stored when the session was opened (their stored R_env and band flags), then the metrics'
        p-hats (R_env under the session's ``curriculum.reward`` with the global alpha: no batch row says more)."""
        epochs = sorted(
            set(self.scored) | set(self.stored) | {e for e, m in self.metrics.items() if m.get("batch_p_hats")}
        )
        for epoch in reversed(epochs):
            flags = None
            if epoch in self.scored and self.scored[epoch][0]:
                p_hats, r_envs = self.scored[epoch]
            elif epoch in self.stored:
                p_hats, r_envs, flags = self.stored[epoch]
            else:
                p_hats = list(self.metrics.get(epoch, {}).get("batch_p_hats") or [])
                r_envs = [env_reward(p, self.reward, self.alpha, self.beta) for p in p_hats]
            if p_hats:
                return Histogram(
                    epoch,
                    list(p_hats),
                    list(r_envs),
                    self.alpha,
                    self.beta,
                    self.k_min,
                    None if flags is None else list(flags),
                )
        return Histogram(None, [], [], self.alpha, self.beta, self.k_min)

    def phase_seconds(self) -> tuple[list[int], dict[str, list[float]]]:
        """Epochs and, per phase that ever ran, its seconds in each epoch (0 when absent)."""
        epochs = sorted(self.metrics)
        seen = {p for e in epochs for p in (self.metrics[e].get("phase_seconds") or {})}
        order = [p for p in PHASES if p in seen] + sorted(seen - set(PHASES))
        table = {p: [float((self.metrics[e].get("phase_seconds") or {}).get(p, 0.0)) for e in epochs] for p in order}
        return epochs, table

    def rollout_workers(self) -> str:
        """The latest epoch's rollout workers as ``genenv status`` shows them (count, each one's tasks/s and
        tokens/s: `genenv_engine.storage.progress.worker_summary`), or "" before an epoch reports them."""
        for epoch in sorted(self.metrics, reverse=True):
            stats = self.metrics[epoch].get("rollout_workers")
            if stats:
                return worker_summary(stats)
        return ""

    def plugin_faults(self) -> str:
        """The latest finished epoch's plugin faults per benchmark (`genenv_engine.storage.progress.fault_text`), ""
        when it had none."""
        return fault_text(self.metrics[max(self.metrics)].get("plugin_faults")) if self.metrics else ""

    def throughput(self) -> list[tuple[int, float]]:
        """(epoch, generated tokens per second of busy time) for epochs that report it."""
        return [
            (e, float(m["tokens_per_second"]))
            for e, m in sorted(self.metrics.items())
            if m.get("tokens_per_second") is not None
        ]


def describe(event: ev.Event) -> str | None:
    """One event-log line for an engine event (None for the high-rate progress events).

    >>> describe(ev.PhaseFinished(2, "rollout", 1.234)), describe(ev.RunFinished(6, 6))
    ('e2 rollout 1.23s', 'run finished: 6 epochs')
    """
    match event:
        case ev.BatchProgressed() | ev.WarmStartProgressed() | ev.PhaseStarted():
            return None
        case ev.WarmStartSample():
            return sample_line(event)  # the line `genenv run` prints
        case ev.RunStarted():
            return f"run started at epoch {event.start_epoch}"
        case ev.EpochStarted():
            return f"epoch {event.epoch} started"
        case ev.PhaseFinished():
            return f"e{event.epoch} {event.phase} {event.seconds:.2f}s"
        case ev.TasksGenerated():
            reasons = ", ".join(f"{k} {v}" for k, v in sorted(event.reasons.items()))
            return f"e{event.epoch} {event.benchmark}: {event.valid}/{event.generated} valid" + (
                f" ({reasons})" if reasons else ""
            )
        case ev.AttemptsScored():
            return (
                f"e{event.epoch} scored {event.tasks} tasks, {event.rollouts} rollouts, "
                f"success {event.success:.2f}, {len(event.p_hats)} batches"
            )
        case ev.PolicyUpdated():
            bits = " ".join(
                f"{k}={v:.3g}"
                for k, v in event.metrics.items()
                if isinstance(v, (int, float)) and k in ("steps", "loss", "kl", "examples", "current_examples")
            )
            return f"e{event.epoch} {event.role} updated {bits}".rstrip()
        case ev.HeldoutEvaluated():
            res = " ".join(f"{k}={v:.2f}" for k, v in event.results.items())
            return f"e{event.epoch} held-out {res}"
        case ev.CheckpointSaved():
            return f"e{event.epoch} checkpoint saved"
        case ev.EpochFinished():
            gen = event.metrics.get("generated_success")
            faults = fault_text(event.metrics.get("plugin_faults"))
            return (
                f"epoch {event.epoch} finished"
                + (f": generated p̂ {gen:.2f}" if gen is not None else "")
                + (f" — PLUGIN FAULTS {faults}" if faults else "")
            )
        case ev.RunPaused():
            return f"paused in epoch {event.epoch}"
        case ev.RunResumed():
            return f"resumed in epoch {event.epoch}"
        case ev.RunStopped():
            return f"stopped in epoch {event.epoch}: {event.reason} (resumable)"
        case ev.RunFinished():
            return f"run finished: {event.epochs_done} epochs"
        case ev.RunFailed():
            return f"run FAILED in epoch {event.epoch}: {event.error}"
        case ev.WorkerRestarted():
            return f"e{event.epoch} Ray worker {event.worker} restarted (pid {event.old_pid} -> {event.new_pid})"
        case ev.WorkerTimedOut():
            then = "sent again" if event.retried else "giving up"
            return (
                f"e{event.epoch} Ray worker {event.worker}: {event.phase} batch {event.batch} ran past "
                f"{event.seconds:g}s (attempt {event.attempt}), worker restarted, {then}"
            )
    return event.kind


HISTORY_LINES = 200
"""Stored events replayed into the event log when a session is opened."""


def history_lines(store: Any, limit: int = HISTORY_LINES) -> list[str]:
    """Event-log lines for the last ``limit`` stored events of a session (``store``: a
    `genenv_engine.storage.store.Store`)."""
    return history_lines_after(store, max(0, store.last_event_id() - limit), limit)[0]


def history_lines_after(store: Any, after_id: int, limit: int = HISTORY_LINES) -> tuple[list[str], int]:
    """Event-log lines for the stored events after id ``after_id`` (at most ``limit``), and the last id read."""
    lines, last = [], after_id
    for row in store.events(after_id=after_id, limit=limit):
        last = row["id"]
        cls = getattr(ev, row["kind"], None)
        if row["kind"] == "PartialEpochDiscarded":
            lines.append(f"epoch {row['epoch']} was partial: discarded on resume")
        elif isinstance(cls, type) and issubclass(cls, ev.Event):
            try:
                line = describe(cls(**row["payload"]))
            except TypeError:
                line = row["kind"]
            if line:
                lines.append(line)
    return lines, last
