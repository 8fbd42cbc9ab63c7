"""The ``genenv env`` command: ``check`` (`genenv_engine.interfaces.conformance.check_environment`, one line per
failure and a line on how replies are scored, or ``--json``), ``new`` (`genenv_engine.interfaces.scaffold`) and
``rg-table`` (`genenv_engine.interfaces.rg_table`): `add_env_parser`, `run_env`, and `scoring_line`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from genenv_engine.interfaces.conformance import CHECK_SIZES, RUN_SIZES, check_environment, parse_sizes, sizes_text
from genenv_engine.interfaces.rg_table import add_rg_table_parser, run_rg_table


def scoring_line(name: str, scoring: dict[str, object]) -> str:
    """The line ``genenv env check`` prints about how replies are scored.

    >>> line = scoring_line("rg_x", {"mode": "sandboxed", "contained": True, "findings": ["eval@m:3"],
    ...                               "other_gold_share": 0.0, "constant_share": 0.0, "probed_entries": 15})
    >>> for part in line.split("; "):
    ...     print(part)
    rg_x: replies scored sandboxed (its scorer runs text: eval@m:3), in a contained worker
    wrong answers accepted on 0% of 15 probed entries (another gold), 0% (a constant)
    >>> scoring_line("bfcl", {"mode": "direct", "contained": False})
    'bfcl: replies scored direct, in this process'
    """
    findings = scoring.get("findings") or []
    why = f" (its scorer runs text: {', '.join(map(str, findings[:2]))})" if findings else ""
    where = (
        "in a contained worker"
        if scoring.get("contained")
        else ("in a worker" if "probed_entries" in scoring else "in this process")
    )
    line = f"{name}: replies scored {scoring['mode']}{why}, {where}"
    if "probed_entries" in scoring:
        line += (
            f"; wrong answers accepted on {float(scoring['other_gold_share']):.0%} of "  # type: ignore[arg-type]
            f"{scoring['probed_entries']} probed entries (another gold), "
            f"{float(scoring['constant_share']):.0%} (a constant)"
        )  # type: ignore[arg-type]
    return line


def add_env_parser(sub: argparse._SubParsersAction) -> None:
    """``genenv env check`` and ``genenv env new``."""
    env = sub.add_parser("env", help="check an environment against the environment API, or write a new one")
    env_sub = env.add_subparsers(dest="env_command", required=True)
    check = env_sub.add_parser(
        "check",
        help="check every contract of the environment API (one line per failure; "
        "exit 1 on any) and time its check and validate",
    )
    check.add_argument(
        "name", help="a benchmark as --benchmarks names it: built-in, entry point, module:Class or rg:<dataset>"
    )
    check.add_argument("--seed", type=int, default=0, help="the splits' seed")
    check.add_argument(
        "--sizes",
        default=sizes_text(CHECK_SIZES),
        help=f"the split sizes: seed,train,heldout, or '{RUN_SIZES}' for those a genenv run builds "
        "(the class's DEFAULT_SIZES)",
    )
    check.add_argument("--samples", type=int, default=100, help="how many split tasks each contract checks")
    check.add_argument("--data-dir", default=None, metavar="PATH", help="upstream data for the environment")
    check.add_argument("--json", action="store_true", help="print the report as one JSON object")
    new = env_sub.add_parser(
        "new",
        help="write a package holding a new environment (its pyproject with the "
        "genenv.environments entry point, the module, its tests)",
    )
    new.add_argument("name", help="the benchmark's name: lowercase letters, digits and '_', starting with a letter")
    new.add_argument("--out", type=Path, default=None, help="the folder to write (default ./NAME)")
    add_rg_table_parser(env_sub)


def run_env(args: argparse.Namespace) -> int:
    """Run ``genenv env check`` or ``genenv env new``: 0 when it passes or is written, 1 when a contract fails."""
    if args.env_command == "rg-table":
        return run_rg_table(args)
    if args.env_command == "new":
        from genenv_engine.interfaces.scaffold import write_package

        folder = write_package(args.name, args.out)
        where = str(folder) if folder.is_absolute() or str(folder).startswith(".") else f"./{folder}"
        print(
            f"wrote the environment {args.name} in {where}; try it with: pip install {where} && genenv env "
            f"check {args.name}"
        )
        return 0
    report = check_environment(args.name, args.seed, parse_sizes(args.sizes), args.samples, args.data_dir)
    if args.json:
        print(report.as_json())
        return 0 if report.ok else 1
    if report.scoring:
        print(scoring_line(report.name, report.scoring))
    for failure in report.failures:
        print(f"FAIL {failure.line}")
    for contract in report.checked:
        print(f"ok   {contract}")
    for contract, why in report.skipped.items():
        print(f"--   {contract}: skipped ({why})")
    timing = ", ".join(f"{k} {v * 1000:.3g} ms/call" for k, v in report.seconds.items())
    print(
        f"{report.name}: {len(report.failures)} of {len(report.failures) + len(report.checked)} contracts broken"
        + (f"; {timing}" if timing else "")
    )
    return 0 if report.ok else 1
