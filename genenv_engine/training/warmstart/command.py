"""The warm-start command, ``python -m genenv_engine.training.warmstart ship ...`` (``make shipped-warmstart``): ship a
freshly trained warm start inside the package with its manifest (`genenv_engine.training.warmstart.shipped.ship`).

Importing this module loads no torch: `main` imports what it runs, so it can set the process up first.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m genenv_engine.training.warmstart ship --bench FILE [--preset P] [--seed N] [--entry DIR]``: ship the
    finished warm start of the preset and seed (default: its entry in ``$GENENV_CACHE``) with the epoch-0
    held-out that ``genenv bench warmstart --json`` wrote to FILE when it trained it (``make shipped-warmstart``)."""
    from genenv_engine.backends.openmp import choose_spin

    choose_spin()  # before anything loads torch
    import argparse

    from genenv_engine.config import load_config
    from genenv_engine.training.warmstart.cache import cache_key, cache_root
    from genenv_engine.training.warmstart.shipped import MANIFEST, ship

    parser = argparse.ArgumentParser(prog="python -m genenv_engine.training.warmstart")
    sub = parser.add_subparsers(dest="command", required=True)
    cmd = sub.add_parser("ship", help="copy a finished warm start into the package with its manifest")
    cmd.add_argument("--preset", default="tiny")
    cmd.add_argument("--seed", type=int, default=0)
    cmd.add_argument(
        "--bench",
        type=Path,
        required=True,
        help="bench-warmstart.json of the `genenv bench warmstart --keep` run that trained the entry",
    )
    cmd.add_argument("--entry", type=Path, help="the entry to ship (default: its key's folder in $GENENV_CACHE)")
    args = parser.parse_args(argv)
    config = load_config(args.preset, None, {"seed": args.seed})
    bench = json.loads(args.bench.read_text())
    if (bench.get("preset"), bench.get("seed"), bench.get("overrides") or []) != (args.preset, args.seed, []):
        raise SystemExit(f"{args.bench} is not a plain warm start of {args.preset} seed {args.seed}")
    entry = args.entry or cache_root() / "warmstart" / cache_key(config)
    if bench.get("kept") and Path(bench["kept"]).resolve() != entry.resolve():
        raise SystemExit(f"{args.bench} kept its warm start in {bench['kept']}, not {entry}")
    shipped = ship(
        entry,
        bench["heldout"],
        config,
        f"genenv bench warmstart --preset {args.preset} --seed {args.seed} --keep "
        f"({bench.get('seconds')} s, {bench.get('finished_at')})",
    )
    manifest = json.loads((shipped / MANIFEST).read_text())
    print(
        f"shipped {shipped} ({manifest['bytes'] / 1e6:.1f} MB, {len(manifest['files'])} files, "
        f"epoch-0 held-out {manifest['heldout']})"
    )
