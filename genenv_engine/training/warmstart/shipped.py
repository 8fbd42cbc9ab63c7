"""Warm starts shipped inside the package, so the default first run starts at epoch 1 in seconds.

A shipped entry (`SHIPPED_ROOT`) is a finished warm start with a `MANIFEST` naming its cache key and the sha256
of every file. A run whose key is exactly that key and finds no entry in its cache installs it there
(`install_shipped`): the files are copied into a temp folder, their checksums verified on the copies, and the
folder moved into place like a trained entry. A file that fails its checksum refuses the whole entry with a
warning, and the run trains its warm start as before. `ship` (``python -m genenv_engine.training.warmstart ship``,
``make shipped-warmstart``) rebuilds one from a freshly trained entry.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

from genenv_engine.config import RunConfig
from genenv_engine.storage.session import file_sha256
from genenv_engine.training.models import AGENT_INFO, DONE, TORCH_RNG
from genenv_engine.training.warmstart.cache import WARM_START_VERSION, cache_key, fresh_temp

SHIPPED_ROOT = Path(__file__).resolve().parents[2] / "shipped" / "warmstart"
"""Warm starts shipped inside the package: one finished entry per folder, named by its cache key, with its
`MANIFEST`."""
MANIFEST = "manifest.json"
"""A shipped entry's manifest: ``key``, ``preset``, ``seed``, ``files`` (relative path -> sha256), the epoch-0
``heldout`` the training path measured on it, and how it was made."""
SHIPPED_COPY = "shipped.json"
"""The manifest as copied into the cache with an installed shipped entry (where the entry came from)."""
SHIPPED_ENV = "GENENV_SHIPPED_WARMSTART"
"""Set to ``0`` to ignore the shipped warm starts (``genenv bench warmstart`` does: it times the training)."""
SHIPPED_PARTS = ("agent", "simulator", AGENT_INFO, TORCH_RNG, DONE)
"""What of a finished entry is shipped: both roles' folders and stage one's and stage two's files."""


def shipped_folder(config: RunConfig, root: Path | None = None) -> Path | None:
    """The shipped warm start for ``config``'s cache key, if the package holds one (unverified): its folder is
    named by the key and its manifest names the same key. Only that exact key is served, never one made under
    another preset's name or seed, and only while ``$GENENV_SHIPPED_WARMSTART`` is not ``0``.

    >>> from genenv_engine.config import load_config
    >>> shipped_folder(load_config("tiny", overrides={"seed": 7})) is None
    True
    """
    if os.environ.get(SHIPPED_ENV, "1") == "0":
        return None
    key = cache_key(config)
    folder = (SHIPPED_ROOT if root is None else root) / key
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return folder if manifest.get("key") == key else None


def shipped_problems(folder: Path) -> list[str]:
    """What is wrong with the shipped entry ``folder``: each file its manifest lists that is missing or whose
    sha256 differs, and the finished marker if the manifest lacks it (empty: it verifies)."""
    files = json.loads((folder / MANIFEST).read_text()).get("files") or {}
    problems = [] if DONE in files else [f"{DONE} is not in {MANIFEST}"]
    for name, digest in sorted(files.items()):
        path = folder / name
        if ".." in Path(name).parts or Path(name).is_absolute():
            problems.append(f"{name}: not a path inside the entry")
        elif not path.is_file():
            problems.append(f"{name}: missing")
        elif file_sha256(path) != digest:
            problems.append(f"{name}: sha256 does not match {MANIFEST}")
    return problems


def install_shipped(config: RunConfig, folder: Path) -> Path | None:
    """Install the shipped warm start for ``config`` as the cache entry ``folder`` (the key's entry) and return
    it, or None when none is shipped for this exact key or it fails its checksums (with a warning naming the
    files: the run then trains its warm start as it would without one).

    The listed files are copied into a temp folder and their checksums verified on the copies, which is then
    moved into place in one rename (an agent-only entry of the same key is replaced: the shipped one holds the
    same agent and the simulator too). A finished entry another run made meanwhile is kept."""
    source = shipped_folder(config)
    if source is None:
        return None
    files = json.loads((source / MANIFEST).read_text()).get("files") or {}
    problems = shipped_problems(source)
    tmp = fresh_temp(folder)
    try:
        if not problems:
            for name, digest in files.items():
                (tmp / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source / name, tmp / name)
                if file_sha256(tmp / name) != digest:
                    problems.append(f"{name}: sha256 of the copy does not match {MANIFEST}")
        if problems:
            warnings.warn(
                f"shipped warm start {source.name} refused, it will be trained instead "
                f"({source}): " + "; ".join(problems),
                stacklevel=2,
            )
            return None
        shutil.copyfile(source / MANIFEST, tmp / SHIPPED_COPY)
        if (folder / DONE).exists():  # another run finished this entry meanwhile
            return folder
        shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)
        return folder
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def ship(entry: Path, heldout: dict[str, float], config: RunConfig, made_with: str, root: Path | None = None) -> Path:
    """Copy the finished warm start ``entry`` (``config``'s key) into the shipped folder with its manifest,
    replacing every shipped entry of the same preset and seed (an older recipe's); ``heldout`` is the epoch-0
    held-out the training path measured on it. Returns the shipped folder."""
    root = SHIPPED_ROOT if root is None else root
    key = cache_key(config)
    if entry.name != key:
        raise ValueError(f"{entry} is not the entry of {config.preset} seed {config.seed}: its key is {key}")
    if not (entry / DONE).is_file():
        raise ValueError(f"{entry} is not a finished warm start (no {DONE})")
    missing = [part for part in SHIPPED_PARTS if not (entry / part).exists()]
    if missing:
        raise ValueError(f"{entry} lacks {', '.join(missing)}")
    import torch

    files: dict[str, str] = {}
    tmp = root / f".{key}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        for part in SHIPPED_PARTS:
            paths = (
                sorted(p for p in (entry / part).rglob("*") if p.is_file())
                if (entry / part).is_dir()
                else [entry / part]
            )
            for path in paths:
                name = path.relative_to(entry).as_posix()
                (tmp / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, tmp / name)
                files[name] = file_sha256(tmp / name)
        manifest = {
            "key": key,
            "preset": config.preset,
            "seed": config.seed,
            "warm_start_version": WARM_START_VERSION,
            "heldout": heldout,
            "heldout_tasks": config.heldout_size,
            "made_with": made_with,
            "torch": torch.__version__,
            "bytes": sum((tmp / n).stat().st_size for n in files),
            "files": files,
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        for old in root.glob(f"{config.preset}-s{config.seed}-*"):
            shutil.rmtree(old)
        tmp.rename(root / key)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root / key
