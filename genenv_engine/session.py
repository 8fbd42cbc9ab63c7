"""Session folders: ``sessions/<name>/`` with config.toml, the SQLite store, checkpoints and logs.

A session is created once from a `RunConfig` (saved before anything runs) and resumed from its
folder alone. Checkpoints are written to a temporary folder and renamed into place, so a crash
never leaves a half-written ``checkpoints/epoch_NNN``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path

from genenv_engine.config import RunConfig, config_from_file, save_config
from genenv_engine.store import Store

DEFAULT_ROOT = Path("sessions")


def _stamp() -> str:
    return dt.datetime.now().strftime("%Y%m%d-%H%M%S")


class Session:
    """An open session folder: its config, its store and its checkpoints."""

    def __init__(self, path: Path, config: RunConfig) -> None:
        self.path = path
        self.config = config
        self.store = Store(path / "genenv.db")

    @classmethod
    def create(cls, config: RunConfig, path: str | Path | None = None, root: str | Path = DEFAULT_ROOT) -> "Session":
        """Make a new session folder and save its config; refuses a folder that already holds a session."""
        folder = Path(path) if path else Path(root) / f"{config.preset}-{config.simulator.mode}-{_stamp()}"
        if (folder / "config.toml").exists():
            raise FileExistsError(f"{folder} already holds a session; use 'genenv resume {folder}'")
        for sub in ("checkpoints", "logs"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        save_config(config, folder / "config.toml")
        session = cls(folder, config)
        session.store.set_meta("created_at", dt.datetime.now(dt.timezone.utc).isoformat())
        return session

    @classmethod
    def open(cls, path: str | Path) -> "Session":
        """Open an existing session from its folder (config rebuilt from config.toml alone)."""
        folder = Path(path)
        if not (folder / "config.toml").exists():
            raise FileNotFoundError(f"{folder} is not a genenv session (no config.toml)")
        return cls(folder, config_from_file(folder / "config.toml"))

    def set_epochs(self, epochs: int) -> None:
        """Change the target epoch count (resume --epochs) and re-save the config."""
        from dataclasses import replace

        self.config = replace(self.config, epochs=epochs)
        save_config(self.config, self.path / "config.toml")

    def checkpoint_dir(self, epoch: int) -> Path:
        """Folder of one epoch's checkpoint."""
        return self.path / "checkpoints" / f"epoch_{epoch:03d}"

    def checkpoint_epochs(self) -> list[int]:
        """Epochs that have a complete checkpoint."""
        return sorted(int(p.name.split("_")[1]) for p in (self.path / "checkpoints").glob("epoch_[0-9]*"))

    def write_checkpoint(self, epoch: int, writer) -> Path:
        """Call ``writer(tmp_folder)`` then atomically rename the folder to ``epoch_NNN``."""
        final = self.checkpoint_dir(epoch)
        tmp = final.with_name(f".tmp-{final.name}-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        writer(tmp)
        (tmp / "COMPLETE").write_text(json.dumps({"epoch": epoch, "at": _stamp()}))
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
        return final

    def log_path(self) -> Path:
        """The JSON-lines event log."""
        return self.path / "logs" / "events.jsonl"
