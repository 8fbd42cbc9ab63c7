"""Headless progress for the CLI: rich progress bars per phase and a summary line per epoch.

A `ConsoleReporter` is an EventSink; the warm start's bars show each role's loss, steps/s and ETA.
``quiet`` mode prints plain lines instead (for logs and CI): one per epoch, and one per tenth of each
warm-start role. Either way each warm-start sample (what a role writes greedily now) is printed as one line
(`sample_line`, which the console's event log shows too). `print_status` renders ``genenv status`` as a table.
An epoch whose items a plugin's fault failed says how many, per benchmark (`fault_text`), on its line and in the
table.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from genenv_engine.core.events import (
    BatchProgressed,
    EpochFinished,
    Event,
    PhaseFinished,
    WarmStartProgressed,
    WarmStartSample,
)

if TYPE_CHECKING:
    from genenv_engine.storage.session import Session


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    if isinstance(value, dict):
        return " ".join(f"{k}={_fmt(v, 2)}" for k, v in value.items())
    return str(value)


def fault_text(faults: dict[str, dict[str, dict[str, int]]] | None) -> str:
    """An epoch's ``plugin_faults`` (benchmark -> where -> kind -> items) as text, "" when there is none.

    >>> fault_text({"flaky": {"rollouts": {"plugin_error": 80}, "drafts": {"plugin_timeout": 8}}, "other": {}})
    'flaky: 80 rollouts plugin_error, 8 drafts plugin_timeout'
    """
    parts = []
    for benchmark, places in sorted((faults or {}).items()):
        items = [f"{n} {where} {kind}" for where, kinds in places.items() for kind, n in sorted(kinds.items()) if n]
        if items:
            parts.append(f"{benchmark}: {', '.join(items)}")
    return "; ".join(parts)


def recorded_text(metrics: dict[str, Any]) -> str:
    """The rollouts an outside trainer sent that no p-hat counts (`genenv_engine.method.coevolution`): those of an
    epoch already closed (late) and those of tasks no epoch issued (unknown), and the epoch's tasks it sent none
    for (unscored); "" when there are none.

    >>> recorded_text({"late_rollouts": {"1": 8}, "unknown_rollouts": 3}), recorded_text({"late_rollouts": {}})
    (' late=8 (of epoch 1) unknown=3', '')
    >>> recorded_text({"late_rollouts": {}, "unscored_tasks": 5})
    ' unscored=5 tasks'
    """
    late = metrics.get("late_rollouts") or {}
    text = f" late={sum(late.values())} (of epoch {', '.join(late)})" if late else ""
    text += f" unknown={metrics['unknown_rollouts']}" if metrics.get("unknown_rollouts") else ""
    return text + (f" unscored={metrics['unscored_tasks']} tasks" if metrics.get("unscored_tasks") else "")


def epoch_line(metrics: dict[str, Any], epoch: int) -> str:
    """One line summarising an epoch's metrics (ending with its plugin faults, when it has any)."""
    secs = sum((metrics.get("phase_seconds") or {}).values())
    faults = fault_text(metrics.get("plugin_faults"))
    return (
        f"epoch {epoch}: p_hat={_fmt(metrics.get('generated_success'))} "
        f"|p-a|={_fmt(metrics.get('calibration_error'))} valid={_fmt(metrics.get('valid_fraction'))} "
        f"unique={_fmt(metrics.get('unique_fraction'))} mix={_fmt(metrics.get('difficulty_mix'))} "
        f"heldout={_fmt(metrics.get('heldout'))} {secs:.1f}s"
        + recorded_text(metrics)
        + (f" PLUGIN FAULTS {faults}" if faults else "")
    )


class ConsoleReporter:
    """Render engine events on the terminal."""

    def __init__(self, session: Session | None, quiet: bool = False) -> None:
        self.session = session
        self.quiet = quiet
        self.console = Console(stderr=False)
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
            transient=True,
            disable=quiet,
        )
        self.tasks: dict[str, TaskID] = {}
        self._warm_printed: dict[str, int] = {}

    def __enter__(self) -> ConsoleReporter:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def _bar(self, key: str, total: int, done: int, info: str = "") -> None:
        if key not in self.tasks:
            self.tasks[key] = self.progress.add_task(key, total=total, info=info)
        self.progress.update(self.tasks[key], completed=done, total=total, info=info)

    def _sample(self, event: WarmStartSample) -> None:
        self.console.print(sample_line(event), soft_wrap=True, markup=False, highlight=False)

    def _warm(self, event: WarmStartProgressed) -> None:
        rate, eta = event.steps_per_second, event.eta
        info = f"loss {event.loss:.3f}" + (f"  {rate:.1f} steps/s" if rate else "")
        if not self.quiet:
            self._bar(f"warm start {event.role}", event.steps, event.step, info)
            return
        tenth = event.step * 10 // max(1, event.steps)
        if tenth > self._warm_printed.get(event.role, 0) or event.step == event.steps:
            self._warm_printed[event.role] = tenth
            left = f", ETA {eta:.0f}s" if eta else ""
            self.console.print(
                f"warm start {event.role} {event.step}/{event.steps}: {info}{left}",
                soft_wrap=True,
                markup=False,
                highlight=False,
            )

    def __call__(self, event: Event) -> None:
        kind = event.kind
        if isinstance(event, WarmStartProgressed):
            self._warm(event)
        elif isinstance(event, WarmStartSample):
            self._sample(event)
        elif isinstance(event, BatchProgressed):
            self._bar(f"epoch {event.epoch} {event.phase}", event.total, event.done)
        elif isinstance(event, PhaseFinished):
            for key in [k for k in self.tasks if k.startswith(f"epoch {event.epoch} ")]:
                self.progress.remove_task(self.tasks.pop(key))
        elif isinstance(event, EpochFinished):
            for key in list(self.tasks):
                self.progress.remove_task(self.tasks.pop(key))
            self.console.print(epoch_line(event.metrics, event.epoch), soft_wrap=True, markup=False)
        elif kind in ("RunPaused", "RunResumed", "RunStopped", "RunFailed"):
            self.console.print(f"{kind} {event.payload()}")


def sample_line(event: WarmStartSample) -> str:
    r"""One printable line for a warm-start sample (control characters escaped by ``repr``, long text cut).

    >>> from genenv_engine.core.events import WarmStartSample
    >>> print(sample_line(WarmStartSample(0, "simulator", 63, 500, "add 2 and 3", "TASK: add 7 and 1\x07", True)))
    warm start simulator 63/500 valid: 'add 2 and 3' -> 'TASK: add 7 and 1\x07'
    >>> print(sample_line(WarmStartSample(0, "agent", 8, 8, "q", "a", False, "gold: b (plugin_error: KeyError)")))
    warm start agent 8/8 not scored (plugin_error: KeyError): 'q' -> 'a'
    """
    fault = re.search(r"plugin_error: \w+|plugin_timeout", getattr(event, "detail", "") or "")
    verdict = f"not scored ({fault[0]})" if fault else event.verdict  # the plugin failed, not the role
    return (
        f"warm start {event.role} {event.step}/{event.steps} {verdict}: {event.prompt[:80]!r} -> {event.text[:160]!r}"
    )


def print_status(data: dict[str, Any]) -> None:
    """Print ``genenv status`` as a table."""
    table = Table(title=f"{data['session']} ({data['preset']}, simulator {data['simulator_mode']})")
    faults = any(fault_text(e.get("plugin_faults")) for e in data["epochs"])
    for col in (
        "epoch",
        "status",
        "p_hat gen",
        "|p-a|",
        "valid",
        "unique",
        "mix",
        "held-out",
        "trained",
        "seconds",
        "rollout workers",
        *(("plugin faults",) if faults else ()),
    ):
        table.add_column(col)
    for e in data["epochs"]:
        table.add_row(
            str(e["epoch"]),
            e["status"],
            _fmt(e["generated_success"]),
            _fmt(e["calibration_error"]),
            _fmt(e["valid_fraction"]),
            _fmt(e["unique_fraction"]),
            _fmt(e["difficulty_mix"]),
            _fmt(e["heldout"]),
            _fmt(e["tasks_trained"]),
            f"{sum((e['phase_seconds'] or {}).values()):.1f}",
            worker_summary(e.get("rollout_workers")),
            *((fault_text(e.get("plugin_faults")) or "-",) if faults else ()),
        )
    Console().print(table)


def worker_summary(stats: list[dict[str, float]] | None) -> str:
    """Worker count and each worker's rollout throughput (tasks/s, tokens/s) from an epoch's ``rollout_workers``.

    >>> worker_summary([{"tasks": 48, "tokens": 4800, "seconds": 12.0}, {"tasks": 48, "tokens": 5000, "seconds": 10.0}])
    '2: 4.0+4.8 tasks/s, 400+500 tok/s'
    >>> worker_summary(None), worker_summary([{"tasks": 0, "tokens": 0, "seconds": 0.0}])
    ('-', '1: 0.0 tasks/s, 0 tok/s')
    """
    if not stats:
        return "-"

    def rate(value: float, seconds: float) -> float:
        return value / seconds if seconds else 0.0

    tasks = "+".join(f"{rate(w.get('tasks', 0), w.get('seconds', 0)):.1f}" for w in stats)
    tokens = "+".join(f"{rate(w.get('tokens', 0), w.get('seconds', 0)):.0f}" for w in stats)
    return f"{len(stats)}: {tasks} tasks/s, {tokens} tok/s"
