"""The ``genenv bench`` command: its subcommands (``update-memory``, every benchmark of
`genenv_engine.interfaces.benches`,
``ablation``) and running the one asked for, with its tables or JSON and its ``bench-NAME.json`` file."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_bench_parser(sub) -> None:
    """Register ``genenv bench`` with ``update-memory`` and every benchmark of `genenv_engine.interfaces.benches`."""
    import importlib

    from genenv_engine.interfaces.benches import BENCHES

    bench = sub.add_parser("bench", help="engine benchmarks (memory and speed goals live here, not in tests)")
    what = bench.add_subparsers(dest="bench", required=True)
    mem = what.add_parser("update-memory", help="peak memory of one update: naive vs micro-batched + chunked")
    mem.add_argument("--model", default="smollm2", help="smollm2 (default) or a local checkpoint folder")
    mem.add_argument("--batch", type=int, default=32)
    mem.add_argument("--seq", type=int, default=128)
    mem.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="MICRO:CHUNK[:gc]",
        help="micro_batch:logprob_chunk to measure, 0:0 = naive, a :gc suffix turns on gradient "
        "checkpointing (repeatable; default 0:0, 0:100000, 8:1024)",
    )
    for name, module in BENCHES.items():
        mod = importlib.import_module(module)
        parser = what.add_parser(name, help=mod.__doc__.splitlines()[0].split(": ", 1)[-1])
        parser.add_argument("--json", action="store_true", help="print the JSON result instead of tables")
        parser.add_argument(
            "--out",
            type=Path,
            default=Path("bench-results"),
            help="folder for bench-NAME.json (default bench-results/)",
        )
        mod.add_arguments(parser)
    from genenv_engine.ablation.bench import add_parser as add_ablation

    add_ablation(what)


def run_bench(args: argparse.Namespace) -> int:
    """Entry point of ``genenv bench``."""
    if args.bench == "ablation":
        from genenv_engine.ablation.bench import main as ablation

        return ablation(args)
    if args.bench != "update-memory":
        return _run_named(args)
    settings = [(int(s.split(":")[0]), int(s.split(":")[1]), s.endswith(":gc")) for s in args.setting] or [
        (0, 0, False),
        (0, 100_000, False),
        (8, 1024, False),
    ]
    from genenv_engine.interfaces.benches.update_memory import update_memory

    rows = update_memory(args.model, args.batch, args.seq, settings)  # type: ignore[arg-type]
    return 1 if any("error" in r for r in rows) else 0


def _run_named(args: argparse.Namespace) -> int:
    """Run one benchmark of `genenv_engine.interfaces.benches`: print its tables (or JSON) and write its JSON file."""
    import importlib
    import os

    from genenv_engine.interfaces.benches import BENCHES
    from genenv_engine.interfaces.benches.common import finish, goals_table

    mod = importlib.import_module(BENCHES[args.bench])
    load_before = [round(x, 2) for x in os.getloadavg()]
    result = finish(args.bench, mod.run(args), load_before, args.out)
    if args.json:
        print(json.dumps(result, default=str))
    else:
        from rich.console import Console

        console = Console()
        console.print(mod.table(result))
        if result.get("goals"):
            console.print(goals_table(result))
        m = result["machine"]
        console.print(
            f"load average {m['load_average_before']} -> {m['load_average']} on {m['cpus']} CPUs, "
            f"torch threads {m['torch_threads']}; JSON: {args.out / ('bench-' + args.bench + '.json')}"
        )
    return 2 if result.get("error") else 0
