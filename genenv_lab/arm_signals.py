"""The grounded study's table of arms, one row per arm × seed read from its run record: the change on the re-scored
held-out tasks and what the arm's epochs trained on — the agent's optimizer steps and training rollouts (counted
from each run's store), the valid share of the simulator's drafts, the share of fresh tasks and of batches with p̂ in
the α band, informative GRPO groups, fresh tasks, RWR examples and their weights' spread, the simulator's drift from
its initial weights, and the grounded reward's evaluation generations (the simulator's cost, apart from the agent's
budget). Per-epoch figures are means over the training epochs (1 to the last); "—" where a record does not hold the
field (records written before it was counted). It reads only JSON.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from genenv_engine.ablation.stats import paired_change
from genenv_lab.figure_text import bare, rounded, signed
from genenv_lab.reading import (
    BENCHMARK,
    LABELS,
    RESCORE,
    SAME_START,
    SEEDS,
    STUDY_RECORDS,
    answers,
    record,
)

ARMS = ("grounded", "controller", "trained", "frozen", "static", "off", "unseen")
"""The study's arms in the order its table lists them: the two new ones, then the controls."""

DASH = "—"


def _values(epochs: list[dict[str, Any]], key: str) -> list[float]:
    """``key`` over the training epochs that hold it."""
    return [float(e[key]) for e in epochs if e.get(key) is not None]


def _mean(epochs: list[dict[str, Any]], key: str, places: int = 3, transform: Any = None) -> str:
    """The mean share of ``key`` over the epochs that hold it, "—" where none does.

    >>> _mean([{"x": 0.25}, {"x": 0.5}, {"x": None}], "x"), _mean([{}], "x")
    ('.375', '—')
    >>> _mean([{"x": 0.2}], "x", 2, lambda v: 1 - v)
    '.80'
    """
    got = _values(epochs, key)
    if not got:
        return DASH
    return bare(statistics.mean(transform(v) for v in got) if transform else statistics.mean(got), places)


def _count(epochs: list[dict[str, Any]], key: str, places: int = 1) -> str:
    """The mean count of ``key`` per epoch over the epochs that hold it, "—" where none does.

    >>> _count([{"n": 40}, {"n": 45}], "n"), _count([{"n": 374.0}], "n", 0), _count([{"n": None}], "n")
    ('42.5', '374', '—')
    """
    got = _values(epochs, key)
    return rounded(statistics.mean(got), places) if got else DASH


def _steady(epochs: list[dict[str, Any]], key: str) -> str:
    """One per-epoch count when every training epoch has the same, its range when not, "—" when unrecorded.

    >>> _steady([{"s": 4.0}, {"s": 4.0}], "s"), _steady([{"s": 300}, {"s": 320}], "s"), _steady([{"s": None}], "s")
    ('4', '300–320', '—')
    """
    got = _values(epochs, key)
    if not got or len(got) < len(epochs):
        return DASH
    low, high = round(min(got)), round(max(got))
    return f"{low}" if low == high else f"{low}–{high}"


def _in_band(epochs: list[dict[str, Any]]) -> str:
    """Fresh tasks / batches with p̂ in the band; a record from before the batch share was stored apart from the
    band filter gives the filter's share (the same thing under the α reward), and no task share."""
    batches = "band_fraction" if any(e.get("band_fraction") is not None for e in epochs) else "in_band_fraction"
    return f"{_mean(epochs, 'task_band_fraction')} / {_mean(epochs, batches)}"


def _weights(epochs: list[dict[str, Any]]) -> str:
    """The RWR weights' range over the run and the mean of each epoch's sd.

    >>> _weights([{"weight_min": 0.9, "weight_max": 1.2, "weight_sd": 0.1}, {"weight_min": 0.8, "weight_max": 1.0,
    ...   "weight_sd": 0.05}])
    '0.80–1.20 (.075)'
    """
    low, high = _values(epochs, "weight_min"), _values(epochs, "weight_max")
    if not low or not high:
        return DASH
    return f"{rounded(min(low), 2)}–{rounded(max(high), 2)} ({_mean(epochs, 'weight_sd')})"


def _change(data: dict[str, Any]) -> tuple[str, str]:
    """Held-out at epoch 0 → the last epoch on the re-score, and the change with its paired SE."""
    got = answers(data, RESCORE, BENCHMARK)
    if got is None:
        return "waiting for the re-score", DASH
    first, last = got
    change = paired_change(first, last)
    assert change is not None, "re-scored answers of one run have one length"
    return f"{_rate(first)} → {_rate(last)}", f"{signed(change[0])} ({bare(change[1])})"


def _rate(answers_0_1: str) -> str:
    """The share of ``1`` in a held-out answer string.

    >>> _rate("0111")
    '0.750'
    """
    return rounded(answers_0_1.count("1") / len(answers_0_1), 3)


def row(arm: str, seed: int, data: dict[str, Any], source: str = "") -> str:
    """One arm × seed's row of the table; ``source`` names where a record made outside the study comes from."""
    epochs = [e for e in data["epochs"] if e.get("epoch", 0) > 0 and e.get("status", "done") == "done"]
    held, change = _change(data)
    drift = next((e["drift"] for e in reversed(epochs) if e.get("drift") is not None), None)
    cells = [
        f"`{LABELS.get(arm, arm)}`",
        f"{seed} ({source})" if source else str(seed),
        held,
        change,
        f"{_steady(epochs, 'agent_steps')} / {_steady(epochs, 'train_rollouts')}",
        _mean(epochs, "valid_fraction"),
        _in_band(epochs),
        _mean(epochs, "zero_advantage_share", transform=lambda v: 1 - v),
        _count(epochs, "fresh_tasks"),
        _count(epochs, "simulator_examples"),
        _weights(epochs),
        DASH if drift is None else bare(drift, 3),
        _count(epochs, "eval_generations", 0),
    ]
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| arm | seed | held-out e0 → e8 | Δ (paired SE) | agent steps / train rollouts per epoch | valid | "
    "in band: tasks / batches | informative groups | fresh tasks | RWR examples | RWR weights min–max (sd) | "
    "simulator drift (e8) | evaluation generations |"
)


def arms_table(root: Path, seeds: tuple[int, ...] = SEEDS) -> str:
    """The grounded study's table of arms (Markdown): every arm × seed with a record, in `ARMS` order (seed 2 only
    where it was run, to decide a split); a committed record the study reads in place of a run of its own is named
    by its study folder beside the seed, and a run started from genenv20's warm start (`SAME_START`) follows the
    arm × seed's row, marked "genenv20 start"."""
    columns = HEADER.count(" | ") + 1
    lines = [HEADER, "|" + "---|" * columns]
    for arm in ARMS:
        for seed in seeds:
            path = record(root, arm, seed)
            if path.is_file():
                own = path.parent == root / STUDY_RECORDS
                lines.append(row(arm, seed, json.loads(path.read_text()), "" if own else path.parent.parent.name))
            elif seed < 2:
                lines.append(f"| `{LABELS.get(arm, arm)}` | {seed} | no record yet |" + " |" * (columns - 3))
            same_start = root / SAME_START / f"{arm}-s{seed}.json"
            if same_start.is_file():
                lines.append(row(arm, seed, json.loads(same_start.read_text()), "genenv20 start"))
    return "\n".join(lines)
