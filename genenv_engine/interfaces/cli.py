"""The headless command line: ``genenv run``, ``genenv resume``, ``genenv status`` and ``genenv presets``.

Runs the same engine the console drives, with rich progress bars, for long jobs on a GPU box or
in CI. Ctrl-C asks the loop to stop at its next check, leaving the session resumable.

Bad input never gives a traceback: a config error, a damaged session (database, checkpoint, a file
where a folder should be, a newer schema) or an impossible request prints one ``genenv: ...`` line
naming the file and what to do, and exits 2 without changing anything.
"""

from __future__ import annotations

import argparse
import json
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any

import genenv_engine
from genenv_engine.config import SIMULATOR_MODES, ConfigError, load_config, parse_sets, preset_names
from genenv_engine.core.errors import SessionBusy, SessionUnwritable
from genenv_engine.interfaces.loggers import LOGGERS
from genenv_engine.storage.session import SessionError


def version_line() -> str:
    """What ``genenv --version`` prints: the distribution this command comes from (`genenv_engine.DISTRIBUTION`, not
    the unrelated ``genenv`` on the package index, which installs a ``genenv`` command too), its installed version,
    and the folder ``genenv_engine`` is imported from."""
    import importlib.metadata

    try:
        version = importlib.metadata.version(genenv_engine.DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        version = f"{genenv_engine.__version__} (not installed)"
    return f"{genenv_engine.DISTRIBUTION} {version} (genenv_engine in {Path(genenv_engine.__file__).parent})"


class _VersionAction(argparse.Action):
    """``--version``: print `version_line` (read only when asked) and exit 0."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(version_line())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="genenv", description="GenEnv co-evolution of an agent and an environment simulator."
    )
    parser.add_argument(
        "--version",
        action=_VersionAction,
        help=f"print the distribution ({genenv_engine.DISTRIBUTION}), its version and where it runs from, and exit",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="start a new session and run it")
    src = run.add_mutually_exclusive_group()
    src.add_argument("--preset", help=f"built-in preset ({', '.join(preset_names())}); default tiny")
    src.add_argument("--config", type=Path, help="a TOML config file (may name a preset)")
    run.add_argument("--session", type=Path, help="session folder to create (default sessions/<preset>-<mode>-<time>)")
    run.add_argument("--epochs", type=int, help="co-evolution epochs after the warm start")
    run.add_argument("--seed", type=int, help="seed for splits, warm start and sampling")
    run.add_argument(
        "--benchmarks",
        help="comma-separated benchmarks to enable, or 'all': built-in names, names of "
        "installed genenv.environments entry points, or module:Class (docs/guide/environments.md)",
    )
    run.add_argument(
        "--data-dir",
        action="append",
        default=[],
        metavar="BENCH=PATH",
        help="upstream data for a benchmark (its held-out split), e.g. bamboogle=~/bamboogle.csv",
    )
    run.add_argument("--simulator-mode", choices=SIMULATOR_MODES, help="ablation mode")
    run.add_argument("--curriculum", choices=("alpha", "uniform", "grounded"), help="simulator reward")
    run.add_argument(
        "--base-model", metavar="PATH", help="local checkpoint both roles start from (sets model.kind = hf, model.path)"
    )
    run.add_argument("--agent-model", metavar="PATH", help="local checkpoint of the agent alone (model.agent_path)")
    run.add_argument(
        "--simulator-model", metavar="PATH", help="local checkpoint of the simulator alone (model.simulator_path)"
    )
    run.add_argument(
        "--lora",
        choices=("agent", "simulator", "both"),
        help="tune these roles as LoRA adapters (model.<role>_tuning = lora); others fully",
    )
    run.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override any config value, e.g. --set curriculum.beta=10 (repeatable)",
    )
    run.add_argument(
        "--ray",
        metavar="local|ADDRESS",
        type=_ray_address,
        help="run the agent's rollouts on Ray workers: a new local instance or a cluster address (ray extra)",
    )
    run.add_argument("--quiet", action="store_true", help="no progress bars, one line per epoch")
    _trainer_options(run, "native (default): genenv's GRPO; trl: TRL's GRPOTrainer in this process (trl extra)")
    run.add_argument(
        "--log",
        action="append",
        default=[],
        choices=LOGGERS,
        help="also log each epoch to TensorBoard, W&B or Trackio (offline; under SESSION/logs; repeatable)",
    )
    resume = sub.add_parser("resume", help="continue a session from its last finished epoch")
    resume.add_argument("session", type=Path)
    resume.add_argument("--epochs", type=int, help="new total number of epochs")
    resume.add_argument(
        "--ray",
        metavar="local|ADDRESS|none",
        type=_ray_address,
        help="from now on run the rollouts on Ray workers (a new local instance or a cluster address), "
        "or in this process (none); default: where the session ran them",
    )
    resume.add_argument(
        "--rescore-heldout",
        action="store_true",
        help="first check every stored held-out answer of the finished epochs again with the "
        "environments as they are now (a fixed plugin) and update those whose verdict changed",
    )
    resume.add_argument("--quiet", action="store_true")
    _trainer_options(resume, "default: the trainer the session ran with")
    resume.add_argument(
        "--log",
        action="append",
        default=[],
        choices=LOGGERS,
        help="as for run: a resumed session continues the same logged run",
    )
    status = sub.add_parser("status", help="per-epoch metrics of a session")
    status.add_argument("session", type=Path)
    status.add_argument("--json", action="store_true", help="print JSON")
    sub.add_parser("presets", help="list the built-in presets")
    bench = sub.add_parser("benchmarks", help="list the benchmarks with granularity, source and sizes")
    bench.add_argument("--data-dir", action="append", default=[], metavar="BENCH=PATH")
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("--json", action="store_true")
    tasks = sub.add_parser("tasks", help="a session's tasks as datasets: export (JSONL/Parquet, veRL layout), import")
    tasks_sub = tasks.add_subparsers(dest="tasks_command", required=True)
    export = tasks_sub.add_parser("export", help="write the session's tasks (filtered as on the tasks screen)")
    export.add_argument("session", type=Path)
    export.add_argument(
        "--format",
        choices=("jsonl", "parquet", "verifiers"),
        default="jsonl",
        help="a file in the veRL layout with reward.py beside it, or a verifiers taskset package",
    )
    export.add_argument(
        "--out",
        type=Path,
        default=None,
        help="file to write (default SESSION/export/tasks.FORMAT); for verifiers the folder to write the package in",
    )
    export.add_argument("--name", default=None, help="verifiers: the package name (default genenv_<session folder>)")
    export.add_argument("--benchmark", default=None)
    export.add_argument("--origin", default=None, help="seed, generated, edited, static, imported, ...")
    export.add_argument("--status", default=None, help="active, pinned or banned")
    export.add_argument("--epoch", type=int, default=None)
    export.add_argument("--valid", choices=("yes", "no"), default=None, help="only valid (or only rejected) tasks")
    export.add_argument("--p-min", type=float, default=None, help="lowest p-hat")
    export.add_argument("--p-max", type=float, default=None, help="highest p-hat")
    export.add_argument("--text", default=None, help="a word search, as the tasks screen's /")
    export.add_argument(
        "--include-rejected",
        action="store_true",
        help="also the simulator's rejected drafts (empty gold; --valid no implies it); by default "
        "only admitted tasks: valid ones and the split tasks",
    )
    imp = tasks_sub.add_parser(
        "import",
        help="validate a file's rows (JSONL/Parquet/CSV/JSON; veRL layout or the "
        "benchmark's upstream one) and add the valid ones to the session",
    )
    imp.add_argument("session", type=Path)
    imp.add_argument("benchmark")
    imp.add_argument("file", type=Path)
    imp.add_argument(
        "--split",
        choices=("train", "seed"),
        default="train",
        help="the agent's training pool (train) or the simulator's conditioning seeds (seed)",
    )
    export_model = sub.add_parser("export-model", help="a trained role as a plain Hugging Face model folder")
    export_model.add_argument("session", type=Path)
    export_model.add_argument("--out", type=Path, required=True, help="the new folder to write")
    export_model.add_argument("--epoch", type=int, default=None, help="which epoch's checkpoint (default: the latest)")
    export_model.add_argument("--role", choices=("agent", "simulator"), default="agent")
    export_model.add_argument("--merge", action="store_true", help="fold a LoRA adapter into its base weights")
    from genenv_engine.interfaces.bench_command import add_bench_parser
    from genenv_engine.interfaces.env_command import add_env_parser
    from genenv_engine.reports import add_report_parser

    add_report_parser(sub)
    add_bench_parser(sub)
    add_env_parser(sub)
    return parser


def _ray_address(text: str) -> str:
    """``--ray``'s value as ``ray.address``: ``none`` (or nothing) is ``""``, in this process.

    >>> _ray_address("none"), _ray_address("local"), _ray_address("10.0.0.1:6379")
    ('', 'local', '10.0.0.1:6379')
    """
    return "" if text.strip().lower() in ("", "none") else text.strip()


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Only what the user typed overrides the preset or file."""
    out: dict[str, Any] = {}
    for key, name in (
        ("epochs", "epochs"),
        ("seed", "seed"),
        ("simulator.mode", "simulator_mode"),
        ("curriculum.reward", "curriculum"),
        ("ray.address", "ray"),
    ):
        if getattr(args, name) is not None:
            out[key] = getattr(args, name)
    if args.base_model:
        out["model.kind"], out["model.path"] = "hf", args.base_model
    for key, name in (("model.agent_path", "agent_model"), ("model.simulator_path", "simulator_model")):
        if getattr(args, name):
            out[key] = getattr(args, name)
    if args.lora:
        for role in ("agent", "simulator"):
            out[f"model.{role}_tuning"] = "lora" if args.lora in (role, "both") else "full"
    if args.benchmarks:
        out["benchmarks"] = [b.strip() for b in args.benchmarks.split(",") if b.strip()]
    if args.data_dir:
        out["data_dirs"] = _pairs(args.data_dir, "--data-dir")
    out.update(parse_sets(args.set))
    return out


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(flag, f"expected BENCH=PATH, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def benchmarks_table(data_dirs: dict[str, str], seed: int = 0) -> list[dict[str, Any]]:
    """Every built-in benchmark, then every one an installed package registers, with its granularity, source and
    split sizes (built as a run builds them: a level out of new prompts stops it with `SplitsExhausted`'s line)."""
    from genenv_engine.core.errors import SplitsExhausted
    from genenv_engine.environments import BENCHMARKS, entry_point_names, get_environment

    names = [*BENCHMARKS, *entry_point_names()]
    for name, path in data_dirs.items():
        if name not in names:
            raise ConfigError(f"data_dirs.{name}", f"unknown benchmark {name!r}")
        if not Path(path).expanduser().exists():
            raise ConfigError(f"data_dirs.{name}", f"no such file or folder: {path}")
    rows = []
    for name in names:
        try:
            rows.append(get_environment(name, seed, data_dir=data_dirs.get(name)).describe())
        except SplitsExhausted:
            raise
        except (ImportError, RuntimeError, ConfigError) as exc:  # an optional package or a plugin is missing
            rows.append({"name": name, "granularity": "step", "source": f"unavailable: {exc}", "sizes": {}})
    return rows


def status_json(session_dir: Path) -> dict[str, Any]:
    """The session's per-epoch metrics in the documented ``genenv status --json`` shape, with each epoch's
    ``validity`` per benchmark that had drafts: drafts, valid (kept by the validator and the duplicate cap), their
    fraction, the rejections counted by reason (`genenv_engine.storage.store.funnel_validity`) and how the valid ones
    were admitted (`genenv_engine.storage.store.with_admitted`), and its ``plugin_faults`` (benchmark -> where ->
    kind -> items a plugin's fault failed; counted from the stored rows for an epoch whose metrics lack them)."""
    from genenv_engine.storage.session import Session

    session = Session.open(session_dir, check=True)
    from genenv_engine.interfaces.loggers import STATUS_KEYS
    from genenv_engine.storage.store import funnel_validity, with_admitted

    validity = funnel_validity(session.store.funnel())
    rows = session.store.epoch_metrics()
    stored = session.store.plugin_faults([m["epoch"] for m in rows if m.get("plugin_faults") is None])
    epochs = [
        {
            "epoch": m["epoch"],
            "status": m["status"],
            **{k: m.get(k) for k in STATUS_KEYS},
            "plugin_faults": stored.get(m["epoch"], {}) if m.get("plugin_faults") is None else m["plugin_faults"],
            "validity": with_admitted(validity.get(m["epoch"], {}), m.get("admitted") or {}),
        }
        for m in rows
    ]
    cfg = session.config
    return {
        "session": str(session_dir),
        "preset": cfg.preset,
        "simulator_mode": cfg.simulator.mode,
        "target_epochs": cfg.epochs,
        "epochs": epochs,
    }


def _trainer_options(parser: argparse.ArgumentParser, which: str) -> None:
    parser.add_argument("--agent-trainer", choices=("native", "trl"), help=f"what trains the agent: {which}")
    parser.add_argument(
        "--trl-steps", type=int, metavar="N", help="with trl: TRL optimizer steps per genenv epoch (default 8)"
    )
    parser.add_argument(
        "--trl-batch",
        type=int,
        metavar="N",
        help="with trl: completions per TRL step, a multiple of agent.rollouts (default 2 x agent.rollouts)",
    )


def _run(session, quiet: bool, log: list[str] | tuple[str, ...] = (), args: argparse.Namespace | None = None) -> int:
    from genenv_engine.core.events import RunControl
    from genenv_engine.integrations.trl_run import run_session
    from genenv_engine.interfaces.loggers import logging_sink, make_loggers
    from genenv_engine.storage.progress import ConsoleReporter

    trainer = getattr(args, "agent_trainer", None)  # None (resume): as the session ran
    control = RunControl()
    signal.signal(signal.SIGINT, lambda *_: (control.stop(), signal.signal(signal.SIGINT, signal.default_int_handler)))
    loggers = make_loggers(session, list(log))
    try:
        with ConsoleReporter(session, quiet=quiet) as reporter:
            sink = logging_sink(session, loggers, reporter) if loggers else reporter
            steps, batch = getattr(args, "trl_steps", None), getattr(args, "trl_batch", None)
            summary = run_session(session, sink, control, trainer=trainer, steps_per_epoch=steps, batch=batch)
    finally:
        for logger in loggers:
            logger.close()
    if "stopped_at" in summary:
        print(f"stopped; resume with: genenv resume {session.path}")
        return 130
    print(f"done: {summary['epochs_done']} epochs in {session.path}")
    return 0


def _tasks(args: argparse.Namespace) -> int:
    from genenv_engine.interfaces import interop
    from genenv_engine.storage.store import TaskFilter

    if not (args.session / "genenv.db").exists():
        raise FileNotFoundError(f"{args.session} is not a genenv session (no genenv.db)")
    if args.tasks_command == "export":
        where = TaskFilter(
            benchmark=args.benchmark,
            origin=args.origin,
            status=args.status,
            epoch=args.epoch,
            valid=None if args.valid is None else args.valid == "yes",
            p_min=args.p_min,
            p_max=args.p_max,
            text=args.text,
        )
        if args.format == "verifiers":
            from genenv_engine.interfaces.interop.verifiers_export import export_verifiers

            if args.out is None:
                raise ValueError("--format verifiers needs --out DIR (the folder the package is written in)")
            path, n = export_verifiers(args.session, args.out, args.name, where, args.include_rejected)
            print(
                f"wrote {n} tasks as the verifiers taskset {path.name} in {path}; load it with {args.out} on "
                f"PYTHONPATH: vf.load_taskset(vf.TasksetConfig(id={path.name!r}))"
            )
            return 0
        path, n = interop.export_tasks(args.session, args.out, args.format, where, args.include_rejected)
        print(f"wrote {n} tasks to {path}")
        return 0
    result = interop.import_tasks(args.session, args.benchmark, args.file, args.split)
    for row, reason in result.rejected:
        print(f"row {row}: rejected: {reason}", file=sys.stderr)
    print(
        f"imported {len(result.added)} tasks from {result.rows} rows into {args.session}"
        + (f" ({result.added[0]} ... {result.added[-1]})" if result.added else "")
    )
    return 0 if result.added or not result.rejected else 1


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``genenv`` command (and ``python -m genenv_engine``)."""
    from genenv_engine.backends.openmp import choose_spin

    choose_spin()  # before anything loads torch
    args = build_parser().parse_args(argv)
    try:
        if args.command == "presets":
            print("\n".join(preset_names()))
            return 0
        if args.command == "benchmarks":
            rows = benchmarks_table(_pairs(args.data_dir, "--data-dir"), args.seed)
            if args.json:
                print(json.dumps(rows, indent=2))
            else:
                width = max(len(r["name"]) for r in rows)
                for r in rows:
                    sizes = " ".join(f"{k}={v}" for k, v in r["sizes"].items())
                    print(f"{r['name']:<{width}} {r['granularity']:<8} {r['source']:<16} {sizes}")
            return 0
        if args.command == "status":
            data = status_json(args.session)
            if args.json:
                print(json.dumps(data, indent=2))
            else:
                from genenv_engine.storage.progress import print_status

                print_status(data)
            return 0
        if args.command == "tasks":
            return _tasks(args)
        if args.command == "export-model":
            from genenv_engine.interfaces.model_export import export_model

            done = export_model(args.session, args.out, args.epoch, args.role, args.merge)
            print(f"wrote the {done['role']} of epoch {done['epoch']} ({done['kind']}) to {done['folder']}")
            return 0
        if args.command == "report":
            from genenv_engine.reports import run_report

            return run_report(args)
        if args.command == "bench":
            from genenv_engine.interfaces.bench_command import run_bench

            return run_bench(args)
        if args.command == "env":
            from genenv_engine.interfaces.env_command import run_env

            return run_env(args)
        from genenv_engine.storage.session import Session

        if args.command == "run":
            config = load_config(args.preset, args.config, _overrides(args))
            if args.agent_trainer == "trl":
                from genenv_engine.integrations.trl_run import check_trl

                check_trl(config, args.trl_batch)  # before the session is created
            session = Session.create(config, args.session)
            print(f"session: {session.path}")
            with session.lease("genenv run"):
                return _run(session, args.quiet, args.log, args)
        session = Session.open(args.session, check=True)
        with session.lease("genenv resume"):  # before anything changes: a second engine changes nothing
            session.config.check_paths()
            session.check_releases()
            if args.epochs is not None:
                session.check_epochs(args.epochs)
            if args.ray is not None:
                session.set_ray(args.ray)
            fallback = session.prepare_resume()
            if fallback is not None:
                print(f"genenv: {fallback['reason']} (epochs after it are redone)", file=sys.stderr)
            if args.epochs is not None:
                session.set_epochs(args.epochs)
            if args.rescore_heldout:
                from genenv_engine.method.faults import rescore_heldout, rescore_line

                print(rescore_line(rescore_heldout(session)))
            return _run(session, args.quiet, args.log, args)
    except SessionBusy as exc:
        print(f"genenv: {exc}", file=sys.stderr)
        return 3
    except (SessionUnwritable, ConfigError, FileNotFoundError, FileExistsError, ValueError, SessionError) as exc:
        print(f"genenv: {exc}", file=sys.stderr)
        return 2
    except sqlite3.DatabaseError as exc:  # damage found mid-run, after the open-time check passed
        where = getattr(args, "session", None)
        print(
            f"genenv: the session database{f' in {where}' if where else ''} failed ({exc}): check it with "
            "'sqlite3 genenv.db 'PRAGMA integrity_check'' and restore it from a backup",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
