"""Untrusted calls (a third-party scorer that evaluates a model's reply) run in a contained worker process under a
wall-clock limit.

Provides `Sandbox` (``Sandbox(function, seconds=...).call(*args)`` runs ``function(*args)`` in a forked worker and
returns its result, JSON-decoded), `unavailable_reason` (why containment cannot work where it runs, or None),
`contain` (the worker's containment, applied to the calling process for good: for a child process of one's own) and
the errors a call raises, each with the ``genenv_reason`` a rollout records: `SandboxTimeout` (``score_timeout``: past
the limit, the worker killed), `SandboxRaised` (``score_error``: the function raised there, named by its type),
`SandboxFailed` (``score_error``: the worker died or answered something other than a well-formed reply) and their
base `SandboxError` (raised itself when a contained call cannot be contained: ``sandbox_unavailable``).

The worker is forked on the first call and again after a timeout or a crash; it serves one call at a time. Before
it runs anything it replaces every file descriptor it inherited, but its two pipes, with ``/dev/null`` (so nothing
reaches the parent's database, lease or logs), caps its resources (no file growth, no core, uncontained no new
process where ``RLIMIT_NPROC`` applies, i.e. not for root, and at most 2 GiB more address space than it was
forked with, so a memory bomb ends in MemoryError), and, when contained, installs the seccomp filter of
`genenv_engine.environments.seccomp`: no writing to the filesystem, no process, no program, no socket, no signal to
another process. Arguments go to the worker pickled (this process is trusted); the result comes back as JSON, at
most `REPLY_LIMIT` bytes, which this process parses and checks and never unpickles. Each request carries a fresh
random id that its reply must echo, so a reply the function forges for an earlier call is skipped. A worker serves
many calls: what one call changes in it (a patched module, a thread left running) persists into the next ones.
"""

from __future__ import annotations

import json
import os
import pickle
import platform
import resource
import select
import signal
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from genenv_engine.environments import seccomp

REPLY_LIMIT = 1 << 20
"""The most bytes of JSON a worker's reply may have."""

ADDRESS_SPACE_HEADROOM = 2 << 30
"""How much more address space than its size at the fork a worker may map (RLIMIT_AS)."""

REPLY_FD: int | None = None
"""In a worker, the file descriptor its replies go to (None in any other process)."""

HEADER = struct.Struct(">Q")
"""Each frame on a worker's pipes: its length, then the bytes (a pickle to the worker, JSON back)."""


class SandboxError(RuntimeError):
    """A sandboxed call did not return; raised as itself when a contained call cannot be contained here."""

    genenv_reason = "sandbox_unavailable"


class SandboxTimeout(SandboxError):
    """The call ran past its limit: the worker was killed (the next call forks a new one)."""

    genenv_reason = "score_timeout"


class SandboxFailed(SandboxError):
    """The worker died during the call, or answered something that is not a well-formed reply."""

    genenv_reason = "score_error"


class SandboxRaised(SandboxError):
    """The function raised in the worker: ``kind`` is the exception's type name, ``message`` its first 200
    characters.

    >>> error = SandboxRaised("ZeroDivisionError", "division by zero")
    >>> str(error), error.genenv_reason, pickle.loads(pickle.dumps(error)).kind
    ('ZeroDivisionError: division by zero', 'score_error', 'ZeroDivisionError')
    """

    genenv_reason = "score_error"

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind, self.message = kind, message

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return type(self), (self.kind, self.message)


class _Late(Exception):
    """The deadline passed while talking to the worker."""


class _Closed(Exception):
    """The worker closed its end of a pipe."""


class _Malformed(Exception):
    """The worker sent bytes that are not a well-formed reply."""


_reason_lock = threading.Lock()
_reason: list[str | None] = []


def unavailable_reason() -> str | None:
    """None when a contained worker works where it runs (64-bit little-endian Linux on x86_64 or aarch64, whose
    kernel installs the seccomp filter: tried once, in a throwaway forked child, and remembered); else one line
    saying why not."""
    with _reason_lock:
        if not _reason:
            _reason.append(_probe())
        return _reason[0]


def _probe() -> str | None:
    machine = platform.machine()
    if not sys.platform.startswith("linux"):
        return f"the seccomp filter needs Linux, and this is {sys.platform}"
    if machine not in seccomp.MACHINES:
        return f"there is no syscall table for {machine} (only {', '.join(seccomp.MACHINES)})"
    if struct.calcsize("P") != 8 or sys.byteorder != "little":
        return "the seccomp filter needs a 64-bit little-endian Python"
    try:
        seccomp.libc()
    except OSError as exc:
        return f"libc could not be loaded by ctypes: {exc}"
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the throwaway child: install the filter, see that it refuses a harmless call
        try:
            os.close(read_end)
            seccomp.install(seccomp.filter_program(machine, os.getpid()), machine)
            try:
                os.rmdir(f"/genenv-sandbox-probe-{os.getpid()}")  # absent: ENOENT unless the filter refuses it
                message = "rmdir was not refused under the filter"
            except PermissionError:
                message = ""
            except OSError as exc:
                message = f"rmdir was not refused under the filter ({exc.strerror})"
        except BaseException as exc:  # noqa: BLE001 - anything at all becomes the reason
            message = f"the filter could not be installed: {type(exc).__name__}: {exc}"
        finally:
            try:
                os.write(write_end, (message or "ok").encode()[:500])
            finally:
                os._exit(0)
    os.close(write_end)
    try:
        answer = _read_all(read_end, time.monotonic() + 10)
    finally:
        os.close(read_end)
        _kill(pid)
        status = _reap(pid)
    if answer == b"ok":
        return None
    return " ".join(answer.decode(errors="replace").split()) or f"the probe child {describe_exit(status)}"


def _read_all(fd: int, deadline: float) -> bytes:
    """Everything ``fd`` gives until its end or the deadline."""
    chunks = []
    while _wait(fd, select.POLLIN, deadline) and (chunk := os.read(fd, 4096)):
        chunks.append(chunk)
    return b"".join(chunks)


def describe_exit(status: int | None) -> str:
    """How a process ended, from its raw ``waitpid`` status.

    >>> describe_exit(signal.SIGKILL), describe_exit(3 << 8), describe_exit(None)
    ('was killed by SIGKILL', 'exited with code 3', 'ended (its status was collected elsewhere)')
    """
    if status is None:
        return "ended (its status was collected elsewhere)"
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def decode_reply(body: bytes) -> dict[str, Any]:
    """A worker's reply, checked: an object with the request's ``id`` and exactly one of ``value`` (what the
    function returned), ``raised`` (its exception's type name and message) or ``failed`` (why the worker could not
    answer). Raises `_Malformed` on anything else.

    >>> decode_reply(b'{"id": "a1", "value": [1, 2.5, null]}')
    {'id': 'a1', 'value': [1, 2.5, None]}
    >>> decode_reply(b'{"id": "a1", "raised": ["ValueError", "no"]}')["raised"]
    ['ValueError', 'no']
    >>> def refused(body):
    ...     try:
    ...         decode_reply(body)
    ...     except _Malformed:
    ...         return True
    >>> [refused(body) for body in (b'\\xff', b'[1]', b'{"id": "a1"}', b'{"id": 1, "value": 2}',
    ...                             b'{"id": "a", "raised": [1]}')]
    [True, True, True, True, True]
    """
    try:
        reply = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise _Malformed(f"the reply is not JSON ({type(exc).__name__})") from None
    if not (isinstance(reply, dict) and len(reply) == 2 and isinstance(reply.get("id"), str)):
        raise _Malformed("the reply is not an object with an id and one answer")
    if "value" in reply:
        return reply
    raised = reply.get("raised")
    if isinstance(raised, list) and len(raised) == 2 and all(isinstance(part, str) for part in raised):
        return reply
    if isinstance(reply.get("failed"), str):
        return reply
    raise _Malformed("the reply's answer is neither a value, an exception nor a failure")


def vm_size(status: str) -> int | None:
    """The virtual size, in bytes, in the text of ``/proc/<pid>/status`` (None when it is not there).

    >>> vm_size("Name:\\tpython\\nVmPeak:\\t  20 kB\\nVmSize:\\t   12345 kB\\n")
    12641280
    """
    for line in status.splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return None


def _wait(fd: int, event: int, deadline: float) -> bool:
    """Whether ``fd`` is ready for ``event`` (or closed) before the deadline."""
    poller = select.poll()
    poller.register(fd, event)
    while (left := deadline - time.monotonic()) > 0:
        if poller.poll(max(1, int(left * 1000 + 1))):
            return True
    return False


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _reap(pid: int) -> int | None:
    """Wait for ``pid`` (already ended or killed) and return its raw status (None if collected elsewhere)."""
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return None


# ---- the worker (runs in the forked child) ----


def _blank_descriptors(keep: set[int]) -> None:
    """Point every open file descriptor but ``keep`` at /dev/null (read and write)."""
    folder = "/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"
    listed = [int(name) for name in os.listdir(folder)]
    null = os.open(os.devnull, os.O_RDWR)
    for fd in listed:
        if fd not in keep and fd != null:
            try:
                os.fstat(fd)  # the listing's own descriptor, closed since, is left closed
            except OSError:
                continue
            os.dup2(null, fd)
    os.close(null)


def _limit_resources(contained: bool) -> None:
    """No file growth, no core file, a bounded address space, and, uncontained, no new process (for a user other
    than root; contained, the filter refuses new processes and threads stay allowed)."""
    size = None
    if os.path.exists("/proc/self/status"):
        with open("/proc/self/status", encoding="ascii", errors="replace") as file:
            size = vm_size(file.read())
    limits = [(resource.RLIMIT_FSIZE, 0), (resource.RLIMIT_CORE, 0)]
    if not contained:
        limits.append((resource.RLIMIT_NPROC, 0))
    if size is not None:
        limits.append((resource.RLIMIT_AS, size + ADDRESS_SPACE_HEADROOM))
    for which, value in limits:
        hard = resource.getrlimit(which)[1]
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))


def contain(contained: bool = True, keep: Iterable[int] = (0, 1, 2)) -> None:
    """Contain this process for good, as a worker is before it runs anything: every open file descriptor but
    ``keep`` (by default stdin, stdout and stderr) pointed at /dev/null, its resources capped, and, when
    ``contained``, the seccomp filter installed. For a child process of its own that runs untrusted code and then
    ends; raises `SandboxError` when ``contained`` and `unavailable_reason` is not None (nothing is changed then)."""
    if contained and (reason := unavailable_reason()) is not None:
        raise SandboxError(f"this process cannot be contained here: {reason}")
    _apply(contained, set(keep))


def _apply(contained: bool, keep: set[int]) -> None:
    """`contain` once it is known to work (a worker does not ask again: a lock held at the fork would hang it)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past RLIMIT_FSIZE then fails with EFBIG
    _blank_descriptors(keep)
    _limit_resources(contained)
    if contained:
        machine = platform.machine()
        seccomp.install(seccomp.filter_program(machine, os.getpid()), machine)


def _contain(contained: bool, parent: int, keep: set[int]) -> None:
    """Everything the worker does before it reads its first request."""
    for number in signal.valid_signals():  # the parent's Python handlers are not the worker's
        try:
            if callable(signal.getsignal(number)):
                signal.signal(number, signal.SIG_DFL)
        except (OSError, ValueError, TypeError):
            pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the parent, which kills the worker
    signal.set_wakeup_fd(-1)  # the parent's (asyncio's) wakeup descriptor is about to be /dev/null
    if sys.platform.startswith("linux"):
        try:
            seccomp.die_with_parent(signal.SIGKILL)  # killed if the thread that forked it ends
        except OSError:
            pass  # no libc by ctypes: a worker left looping would outlive the parent
        if os.getppid() != parent:  # the parent ended before the line above
            os._exit(0)
    _apply(contained, keep)


def _read_exactly(fd: int, size: int) -> bytes | None:
    """``size`` bytes from ``fd`` (blocking); None if it ends first."""
    data = bytearray()
    while len(data) < size:
        chunk = os.read(fd, min(size - len(data), 1 << 20))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _read_frame(fd: int) -> bytes | None:
    """One frame from ``fd`` (blocking); None at its end."""
    header = _read_exactly(fd, HEADER.size)
    return None if header is None else _read_exactly(fd, HEADER.unpack(header)[0])


def _write_frame(fd: int, body: bytes) -> None:
    view = memoryview(HEADER.pack(len(body)) + body)
    while view:
        view = view[os.write(fd, view) :]


def _text(exc: BaseException) -> tuple[str, str]:
    try:
        kind = str(type(exc).__name__)[:100]
    except BaseException:  # noqa: BLE001 - a hostile type
        kind = "BaseException"
    try:
        message = str(exc)[:200]
    except BaseException:  # noqa: BLE001 - a hostile __str__
        message = "<unprintable>"
    return kind, message


def _answer(function: Callable[..., Any], request: str, args: tuple) -> bytes:
    """The JSON reply to one call."""
    try:
        body = json.dumps({"id": request, "value": function(*args)}).encode()
    except BaseException as exc:  # noqa: BLE001 - SystemExit and MemoryError too: all go back by their type
        body = json.dumps({"id": request, "raised": list(_text(exc))}).encode()
    if len(body) > REPLY_LIMIT:
        failure = f"the result is {len(body)} bytes of JSON, over the limit of {REPLY_LIMIT}"
        body = json.dumps({"id": request, "failed": failure}).encode()
    return body


def _serve(function: Callable[..., Any], contained: bool, parent: int, requests: int, replies: int) -> None:
    """The worker: contained, then the function called for each request until the parent closes the pipe."""
    global REPLY_FD
    REPLY_FD = replies
    try:
        _contain(contained, parent, {requests, replies})
        failure = None
    except Exception as exc:  # noqa: BLE001 - reported on every call; nothing runs uncontained
        failure = "the worker could not be contained: {}: {}".format(*_text(exc))
    while (frame := _read_frame(requests)) is not None:
        request, args = pickle.loads(frame)  # from the parent: trusted
        if failure is None:
            body = _answer(function, request, args)
        else:
            body = json.dumps({"id": request, "failed": failure}).encode()
        _write_frame(replies, body)


# ---- the parent's side ----


class _Worker:
    """One forked worker: its pid and the parent's ends of its two pipes."""

    def __init__(self, function: Callable[..., Any], contained: bool) -> None:
        if sys.platform.startswith("linux"):
            try:
                seccomp.libc()  # loaded here, so that the child finds it loaded
            except OSError:
                pass
        self.owner = os.getpid()
        to_child, self.requests = os.pipe()
        self.replies, from_child = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.close(self.requests)
                os.close(self.replies)
                _serve(function, contained, self.owner, to_child, from_child)
            except BaseException:  # noqa: BLE001 - the worker never returns into the parent's code
                code = 70
            finally:
                os._exit(code)
        self.pid, self.status, self.reaped = pid, None, False
        os.close(to_child)
        os.close(from_child)
        os.set_blocking(self.requests, False)

    def alive(self) -> bool:
        """Whether the worker still runs (if not, it is collected, and its pid never signalled again)."""
        if not self.reaped:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                pid, status = self.pid, None
            if pid:
                self.status, self.reaped = status, True
        return not self.reaped

    def send(self, body: bytes, deadline: float) -> None:
        view = memoryview(HEADER.pack(len(body)) + body)
        while view:
            if not _wait(self.requests, select.POLLOUT, deadline):
                raise _Late
            try:
                view = view[os.write(self.requests, view) :]
            except BlockingIOError:
                continue
            except BrokenPipeError:
                raise _Closed from None

    def receive(self, deadline: float) -> bytes:
        size = HEADER.unpack(self._read(HEADER.size, deadline))[0]
        if size > REPLY_LIMIT:
            raise _Malformed(f"the reply claims {size} bytes, over the limit of {REPLY_LIMIT}")
        return self._read(size, deadline)

    def _read(self, size: int, deadline: float) -> bytes:
        data = bytearray()
        while len(data) < size:
            if not _wait(self.replies, select.POLLIN, deadline):
                raise _Late
            chunk = os.read(self.replies, size - len(data))
            if not chunk:
                raise _Closed
            data += chunk
        return bytes(data)

    def end(self, kill: bool) -> int | None:
        """Close the pipes and collect the worker (killed first when ``kill``, or when it lingers); its status."""
        for fd in (self.requests, self.replies):
            try:
                os.close(fd)
            except OSError:
                pass
        if not kill:  # it closed its pipe: it is ending; give it a moment to end by itself
            for _ in range(100):
                if not self.alive():
                    break
                time.sleep(0.005)
        if not self.reaped:
            _kill(self.pid)
            self.status, self.reaped = _reap(self.pid), True
        return self.status


class Sandbox:
    """``function`` called in a worker process: at most ``seconds`` per call, contained (the seccomp filter) unless
    ``contained`` is False (then the worker still has no inherited descriptors, capped resources and the limit).
    ``name`` labels its errors. Calls from several threads take turns. A pickled Sandbox arrives unstarted."""

    def __init__(self, function: Callable[..., Any], *, seconds: float, contained: bool = True, name: str = "") -> None:
        if not seconds > 0:
            raise ValueError(f"seconds must be above 0, not {seconds!r}")
        self.function, self.seconds, self.contained = function, seconds, contained
        self.name = name or getattr(function, "__qualname__", repr(function))
        self._lock = threading.Lock()
        self._worker: _Worker | None = None

    @property
    def pid(self) -> int | None:
        """The worker's process id (None before the first call and after `stop`)."""
        worker = self._worker
        return worker.pid if worker is not None else None

    def call(self, *args: Any) -> Any:
        """``function(*args)`` run in the worker (forked now if there is none); its result, JSON-decoded. Raises
        `SandboxTimeout`, `SandboxRaised`, `SandboxFailed`, or `SandboxError` when ``contained`` and the host
        cannot contain it."""
        if self.contained and (reason := unavailable_reason()) is not None:
            raise SandboxError(f"{self.name}: the call cannot be contained here: {reason}")
        request = os.urandom(8).hex()
        body = pickle.dumps((request, args), protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            deadline = time.monotonic() + self.seconds
            if self._worker is not None and (self._worker.owner != os.getpid() or not self._worker.alive()):
                self._end(kill=True)
            if self._worker is None:
                self._worker = _Worker(self.function, self.contained)
            worker = self._worker
            try:
                worker.send(body, deadline)
                while (reply := decode_reply(worker.receive(deadline)))["id"] != request:
                    pass  # a reply forged for an earlier call
            except _Late:
                self._end(kill=True)
                raise SandboxTimeout(f"{self.name} ran past {self.seconds:g} s; its worker was killed") from None
            except _Closed:
                status = self._end(kill=False)
                raise SandboxFailed(f"{self.name}: the worker {describe_exit(status)}") from None
            except _Malformed as exc:
                self._end(kill=True)
                raise SandboxFailed(f"{self.name}: {exc}; the worker was killed") from None
            except BaseException:  # interrupted while waiting (Ctrl-C, an alarm): the worker may still be busy
                self._end(kill=True)
                raise
        if "value" in reply:
            return reply["value"]
        if "raised" in reply:
            raise SandboxRaised(*reply["raised"])
        raise SandboxFailed(f"{self.name}: {reply['failed']}")

    def stop(self) -> None:
        """Kill the worker, if there is one (the next call forks a new one)."""
        with self._lock:
            self._end(kill=True)

    def _end(self, kill: bool) -> int | None:
        worker, self._worker = self._worker, None
        if worker is None or worker.owner != os.getpid():  # a forked copy of this Sandbox: not its worker
            return None
        return worker.end(kill)

    def __getstate__(self) -> dict[str, Any]:
        return {"function": self.function, "seconds": self.seconds, "contained": self.contained, "name": self.name}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(
            state["function"],
            seconds=state["seconds"],
            contained=state["contained"],  # type: ignore[misc]
            name=state["name"],
        )

    def __del__(self) -> None:
        try:
            self._end(kill=True)
        except Exception:  # noqa: BLE001 - at interpreter exit anything may be gone
            pass

    def __repr__(self) -> str:
        state = f"worker {self.pid}" if self.pid is not None else "not started"
        return f"Sandbox({self.name}, {self.seconds:g} s, {'contained' if self.contained else 'uncontained'}, {state})"
