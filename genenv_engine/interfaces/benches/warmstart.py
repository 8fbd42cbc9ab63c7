"""``genenv bench warmstart``: wall time and epoch-0 held-out success of a preset's warm start, trained afresh.

Runs ``genenv run --epochs 0`` on a temporary session with a temporary warm-start cache (so the
real cache is neither read nor written, and the warm start shipped in the package is not used): SFT of
the agent, then of the simulator (not with ``--set simulator.mode=off``: such a run trains the agent alone), then the
greedy held-out evaluation of epoch 0. Reports the seconds of each role's SFT and of the whole warm start,
steps per second, the final losses and held-out success per benchmark, and for each role's SFT and the held-out
decoding their tokens, model FLOPs and time as a multiple of the compute bound at the matmul peak measured in the
same run (`genenv_engine.interfaces.benches.flops`). ``--set`` tries another
recipe (``--set warm_start.agent_steps=400``). ``--keep`` then moves the trained warm start into the real
cache (unless it already holds as much for the same key), so the next ``genenv run`` with the same settings starts
at epoch 1 instead of training it again. Goal on tiny: warm start ≤ 180 s on 2 quiet cores
with bfcl held-out no worse than 0.870 (seed 0) / 0.797 (seed 1).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from genenv_engine.interfaces.benches import flops as fl
from genenv_engine.interfaces.benches.common import goal, peak_rss_mb, rich_table
from genenv_engine.interfaces.benches.epoch import PhaseTokens

GOAL_SECONDS = 180.0
REFERENCE_HELDOUT = {0: 0.870, 1: 0.797}
"""bfcl held-out of the tiny warm start before this benchmark existed (400 tasks, greedy)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``genenv bench warmstart``."""
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="move the trained warm start into $GENENV_CACHE (if it has none for these settings)",
    )


class SftTokens(PhaseTokens):
    """`PhaseTokens`, and the log-prob pass tokens at the agent's last SFT step (what follows is the simulator's)."""

    def __init__(self) -> None:
        super().__init__()
        from genenv_engine.training.policy import PASS_TOKENS

        self.first = dict(PASS_TOKENS)
        self.agent_end: dict[str, int] | None = None

    def __call__(self, event) -> None:
        from genenv_engine.training.policy import PASS_TOKENS

        super().__call__(event)
        if event.kind == "WarmStartProgressed" and event.role == "agent" and event.step == event.steps:
            self.agent_end = dict(PASS_TOKENS)

    def sft(self, end: dict[str, int]) -> dict[str, dict[str, int]]:
        """The pass tokens of each role's SFT (the agent's alone when the simulator's did not run)."""
        middle = self.agent_end or end
        return {"agent": {k: middle[k] - self.first[k] for k in end}, "simulator": {k: end[k] - middle[k] for k in end}}


def bounds(
    info: dict,
    counter: SftTokens,
    end: dict[str, int],
    heldout_seconds: float,
    roles: dict[str, fl.RoleFlops],
    peak: dict[str, float | None],
) -> dict[str, dict[str, Any]]:
    """Tokens, FLOPs and compute-bound multiple of each role's SFT and of the epoch-0 held-out decoding."""
    out = {}
    for role, passes in counter.sft(end).items():
        seconds = info.get(f"{role}_seconds")
        if seconds:
            out[f"{role}_sft"] = {
                "tokens": passes["grad_forward"] + passes["forward"],
                **fl.bound(seconds, roles[role].update(passes), peak),
            }
    prompt, generated = counter.prompted.get((0, "heldout_eval"), 0), counter.tokens.get((0, "heldout_eval"), 0)
    if heldout_seconds:
        out["heldout_eval"] = {
            "tokens": prompt + generated,
            **fl.bound(heldout_seconds, roles["agent"].decode(prompt, generated), peak),
        }
    return out


def rebase_adapters(entry: Path, old_root: Path, new_root: Path) -> list[Path]:
    """Point the LoRA adapters of the warm-start ``entry``, trained under the cache ``old_root``, at the base model
    under ``new_root`` (their ``base_model_name_or_path``), so that a kept entry names no deleted folder (the base
    model's folder there is made by the next run that needs it; its weights are not read from this field); the
    adapter configs changed, in path order.

    >>> import json, tempfile
    >>> folder = tempfile.TemporaryDirectory()
    >>> entry = Path(folder.name) / "smol-s0-abc"
    >>> (entry / "agent").mkdir(parents=True)
    >>> _ = (entry / "agent" / "adapter_config.json").write_text(json.dumps(
    ...     {"base_model_name_or_path": "/tmp/x/cache/models/SmolLM2", "r": 8}))
    >>> [p.parent.name for p in rebase_adapters(entry, Path("/tmp/x/cache"), Path("/home/u/.cache/genenv"))]
    ['agent']
    >>> json.loads((entry / "agent" / "adapter_config.json").read_text())
    {'base_model_name_or_path': '/home/u/.cache/genenv/models/SmolLM2', 'r': 8}
    >>> rebase_adapters(entry, Path("/tmp/x/cache"), Path("/home/u/.cache/genenv"))  # nothing left to change
    []
    >>> folder.cleanup()
    """
    import json

    from genenv_engine.training.adapters import ADAPTER_FILE

    changed = []
    for config in sorted(entry.glob(f"*/{ADAPTER_FILE}")):
        data = json.loads(config.read_text())
        base = Path(str(data.get("base_model_name_or_path") or ""))
        if base.is_relative_to(old_root):
            data["base_model_name_or_path"] = str(new_root / base.relative_to(old_root))
            config.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
            changed.append(config)
    return changed


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Entry point."""
    from genenv_engine.config import load_config, parse_sets
    from genenv_engine.method.loop import run as run_loop
    from genenv_engine.storage.session import Session
    from genenv_engine.training.policy import PASS_TOKENS, quiet_transformers
    from genenv_engine.training.warmstart import SHIPPED_ENV, cache_key, cache_root, serves

    quiet_transformers()
    overrides: dict[str, Any] = {"epochs": 0, "seed": args.seed}
    overrides.update(parse_sets(args.set))
    config = load_config(args.preset, None, overrides)
    old_env = {name: os.environ.get(name) for name in ("GENENV_CACHE", SHIPPED_ENV)}
    kept_in = cache_root() / "warmstart" / cache_key(config) if args.keep else None
    kept = False
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["GENENV_CACHE"] = str(Path(tmp) / "cache")
        os.environ[SHIPPED_ENV] = "0"  # trained afresh: the shipped warm start of the same key is not installed
        try:
            session = Session.create(config, Path(tmp) / "bench-warmstart")
            counter = SftTokens()
            run_loop(session, counter, backend_factory=counter.factory(config))
            end = dict(PASS_TOKENS)
            m = session.store.epoch_metrics()[0]
            session.store.close()
            if kept_in is not None and not serves(kept_in, config):
                shutil.rmtree(kept_in, ignore_errors=True)  # an agent-only entry, where this run trained both roles
                kept_in.parent.mkdir(parents=True, exist_ok=True)
                trained = Path(tmp) / "cache" / "warmstart" / kept_in.name
                rebase_adapters(trained, Path(tmp) / "cache", kept_in.parents[1])  # before it is visible there
                shutil.move(str(trained), str(kept_in))
                kept = True
        finally:
            for name, value in old_env.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    info = m.get("warm_start") or {}
    seconds = (m.get("phase_seconds") or {}).get("warm_start")
    ws = config.warm_start
    out = {
        "preset": args.preset,
        "seed": args.seed,
        "overrides": args.set,
        "agent_steps": ws.agent_steps,
        "simulator_steps": ws.simulator_steps,
        "batch_size": ws.batch_size,
        "seconds": round(seconds, 1) if seconds is not None else None,
        "agent_seconds": info.get("agent_seconds"),
        "simulator_seconds": info.get("simulator_seconds"),
        "agent_steps_per_second": round(ws.agent_steps / info["agent_seconds"], 2)
        if info.get("agent_seconds")
        else None,
        "simulator_steps_per_second": round(ws.simulator_steps / info["simulator_seconds"], 2)
        if info.get("simulator_seconds")
        else None,
        "agent_final_loss": info.get("agent_final_loss"),
        "simulator_final_loss": info.get("simulator_final_loss"),
        "heldout": m.get("heldout"),
        "heldout_seconds": round((m.get("phase_seconds") or {}).get("heldout_eval", 0), 1),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "peak_rss_mb": peak_rss_mb(),
        "kept": str(kept_in) if kept else None,
    }
    peak = fl.peaks()
    out["matmul_peak_flops"] = peak
    out["bounds"] = bounds(
        info, counter, end, (m.get("phase_seconds") or {}).get("heldout_eval", 0.0), fl.roles(config), peak
    )
    if args.preset == "tiny" and not args.set:
        out["goals"] = [goal("seconds", out["seconds"], GOAL_SECONDS, at_most=True)]
        if args.seed in REFERENCE_HELDOUT and "bfcl" in (out["heldout"] or {}):
            out["goals"].append(
                goal("heldout bfcl", out["heldout"]["bfcl"], REFERENCE_HELDOUT[args.seed], at_most=False)
            )
    return out


def table(result: dict[str, Any]):
    """Rich table: the warm start's parts."""
    t = rich_table(
        f"warmstart: {result['preset']} preset, seed {result['seed']} "
        f"({result['agent_steps']} + {result['simulator_steps']} SFT steps of {result['batch_size']})",
        ("part", "seconds", "steps/s", "final loss", "GFLOP", "x bound"),
    )
    b = result.get("bounds") or {}

    def flops(part: str) -> tuple[str, str]:
        entry = b.get(part) or {}
        return (
            f"{entry['flops'] / 1e9:.1f}" if entry.get("flops") else "-",
            f"{entry['multiple']:.1f}" if entry.get("multiple") else "-",
        )

    t.add_row(
        "agent SFT",
        str(result["agent_seconds"]),
        str(result["agent_steps_per_second"]),
        str(result["agent_final_loss"]),
        *flops("agent_sft"),
    )
    t.add_row(
        "simulator SFT",
        str(result["simulator_seconds"]),
        str(result["simulator_steps_per_second"]),
        str(result["simulator_final_loss"]),
        *flops("simulator_sft"),
    )
    t.add_row("warm start (all)", str(result["seconds"]), "-", "-", "-", "-")
    t.add_row(
        "held-out eval",
        str(result["heldout_seconds"]),
        "-",
        " ".join(f"{k}={v:.3f}" for k, v in (result["heldout"] or {}).items()),
        *flops("heldout_eval"),
    )
    return t
