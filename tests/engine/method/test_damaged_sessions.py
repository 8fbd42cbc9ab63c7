"""Damaged sessions: each bad input gives one ``genenv: ...`` line naming the file and what to do, exit 2,
and nothing in the session folder changes; a damaged latest checkpoint falls back to the previous one.

One real 2-epoch micro session (real SQLite file, real checkpoints) is made once and copied for each
case; the damage is done to the copy with plain file operations, as it would happen on disk.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from genenv_engine.config import load_config
from genenv_engine.interfaces import cli
from genenv_engine.method.loop import run
from genenv_engine.storage.session import Session, SessionError, verify_checkpoint, write_manifest
from genenv_engine.testing import scripted_backends
from genenv_engine.training.roles import CheckpointError, load_roles


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished 2-epoch micro session folder (store closed)."""
    session = Session.create(load_config("micro"), tmp_path_factory.mktemp("damaged") / "base")
    assert run(session, backend_factory=scripted_backends()) == {"epochs_done": 2}
    session.store.close()
    return session.path


@pytest.fixture
def copy(finished, tmp_path) -> Path:
    target = tmp_path / "s"
    shutil.copytree(finished, target)
    return target


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with its SHA-256 (to prove nothing changed).

    SQLite's shared-memory index and an empty WAL, which any reader of a WAL database creates, are left out.
    """
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.endswith("-shm") and not (p.name.endswith("-wal") and p.stat().st_size == 0)
    }


def fails_cleanly(capsys, argv: list[str], folder: Path, *needles: str) -> str:
    """Run the CLI; assert exit 2, one ``genenv:`` line containing ``needles``, and an unchanged folder."""
    before = snapshot(folder) if folder.is_dir() else None
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("genenv: "), err
    for needle in needles:
        assert needle in err, err
    if before is not None:
        assert snapshot(folder) == before
    return err


def test_truncated_database(copy, capsys):
    db = copy / "genenv.db"
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])
    err = fails_cleanly(capsys, ["resume", str(copy), "--quiet"], copy, str(db), "damaged", "backup")
    print(err)
    fails_cleanly(capsys, ["status", str(copy)], copy, str(db))


def test_corrupt_database_header(copy, capsys):
    db = copy / "genenv.db"
    data = bytearray(db.read_bytes())
    data[:16] = b"not a database!!"
    db.write_bytes(bytes(data))
    print(fails_cleanly(capsys, ["resume", str(copy), "--quiet"], copy, str(db), "not a genenv database"))


def test_newer_schema_version(copy, capsys):
    with sqlite3.connect(copy / "genenv.db") as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.close()
    print(fails_cleanly(capsys, ["resume", str(copy), "--quiet"], copy, "genenv.db", "newer genenv", "upgrade"))
    with sqlite3.connect(copy / "genenv.db") as conn:
        conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
        conn.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
            "VALUES ('genenv.store', 'm099_future', '2030-01-01')"
        )
    conn.close()
    print(fails_cleanly(capsys, ["resume", str(copy), "--quiet"], copy, "m099_future"))


def test_session_path_that_is_a_file(tmp_path, capsys):
    path = tmp_path / "afile"
    path.write_text("x")
    print(
        fails_cleanly(
            capsys, ["run", "--preset", "micro", "--session", str(path), "--quiet"], tmp_path, str(path), "is a file"
        )
    )
    print(fails_cleanly(capsys, ["resume", str(path)], tmp_path, str(path), "is a file"))
    inside = path / "sub"
    print(
        fails_cleanly(capsys, ["run", "--preset", "micro", "--session", str(inside), "--quiet"], tmp_path, str(inside))
    )
    assert path.read_text() == "x"


def test_resume_epochs_below_what_is_done(copy, capsys):
    print(
        fails_cleanly(
            capsys, ["resume", str(copy), "--epochs", "1"], copy, str(copy), "finished epoch 2", "--epochs 2 or more"
        )
    )


def test_no_complete_checkpoint_left(copy, capsys):
    for epoch in (0, 1, 2):
        (copy / "checkpoints" / f"epoch_{epoch:03d}" / "agent" / "model.safetensors").unlink()
    print(
        fails_cleanly(
            capsys,
            ["resume", str(copy), "--epochs", "3", "--quiet"],
            copy,
            "no complete checkpoint",
            "epoch_002: missing agent/model.safetensors",
            "new session",
        )
    )


def test_base_checkpoint_damaged_means_no_fallback(copy, capsys):
    (copy / "checkpoints" / "epoch_002" / "COMPLETE").unlink()
    (copy / "checkpoints" / "epoch_000" / "simulator_optimizer.pt").write_bytes(b"")
    print(
        fails_cleanly(
            capsys,
            ["resume", str(copy), "--epochs", "3", "--quiet"],
            copy,
            "epoch_000: simulator_optimizer.pt has 0 bytes",
        )
    )


@pytest.mark.parametrize("damage", ["missing", "truncated", "no_marker"])
def test_damaged_latest_checkpoint_falls_back_to_the_previous_one(copy, capsys, damage):
    ckpt = copy / "checkpoints" / "epoch_002"
    if damage == "missing":
        (ckpt / "agent" / "model.safetensors").unlink()
    elif damage == "truncated":
        opt = ckpt / "simulator_optimizer.pt"
        opt.write_bytes(opt.read_bytes()[:100])
    else:
        (ckpt / "COMPLETE").unlink()
    assert verify_checkpoint(ckpt) is not None
    epoch1 = Session.open(copy).store.epoch_metrics()[1]
    session = Session.open(copy, check=True)
    session.set_epochs(3)
    fallback = session.prepare_resume()
    assert fallback["from_epoch"] == 2 and fallback["to_epoch"] == 1 and "2" in fallback["problems"]
    assert [e["kind"] for e in session.store.events()][-1] == "CheckpointFallback"
    assert list((copy / "checkpoints").glob("damaged-epoch_002-*"))  # kept aside, not deleted
    assert run(session, backend_factory=scripted_backends()) == {"epochs_done": 3}
    metrics = session.store.epoch_metrics()
    assert [(m["epoch"], m["status"]) for m in metrics] == [(0, "done"), (1, "done"), (2, "done"), (3, "done")]
    assert metrics[1]["finished_at"] == epoch1["finished_at"]  # epoch 1 untouched, 2 redone
    assert verify_checkpoint(copy / "checkpoints" / "epoch_002") is None
    assert verify_checkpoint(copy / "checkpoints" / "epoch_003") is None


def test_full_disk_while_checkpointing(copy, capsys, monkeypatch):
    import genenv_engine.method.phases as phases  # the epoch's checkpoint step

    real = phases.save_roles

    def full_disk(roles, folder):
        real(roles, folder)  # most of the files land, then the disk fills up
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(phases, "save_roles", full_disk)
    before = {k: v for k, v in snapshot(copy).items() if k.startswith("checkpoints/")}
    assert cli.main(["resume", str(copy), "--epochs", "3", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("genenv: cannot write checkpoint") and "disk is full" in err[0]
    assert "epoch_003" in err[0] and f"genenv resume {copy}" in err[0]
    after = {k: v for k, v in snapshot(copy).items() if k.startswith("checkpoints/")}
    assert after == before  # no temp folder left, the earlier checkpoints untouched
    monkeypatch.setattr(phases, "save_roles", real)
    assert cli.main(["resume", str(copy), "--quiet"]) == 0  # and the session resumes
    assert Session.open(copy).store.last_finished_epoch() == 3


def test_stale_temp_folders_are_removed_at_start(copy, tmp_path, monkeypatch):
    from genenv_engine.training.warmstart import remove_stale_temp

    ckpts = copy / "checkpoints"
    dead, alive = ckpts / ".tmp-epoch_003-999999999", ckpts / f".tmp-epoch_003-{os.getppid()}"
    for folder in (dead, alive):
        (folder / "agent").mkdir(parents=True)
    session = Session.open(copy)
    assert session.prepare_resume() is None
    assert not dead.exists() and alive.exists()  # a live writer's temp folder stays
    cache = tmp_path / "cache"
    monkeypatch.setenv("GENENV_CACHE", str(cache))
    ws_dead, ws_alive = cache / "warmstart" / "tiny-s0-abc.tmp999999999", cache / "warmstart" / f"k.tmp{os.getppid()}"
    for folder in (ws_dead, ws_alive):
        folder.mkdir(parents=True)
    assert remove_stale_temp() == [ws_dead]
    assert not ws_dead.exists() and ws_alive.exists()


class Exploit:
    """A pickle that, if ever unpickled with weights_only=False, leaves a marker file."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def test_optimizer_state_cannot_run_code(copy, tmp_path):
    import torch

    ckpt = copy / "checkpoints" / "epoch_002"
    marker = tmp_path / "pwned"
    torch.save({"optimizer": Exploit(str(marker)), "steps": 1}, ckpt / "agent_optimizer.pt")
    write_manifest(ckpt)  # a consistent manifest: the file itself is the attack
    with pytest.raises(CheckpointError, match="agent_optimizer.pt cannot be loaded"):
        load_roles(Session.open(copy), 2)
    assert not marker.exists()
    torch.load(ckpt / "agent_optimizer.pt", weights_only=False)  # what the old loader did: the payload runs
    assert marker.exists()


def test_old_checkpoint_without_optimizer_state_is_an_error(copy):
    ckpt = copy / "checkpoints" / "epoch_002"
    (ckpt / "agent_optimizer.pt").unlink()
    (ckpt / "MANIFEST.json").unlink()  # as written before manifests: the required files are still checked
    assert verify_checkpoint(ckpt) == "missing agent_optimizer.pt"
    with pytest.raises(SessionError, match="agent_optimizer.pt"):
        load_roles(Session.open(copy), 2)


def test_checkpoints_have_a_manifest_of_every_file(finished):
    ckpt = finished / "checkpoints" / "epoch_002"
    files = json.loads((ckpt / "MANIFEST.json").read_text())["files"]
    assert {"agent_optimizer.pt", "simulator_optimizer.pt", "agent/model.safetensors"} <= set(files)
    assert all(entry["size"] == (ckpt / name).stat().st_size for name, entry in files.items())
    assert verify_checkpoint(ckpt) is None
