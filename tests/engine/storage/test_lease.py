"""One engine per session: the lease refuses a second engine with its holder named, changes nothing, and a lease
left by a killed process is taken over."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from genenv_engine.core.errors import SessionBusy
from genenv_engine.interfaces.cli import main
from genenv_engine.storage import lease
from genenv_engine.storage.session import Session

ROOT = Path(__file__).resolve().parents[3]
HOLD = (
    "import sys, time; from genenv_engine.storage import lease; lease.acquire(sys.argv[1], 'test holder'); "
    "print('held', flush=True); time.sleep(600)"
)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}  # the test run's warm-start cache (tests/conftest.py)


def _wait_for(predicate, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.05)


def test_a_second_holder_is_refused_with_the_first_named_and_release_frees_it(tmp_path):
    first = lease.acquire(tmp_path, "genenv run")
    assert lease.holder(tmp_path) == first.holder and first.holder["pid"] == os.getpid()
    with pytest.raises(SessionBusy, match=rf"being run by genenv run \(PID {os.getpid()} on ") as busy:
        lease.acquire(tmp_path, "genenv resume")
    assert busy.value.holder == first.holder
    first.release()
    first.release()  # idempotent
    assert lease.holder(tmp_path) is None
    again = lease.acquire(tmp_path, "genenv resume")
    assert again.previous is None  # released cleanly: nothing was left behind to take over
    again.release()


def test_a_lease_left_by_a_killed_process_is_taken_over(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=_env())
    try:
        assert child.stdout.readline().strip() == "held"
        assert lease.holder(tmp_path)["pid"] == child.pid
        with pytest.raises(SessionBusy, match=f"PID {child.pid} "):
            lease.acquire(tmp_path, "genenv resume")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert lease.holder(tmp_path) is None  # the OS dropped the lock with the process
    taken = lease.acquire(tmp_path, "genenv resume")
    assert taken.previous["pid"] == child.pid and taken.previous["what"] == "test holder"
    taken.release()


def test_a_second_resume_exits_non_zero_naming_the_holder_and_changes_nothing(tmp_path, capsys):
    folder = tmp_path / "s"
    assert main(["run", "--preset", "micro", "--session", str(folder), "--epochs", "1", "--quiet"]) == 0
    first = subprocess.Popen(
        [sys.executable, "-m", "genenv_engine", "resume", str(folder), "--epochs", "40", "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        _wait_for(lambda: (lease.holder(folder) or {}).get("pid") == first.pid)
        db = sqlite3.connect(folder / "genenv.db")
        _wait_for(
            lambda: (
                db.execute("select count(*) from events where kind = 'EpochStarted' and epoch = 2").fetchone()[0] == 1
            )
        )
        capsys.readouterr()
        assert main(["resume", str(folder), "--epochs", "3", "--quiet"]) == 3
        err = capsys.readouterr().err
        assert f"is being run by genenv resume (PID {first.pid} on " in err and "Traceback" not in err
        assert err.count("\n") == 1
        assert (lease.holder(folder) or {}).get("pid") == first.pid  # the refusal left the holder alone
        _wait_for(
            lambda: db.execute("select count(*) from epochs where status = 'done' and epoch = 3").fetchone()[0] == 1
        )  # the epoch running at the refusal, and one more, finished
    finally:
        first.send_signal(signal.SIGINT)  # a clean stop of the first engine
        out, _ = first.communicate(timeout=300)
    assert first.returncode == 130 and "stopped; resume with" in out
    starts = db.execute("select epoch, count(*) from events where kind = 'EpochStarted' group by epoch").fetchall()
    assert all(n == 1 for _, n in starts[1:]), starts  # every epoch after the first started once: one engine wrote
    config = db.execute("select count(*) from events where kind = 'RunStarted'").fetchone()[0]
    assert config == 2  # the first run and the one resume that ran; the refused one logged nothing
    assert "epochs = 40" in (folder / "config.toml").read_text()  # the refused --epochs 3 was not saved
    last = db.execute("select max(epoch) from epochs where status = 'done'").fetchone()[0]
    assert last >= 3
    # row for row, what a single resume of the same session writes up to the same finished epoch
    ref = tmp_path / "ref"
    assert main(["run", "--preset", "micro", "--session", str(ref), "--epochs", "1", "--quiet"]) == 0
    single = subprocess.Popen(
        [sys.executable, "-m", "genenv_engine", "resume", str(ref), "--epochs", "40", "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    ref_db = sqlite3.connect(ref / "genenv.db")
    try:
        _wait_for(
            lambda: (
                ref_db.execute("select count(*) from epochs where status = 'done' and epoch = ?", [last]).fetchone()[0]
                == 1
            )
        )
    finally:
        single.send_signal(signal.SIGINT)
        single.communicate(timeout=300)
    assert _rows(db, last) == _rows(ref_db, last)
    db.close()
    ref_db.close()
    assert lease.holder(folder) is None


def _rows(db: sqlite3.Connection, last: int) -> tuple[list, list]:
    """The rollouts and generated tasks of epochs up to ``last``, less timings and running statistics."""
    rollouts = db.execute(
        "select task_id, epoch, response, reward, success, error_type, purpose, policy_version "
        "from rollouts where epoch <= ? order by id",
        [last],
    ).fetchall()
    tasks = db.execute(
        "select id, prompt, answer, valid, reason, level from tasks where origin = 'generated' "
        "and epoch <= ? order by id",
        [last],
    ).fetchall()
    assert rollouts and tasks
    return rollouts, tasks


def test_a_read_only_session_folder_is_one_line_and_nothing_runs(tmp_path, monkeypatch, capsys):
    import errno

    folder = tmp_path / "s"
    assert main(["run", "--preset", "micro", "--session", str(folder), "--epochs", "1", "--quiet"]) == 0
    capsys.readouterr()
    real_open = os.open

    def read_only(path, flags, *args):  # a test double for a read-only filesystem under the session folder
        if str(path).endswith(lease.LOCK_NAME):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(lease.os, "open", read_only)
    assert main(["resume", str(folder), "--epochs", "2", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "its folder is not writable (Read-only file system)" in err and err.count("\n") == 1
    assert "epochs = 1" in (folder / "config.toml").read_text()  # --epochs 2 was not saved
    monkeypatch.setattr(lease.os, "open", real_open)  # the folder writable again: the session resumes
    assert main(["resume", str(folder), "--epochs", "2", "--quiet"]) == 0
    assert Session.open(folder).store.last_finished_epoch() == 2
