"""The trainers study: genenv's own GRPO against TRL's ``GRPOTrainer`` on the same sessions' settings
(``docs/results/trainers/``).

Each run of the study is a JSON record under ``docs/results/trainers/records/`` (`record`, written from a finished
session by ``python -m genenv_lab.trainers record SESSION OUT ...``): per epoch the fresh tasks' mean p̂, the share
of variation batches whose p̂ lies in the α band, the simulator's valid fraction, held-out success per benchmark with
its per-task ``0``/``1`` string, the epoch's seconds and phase times, plus the run's config, trainer, thread count
and machine. `trainers_table` renders the page's table and verdict from the records (a section of
`genenv_lab.figures`), `trainers_finding` the results index's cell. Rendering reads only JSON; `record` opens a
session.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import sys
from pathlib import Path
from typing import Any

from genenv_engine.ablation.stats import band_share, paired_change
from genenv_lab.figure_text import bare, rounded, signed
from genenv_lab.performance import RESULTS

STUDY = f"{RESULTS}/trainers"
TRAINERS_PAGE = f"{STUDY}/README.md"
RECORDS = f"{STUDY}/records"
BASELINE = "native"
"""The arm every other arm is compared with."""
LABELS = {"native": "native", "trl": "TRL"}
"""An arm's name in the table (an arm not listed is shown by its own name)."""
HELD_OUT = "bfcl"


# ---- a record from a finished session -------------------------------------------------------------------------


def _seconds(start: str | None, end: str | None) -> float | None:
    """Seconds between two stored ISO timestamps (None when either is missing)."""
    if not start or not end:
        return None
    return round((dt.datetime.fromisoformat(end) - dt.datetime.fromisoformat(start)).total_seconds(), 1)


def record(folder: Path, *, arm: str, seed: int, command: str, wall_seconds: float | None) -> dict[str, Any]:
    """The study's record of one finished session: its settings and, per finished epoch, what the table reads."""
    from genenv_engine.storage.session import Session
    from genenv_engine.storage.session_view import SessionView

    session = Session.open(folder)
    try:
        view = SessionView.of(session)
        cfg = view.config
        band = (cfg.curriculum.alpha, cfg.curriculum.k_min)
        epochs = []
        for e in view.done_epochs:
            m = e.row()
            upd = m.get("agent_update") or {}
            epochs.append(
                {
                    "epoch": e.epoch,
                    "p_hat": m.get("generated_success"),
                    "band_share": band_share(m.get("batch_p_hats"), *band) if e.epoch else None,
                    "batch_p_hats": m.get("batch_p_hats"),
                    "valid_fraction": m.get("valid_fraction"),
                    "heldout": dict(e.heldout),
                    "heldout_correct": dict(e.heldout_correct),
                    "seconds": _seconds(e.started_at, e.finished_at),
                    "phase_seconds": m.get("phase_seconds") or {},
                    "tasks_trained": m.get("tasks_trained"),
                    "fresh_tasks": len(m["task_p_hats"]) if m.get("task_p_hats") is not None else None,
                    "agent_steps": upd.get("steps"),
                    "late_rollouts": m.get("late_rollouts"),
                    "unscored_tasks": m.get("unscored_tasks"),
                }
            )
        machine = json.loads(session.store.get_meta("machine") or "{}")
        trainer = json.loads(session.store.get_meta("agent_trainer") or '{"trainer": "native"}')
        config_toml = (Path(folder) / "config.toml").read_text()
    finally:
        session.store.close()
    return {
        "arm": arm,
        "seed": seed,
        "command": command,
        "wall_seconds": wall_seconds,
        "trainer": trainer,
        "threads": cfg.runtime.threads,
        "torch_threads": machine.get("torch_threads"),
        "machine": machine,
        "alpha": band[0],
        "k_min": band[1],
        "config_toml": config_toml,
        "epochs": epochs,
    }


# ---- the page's table and verdict -----------------------------------------------------------------------------


def records(root: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """Every record under ``records/``, by (arm, seed)."""
    found = {}
    for path in sorted((root / RECORDS).glob("*.json")):
        r = json.loads(path.read_text())
        found[(r["arm"], int(r["seed"]))] = r
    return found


def _arms(found: dict[tuple[str, int], dict[str, Any]]) -> list[str]:
    names = {arm for arm, _ in found}
    return [BASELINE] * (BASELINE in names) + sorted(names - {BASELINE}, key=lambda a: (a != "trl", a))


def _cell(values: list[float | None], fmt: Any) -> str:
    return " / ".join("–" if v is None else fmt(v) for v in values)


def _held(e: dict[str, Any]) -> float | None:
    return (e.get("heldout") or {}).get(HELD_OUT)


def pair(base: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """``other`` against ``base`` on one seed: the held-out difference at their last common epoch with its paired SE
    over the held-out tasks, and the mean p̂ difference over the trained epochs with its paired SE over epochs."""
    a = {e["epoch"]: e for e in base["epochs"]}
    b = {e["epoch"]: e for e in other["epochs"]}
    common = sorted(set(a) & set(b))
    last = common[-1]
    held = paired_change(a[last]["heldout_correct"][HELD_OUT], b[last]["heldout_correct"][HELD_OUT])
    diffs = [b[k]["p_hat"] - a[k]["p_hat"] for k in common if a[k]["p_hat"] is not None and b[k]["p_hat"] is not None]
    mean = sum(diffs) / len(diffs) if diffs else math.nan
    var = sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1) if len(diffs) > 1 else math.nan
    se = math.sqrt(var / len(diffs)) if len(diffs) > 1 else math.nan
    assert held is not None
    return {
        "epoch": last,
        "heldout": held,
        "heldout_agrees": abs(held[0]) <= 2 * held[1] if held[1] > 0 else held[0] == 0,
        "p_hat": (mean, se, len(diffs)),
        "p_hat_agrees": abs(mean) <= 2 * se if se > 1e-9 else abs(mean) <= 0.05,
    }


def trainers_table(root: Path) -> str:
    """The page's table (per seed and epoch, each arm's figures side by side) and its verdict lines."""
    found = records(root)
    if not found:
        return "No run is recorded yet."
    arms = _arms(found)
    seeds = sorted({seed for _, seed in found})
    names = " / ".join(LABELS.get(a, a) for a in arms)
    lines = [
        f"Each cell: {names}. p̂: mean over the epoch's fresh tasks' attempts; in band: share of variation batches "
        f"with p̂ in α ± k_min; held-out: greedy {HELD_OUT} success on the held-out tasks; s: wall seconds of the "
        "epoch.",
        "",
        "| seed | epoch | mean p̂ | in band | valid fraction | held-out | s / epoch |",
        "|---|---|---|---|---|---|---|",
    ]
    for seed in seeds:
        runs = [found.get((a, seed)) for a in arms]
        epochs = sorted({e["epoch"] for r in runs if r for e in r["epochs"]})
        for k in epochs:
            rows = [next((e for e in r["epochs"] if e["epoch"] == k), {}) if r else {} for r in runs]
            lines.append(
                f"| {seed} | {k} | {_cell([e.get('p_hat') for e in rows], bare)} | "
                f"{_cell([e.get('band_share') for e in rows], lambda v: bare(v, 2))} | "
                f"{_cell([e.get('valid_fraction') for e in rows], lambda v: bare(v, 2))} | "
                f"{_cell([_held(e) for e in rows], lambda v: bare(v, 4))} | "
                f"{_cell([e.get('seconds') for e in rows], lambda v: rounded(v, 0))} |"
            )
    for block in (verdict_lines(found, arms, seeds), machine_lines(found, arms, seeds), smol_lines(root)):
        lines += ["", *block] if block else []
    return "\n".join(lines)


def flips(run: dict[str, Any]) -> tuple[int, int]:
    """Held-out tasks a run's last epoch solves that epoch 0 did not (up), and the reverse (down)."""
    first, last = run["epochs"][0]["heldout_correct"][HELD_OUT], run["epochs"][-1]["heldout_correct"][HELD_OUT]
    up = sum(a == "0" and b == "1" for a, b in zip(first, last, strict=True))
    down = sum(a == "1" and b == "0" for a, b in zip(first, last, strict=True))
    return up, down


def verdict_lines(found: dict[tuple[str, int], dict[str, Any]], arms: list[str], seeds: list[int]) -> list[str]:
    """One line per arm and seed against the baseline: the two differences, their paired SE, agree or not."""
    out = []
    for arm in arms:
        if arm == BASELINE:
            continue
        for seed in seeds:
            base, other = found.get((BASELINE, seed)), found.get((arm, seed))
            if not base or not other:
                continue
            p = pair(base, other)
            (hd, hse), (pd, pse, n) = p["heldout"], p["p_hat"]
            out.append(
                f"- {LABELS.get(arm, arm)} − native, seed {seed}: held-out at epoch {p['epoch']} {signed(hd, 4)} "
                f"(paired SE {bare(hse, 4)}): {'agrees' if p['heldout_agrees'] else 'differs'}; mean p̂ over "
                f"{n} epochs {signed(pd)} (paired SE {bare(pse)}): {'agrees' if p['p_hat_agrees'] else 'differs'}. "
                f"Held-out tasks up / down from epoch 0: native {'/'.join(map(str, flips(base)))}, "
                f"{LABELS.get(arm, arm)} {'/'.join(map(str, flips(other)))}."
            )
    return out


AGENT_PHASES = ("rollout", "agent_update", "trainer")
"""The phases that hold the agent's side of an epoch: the native loop's rollouts and update, TRL's trainer (its
rollouts and steps) and the adoption of its weights."""


def agent_seconds(run: dict[str, Any]) -> float | None:
    """Mean seconds per trained epoch of the agent's side (`AGENT_PHASES`)."""
    phases = [e.get("phase_seconds") or {} for e in run["epochs"] if e["epoch"] > 0]
    spent = [sum(ph.get(p, 0.0) for p in AGENT_PHASES) for ph in phases]
    return sum(spent) / len(spent) if spent else None


def machine_lines(found: dict[tuple[str, int], dict[str, Any]], arms: list[str], seeds: list[int]) -> list[str]:
    """Each run's wall time, threads and the machine line its session recorded."""
    parts = []
    for seed in seeds:
        for arm in arms:
            r = found.get((arm, seed))
            if r is None:
                continue
            m = r.get("machine") or {}
            wall = r.get("wall_seconds")
            parts.append(
                f"{LABELS.get(arm, arm)} seed {seed}: {'–' if wall is None else rounded(wall, 0)} s in all, "
                f"agent side {_cell([agent_seconds(r)], lambda v: rounded(v, 1))} s an epoch, "
                f"{r.get('torch_threads') or r.get('threads')} threads, {m.get('cpu', '?')} ({m.get('cores', '?')} "
                "cores)"
            )
    head = (
        "Runs (wall time including the warm start and epoch 0; agent side: the mean over epochs 1 on of the "
        "native rollouts and update, or TRL's trainer phase and the adoption of its weights)"
    )
    return [f"{head}: {'; '.join(parts)}."] if parts else []


SMOL = f"{STUDY}/smol-trl-s0.json"
"""The record of one SmolLM2 epoch trained by TRL (a timing, not a side-by-side comparison)."""


def smol_lines(root: Path) -> list[str]:
    """The SmolLM2 run's wall time and each epoch's phase times, when its record exists."""
    path = root / SMOL
    if not path.is_file():
        return []
    r = json.loads(path.read_text())
    epochs = []
    for e in r["epochs"]:
        phases = ", ".join(f"{k} {rounded(v, 1)}" for k, v in (e.get("phase_seconds") or {}).items())
        epochs.append(f"epoch {e['epoch']} {rounded(e['seconds'], 0)} s ({phases})")
    trainer = r.get("trainer") or {}
    return [
        f"SmolLM2-135M through TRL (`{r['command']}`, {trainer.get('steps_per_epoch')} steps of "
        f"{trainer.get('batch')} completions, LoRA agent, float32 on the CPU cores, "
        f"{r.get('torch_threads') or r.get('threads')} threads): {rounded(r['wall_seconds'], 0)} s in all; "
        f"{'; '.join(epochs)} ([record]({Path(SMOL).name}))."
    ]


def trainers_finding(root: Path) -> str:
    """The results index's cell of the study."""
    found = records(root)
    arms = [a for a in _arms(found) if a != BASELINE]
    seeds = sorted({seed for _, seed in found})
    pairs = [
        (seed, pair(found[(BASELINE, seed)], found[("trl", seed)]))
        for seed in seeds
        if (BASELINE, seed) in found and ("trl", seed) in found
    ]
    if not pairs:
        return "no run recorded yet ([its page](trainers/README.md))"
    agree = all(p["heldout_agrees"] and p["p_hat_agrees"] for _, p in pairs)
    each = "; ".join(
        f"seed {seed}: held-out {signed(p['heldout'][0], 4)} (SE {bare(p['heldout'][1], 4)}), mean p̂ "
        f"{signed(p['p_hat'][0])} (SE {bare(p['p_hat'][1])})"
        for seed, p in pairs
    )
    more = f"; {len(arms) - 1} more arm(s) on [its page](trainers/README.md)" if len(arms) > 1 else ""
    return (
        f"TRL − native at the same settings, tiny preset: {each}: "
        f"{'both within 2 paired SE on every seed' if agree else 'not within 2 paired SE on every seed'}{more}"
    )


# ---- command line ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """``python -m genenv_lab.trainers record SESSION OUT --arm A --seed S --command C [--wall-seconds W]``."""
    p = argparse.ArgumentParser(prog="python -m genenv_lab.trainers", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("record", help="write the study's JSON record of a finished session")
    r.add_argument("session", type=Path)
    r.add_argument("out", type=Path)
    r.add_argument("--arm", required=True)
    r.add_argument("--seed", type=int, required=True)
    r.add_argument("--command", required=True)
    r.add_argument("--wall-seconds", type=float)
    args = p.parse_args(argv)
    data = record(args.session, arm=args.arm, seed=args.seed, command=args.command, wall_seconds=args.wall_seconds)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{args.out}: {len(data['epochs'])} epochs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
