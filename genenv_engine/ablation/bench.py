"""``genenv bench ablation``: GenEnv against its ablations, every arm and seed an ordinary, resumable session.

The arms are the paper's comparison (Table/Fig. 6) plus one: ``trained`` (GenEnv), ``frozen`` (GenEnv-Random:
the same simulator, never updated), ``static`` (a one-off augmentation before epoch 1), ``off`` (base data only)
and ``uniform`` (the trained simulator without the alpha reward: every valid generation weighted 1). Each
arm x seed is a session folder ``<arm>-s<seed>`` under one bench folder, so a rerun skips finished arms and
resumes a partial one from its last checkpoint; the warm start is cached per seed and shared by every arm of
that seed. The arms must get the same agent compute: the bench refuses a setup in which the arms would train a
different number of tasks, rollouts or optimizer steps per epoch (``agent.tasks_per_epoch`` and
``agent.steps_per_epoch`` fix them). Results are read back from the sessions' databases
(`genenv_engine.ablation.tables`), never from memory, so a table always describes what is on disk.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from genenv_engine.ablation.arms import (
    ARMS,
    DEFAULT_ARMS,
    Plan,
    arm_config,
    check_equal_compute,
    folder_name,
    same_run,
)
from genenv_engine.ablation.markdown import epoch0_text, fmt, markdown, versus_cells
from genenv_engine.ablation.plots import plots
from genenv_engine.config import config_from_file, parse_sets
from genenv_engine.core.errors import ConfigError


def open_or_create(plan: Plan, arm: str, seed: int):
    """The arm x seed session: opened (its target epochs raised if needed) when the folder holds the same run,
    created when it holds none; a folder holding another run is an error (nothing in it is touched)."""
    from genenv_engine.storage.session import Session

    wanted = arm_config(plan, arm, seed)
    folder = plan.out / folder_name(arm, seed)
    if (folder / "config.toml").exists():
        saved = config_from_file(folder / "config.toml")
        if not same_run(saved, wanted):
            raise ConfigError(str(folder), "holds a session with other settings; use another --out folder")
        session = Session.open(folder)
        if session.config.epochs != wanted.epochs:
            session.set_epochs(wanted.epochs)
        return session
    return Session.create(wanted, folder)


def recorded_run(plan: Plan, arm: str, seed: int) -> Path | None:
    """The record standing for this arm x seed when its folder holds no session (None: run it); a record made
    with other settings is an error, as a session folder with other settings is."""
    from genenv_engine.ablation.run_records import read_record, record_path

    if (plan.out / folder_name(arm, seed) / "config.toml").exists():
        return None
    path = record_path(plan.records_folder(), arm, seed)
    run = read_record(path)
    if run is None:
        return None
    if not same_run(run["_config"], arm_config(plan, arm, seed)):
        raise ConfigError(str(path), "records a run with other settings; use another --records folder")
    return path


class _ArmSink:
    """Progress of one arm's run: a rich bar over its epochs, the current phase as the bar's text."""

    def __init__(self, progress: Any, task_id: Any, label: str, quiet: bool) -> None:
        self.progress, self.task_id, self.label, self.quiet = progress, task_id, label, quiet

    def __call__(self, event: Any) -> None:
        kind = event.kind
        if kind == "EpochFinished":
            self.progress.update(self.task_id, completed=event.epoch + 1, description=f"{self.label}")
            if self.quiet:
                held = " ".join(f"{k}={v:.3f}" for k, v in event.metrics.get("heldout", {}).items())
                p_hat = event.metrics.get("generated_success")
                print(
                    f"{self.label} epoch {event.epoch}: heldout {held} p_hat "
                    f"{'-' if p_hat is None else f'{p_hat:.3f}'}",
                    flush=True,
                )
        elif kind == "WarmStartProgressed":
            self.progress.update(
                self.task_id, description=f"{self.label} warm start {event.role} {event.step}/{event.steps}"
            )
        elif kind == "PhaseStarted":
            self.progress.update(self.task_id, description=f"{self.label} e{event.epoch} {event.phase}")


def run_plan(plan: Plan, quiet: bool = False) -> dict[str, Any]:
    """Run every unfinished arm x seed (seed-major, so one seed's warm start is made once and reused), writing each
    one's run record as soon as it finishes (a bench stopped later keeps it), then write the tables; returns the
    collected results."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from genenv_engine.ablation.run_records import write_record
    from genenv_engine.ablation.runs import read_session
    from genenv_engine.ablation.tables import collect
    from genenv_engine.core.events import RunControl
    from genenv_engine.method.loop import run

    configs = {arm: arm_config(plan, arm, plan.seeds[0]) for arm in plan.arms}
    budget = check_equal_compute(configs)
    plan.out.mkdir(parents=True, exist_ok=True)
    print(
        f"ablation: {len(plan.arms)} arms x {len(plan.seeds)} seeds, {configs[plan.arms[0]].epochs} epochs, "
        f"agent budget per epoch: {budget['tasks_per_epoch']} tasks x {budget['rollouts']} rollouts = "
        f"{budget['rollouts_per_epoch']} rollouts, {budget['steps_per_epoch']} optimizer steps x "
        f"{budget['update_epochs']} passes",
        flush=True,
    )
    started = time.perf_counter()
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), disable=quiet
    ) as progress:
        for seed in plan.seeds:
            for arm in plan.arms:
                recorded = recorded_run(plan, arm, seed)
                if recorded is not None:
                    progress.add_task(f"{folder_name(arm, seed)} (recorded: {recorded})", total=1, completed=1)
                    continue
                session = open_or_create(plan, arm, seed)
                target = session.config.epochs
                done = session.store.last_finished_epoch()
                label = folder_name(arm, seed)
                task_id = progress.add_task(label, total=target + 1, completed=done + 1)
                if done >= target:
                    progress.update(task_id, description=f"{label} (done)")
                    continue
                run(session, _ArmSink(progress, task_id, label, quiet), RunControl())
                session.store.close()
                finished = read_session(plan.out / label)
                if finished is not None:
                    write_record(plan.records_folder(), arm, seed, finished)
    results = collect(plan.out, plan.arms, plan.seeds, records=plan.records_folder())
    results["bench_seconds"] = round(time.perf_counter() - started, 1)
    write_outputs(plan.out, results)
    return results


def output_names(results: dict[str, Any]) -> tuple[str, str]:
    """The JSON and Markdown file names: ``ablation.*``, or ``rescore-<n>.*`` for re-scored held-out."""
    stem = f"rescore-{results['rescore']}" if results.get("rescore") else "ablation"
    return f"{stem}.json", f"{stem}.md"


def write_outputs(out: Path, results: dict[str, Any]) -> None:
    """``ablation.json``, ``ablation.md`` and the two plots, written into the bench folder (re-scored held-out:
    ``rescore-<n>.json`` and ``.md`` only, the plots of the full run stay)."""
    out.mkdir(parents=True, exist_ok=True)
    json_name, md_name = output_names(results)
    (out / json_name).write_text(json.dumps(results, indent=1, default=str))
    (out / md_name).write_text(markdown(results))
    if results["runs"] and not results.get("rescore"):
        for name, png in plots(results).items():
            (out / name).write_bytes(png)


def print_summary(results: dict[str, Any]) -> None:
    """The final table on the terminal (rich), then every pairing of arms whose epoch-0 agents differ."""
    from rich.console import Console
    from rich.table import Table

    s = results["summary"]
    for bench in results["benchmarks"]:
        table = Table(title=f"ablation: {bench}, seeds {','.join(map(str, results['seeds']))} (mean ± sd)")
        for col in ("arm", "held-out e0", "final", "Δ", "up>2SE", "p̂ final", "first in band", "tasks/epoch"):
            table.add_column(col)
        for arm in results["arms"]:
            row = s.get(arm)
            if not row or bench not in row:
                continue
            b = row[bench]
            table.add_row(
                arm,
                fmt(b["epoch0"], b["epoch0_sd"]),
                fmt(b["final"], b["final_sd"]),
                fmt(b["delta"], b["delta_sd"]),
                f"{b['seeds_up_2se']}/{len(b['per_seed'])}",
                fmt(row["final_p_hat"]),
                fmt(row["first_epoch_in_band"]),
                fmt(row["final_tasks_trained"], digits=0),
            )
        Console().print(table)
        pairs = [v for v in s.get("_versus", []) if v["benchmark"] == bench]
        if pairs:
            versus_table = Table(title=f"arm − arm on the same held-out tasks: {bench}")
            for col in ("pair", "mean ± sd", "per seed (paired SE) @ epoch", "first > 2SE", "second > 2SE"):
                versus_table.add_column(col)
            for v in pairs:
                n = len(v["per_seed"])
                versus_table.add_row(
                    f"{v['a']} − {v['b']}",
                    fmt(v["mean"], v["sd"]),
                    versus_cells(v),
                    f"{v['a_above_2se']}/{n}",
                    f"{v['b_above_2se']}/{n}",
                )
            Console().print(versus_table)
    for m in results.get("warm_start_mismatches") or []:
        Console().print(
            f"⚠ seed {m['seed']}: {m['a']} and {m['b']} started from different epoch-0 agents "
            f"({epoch0_text(m, m['a'], m['b'])}); their differences include the epoch-0 agents'",
            style="bold red",
            markup=False,
        )


def add_parser(what: Any) -> None:
    """Register ``genenv bench ablation`` on the bench subparsers."""
    p = what.add_parser("ablation", help="GenEnv vs its ablations (trained/frozen/static/off/uniform) over seeds")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--preset", help="preset every arm starts from (default: ablation)")
    src.add_argument("--config", type=Path, help="a TOML config file every arm starts from")
    p.add_argument(
        "--arms",
        default=",".join(DEFAULT_ARMS),
        help=f"comma list of arms (default {','.join(DEFAULT_ARMS)}; also: "
        f"{','.join(a for a in ARMS if a not in DEFAULT_ARMS)})",
    )
    p.add_argument("--seeds", default="0,1,2", help="comma list of seeds (default 0,1,2)")
    p.add_argument("--epochs", type=int, help="epochs per arm (default: the preset's)")
    p.add_argument("--benchmarks", help="comma list of benchmarks, or 'all'")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override for every arm")
    p.add_argument(
        "--out", type=Path, default=Path("sessions/ablation"), help="bench folder (default sessions/ablation)"
    )
    p.add_argument(
        "--records",
        type=Path,
        metavar="DIR",
        help="run records (one small JSON per arm x seed, committable): every session read is recorded "
        "here, and an arm x seed without a session folder is read from its record instead of run "
        "(default: OUT/records)",
    )
    p.add_argument("--report-only", action="store_true", help="only re-read the sessions and rewrite the tables")
    p.add_argument("--quiet", action="store_true", help="no progress bars; one line per arm epoch")
    p.add_argument(
        "--rescore",
        type=int,
        metavar="N",
        help="re-read only, with held-out re-scored from the saved checkpoints (epoch 0 and the last "
        "epochs) on the first N held-out tasks; writes rescore-N.md/.json",
    )


def plan_from_args(args: argparse.Namespace) -> Plan:
    """The Plan the command line asks for."""
    sets = parse_sets(args.set)
    seeds = tuple(int(s) for s in args.seeds.split(",") if s.strip())
    arms = tuple(a.strip() for a in args.arms.split(",") if a.strip())
    benchmarks = tuple(b.strip() for b in args.benchmarks.split(",")) if args.benchmarks else None
    preset = args.preset if args.preset or args.config else "ablation"
    return Plan(args.out, arms, seeds, args.epochs, preset, args.config, benchmarks, sets, args.records)


def main(args: argparse.Namespace) -> int:
    """Entry point of ``genenv bench ablation``: 0 whatever the results (a bench never fails on them)."""
    plan = plan_from_args(args)
    if args.rescore is not None and args.rescore < 1:
        raise ConfigError("--rescore", "must be a number of held-out tasks >= 1")
    if args.report_only or args.rescore:
        from genenv_engine.ablation.tables import collect

        results = collect(plan.out, plan.arms, plan.seeds, rescore=args.rescore, records=plan.records_folder())
        write_outputs(plan.out, results)
    else:
        results = run_plan(plan, quiet=args.quiet)
    print_summary(results)
    json_name, md_name = output_names(results)
    print(f"wrote {plan.out / md_name} and {plan.out / json_name}")
    return 0
