"""``genenv env rg-table``: every reasoning-gym dataset put through the eligibility check and ``genenv env check``.

Provides `survey` (each dataset of the installed reasoning-gym, one at a time, through ``genenv env check
rg:<dataset> --json`` in a child process bounded by a time limit; each result written to the JSON file as it comes,
so an interrupted survey resumes where it stopped), `verdict` (one dataset's row from its child's exit status and
output: ``passes``, ``breaks`` a contract, ``refused`` with the eligibility check's line, ``no result`` within the
limit, or ``crashed``), `render` (the Markdown table and its counts, generated from the JSON) and the command
(`add_rg_table_parser`, `run_rg_table`). A row says how the dataset's replies are scored: ``direct``, ``sandboxed``
(its scorer runs text, so only in the contained worker) or ``refused``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

DEFAULT_OUT = Path("rg-table")
"""Where the table's JSON (``datasets.json``) and Markdown (``datasets.md``) go by default (under the working
directory)."""
DATASET_SECONDS = 900
"""How long one dataset's eligibility check and ``env check`` may take together."""
OUTCOMES = ("passes", "breaks", "refused", "no result", "crashed")


def _line(text: str) -> str:
    return " ".join(text.split())[:300]


def verdict(dataset: str, returncode: int | None, stdout: str, stderr: str, seconds: float) -> dict[str, Any]:
    """One dataset's row: ``returncode`` None means the child ran past its limit.

    >>> refused = "genenv: config error in 'benchmarks': rg:x: its generator fails at level 3\\n"
    >>> verdict("x", 2, "", refused, 1.0)["outcome"], verdict("x", 2, "", refused, 1.0)["detail"]
    ('refused', 'rg:x: its generator fails at level 3')
    >>> row = verdict("y", 0, '{"ok": true, "failures": [], "checked": ["a"], "scoring": {"mode": "direct"}}', "", 2.0)
    >>> row["outcome"], row["scoring"]
    ('passes', 'direct')
    """
    row: dict[str, Any] = {"dataset": dataset, "seconds": round(seconds, 1)}
    if returncode is None:
        return {**row, "outcome": "no result", "scoring": "", "detail": f"no result within {DATASET_SECONDS} s"}
    reports = [line for line in stdout.splitlines() if line.startswith("{")]
    if reports:
        report = json.loads(reports[-1])
        scoring = report.get("scoring", {})
        return {
            **row,
            "outcome": "passes" if report["ok"] else "breaks",
            "scoring": scoring.get("mode", ""),
            "findings": scoring.get("findings", []),
            "other_gold_share": scoring.get("other_gold_share"),
            "constant_share": scoring.get("constant_share"),
            "checked": report["checked"],
            "failures": report["failures"],
            "skipped": report.get("skipped", {}),
            "detail": "; ".join(f"{c}: {_line(d)}" for c, d in report["failures"]),
        }
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else f"exit status {returncode}"
    if returncode == 2 and len(lines) == 1 and "config error" in last:
        return {**row, "outcome": "refused", "scoring": "refused", "detail": _line(last.split(": ", 2)[-1])}
    return {**row, "outcome": "crashed", "scoring": "", "detail": _line(last)}


def _check(dataset: str, seconds: float) -> dict[str, Any]:
    """``env check`` of the dataset; once more when a contract ran out of time, since the first try kept the
    entries that were slow to generate (`genenv_engine.environments.reasoning_gym.entry_cache`): the row is the
    second try's, with the first one's detail."""
    row = _check_once(dataset, seconds)
    if row["outcome"] == "breaks" and "did not finish" in row.get("detail", ""):
        again = _check_once(dataset, seconds)
        again["first_try"] = {"outcome": row["outcome"], "seconds": row["seconds"], "detail": row["detail"]}
        return again
    return row


def _check_once(dataset: str, seconds: float) -> dict[str, Any]:
    started = time.monotonic()
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "genenv_engine", "env", "check", f"rg:{dataset}", "--json"],
            capture_output=True,
            text=True,
            timeout=seconds,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return verdict(dataset, None, "", "", time.monotonic() - started)
    return verdict(dataset, done.returncode, done.stdout, done.stderr, time.monotonic() - started)


def survey(
    out: Path, datasets: list[str] | None = None, seconds: float = DATASET_SECONDS, again: bool = False
) -> dict[str, Any]:
    """Every dataset of the installed reasoning-gym (or ``datasets``) checked, its row saved in
    ``out/datasets.json`` as it comes; rows already there for this reasoning-gym version are kept, and checked
    again only when ``again`` (the other rows stay)."""
    from importlib import metadata

    from reasoning_gym.factory import DATASETS

    version = metadata.version("reasoning-gym")
    path = out / "datasets.json"
    table: dict[str, Any] = {"reasoning_gym": version, "seconds_per_dataset": seconds, "rows": {}}
    if path.is_file():
        saved = json.loads(path.read_text())
        if saved.get("reasoning_gym") == version:
            table["rows"] = saved.get("rows", {})
    out.mkdir(parents=True, exist_ok=True)
    for dataset in datasets or sorted(DATASETS):
        if dataset in table["rows"] and not again:
            continue
        row = _check(dataset, seconds)
        table["rows"][dataset] = row
        path.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
        print(
            f"{dataset}: {row['outcome']} ({row['scoring'] or '-'}) in {row['seconds']} s"
            + (f": {row['detail'][:160]}" if row.get("detail") else ""),
            flush=True,
        )
    return table


def render(table: dict[str, Any]) -> str:
    """The Markdown page of a survey: the counts by outcome and by scoring, then one row per dataset."""
    rows = [table["rows"][d] for d in sorted(table["rows"])]
    outcomes = Counter(r["outcome"] for r in rows)
    scorings = Counter(r["scoring"] for r in rows if r["outcome"] in ("passes", "breaks"))
    lines = [
        f"# reasoning-gym {table['reasoning_gym']}: every dataset through the eligibility check and `env check`",
        "",
        "Generated by `genenv env rg-table` (each dataset in its own process, at most "
        f"{table['seconds_per_dataset']:g} s; a dataset whose contract ran out of time is checked a second time, "
        "with the entries that were slow to generate kept from the first); do not edit.",
        "",
        f"Of {len(rows)} datasets: " + ", ".join(f"{outcomes[o]} {o}" for o in OUTCOMES if outcomes[o]) + ". "
        "Replies of the admitted ones are scored "
        + ", ".join(f"{n} {s}" for s, n in sorted(scorings.items()))
        + " (`sandboxed`: the dataset's scorer runs the reply as code, so it runs only in the contained worker).",
        "",
        "| dataset | outcome | replies scored | wrong answers accepted (another gold / constant) | seconds | detail |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        shares = ""
        if r.get("other_gold_share") is not None:
            shares = f"{r['other_gold_share']:.0%} / {r['constant_share']:.0%}"
        detail = r.get("detail") or ", ".join(sorted({f.split("@")[0] for f in r.get("findings", [])}))
        if r.get("first_try"):
            detail += f" (second try; the first, {r['first_try']['seconds']} s: {r['first_try']['detail'][:120]})"
        lines.append(
            f"| {r['dataset']} | {r['outcome']} | {r['scoring'] or '-'} | {shares} | {r['seconds']} | "
            f"{detail.replace('|', '/')} |"
        )
    return "\n".join(lines) + "\n"


def add_rg_table_parser(env_sub: argparse._SubParsersAction) -> None:
    """``genenv env rg-table``."""
    table = env_sub.add_parser(
        "rg-table",
        help="put every reasoning-gym dataset through the eligibility check and "
        "env check, one process each, and write the table (hours)",
    )
    table.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the folder of datasets.json and datasets.md")
    table.add_argument("--datasets", default="", help="comma-separated datasets (default: all)")
    table.add_argument("--seconds", type=float, default=DATASET_SECONDS, help="the limit per dataset")
    table.add_argument(
        "--again",
        action="store_true",
        help="check the chosen datasets again even if the JSON has them (the other rows stay)",
    )
    table.add_argument("--render", action="store_true", help="only write datasets.md from the JSON")


def run_rg_table(args: argparse.Namespace) -> int:
    """Run ``genenv env rg-table``: 0 once the table is written."""
    path = args.out / "datasets.json"
    if args.render:
        table = json.loads(path.read_text())
    else:
        chosen = [d.strip() for d in args.datasets.split(",") if d.strip()] or None
        table = survey(args.out, chosen, args.seconds, args.again)
    (args.out / "datasets.md").write_text(render(table))
    print(f"wrote {args.out / 'datasets.md'} ({len(table['rows'])} datasets)")
    return 0
