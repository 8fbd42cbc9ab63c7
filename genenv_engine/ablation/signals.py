"""The bench's training-signal table: per arm and epoch (mean over seeds), what the agent trained on and what the
simulator's update had to learn from.

Columns: the share of the epoch's fresh tasks, and of its variation batches, whose p-hat lies in alpha ± k_min
(``task_band_fraction``, ``band_fraction``; a record without ``band_fraction`` shows the share of batches its band
filter kept, ``in_band_fraction``, the same thing under the paper's alpha reward and band filter); informative
groups (1 − the share of GRPO groups whose rollouts all got one reward); the fresh tasks trained on; the training
rollouts and optimizer steps (counted from the store, and from the agent update's own count); the RWR examples and
the spread of their weights (min–max, sd); the simulator's drift from its initial weights on a fixed probe set
(`genenv_engine.method.simulator_update.simulator_drift`); and the grounded reward's evaluation generations (its sibling
answers, counted from the store). A run record written before a column existed shows "—" there; "–" is a value
recorded as none (no fresh tasks, no update).
"""

from __future__ import annotations

from typing import Any

from genenv_engine.ablation.arms import ARMS
from genenv_engine.ablation.stats import mean_sd, mean_series

MISSING = "—"
"""A cell whose runs' records lack the field."""
NONE = "–"
"""A cell whose runs recorded no value."""


def _mean(rows: list[dict[str, Any]], key: str) -> tuple[bool, float | None]:
    """Whether any row has ``key``, and the mean over seeds of its values (None when every one is None)."""
    present = [r[key] for r in rows if key in r]
    return bool(present), mean_sd(present)[0]


def cell(
    rows: list[dict[str, Any]], key: str, digits: int = 3, fallback: str | None = None, transform: Any = None
) -> str:
    """One column's text over the seeds' rows of one epoch: the mean of ``key`` (through ``transform``), the mean of
    ``fallback`` where no row has ``key``, `MISSING` where no row has either, `NONE` where the values are none.

    >>> cell([{"a": 0.5}, {"a": 0.25}], "a"), cell([{"b": 1}], "a"), cell([{"a": None}], "a")
    ('0.375', '—', '–')
    >>> cell([{"b": 0.5}], "a", fallback="b"), cell([{"a": 0.25}], "a", transform=lambda v: 1 - v)
    ('0.500', '0.750')
    >>> cell([{"a": 12.0}], "a", digits=0)
    '12'
    """
    has, value = _mean(rows, key)
    if not has and fallback is not None:
        has, value = _mean(rows, fallback)
    if not has:
        return MISSING
    if value is None:
        return NONE
    if transform is not None:
        value = transform(value)
    return f"{value:.{digits}f}"


def weights_cell(rows: list[dict[str, Any]]) -> str:
    """RWR weights of one epoch over seeds: mean min – mean max (mean sd).

    >>> weights_cell([{"weight_min": 0.5, "weight_max": 1.5, "weight_sd": 0.25}]), weights_cell([{}])
    ('0.500–1.500 (0.250)', '—')
    """
    low, high, sd = (cell(rows, k) for k in ("weight_min", "weight_max", "weight_sd"))
    if MISSING in (low, high):
        return MISSING
    if NONE in (low, high):
        return NONE
    return f"{low}–{high} ({sd})"


HEADER = (
    "| epoch | in band (tasks) | in band (batches) | informative groups | fresh tasks | train rollouts | "
    "steps | RWR examples | RWR weights min–max (sd) | simulator drift | evaluation generations |"
)


def markdown(results: dict[str, Any]) -> list[str]:
    """The table per arm (mean over seeds per epoch), as Markdown lines."""
    lines = [
        "## Training signals per epoch (mean over seeds)",
        "",
        "In band: p̂ in α ± k_min (fresh tasks; batches). Informative groups: 1 − the share of GRPO groups whose "
        "rollouts all got one reward. Train rollouts and evaluation generations (the grounded reward's sibling "
        "answers, before and after the agent's update) are counted from each run's store. Simulator drift: "
        "per-token k3 estimate of KL(simulator ‖ initial simulator) on a fixed probe set of sibling pairs. "
        f"{MISSING}: the run records lack the field (written before it existed); {NONE}: recorded as none.",
        "",
    ]
    for arm in results["arms"]:
        runs = list(results["runs"].get(arm, {}).values())
        if not runs:
            continue
        lines += [f"### {ARMS[arm][1]} ({arm})", "", HEADER, "|---|" + "---|" * 10]
        for e, _, _ in mean_series(runs, lambda r: r.get("tasks_trained")):
            rows = [r for run in runs for r in run["epochs"] if r["epoch"] == e]
            lines.append(
                " | ".join(
                    [
                        f"| {e}",
                        cell(rows, "task_band_fraction"),
                        cell(rows, "band_fraction", fallback="in_band_fraction"),
                        cell(rows, "zero_advantage_share", transform=lambda v: 1 - v),
                        cell(rows, "fresh_tasks", 0),
                        cell(rows, "train_rollouts", 0),
                        cell(rows, "agent_steps", 0),
                        cell(rows, "simulator_examples", 0),
                        weights_cell(rows),
                        cell(rows, "drift", 5),
                        cell(rows, "eval_generations", 0),
                    ]
                )
                + " |"
            )
        lines.append("")
    return lines
