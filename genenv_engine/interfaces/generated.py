"""The command line that every module generating committed documents shares: regenerate the files, or ``--check``
that the committed ones are what the code and data give now (exit 1, naming each stale one)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path


def generated_main(
    argv: Sequence[str] | None,
    *,
    module: str,
    description: str,
    root: Path,
    stale: Callable[[Path], list[str]],
    write: Callable[[Path], Iterable[object]],
    make: str,
    current: str,
) -> int:
    """``python -m <module> [--check] [--root DIR]``: ``write(root)`` and print each file it wrote, or with
    ``--check`` print each of ``stale(root)`` with the ``make`` target that mends it and exit 1 (0 and ``current``
    when none is stale)."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 naming what is stale")
    parser.add_argument("--root", type=Path, default=root, help="the repository root (default: this checkout)")
    args = parser.parse_args(argv)
    if args.check:
        names = stale(args.root)
        for name in names:
            print(f"stale: {name} (run `make {make}`)", file=sys.stderr)
        if not names:
            print(current)
        return 1 if names else 0
    for written in write(args.root):
        print(f"wrote {written}")
    return 0
