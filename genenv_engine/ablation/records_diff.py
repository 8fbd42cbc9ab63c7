"""``genenv bench records-diff A.json B.json``: two run records compared on the same held-out tasks.

The ablation bench pairs arms of one configuration. Two runs whose configurations differ in more than the arm (the
`unseen` oracle against `off` with a capped base pool, say, where a setting valid for one is refused for the other)
are compared here, from their run records alone: each run's change from epoch 0 to the last common epoch, and
A minus B at that epoch, each with its paired standard error over the same tasks, in total and per difficulty level,
on the run's stored held-out results or on a re-score (``--rescore N``). Pairing needs the same epoch-0 agent: the
result says how many tasks the two epoch-0 results differ on and whether the warm-start fingerprints match.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``genenv bench records-diff``."""
    parser.add_argument("a", type=Path, help="run record A (the difference is A minus B)")
    parser.add_argument("b", type=Path, help="run record B")
    parser.add_argument(
        "--rescore",
        type=int,
        default=None,
        metavar="N",
        help="compare the records' re-scores on N held-out tasks (`bench ablation --rescore N`)",
    )
    parser.add_argument("--epoch", type=int, default=None, help="the epoch to compare (default: the last common one)")


def _results(run: dict[str, Any], rescore: int | None, source: Path) -> dict[int, dict[str, str]]:
    if rescore is None:
        return run["_correct"]
    scored = run["_rescored"].get(str(rescore))
    if not scored:
        raise ValueError(
            f"{source} has no re-score on {rescore} tasks (it has: {', '.join(sorted(run['_rescored'])) or 'none'})"
        )
    return {int(e): c for e, c in scored.items()}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Entry point."""
    from genenv_engine.ablation.run_records import read_record
    from genenv_engine.ablation.stats import by_level, paired_change
    from genenv_engine.environments import environments_of
    from genenv_engine.training.agent import heldout_tasks

    runs = {}
    for name in ("a", "b"):
        path = getattr(args, name)
        found = read_record(path)
        if found is None:
            raise FileNotFoundError(f"no run record at {path}")
        runs[name] = found
    a, b = runs["a"], runs["b"]
    ca, cb = a["_config"], b["_config"]
    if ca.seed != cb.seed or tuple(ca.benchmarks) != tuple(cb.benchmarks):
        raise ValueError(
            f"the records are not on the same held-out tasks: seed {ca.seed} / {cb.seed}, "
            f"benchmarks {', '.join(ca.benchmarks)} / {', '.join(cb.benchmarks)}"
        )
    ra, rb = _results(a, args.rescore, args.a), _results(b, args.rescore, args.b)
    common = sorted((set(ra) & set(rb)) - {0})
    if 0 not in ra or 0 not in rb or not common:
        raise ValueError("the records share no epoch after 0 (and epoch 0) to compare")
    epoch = args.epoch if args.epoch is not None else common[-1]
    if epoch not in common:
        raise ValueError(f"epoch {epoch} is not in both records (common: {', '.join(map(str, common))})")
    envs = environments_of(ca)
    out: dict[str, Any] = {}
    for bench in ca.benchmarks:
        a0, b0, a1, b1 = ra[0][bench], rb[0][bench], ra[epoch][bench], rb[epoch][bench]
        if not len(a0) == len(b0) == len(a1) == len(b1):
            raise ValueError(f"{bench}: the records hold results on different numbers of tasks")
        levels = [envs[bench].bucket(t) for t in heldout_tasks({bench: envs[bench]}, len(a0))]
        diff = paired_change(b1, a1)
        a_levels, b_levels = by_level(a0, a1, levels), by_level(b0, b1, levels)
        out[bench] = {
            "tasks": len(a0),
            "epoch0_differ": sum(x != y for x, y in zip(a0, b0, strict=False)),
            "a": {"e0": a0.count("1") / len(a0), "e": a1.count("1") / len(a1), "change": paired_change(a0, a1)},
            "b": {"e0": b0.count("1") / len(b0), "e": b1.count("1") / len(b1), "change": paired_change(b0, b1)},
            "a_minus_b": {"diff": diff[0], "paired_se": diff[1]},
            "by_level": {
                lv: {
                    "a_change": a_levels[lv]["delta"],
                    "b_change": b_levels[lv]["delta"],
                    "a_minus_b": v["delta"],
                    "paired_se": v["paired_se"],
                    "n": v["n"],
                }
                for lv, v in by_level(b1, a1, levels).items()
            },
        }
    prints = (a["_fingerprints"], b["_fingerprints"])
    return {
        "a": str(args.a),
        "b": str(args.b),
        "seed": ca.seed,
        "epoch": epoch,
        "rescore": args.rescore,
        "warm_start_keys": [a["_warm_start"], b["_warm_start"]],
        "same_agent_fingerprint": (
            prints[0].get("agent") == prints[1].get("agent") if prints[0].get("agent") is not None else None
        ),
        "benchmarks": out,
    }


def table(result: dict[str, Any]):
    """The comparison as a table: per benchmark and level, each run's change and A minus B."""
    from rich.table import Table

    t = Table(
        title=f"{result['a']} minus {result['b']}, seed {result['seed']}, epoch {result['epoch']}"
        + (f", re-scored on {result['rescore']} tasks" if result["rescore"] else ""),
        caption="change: epoch 0 to the epoch compared (paired SE); A−B at that epoch (paired SE); "
        f"same agent fingerprint: {result['same_agent_fingerprint']}",
    )
    for col in ("benchmark", "level", "A e0 → e", "B e0 → e", "A − B (SE)", "epoch 0 differs on"):
        t.add_column(col)
    for bench, r in result["benchmarks"].items():
        a, b, d = r["a"], r["b"], r["a_minus_b"]
        t.add_row(
            bench,
            "all",
            f"{a['e0']:.3f} → {a['e']:.3f} ({a['change'][0]:+.3f}, {a['change'][1]:.3f})",
            f"{b['e0']:.3f} → {b['e']:.3f} ({b['change'][0]:+.3f}, {b['change'][1]:.3f})",
            f"{d['diff']:+.3f} ({d['paired_se']:.3f})",
            f"{r['epoch0_differ']} of {r['tasks']}",
        )
        for lv, v in r["by_level"].items():
            t.add_row(
                "",
                lv,
                f"{v['a_change']:+.3f}",
                f"{v['b_change']:+.3f}",
                f"{v['a_minus_b']:+.3f} ({v['paired_se']:.3f})",
                f"n={v['n']}",
            )
    return t
