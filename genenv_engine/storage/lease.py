"""One engine per session: the process that runs a session holds an OS lock on ``<session>/lease.lock``; and
`waiting_lock`, the same kind of lock for work that a second process should wait for rather than redo.

The lock is ``flock`` on a file in the session folder: the operating system drops it when its holder exits,
however it exits (a crash or ``kill -9`` too), so a lease left by a dead process is simply taken over and every
crash-resume works unattended. While held, the file names its holder (PID, host, since when, what it runs), so a
second ``genenv run``/``resume`` or the console's run key refuses with one line that says who holds the session,
and changes nothing. A lock on a network filesystem that does not support ``flock`` is not relied on: see
:func:`acquire`.

>>> import tempfile
>>> folder = Path(tempfile.mkdtemp())
>>> first = acquire(folder, "genenv run")
>>> try:
...     acquire(folder, "genenv resume")
... except SessionBusy as exc:
...     print(str(exc).split(" by ")[0].endswith("is being run"), exc.holder["pid"] == os.getpid())
True True
>>> first.release(); holder(folder) is None
True
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from genenv_engine.core.errors import SessionBusy, SessionUnwritable

LOCK_NAME = "lease.lock"
"""The lease file in a session folder (its content is the holder while the lock is held)."""


@dataclass
class Lease:
    """A held lease; `release` (or process exit) frees it. ``previous`` is the holder record a dead process left
    behind (None when the session was free), so the caller can log that it took the session over."""

    folder: Path
    fd: int
    holder: dict[str, Any]
    previous: dict[str, Any] | None = None
    on_release: Callable[[], None] | None = field(default=None, repr=False)
    """Called once when the lease is released (a session clears its handle)."""
    _released: bool = field(default=False, repr=False)

    def release(self) -> None:
        """Clear the holder record and drop the lock (idempotent)."""
        if self._released:
            return
        self._released = True
        if self.on_release is not None:
            self.on_release()
        try:
            os.ftruncate(self.fd, 0)
        except OSError:
            pass  # a full or read-only disk: the lock still goes with the descriptor
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def describe(record: dict[str, Any] | None) -> str:
    """The holder in words.

    >>> describe({"pid": 42, "host": "box", "since": "2026-12-04T15:00:00Z", "what": "genenv run"})
    'genenv run (PID 42 on box, since 2026-12-04T15:00:00Z)'
    >>> describe(None)
    'another process (it did not say which)'
    """
    if not record:
        return "another process (it did not say which)"
    return (
        f"{record.get('what', 'a process')} (PID {record.get('pid', '?')} on {record.get('host', '?')}, "
        f"since {record.get('since', '?')})"
    )


def _read(fd: int) -> dict[str, Any] | None:
    try:
        raw = os.pread(fd, 4096, 0)
        return json.loads(raw) if raw.strip() else None
    except (OSError, ValueError):
        return None


def _record(what: str) -> dict[str, Any]:
    """The holder record this process writes into a lock file it holds."""
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "what": what,
    }


def _open(folder: Path) -> int:
    try:
        return os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise SessionUnwritable(
                f"cannot run {folder}: its folder is not writable ({exc.strerror}); copy the "
                "session to a writable place and resume it there"
            ) from None
        raise


def acquire(folder: str | Path, what: str) -> Lease:
    """Take the session's lease for this process, or raise `SessionBusy` naming the live holder.

    ``what`` says what holds it (``genenv run``, ``console``, ...). A lock that the filesystem refuses to give
    (``ENOLCK``, some network filesystems) raises `SessionUnwritable` rather than running unguarded.
    """
    folder = Path(folder)
    fd = _open(folder)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        record = _read(fd)
        os.close(fd)
        raise SessionBusy(
            f"{folder} is being run by {describe(record)}: wait for it to finish or stop it "
            "(the console opened on the session follows it)",
            record,
        ) from None
    except OSError as exc:
        os.close(fd)
        raise SessionUnwritable(
            f"cannot lock {folder / LOCK_NAME} ({exc.strerror}): this filesystem does not "
            "support the lock that keeps two engines off one session"
        ) from None
    previous = _read(fd)
    record = _record(what)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
    except OSError as exc:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        raise SessionUnwritable(f"cannot write {folder / LOCK_NAME} ({exc.strerror})") from None
    return Lease(folder, fd, record, previous)


def holder(folder: str | Path) -> dict[str, Any] | None:
    """Who holds the session now (its record), or None when no live process does (a dead holder's record
    does not count). Never takes the lease."""
    path = Path(folder) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(fd) or {"what": "another process"}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


@contextlib.contextmanager
def waiting_lock(
    path: str | Path,
    check: Callable[[], None] = lambda: None,
    on_wait: Callable[[dict[str, Any] | None], None] = lambda holder: None,
    poll: float = 1.0,
    what: str = "genenv",
) -> Iterator[None]:
    """Hold an OS lock on the file ``path`` (created if missing) for the ``with`` block, waiting while another
    process holds it: ``on_wait`` gets the holder's record once, when this process has to wait, and ``check``
    runs between polls (it may raise to give up waiting). Used where two processes would otherwise do the same
    long work at once (a warm-start cache entry), so the second waits and then reuses the first's result. The
    record written while held names this process and ``what`` it does. A filesystem that refuses ``flock`` is
    not locked: the block runs at once, as it would without the lock.

    >>> import tempfile
    >>> with waiting_lock(Path(tempfile.mkdtemp()) / "entry.lock"):
    ...     print("held")
    held
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        waited, locked = False, True
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not waited:
                    on_wait(_read(fd))
                    waited = True
                check()
                time.sleep(poll)
            except OSError:  # no flock on this filesystem: run unguarded, as before the lock existed
                locked = False
                break
        if locked:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.pwrite(fd, json.dumps(_record(what)).encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
