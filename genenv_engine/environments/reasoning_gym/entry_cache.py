"""The entries of a reasoning-gym dataset that were slow to generate, kept on disk so a later run makes them at once.

A few generators take seconds per entry (``group_anagrams``, ``bf``, ``sokoban``) or never return on some seeds
(``arc_1d`` at level 4, seed 254841), so building a run's splits, and ``genenv env check`` after it, would spend
the same minutes again. `EntryCache` keeps, per dataset and reasoning-gym release, the question and gold of every
entry whose generation took at least `SLOW_SECONDS`, and the configurations and seeds whose generation ran past
the worker's time limit, in one JSON-lines file under ``$GENENV_CACHE/reasoning-gym/<release>/`` (default
``~/.cache/genenv``). Lines are appended whole (one ``write`` on a file opened for appending), so processes that
share the file do not mix their lines; a line that does not read (a process killed mid-write) is skipped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

SLOW_SECONDS = 0.05
"""An entry whose generation takes this long or longer is kept."""


def cache_root() -> Path:
    """``$GENENV_CACHE/reasoning-gym`` (default ``~/.cache/genenv/reasoning-gym``)."""
    return Path(os.environ.get("GENENV_CACHE", Path.home() / ".cache" / "genenv")).expanduser() / "reasoning-gym"


def entry_key(config: dict[str, Any], seed: int) -> str:
    """The key of an entry: its configuration and seed as canonical JSON.

    >>> entry_key({"max_terms": 3, "min_terms": 2}, 7) == entry_key({"min_terms": 2, "max_terms": 3}, 7)
    True
    """
    return json.dumps([config, seed], sort_keys=True, separators=(",", ":"))


class EntryCache:
    """The kept entries of one dataset of one reasoning-gym release (read from disk on first use)."""

    def __init__(self, dataset: str, version: str, root: Path | None = None) -> None:
        self.path = (root or cache_root()) / version / f"{dataset}.jsonl"
        self._entries: dict[str, tuple[str, str] | str] | None = None

    def _load(self) -> dict[str, tuple[str, str] | str]:
        if self._entries is None:
            self._entries = {}
            try:
                lines = self.path.read_text(encoding="utf-8").splitlines()
            except OSError:
                lines = []
            for line in lines:
                try:
                    row = json.loads(line)
                    key = str(row["key"])
                    self._entries[key] = str(row["failed"]) if "failed" in row else (str(row["q"]), str(row["a"]))
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut short by a process that was killed while writing it
        return self._entries

    def get(self, config: dict[str, Any], seed: int) -> tuple[str, str] | str | None:
        """The kept question and gold of ``(config, seed)``, the reason its generation failed (a string), or
        None when nothing is kept."""
        return self._load().get(entry_key(config, seed))

    def _append(self, key: str, row: dict[str, Any], value: tuple[str, str] | str) -> None:
        self._load()[key] = value
        line = (json.dumps({"key": key, **row}, ensure_ascii=False) + "\n").encode("utf-8")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        except OSError:
            pass  # a cache that cannot be written only costs the generation again

    def put(self, config: dict[str, Any], seed: int, question: str, gold: str, seconds: float) -> None:
        """Keep the question and gold of ``(config, seed)`` if their generation took ``seconds`` of at least
        `SLOW_SECONDS`."""
        if seconds >= SLOW_SECONDS:
            self._append(entry_key(config, seed), {"q": question, "a": gold}, (question, gold))

    def put_failed(self, config: dict[str, Any], seed: int, reason: str) -> None:
        """Keep that the generation of ``(config, seed)`` failed with ``reason`` (a time-out)."""
        key = entry_key(config, seed)
        self._append(key, {"failed": reason}, reason)
