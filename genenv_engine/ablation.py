"""``genenv bench ablation``: GenEnv against its ablations, every arm and seed an ordinary, resumable session.

The arms are the paper's comparison (Table/Fig. 6) plus one: ``trained`` (GenEnv), ``frozen`` (GenEnv-Random:
the same simulator, never updated), ``static`` (a one-off augmentation before epoch 1), ``off`` (base data only)
and ``uniform`` (the trained simulator without the alpha reward: every valid generation weighted 1). Each
arm x seed is a session folder ``<arm>-s<seed>`` under one bench folder, so a rerun skips finished arms and
resumes a partial one from its last checkpoint; the warm start is cached per seed and shared by every arm of
that seed. The arms must get the same agent compute: the bench refuses a setup in which the arms would train a
different number of tasks, rollouts or optimizer steps per epoch (``agent.tasks_per_epoch`` and
``agent.steps_per_epoch`` fix them). Results are read back from the sessions' databases
(`genenv_engine.ablation_table`), never from memory, so a table always describes what is on disk.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from genenv_engine.config import EXECUTION_FIELDS, ConfigError, RunConfig, config_from_file, load_config

ARMS: dict[str, tuple[dict[str, Any], str]] = {
    "trained": ({"simulator.mode": "trained", "curriculum.reward": "alpha"}, "GenEnv"),
    "frozen": ({"simulator.mode": "frozen", "curriculum.reward": "alpha"}, "GenEnv-Random"),
    "static": ({"simulator.mode": "static", "curriculum.reward": "alpha"}, "Static augmentation"),
    "off": ({"simulator.mode": "off", "curriculum.reward": "alpha"}, "Off (base data only)"),
    "uniform": ({"simulator.mode": "trained", "curriculum.reward": "uniform"}, "Uniform curriculum"),
    "unseen": ({"simulator.mode": "off", "curriculum.reward": "alpha", "agent.base_source": "unseen"},
               "Off on unseen tasks (oracle)"),
}
"""Arm name -> (config overrides that make the arm, the name it has in tables). ``unseen`` is not the paper's: base
data only, but new tasks from the benchmark's own generator that the warm start never saw (`agent.base_source`), the
upper bound of what a simulator could hand the agent."""
DEFAULT_ARMS = ("trained", "frozen", "static", "off", "uniform")
"""The paper's arms, run when ``--arms`` is not given."""

COMPUTE_FIELDS = ("rollouts", "tasks_per_epoch", "steps_per_epoch", "update_epochs", "lr", "minibatch",
                  "temperature", "max_new_tokens", "kl_coef", "clip", "base_levels")
"""Agent settings that must be equal in every arm (what one epoch of agent training costs and does)."""


@dataclass(frozen=True)
class Plan:
    """What one ablation bench runs: arms x seeds, each for ``epochs`` epochs on the same settings."""

    out: Path
    arms: tuple[str, ...] = DEFAULT_ARMS
    seeds: tuple[int, ...] = (0, 1, 2)
    epochs: int | None = None
    preset: str | None = "ablation"
    config_file: Path | None = None
    benchmarks: tuple[str, ...] | None = None
    sets: dict[str, Any] = field(default_factory=dict)
    records: Path | None = None
    """Run records folder (`genenv_engine.run_records`); None: ``out/records``."""

    def records_folder(self) -> Path:
        """Where this bench writes and reads its run records."""
        return self.records if self.records is not None else self.out / "records"

    def __post_init__(self) -> None:
        for arm in self.arms:
            if arm not in ARMS:
                raise ConfigError("--arms", f"unknown arm {arm!r}; known: {', '.join(ARMS)}")
        if not self.arms or not self.seeds:
            raise ConfigError("--arms/--seeds", "name at least one arm and one seed")


def folder_name(arm: str, seed: int) -> str:
    """The session folder of one arm and seed inside the bench folder.

    >>> folder_name("trained", 2)
    'trained-s2'
    """
    return f"{arm}-s{seed}"


def arm_config(plan: Plan, arm: str, seed: int) -> RunConfig:
    """The run config of one arm x seed: the plan's preset/file and ``--set`` values, then the arm's switch."""
    overrides: dict[str, Any] = dict(plan.sets)
    overrides["seed"] = seed
    if plan.epochs is not None:
        overrides["epochs"] = plan.epochs
    if plan.benchmarks is not None:
        overrides["benchmarks"] = list(plan.benchmarks)
    overrides.update(ARMS[arm][0])
    preset = None if plan.config_file is not None and plan.preset is None else plan.preset
    return load_config(preset, plan.config_file, overrides)


def check_equal_compute(configs: dict[str, RunConfig]) -> dict[str, Any]:
    """Raise ConfigError unless every arm trains the same tasks x rollouts and optimizer steps per epoch.

    Returns the shared agent budget (stated in the bench's output).
    """
    budgets = {arm: {name: getattr(cfg.agent, name) for name in COMPUTE_FIELDS} for arm, cfg in configs.items()}
    first_arm, first = next(iter(budgets.items()))
    if not first["tasks_per_epoch"] or not first["steps_per_epoch"]:
        raise ConfigError("agent.tasks_per_epoch", "the arms would get different agent compute: set "
                          "agent.tasks_per_epoch and agent.steps_per_epoch (the ablation preset does)")
    for arm, budget in budgets.items():
        for name, value in budget.items():
            if value != first[name]:
                raise ConfigError(f"agent.{name}", f"differs between arms {first_arm} ({first[name]}) and {arm} "
                                  f"({value})")
    cfg = next(iter(configs.values()))
    return {**first, "rollouts_per_epoch": first["tasks_per_epoch"] * first["rollouts"],
            "heldout_size": cfg.heldout_size, "benchmarks": list(cfg.benchmarks)}


HOW_FIELDS = EXECUTION_FIELDS + ("threads",)
"""Model fields that say how a run computes, not what (`_same_run` ignores them): two seeds run side by side on
one thread each belong in one table with a seed run alone on two. ``threads`` can change float rounding, so the
warm-start key keeps it: arms of one seed at other thread counts start from different warm starts, which the
tables flag (`genenv_engine.ablation_table.warm_start_mismatches`)."""


def _same_run(saved: RunConfig, wanted: RunConfig) -> bool:
    """Whether a session folder was made with the settings this plan asks for (the epoch count and the preset's
    name may differ: a preset is a named set of settings, so `--preset smol-ablation --set …` can equal `smol-l3`;
    so may the `HOW_FIELDS`)."""
    a, b = saved.to_dict(), wanted.to_dict()
    for d in (a, b):
        d.pop("epochs", None)
        d.pop("preset", None)
        for name in HOW_FIELDS:
            d.get("model", {}).pop(name, None)
    return a == b


def open_or_create(plan: Plan, arm: str, seed: int):
    """The arm x seed session: opened (its target epochs raised if needed) when the folder holds the same run,
    created when it holds none; a folder holding another run is an error (nothing in it is touched)."""
    from genenv_engine.session import Session

    wanted = arm_config(plan, arm, seed)
    folder = plan.out / folder_name(arm, seed)
    if (folder / "config.toml").exists():
        saved = config_from_file(folder / "config.toml")
        if not _same_run(saved, wanted):
            raise ConfigError(str(folder), "holds a session with other settings; use another --out folder")
        session = Session.open(folder)
        if session.config.epochs != wanted.epochs:
            session.set_epochs(wanted.epochs)
        return session
    return Session.create(wanted, folder)


def recorded_run(plan: Plan, arm: str, seed: int) -> Path | None:
    """The record standing for this arm x seed when its folder holds no session (None: run it); a record made
    with other settings is an error, as a session folder with other settings is."""
    from genenv_engine.run_records import read_record, record_path

    if (plan.out / folder_name(arm, seed) / "config.toml").exists():
        return None
    path = record_path(plan.records_folder(), arm, seed)
    run = read_record(path)
    if run is None:
        return None
    if not _same_run(run["_config"], arm_config(plan, arm, seed)):
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
                print(f"{self.label} epoch {event.epoch}: heldout {held} p_hat "
                      f"{'-' if p_hat is None else f'{p_hat:.3f}'}", flush=True)
        elif kind == "WarmStartProgressed":
            self.progress.update(self.task_id, description=f"{self.label} warm start {event.role} "
                                 f"{event.step}/{event.steps}")
        elif kind == "PhaseStarted":
            self.progress.update(self.task_id, description=f"{self.label} e{event.epoch} {event.phase}")


def run_plan(plan: Plan, quiet: bool = False) -> dict[str, Any]:
    """Run every unfinished arm x seed (seed-major, so one seed's warm start is made once and reused), then
    write the tables; returns the collected results."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from genenv_engine.ablation_table import collect, write_outputs
    from genenv_engine.events import RunControl
    from genenv_engine.loop import run

    configs = {arm: arm_config(plan, arm, plan.seeds[0]) for arm in plan.arms}
    budget = check_equal_compute(configs)
    plan.out.mkdir(parents=True, exist_ok=True)
    print(f"ablation: {len(plan.arms)} arms x {len(plan.seeds)} seeds, {configs[plan.arms[0]].epochs} epochs, "
          f"agent budget per epoch: {budget['tasks_per_epoch']} tasks x {budget['rollouts']} rollouts = "
          f"{budget['rollouts_per_epoch']} rollouts, {budget['steps_per_epoch']} optimizer steps x "
          f"{budget['update_epochs']} passes", flush=True)
    started = time.perf_counter()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  disable=quiet) as progress:
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
    results = collect(plan.out, plan.arms, plan.seeds, records=plan.records_folder())
    results["bench_seconds"] = round(time.perf_counter() - started, 1)
    write_outputs(plan.out, results)
    return results


def add_parser(what: Any) -> None:
    """Register ``genenv bench ablation`` on the bench subparsers."""
    p = what.add_parser("ablation", help="GenEnv vs its ablations (trained/frozen/static/off/uniform) over seeds")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--preset", help="preset every arm starts from (default: ablation)")
    src.add_argument("--config", type=Path, help="a TOML config file every arm starts from")
    p.add_argument("--arms", default=",".join(DEFAULT_ARMS),
                   help=f"comma list of arms (default {','.join(DEFAULT_ARMS)}; also: "
                        f"{','.join(a for a in ARMS if a not in DEFAULT_ARMS)})")
    p.add_argument("--seeds", default="0,1,2", help="comma list of seeds (default 0,1,2)")
    p.add_argument("--epochs", type=int, help="epochs per arm (default: the preset's)")
    p.add_argument("--benchmarks", help="comma list of benchmarks, or 'all'")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override for every arm")
    p.add_argument("--out", type=Path, default=Path("sessions/ablation"), help="bench folder (default sessions/ablation)")
    p.add_argument("--records", type=Path, metavar="DIR",
                   help="run records (one small JSON per arm x seed, committable): every session read is recorded "
                        "here, and an arm x seed without a session folder is read from its record instead of run "
                        "(default: OUT/records)")
    p.add_argument("--report-only", action="store_true", help="only re-read the sessions and rewrite the tables")
    p.add_argument("--quiet", action="store_true", help="no progress bars; one line per arm epoch")
    p.add_argument("--rescore", type=int, metavar="N",
                   help="re-read only, with held-out re-scored from the saved checkpoints (epoch 0 and the last "
                        "epochs) on the first N held-out tasks; writes rescore-N.md/.json")


def plan_from_args(args: argparse.Namespace) -> Plan:
    """The Plan the command line asks for."""
    from genenv_engine.config import parse_sets

    sets = parse_sets(args.set)
    seeds = tuple(int(s) for s in args.seeds.split(",") if s.strip())
    arms = tuple(a.strip() for a in args.arms.split(",") if a.strip())
    benchmarks = tuple(b.strip() for b in args.benchmarks.split(",")) if args.benchmarks else None
    preset = args.preset if args.preset or args.config else "ablation"
    return Plan(args.out, arms, seeds, args.epochs, preset, args.config, benchmarks, sets, args.records)


def main(args: argparse.Namespace) -> int:
    """Entry point of ``genenv bench ablation``: 0 whatever the results (a bench never fails on them)."""
    from genenv_engine.ablation_table import collect, output_names, print_summary, write_outputs

    plan = plan_from_args(args)
    if args.rescore is not None and args.rescore < 1:
        raise ConfigError("--rescore", "must be a number of held-out tasks >= 1")
    if args.report_only or args.rescore:
        results = collect(plan.out, plan.arms, plan.seeds, rescore=args.rescore, records=plan.records_folder())
        write_outputs(plan.out, results)
    else:
        results = run_plan(plan, quiet=args.quiet)
    print_summary(results)
    json_name, md_name = output_names(results)
    print(f"wrote {plan.out / md_name} and {plan.out / json_name}")
    return 0
