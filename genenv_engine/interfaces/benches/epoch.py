"""``genenv bench epoch``: the shipped tiny epoch, timed per phase with each phase's work, median over epochs.

A temporary session of the preset (default ``tiny``, its settings unchanged) runs ``--epochs``
co-evolution epochs after its epoch-0 warm start (from the warm-start cache when present, so the
bench measures epochs, not the warm start). Each phase reports its seconds and work: tasks,
rollouts, tokens generated (counted per phase on both backends) and tokens trained, and tokens/s; and its model
FLOPs (prompt and generated tokens of a decoding phase, the log-prob passes of an update), the time those would
take at the machine's matmul peak measured in the same run, and the phase's time as a multiple of it
(`genenv_engine.interfaces.benches.flops`).
Goals on tiny: median epoch ≤ 15 s, peak RSS ≤ 1.5 GB.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from genenv_engine.interfaces.benches import flops as fl
from genenv_engine.interfaces.benches.common import goal, peak_rss_mb, rich_table

PHASES = ("generate", "validate", "rollout", "agent_update", "simulator_update", "heldout_eval", "checkpoint")
GOAL_SECONDS = 15.0
GOAL_RSS_MB = 1536.0


class PhaseTokens:
    """An event sink that counts the tokens both backends generate during each phase of each epoch, and the seconds
    their grammar masks took (the cost of constrained decoding)."""

    def __init__(self) -> None:
        self.backends: list[Any] = []
        self.tokens: dict[tuple[int, str], int] = {}
        self.grammar_seconds: dict[tuple[int, str], float] = {}
        self.prompted: dict[tuple[int, str], int] = {}
        """Prompt tokens the backends prefilled during each phase."""
        self.passes: dict[tuple[int, str], dict[str, int]] = {}
        """`genenv_engine.training.policy.PASS_TOKENS` counted during each phase."""
        self._start: dict[str, tuple[int, float]] = {}
        self._counts: dict[str, tuple[int, dict[str, int]]] = {}

    def factory(self, config):
        """A backend factory for `genenv_engine.method.loop.run` that keeps the backends it builds."""
        from dataclasses import asdict

        from genenv_engine.backends import get_backend

        options = asdict(config.vllm) if config.runtime.backend == "vllm" else {}

        def make(role: str, policy):
            backend = get_backend(config.runtime.backend, policy=policy, **options)
            self.backends.append(backend)
            return backend

        return make

    def _total(self) -> tuple[int, float]:
        live = self.backends[-2:]
        return sum(b.tokens_generated for b in live), sum(getattr(b, "grammar_seconds", 0.0) for b in live)

    def _counted(self) -> tuple[int, dict[str, int]]:
        from genenv_engine.training.policy import PASS_TOKENS

        return sum(getattr(b, "tokens_prompted", 0) for b in self.backends[-2:]), dict(PASS_TOKENS)

    def __call__(self, event) -> None:
        if event.kind == "PhaseStarted":
            self._start[event.phase] = self._total()
            self._counts[event.phase] = self._counted()
        elif event.kind == "PhaseFinished" and event.phase in self._start:
            (tokens, grammar), (tokens0, grammar0) = self._total(), self._start.pop(event.phase)
            self.tokens[(event.epoch, event.phase)] = tokens - tokens0
            self.grammar_seconds[(event.epoch, event.phase)] = grammar - grammar0
            (prompted, passes), (prompted0, passes0) = self._counted(), self._counts.pop(event.phase)
            self.prompted[(event.epoch, event.phase)] = prompted - prompted0
            self.passes[(event.epoch, event.phase)] = {k: v - passes0[k] for k, v in passes.items()}


def epoch_rows(
    metrics: list[dict[str, Any]],
    tokens: dict[tuple[int, str], int],
    k: int,
    heldout_tasks: int,
    grammar: dict[tuple[int, str], float] | None = None,
) -> list[dict[str, Any]]:
    """Per epoch (1..): seconds and work of every phase, from the stored epoch metrics and the token counts (and
    the generate phase's seconds spent on grammar masks, ``grammar``)."""
    grammar = grammar or {}
    rows = []
    for m in metrics:
        e = m["epoch"]
        if e == 0 or m.get("status") != "done":
            continue
        secs = m.get("phase_seconds") or {}
        agent, sim = m.get("agent_update") or {}, m.get("simulator_update") or {}
        work = {
            "generate": {
                "tasks": m.get("generated", 0),
                "tokens_generated": tokens.get((e, "generate"), 0),
                "grammar_seconds": round(grammar.get((e, "generate"), 0.0), 3),
            },
            "validate": {"tasks": m.get("generated", 0), "valid": m.get("valid", 0)},
            "rollout": {
                "tasks": m.get("tasks_trained", 0),
                "rollouts": m.get("tasks_trained", 0) * k,
                "tokens_generated": tokens.get((e, "rollout"), 0),
            },
            "agent_update": {
                "sequences": int(agent.get("sequences", 0)),
                "steps": int(agent.get("steps", 0)),
                "tokens_trained": int(agent.get("tokens", 0)),
            },
            "simulator_update": {
                "examples": int(sim.get("examples", 0)),
                "steps": int(sim.get("steps", 0)),
                "tokens_trained": int(sim.get("tokens", 0)),
            },
            "heldout_eval": {"tasks": heldout_tasks, "tokens_generated": tokens.get((e, "heldout_eval"), 0)},
            "checkpoint": {},
        }
        phases = {}
        for p in PHASES:
            s = float(secs.get(p, 0.0))
            w = dict(work[p])
            toks = w.get("tokens_generated", w.get("tokens_trained"))
            if toks is not None:
                w["tokens_per_second"] = round(toks / s, 1) if s > 0 else None
            phases[p] = {"seconds": round(s, 3), **w}
        rows.append(
            {
                "epoch": e,
                "seconds": round(sum(float(v) for v in secs.values()), 3),
                "phases": phases,
                "tokens_generated": m.get("tokens_generated"),
                "heldout": m.get("heldout"),
            }
        )
    return rows


DECODE_ROLE = {"generate": "simulator", "rollout": "agent", "heldout_eval": "agent"}
UPDATE_ROLE = {"agent_update": "agent", "simulator_update": "simulator"}


def phase_flops(phase: str, epoch: int, counter: PhaseTokens, roles: dict[str, fl.RoleFlops]) -> dict[str, int] | None:
    """A phase's tokens and model FLOPs in one epoch: a decoding phase's prompt and generated tokens, an update's
    log-prob passes (None for the phases without model work)."""
    key = (epoch, phase)
    if phase in DECODE_ROLE:
        prompt, generated = counter.prompted.get(key, 0), counter.tokens.get(key, 0)
        return {"tokens": prompt + generated, "flops": roles[DECODE_ROLE[phase]].decode(prompt, generated)}
    if phase in UPDATE_ROLE:
        passes = counter.passes.get(key) or dict.fromkeys(("forward", "head", "grad_forward", "grad_head"), 0)
        return {"tokens": passes["forward"] + passes["grad_forward"], "flops": roles[UPDATE_ROLE[phase]].update(passes)}
    return None


def add_bounds(
    rows: list[dict[str, Any]], counter: PhaseTokens, roles: dict[str, fl.RoleFlops], peak: dict[str, float | None]
) -> None:
    """Add each phase's tokens, FLOPs, compute bound and multiple of it to `epoch_rows`' rows."""
    for row in rows:
        for phase, entry in row["phases"].items():
            work = phase_flops(phase, row["epoch"], counter, roles)
            if work is not None:
                entry["model_tokens"] = work["tokens"]
                entry.update(fl.bound(entry["seconds"], work["flops"], peak))


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Median epoch seconds and, per phase, the median seconds and work."""
    if not rows:
        return {"median_seconds": None, "phase_seconds": {}, "phase_work": {}}
    phase_seconds = {p: round(statistics.median(r["phases"][p]["seconds"] for r in rows), 3) for p in PHASES}
    work = {}
    for p in PHASES:
        keys = [k for k in rows[0]["phases"][p] if k != "seconds"]
        work[p] = {k: statistics.median(r["phases"][p][k] or 0 for r in rows) for k in keys}
    return {
        "median_seconds": round(statistics.median(r["seconds"] for r in rows), 3),
        "phase_seconds": phase_seconds,
        "phase_work": work,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``genenv bench epoch``."""
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--epochs", type=int, default=5, help="co-evolution epochs to time (median over them)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override, as for genenv run (changes the epoch measured: for tests)",
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Entry point."""
    from genenv_engine.config import load_config, parse_sets
    from genenv_engine.method.loop import run as run_loop
    from genenv_engine.storage.session import Session
    from genenv_engine.training.policy import quiet_transformers
    from genenv_engine.training.warmstart import is_cached

    quiet_transformers()
    overrides: dict[str, Any] = {"epochs": args.epochs, "seed": args.seed}
    overrides.update(parse_sets(args.set))
    config = load_config(args.preset, None, overrides)
    cached = is_cached(config)
    counter = PhaseTokens()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        session = Session.create(config, Path(tmp) / "bench-epoch")
        run_loop(session, counter, backend_factory=counter.factory(config))
        metrics = session.store.epoch_metrics()
        session.store.close()
    heldout_tasks = config.heldout_size * len(config.benchmarks)
    rows = epoch_rows(metrics, counter.tokens, config.agent.rollouts, heldout_tasks, counter.grammar_seconds)
    peak = fl.peaks()
    add_bounds(rows, counter, fl.roles(config), peak)
    out = {
        "preset": args.preset,
        "epochs": args.epochs,
        "seed": args.seed,
        "overrides": args.set,
        "warm_start_cached": cached,
        "epoch0_seconds": round(sum((metrics[0].get("phase_seconds") or {}).values()), 2),
        "wall_seconds": round(time.perf_counter() - started, 1),
        **summarize(rows),
        "epochs_measured": rows,
        "peak_rss_mb": peak_rss_mb(),
        "matmul_peak_flops": peak,
    }
    if args.preset == "tiny" and not args.set:
        out["goals"] = [
            goal("median_seconds", out["median_seconds"], GOAL_SECONDS, at_most=True),
            goal("peak_rss_mb", out["peak_rss_mb"], GOAL_RSS_MB, at_most=True),
        ]
    return out


def table(result: dict[str, Any]):
    """Rich table: median seconds and work per phase."""
    t = rich_table(
        f"epoch: {result['preset']} preset, median of {len(result['epochs_measured'])} epochs: "
        f"{result['median_seconds']} s, peak RSS {result['peak_rss_mb']:.0f} MB "
        f"(warm start {'cached' if result['warm_start_cached'] else 'trained in this run'})",
        ("phase", "median s", "work (median per epoch)", "tokens/s", "GFLOP", "x bound"),
        left=("phase", "work (median per epoch)"),
    )
    bound_keys = ("tokens_per_second", "model_tokens", "flops", "bound_seconds", "multiple", "multiple_bf16")
    for p, secs in result["phase_seconds"].items():
        phase = result["phase_work"][p]
        work = {k: v for k, v in phase.items() if k not in bound_keys}
        tps, flops, multiple = phase.get("tokens_per_second"), phase.get("flops"), phase.get("multiple")
        t.add_row(
            p,
            f"{secs:.2f}",
            ", ".join(f"{k}={v:g}" for k, v in work.items()),
            "-" if not tps else f"{tps:.0f}",
            "-" if not flops else f"{flops / 1e9:.1f}",
            "-" if not multiple else f"{multiple:.1f}",
        )
    return t
