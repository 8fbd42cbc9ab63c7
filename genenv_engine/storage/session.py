"""Session folders: ``sessions/<name>/`` with config.toml, the SQLite store, checkpoints and logs.

A session is created once from a `RunConfig` (saved before anything runs) and resumed from its
folder alone. Checkpoints are written to a temporary folder, given a manifest of their files
(sizes and SHA-256) and a ``COMPLETE`` marker, and renamed into place, so a crash never leaves a
half-written ``checkpoints/epoch_NNN``; `verify_checkpoint` checks all of that on load.

A damaged session never gives a traceback: `SessionError` carries one line that names the file and
says what to do, and nothing is deleted on the way (`prepare_resume` moves a damaged checkpoint aside
as ``damaged-epoch_NNN-<time>`` and falls back to the previous complete one, logging an event).
"""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from genenv_engine.config import RunConfig, config_from_file, replace_config, save_config
from genenv_engine.core.errors import ConfigError
from genenv_engine.storage import lease as leases
from genenv_engine.storage.store import MIGRATIONS, Store, probe_database

DEFAULT_ROOT = Path("sessions")

MANIFEST = "MANIFEST.json"
"""File in each checkpoint listing every other file with its size and SHA-256."""

HASH_LIMIT = 1 << 30
"""Files larger than this (1 GiB) are recorded and checked by size only (hashing 15 GB of a 7B model costs minutes)."""


class SessionError(Exception):
    """A session folder that cannot be used as asked; the message names the file and what to do."""


def _stamp() -> str:
    return dt.datetime.now().strftime("%Y%m%d-%H%M%S")


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(folder: Path) -> dict[str, Any]:
    """Record every file under ``folder`` (but the manifest and marker) with its size and SHA-256."""
    files = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name not in (MANIFEST, "COMPLETE")):
        size = path.stat().st_size
        entry: dict[str, Any] = {"size": size}
        if size <= HASH_LIMIT:
            entry["sha256"] = file_sha256(path)
        files[path.relative_to(folder).as_posix()] = entry
    manifest = {"files": files}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
    return manifest


REQUIRED = ("agent", "simulator", "agent_optimizer.pt", "simulator_optimizer.pt")
"""What every session checkpoint holds (checked when an older checkpoint has no manifest)."""


def verify_checkpoint(folder: Path) -> str | None:
    """Why the checkpoint in ``folder`` cannot be loaded, or None when it is complete and intact."""
    if not folder.is_dir():
        return "missing"
    if not (folder / "COMPLETE").is_file():
        return "no COMPLETE marker (its write was interrupted)"
    manifest_file = folder / MANIFEST
    if not manifest_file.is_file():  # written before manifests existed: check what must be there
        missing = [name for name in REQUIRED if not (folder / name).exists()]
        return f"missing {', '.join(missing)}" if missing else None
    try:
        files = json.loads(manifest_file.read_text())["files"]
    except (ValueError, KeyError, TypeError) as exc:
        return f"unreadable {MANIFEST} ({exc})"
    for name, entry in files.items():
        path = folder / name
        if not path.is_file():
            return f"missing {name}"
        size = path.stat().st_size
        if size != entry.get("size"):
            return f"{name} has {size} bytes, {entry.get('size')} expected (truncated or changed)"
        if "sha256" in entry and file_sha256(path) != entry["sha256"]:
            return f"{name} does not match its SHA-256 (corrupt)"
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale_temp_paths(folder: Path, pattern: str, sep: str) -> list[Path]:
    """Temp entries in ``folder`` matching ``pattern`` whose writer (the PID after the last ``sep``) is gone."""
    out = []
    for path in folder.glob(pattern):
        pid = path.name.rsplit(sep, 1)[-1]
        if pid.isdigit() and (int(pid) == os.getpid() or not _pid_alive(int(pid))):
            out.append(path)
    return out


def check_database(path: Path) -> None:
    """Raise `SessionError` when the session database is damaged or from a newer genenv (read-only check)."""
    if not path.exists():
        return
    if path.is_dir():
        raise SessionError(f"{path} is a folder, not a database: move it away or restore genenv.db from a backup")
    advice = "restore it from a backup or start a new session; nothing was changed"
    try:
        facts = probe_database(path)
    except sqlite3.DatabaseError as exc:
        raise SessionError(f"{path} is damaged or not a genenv database ({exc}): {advice}") from None
    if facts["quick_check"] != ["ok"]:
        raise SessionError(f"{path} is damaged ({'; '.join(facts['quick_check'])[:200]}): {advice}")
    known = [m.name for m in MIGRATIONS._migrations]
    newer = [name for name in facts["applied"] or [] if name not in known]
    if newer:
        raise SessionError(
            f"{path} was written by a newer genenv (schema {len(facts['applied'])}, this genenv "
            f"knows {len(known)}; unknown migrations {', '.join(newer)}): upgrade genenv "
            "to open it; nothing was changed"
        )
    version = facts["schema_version"]
    if version is not None and version.isdigit() and int(version) > len(known):
        raise SessionError(
            f"{path} was written by a newer genenv (schema {version}, this genenv "
            f"knows {len(known)}): upgrade genenv to open it; nothing was changed"
        )


class Session:
    """An open session folder: its config, its store and its checkpoints."""

    def __init__(self, path: Path, config: RunConfig) -> None:
        self.path = path
        self.config = config
        self.held: leases.Lease | None = None
        """The session's lease while this object runs it (`lease`)."""
        db = path / "genenv.db"
        try:
            self.store = Store(db)
        except sqlite3.DatabaseError as exc:
            raise SessionError(
                f"{db} is damaged or not a genenv database ({exc}): restore it from a backup "
                "or start a new session; nothing was changed"
            ) from None

    @classmethod
    def create(cls, config: RunConfig, path: str | Path | None = None, root: str | Path = DEFAULT_ROOT) -> Session:
        """Make a new session folder and save its config; refuses a folder that already holds a session."""
        folder = Path(path) if path else Path(root) / f"{config.preset}-{config.simulator.mode}-{_stamp()}"
        if folder.exists() and not folder.is_dir():
            raise SessionError(f"{folder} is a file, not a folder: pass a new folder path for the session")
        if (folder / "config.toml").exists():
            raise FileExistsError(f"{folder} already holds a session; use 'genenv resume {folder}'")
        try:
            for sub in ("checkpoints", "logs"):
                (folder / sub).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SessionError(
                f"cannot create the session folder {folder} ({exc.strerror}): pass a folder path you can write to"
            ) from None
        if config.environments:  # a config copied from an older session may record older packages' versions
            from genenv_engine.environments import current_sources

            config = replace_config(config, environments=current_sources(config.environments))
        save_config(config, folder / "config.toml")
        session = cls(folder, config)
        session.store.set_meta("created_at", dt.datetime.now(dt.UTC).isoformat())
        return session

    def check_releases(self) -> None:
        """Raise `ConfigError` (``environments.<name>``, one line) when a package one of the session's benchmarks
        came from is installed here at another version than the session recorded: its tasks may differ from the
        stored ones. Called before a run continues, before anything changes."""
        from genenv_engine.environments import release_change

        for name, recorded in self.config.environments.items():
            if (change := release_change(name, recorded)) is not None:
                raise ConfigError(f"environments.{name}", change)

    @classmethod
    def open(cls, path: str | Path, check: bool = False) -> Session:
        """Open an existing session from its folder (config rebuilt from config.toml alone).

        ``check`` first verifies the database read-only (`check_database`): what resuming does.
        """
        folder = Path(path)
        if folder.exists() and not folder.is_dir():
            raise SessionError(f"{folder} is a file, not a session folder: pass the folder that holds config.toml")
        if not (folder / "config.toml").exists():
            raise FileNotFoundError(f"{folder} is not a genenv session (no config.toml)")
        if check:
            check_database(folder / "genenv.db")
        return cls(folder, config_from_file(folder / "config.toml"))

    def lease(self, what: str) -> leases.Lease:
        """Take the session's lease (one engine per session) before anything changes, or raise
        `genenv_engine.core.errors.SessionBusy` naming the live holder. Use as ``with session.lease("genenv resume"):``;
        `genenv_engine.method.loop.run` takes it itself when its caller has not. A lease that a dead process left is
        taken over and logged (``LeaseTakenOver``)."""
        if self.held is not None:
            raise RuntimeError(f"{self.path}: the Session object already holds its lease")
        held = leases.acquire(self.path, what)
        held.on_release = lambda: setattr(self, "held", None)
        self.held = held
        if held.previous:
            self.store.log_event(
                "LeaseTakenOver",
                max(self.store.last_finished_epoch(), 0),
                {"previous": held.previous, "by": held.holder},
            )
        return held

    def check_epochs(self, epochs: int) -> None:
        """Raise `SessionError` when ``epochs`` is below the epochs already finished (or negative)."""
        done = self.store.last_finished_epoch()
        if epochs < max(done, 0) or epochs < 0:
            raise SessionError(
                f"{self.path} has already finished epoch {done}; --epochs {epochs} is below that: "
                f"pass --epochs {max(done, 0)} or more (nothing was changed)"
            )

    def set_epochs(self, epochs: int) -> None:
        """Change the target epoch count (resume --epochs) and re-save the config; never below what is done."""
        from dataclasses import replace

        self.check_epochs(epochs)
        self.config = replace(self.config, epochs=epochs)
        save_config(self.config, self.path / "config.toml")

    def set_ray(self, address: str) -> None:
        """Change where the session's rollouts run from here on (resume --ray): ``""`` in this process, ``local`` or
        a cluster address (checked as ``ray.address`` is), and re-save the config. The results do not depend on it:
        workers run the same seeded batches as the controller."""
        from dataclasses import replace

        self.config = replace(self.config, ray=replace(self.config.ray, address=address))
        save_config(self.config, self.path / "config.toml")

    def checkpoint_dir(self, epoch: int) -> Path:
        """Folder of one epoch's checkpoint."""
        return self.path / "checkpoints" / f"epoch_{epoch:03d}"

    def checkpoint_epochs(self) -> list[int]:
        """Epochs that have a checkpoint folder (see `verify_checkpoint` for whether it is complete)."""
        return sorted(int(p.name.split("_")[1]) for p in (self.path / "checkpoints").glob("epoch_[0-9]*"))

    def remove_stale_temp(self) -> list[Path]:
        """Delete checkpoint temp folders (``checkpoints/.tmp-epoch_NNN-PID``) whose writing process is gone."""
        gone = stale_temp_paths(self.path / "checkpoints", ".tmp-epoch_*-*", "-")
        for path in gone:
            shutil.rmtree(path, ignore_errors=True)
        return gone

    def write_checkpoint(self, epoch: int, writer: Callable[[Path], object]) -> Path:
        """Call ``writer(tmp_folder)``, add the manifest and ``COMPLETE``, then rename the folder to ``epoch_NNN``.

        A full disk (or any other write error) removes the temp folder and raises `SessionError`; the
        previous checkpoints and the store are untouched, so the session stays resumable.
        """
        final = self.checkpoint_dir(epoch)
        tmp = final.with_name(f".tmp-{final.name}-{os.getpid()}")
        try:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            writer(tmp)
            manifest = write_manifest(tmp)
            (tmp / "COMPLETE").write_text(json.dumps({"epoch": epoch, "at": _stamp(), "files": len(manifest["files"])}))
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            what = "the disk is full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else exc.strerror or str(exc)
            raise SessionError(
                f"cannot write checkpoint {final} ({what}): free space (or fix the folder) and run "
                f"'genenv resume {self.path}'; epoch {epoch} will be redone"
            ) from None
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
        return final

    def prepare_resume(self) -> dict[str, Any] | None:
        """Before a run continues: remove stale temp folders and make sure the last finished epoch's
        checkpoint is intact, else fall back to the latest complete one.

        On a fallback the damaged folders are moved aside (``checkpoints/damaged-epoch_NNN-<time>``),
        the epochs after the good checkpoint are marked partial (the loop then redoes them) and a
        ``CheckpointFallback`` event is logged; its payload is returned. Raises `SessionError` when no
        complete checkpoint is left (nothing is changed then).
        """
        self.remove_stale_temp()
        done = self.store.last_finished_epoch()
        if done < 0:
            return None
        problems: dict[int, str] = {}
        good = None
        for epoch in range(done, -1, -1):
            problem = verify_checkpoint(self.checkpoint_dir(epoch))
            if problem is None:
                good = epoch
                break
            problems[epoch] = problem
        if good == done:
            return None
        base = verify_checkpoint(self.checkpoint_dir(0)) if good is not None else problems.get(0)
        listed = "; ".join(f"epoch_{e:03d}: {p}" for e, p in sorted(problems.items()))
        if good is None or base is not None:
            raise SessionError(
                f"no complete checkpoint to resume from in {self.path / 'checkpoints'} ({listed}"
                f"{'; epoch_000: ' + base if base and 0 not in problems else ''}): "
                "start a new session; nothing was changed"
            )
        stamp = _stamp()
        for epoch in problems:
            folder = self.checkpoint_dir(epoch)
            if folder.exists():
                folder.rename(folder.with_name(f"damaged-{folder.name}-{stamp}"))
        for epoch in range(good + 1, done + 1):
            self.store.mark_partial(epoch)
        payload = {
            "from_epoch": done,
            "to_epoch": good,
            "problems": {str(e): p for e, p in problems.items()},
            "reason": f"damaged checkpoint ({listed}); resuming from epoch_{good:03d}",
        }
        self.store.log_event("CheckpointFallback", good, payload)
        with self.log_path().open("a") as fh:
            fh.write(json.dumps({"kind": "CheckpointFallback", **payload}) + "\n")
        return payload

    def log_path(self) -> Path:
        """The JSON-lines event log."""
        return self.path / "logs" / "events.jsonl"
