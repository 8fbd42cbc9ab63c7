"""``genenv-console [SESSION_DIR] [--preset NAME | --config FILE]``: open the console on a new or existing session.

With no session folder a new session is created under ``--sessions-root`` (default ``sessions/``)
from the preset (default ``tiny``) or config file and starts running; with a folder that session is
resumed. ``--compare DIR DIR …`` opens the compare screen on 2-4 sessions instead (a folder of sessions, such as
an ablation bench's, stands for all of them), read-only. `make_app` is the one factory the command line and the
tests build the app with.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from genenv_console.app import GenEnvConsole
from genenv_console.compare import CompareError, expand_compare
from genenv_engine.config import SIMULATOR_MODES, ConfigError, load_config, preset_names
from genenv_engine.core.errors import SessionBusy
from genenv_engine.storage.session import Session, SessionError

if TYPE_CHECKING:  # roles imports torch; the console starts without it
    from genenv_engine.training.roles import BackendFactory


def make_app(
    session_dir: str | Path | None = None,
    *,
    preset: str | None = None,
    config_file: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    sessions_root: str | Path | None = "sessions",
    backend_factory: BackendFactory | None = None,
    autostart: bool = True,
    browse: bool = False,
    compare: list[str | Path] | None = None,
) -> GenEnvConsole:
    """Build the console: resume ``session_dir``, or create a new session from the preset/config (or just browse,
    or compare the sessions ``compare`` names: `genenv_console.compare.expand_compare`).

    Raises ConfigError, FileNotFoundError, FileExistsError or SessionError for a bad preset, config or folder,
    CompareError for folders that cannot be compared. With ``sessions_root`` None the sessions screen lists
    ``sessions/``, or when comparing, the folder of the first compared session.
    """
    if compare:
        paths = expand_compare(list(compare))
        root = Path(sessions_root) if sessions_root is not None else paths[0].parent
        return GenEnvConsole(None, root, backend_factory, autostart=False, compare=paths)
    root = Path(sessions_root if sessions_root is not None else "sessions")
    if browse:
        return GenEnvConsole(None, root, backend_factory, autostart=False)
    if session_dir is not None:
        session = Session.open(session_dir, check=True)
        if overrides and "epochs" in overrides and overrides["epochs"] != session.config.epochs:
            with session.lease("genenv-console --epochs"):  # never under another engine's feet
                session.set_epochs(int(overrides["epochs"]))
    else:
        config = load_config(preset, config_file, overrides)
        session = Session.create(config, root=root)
    session.store.close()
    return GenEnvConsole(session.path, root, backend_factory, autostart=autostart)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="genenv-console", description="Watch, pause, inspect and hand-edit a GenEnv co-evolution run."
    )
    parser.add_argument("session", nargs="?", type=Path, help="session folder to resume (default: create a new one)")
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--preset", help=f"preset for a new session ({', '.join(preset_names())}); default tiny")
    src.add_argument("--config", type=Path, help="TOML config file for a new session")
    parser.add_argument("--epochs", type=int, help="target epochs (new session, or raise a resumed one's)")
    parser.add_argument("--simulator-mode", choices=SIMULATOR_MODES, help="ablation mode")
    parser.add_argument(
        "--sessions-root",
        type=Path,
        help="where sessions live (default: sessions/, or with --compare the first compared session's folder)",
    )
    parser.add_argument("--browse", action="store_true", help="open the sessions screen without starting a run")
    parser.add_argument("--no-start", action="store_true", help="open the session without starting the engine")
    parser.add_argument(
        "--compare",
        nargs="+",
        type=Path,
        metavar="DIR",
        help="compare 2-4 sessions read-only (a folder of sessions, e.g. an ablation bench's, stands for all of them)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``genenv-console`` command."""
    from genenv_engine.backends.openmp import choose_spin

    choose_spin()  # before anything loads torch
    args = _parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    overrides: dict[str, Any] = {}
    if args.epochs is not None:
        overrides["epochs"] = args.epochs
    if args.simulator_mode is not None:
        if args.session is not None:
            print("genenv-console: --simulator-mode only applies to a new session", file=sys.stderr)
            return 2
        overrides["simulator.mode"] = args.simulator_mode
    if args.compare and (
        args.session is not None or args.preset or args.config or overrides or args.browse or args.no_start
    ):
        print("genenv-console: --compare takes only session folders (and --sessions-root)", file=sys.stderr)
        return 2
    if args.session is not None and (args.preset or args.config):
        print("genenv-console: --preset/--config only apply to a new session", file=sys.stderr)
        return 2
    try:
        app = make_app(
            args.session,
            preset=args.preset,
            config_file=args.config,
            overrides=overrides or None,
            sessions_root=args.sessions_root,
            autostart=not args.no_start,
            browse=args.browse,
            compare=args.compare,
        )
    except (ConfigError, FileNotFoundError, FileExistsError, SessionError, CompareError) as exc:
        print(f"genenv-console: {exc}", file=sys.stderr)
        return 2
    except SessionBusy as exc:
        print(f"genenv-console: {exc}", file=sys.stderr)
        return 3
    app.run()
    if app.session_path is not None:
        print(f"session: {app.session_path} ({app.state.run}); resume with: genenv-console {app.session_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
