"""The sandbox worker: a benign call returns its JSON value; a hostile one (write, remove or lock a file, start a
process, open a socket, signal another process, write through an inherited descriptor, loop, exhaust memory, forge
or garble its reply) fails inside the worker and leaves the disk, the other processes and the parent as they were.

The hostile functions live at module level and run in the forked worker; `attempt` dispatches to them by name so
that one worker serves a whole parametrised test. The filter itself is also checked without a worker, through
`seccomp.evaluate`, on both machines' tables, and the tables against the installed kernel headers.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import platform
import re
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import sympy  # imported here, so that the forked worker has it loaded

from genenv_engine.environments import sandbox, seccomp
from genenv_engine.environments.sandbox import (
    Sandbox,
    SandboxError,
    SandboxFailed,
    SandboxRaised,
    SandboxTimeout,
    unavailable_reason,
)

REASON = unavailable_reason()
contained_only = pytest.mark.skipif(REASON is not None, reason=f"containment is unavailable here: {REASON}")
PRECIOUS = b"precious bytes\n"


# ---- the functions the worker runs ----


def add(*numbers):
    return sum(numbers)


def echo(value):
    return value


def write_new(folder):
    with open(os.path.join(folder, "new.txt"), "w") as file:
        file.write("x")


def os_open_new(folder):
    os.open(os.path.join(folder, "new.txt"), os.O_CREAT | os.O_WRONLY)


def append(folder):
    with open(os.path.join(folder, "existing.txt"), "a") as file:
        file.write("more")


def overwrite(folder):
    with open(os.path.join(folder, "existing.txt"), "r+b") as file:
        file.write(b"X")


def remove(folder):
    os.remove(os.path.join(folder, "existing.txt"))


def rename(folder):
    os.rename(os.path.join(folder, "existing.txt"), os.path.join(folder, "moved.txt"))


def make_dir(folder):
    os.mkdir(os.path.join(folder, "made"))


def truncate(folder):
    os.truncate(os.path.join(folder, "existing.txt"), 0)


def chmod(folder):
    os.chmod(os.path.join(folder, "existing.txt"), 0o777)


def symlink(folder):
    os.symlink("/etc/passwd", os.path.join(folder, "link"))


def touch_times(folder):
    os.utime(os.path.join(folder, "existing.txt"), (0, 0))


def lock(folder):
    with open(os.path.join(folder, "existing.txt"), "rb") as file:
        fcntl.flock(file, fcntl.LOCK_SH)


def posix_lock(folder):
    with open(os.path.join(folder, "existing.txt"), "rb") as file:
        fcntl.lockf(file, fcntl.LOCK_SH)


def system(folder):
    return os.system(f"touch {folder}/spawned")


def run(folder):
    subprocess.run(["touch", f"{folder}/spawned"])


def fork(folder):
    if os.fork() == 0:
        open(f"{folder}/spawned", "w").close()
        os._exit(0)


def execv(folder):
    os.execv("/usr/bin/touch", ["touch", f"{folder}/spawned"])


def posix_spawn(folder):
    os.posix_spawn("/usr/bin/touch", ["touch", f"{folder}/spawned"], dict(os.environ))


def write_descriptor(fd):
    """Writes through ``fd`` (a number the parent had open for writing) and says what the descriptor is now."""
    written = os.write(fd, b"overwritten")
    info = os.fstat(fd)
    return [written, info.st_ino, info.st_rdev]


def reopen_parents_descriptor(pid, fd):
    with open(f"/proc/{pid}/fd/{fd}", "wb") as file:
        file.write(b"overwritten")


def read_file(path):
    with open(path, encoding="utf-8") as file:
        return file.read()


def open_socket():
    socket.socket(socket.AF_INET, socket.SOCK_STREAM)


def signal_process(pid):
    os.kill(pid, signal.SIGTERM)


def signal_itself():
    """A signal to itself is allowed: its handler runs."""
    seen = []
    signal.signal(signal.SIGUSR1, lambda number, frame: seen.append(number))
    signal.raise_signal(signal.SIGUSR1)
    os.kill(os.getpid(), signal.SIGUSR1)
    return seen


def start_thread():
    results = []
    worker = threading.Thread(target=lambda: results.append(sum(range(10))))
    worker.start()
    worker.join()
    return results


def loop_forever():
    while True:
        pass


def allocate_at_once():
    return len(b"x" * 10**11)


def allocate_gradually():
    chunks = []
    while True:
        chunks.append(bytes(64 << 20))


def not_json():
    return {1, 2}


def too_large():
    return "x" * (2 << 20)


def garble(body, size=None):
    """Writes a frame of ``body`` (``size`` in its header) straight to the reply pipe, then returns normally."""
    header = sandbox.HEADER.pack(len(body) if size is None else size)
    os.write(sandbox.REPLY_FD, header + body.encode())
    return "the real result"


def exit_with(code):
    os._exit(code)


def kill_itself():
    os.kill(os.getpid(), signal.SIGKILL)


def parse(text):
    return str(sympy.parse_expr(text))


ACTIONS = {
    function.__name__: function
    for function in (
        write_new,
        os_open_new,
        append,
        overwrite,
        remove,
        rename,
        make_dir,
        truncate,
        chmod,
        symlink,
        touch_times,
        lock,
        posix_lock,
        system,
        run,
        fork,
        execv,
        posix_spawn,
        write_descriptor,
        reopen_parents_descriptor,
        read_file,
        open_socket,
        signal_process,
        signal_itself,
        start_thread,
        loop_forever,
        allocate_at_once,
        allocate_gradually,
        not_json,
        too_large,
        garble,
        exit_with,
        kill_itself,
        parse,
        echo,
        add,
    )
}


def attempt(action, *args):
    return ACTIONS[action](*args)


# ---- fixtures and helpers ----


@pytest.fixture(scope="module")
def worker():
    """One contained worker for the module's quick calls."""
    box = Sandbox(attempt, seconds=10, name="attempt")
    yield box
    box.stop()


def snapshot(folder: Path) -> dict[str, tuple[bytes | None, int, int]]:
    """Every entry of ``folder``: its bytes (None for a folder or link), mode and mtime in nanoseconds."""
    entries = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        content = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        entries[str(path.relative_to(folder))] = (content, info.st_mode, info.st_mtime_ns)
    return entries


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "existing.txt").write_bytes(PRECIOUS)
    (tmp_path / "existing.txt").chmod(0o644)
    return tmp_path


def raised(box: Sandbox, *args) -> SandboxRaised:
    with pytest.raises(SandboxRaised) as info:
        box.call(*args)
    return info.value


# ---- availability ----


def test_containment_is_available_on_linux_x86_64():
    if sys.platform == "linux" and platform.machine() == "x86_64":
        assert REASON is None
    else:
        assert REASON is None or isinstance(REASON, str) and "\n" not in REASON


def test_a_contained_call_that_cannot_be_contained_raises_and_starts_nothing(monkeypatch):
    monkeypatch.setattr(sandbox, "unavailable_reason", lambda: "no seccomp in this test")
    box = Sandbox(add, seconds=2)
    with pytest.raises(SandboxError) as info:
        box.call(1, 2)
    assert type(info.value) is SandboxError and "no seccomp in this test" in str(info.value)
    assert info.value.genenv_reason == "sandbox_unavailable" and box.pid is None
    assert Sandbox(add, seconds=2, contained=False).call(1, 2) == 3  # uncontained needs no filter


# ---- values ----


@contained_only
def test_a_benign_call_returns_its_value_and_the_worker_serves_the_next(worker):
    assert worker.call("add", 1, 2, 3.5) == 6.5
    pid = worker.pid
    value = {"a": [1, 2.5, None, "é"], "b": {"c": True}, "t": (1, 2)}
    assert worker.call("echo", value) == {"a": [1, 2.5, None, "é"], "b": {"c": True}, "t": [1, 2]}
    assert worker.pid == pid != os.getpid()


@contained_only
def test_the_worker_reads_files_and_starts_threads(worker, folder):
    assert worker.call("read_file", str(folder / "existing.txt")) == PRECIOUS.decode()
    assert worker.call("start_thread") == [45]
    assert worker.call("signal_itself") == [signal.SIGUSR1, signal.SIGUSR1]


@contained_only
def test_sympy_parses_in_the_contained_worker(worker):
    assert worker.call("parse", "x+1") == "x + 1"


# ---- the filesystem ----


@contained_only
@pytest.mark.parametrize(
    "action",
    [
        "write_new",
        "os_open_new",
        "append",
        "overwrite",
        "remove",
        "rename",
        "make_dir",
        "truncate",
        "chmod",
        "symlink",
        "touch_times",
        "lock",
        "posix_lock",
    ],
)
def test_no_change_to_the_filesystem(worker, folder, action):
    before = snapshot(folder)
    error = raised(worker, action, str(folder))
    assert (error.kind, error.genenv_reason) == ("PermissionError", "score_error")
    assert "Operation not permitted" in str(error)
    assert snapshot(folder) == before


@contained_only
def test_a_reply_that_sympy_evaluates_creates_nothing(worker, folder):
    before = snapshot(folder)
    assert worker.call("parse", f"__import__('os').system('touch {folder}/X')") == str(127 << 8)
    error = raised(worker, "parse", f"__import__('builtins').open('{folder}/Y', 'w')")
    assert error.kind == "PermissionError"
    assert snapshot(folder) == before


# ---- processes ----


@contained_only
@pytest.mark.parametrize("action", ["run", "fork", "execv", "posix_spawn"])
def test_no_process_starts(worker, folder, action):
    error = raised(worker, action, str(folder))
    assert error.kind == "PermissionError"
    time.sleep(0.05)
    assert not (folder / "spawned").exists()


@contained_only
def test_os_system_cannot_start_a_shell(worker, folder):
    assert os.waitstatus_to_exitcode(worker.call("system", str(folder))) == 127
    assert not (folder / "spawned").exists()


@pytest.mark.parametrize("contained", [True, False])
def test_a_descriptor_the_parent_holds_for_writing_is_dev_null_in_the_worker(tmp_path, contained):
    if contained and REASON is not None:
        pytest.skip(f"containment is unavailable here: {REASON}")
    target = tmp_path / "parent.db"
    target.write_bytes(PRECIOUS)
    fd = os.open(target, os.O_WRONLY)
    try:
        box = Sandbox(attempt, seconds=5, contained=contained)
        written, inode, device = box.call("write_descriptor", fd)
        null = os.stat(os.devnull)
        assert (written, inode, device) == (len(b"overwritten"), null.st_ino, null.st_rdev)
        if contained:
            assert raised(box, "reopen_parents_descriptor", os.getpid(), fd).kind == "PermissionError"
        box.stop()
    finally:
        os.close(fd)
    assert target.read_bytes() == PRECIOUS


def test_uncontained_still_cannot_grow_a_file(tmp_path):
    box = Sandbox(attempt, seconds=5, contained=False)
    error = raised(box, "write_new", str(tmp_path))
    assert error.kind == "OSError" and "File too large" in error.message
    assert (tmp_path / "new.txt").stat().st_size == 0  # created: only the filter refuses that
    box.stop()


# ---- sockets and signals ----


@contained_only
def test_no_socket(worker):
    assert raised(worker, "open_socket").kind == "PermissionError"


@contained_only
def test_no_signal_to_another_process(worker):
    victim = subprocess.Popen(["sleep", "30"])
    try:
        assert raised(worker, "signal_process", victim.pid).kind == "PermissionError"
        assert raised(worker, "signal_process", os.getpid()).kind == "PermissionError"
        assert raised(worker, "signal_process", 0).kind == "PermissionError"  # its process group
        time.sleep(0.05)
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()


# ---- time and memory ----


def test_a_call_past_its_limit_is_killed_and_the_next_call_has_a_fresh_worker():
    box = Sandbox(attempt, seconds=1, contained=REASON is None, name="looper")
    assert box.call("add", 1) == 1
    first = box.pid
    start = time.monotonic()
    with pytest.raises(SandboxTimeout) as info:
        box.call("loop_forever")
    assert time.monotonic() - start < 5
    assert info.value.genenv_reason == "score_timeout" and "looper ran past 1 s" in str(info.value)
    assert box.pid is None
    with pytest.raises(ChildProcessError):
        os.waitpid(first, os.WNOHANG)  # killed and collected
    assert box.call("add", 2, 3) == 5 and box.pid not in (None, first)
    box.stop()


@pytest.mark.parametrize("action", ["allocate_at_once", "allocate_gradually"])
def test_a_memory_bomb_fails_in_the_worker(action):
    box = Sandbox(attempt, seconds=10, contained=REASON is None)
    limits = resource.getrlimit(resource.RLIMIT_AS)
    error = raised(box, action)
    assert error.kind == "MemoryError"
    assert box.call("add", 4) == 4  # the same worker, its memory back
    assert resource.getrlimit(resource.RLIMIT_AS) == limits
    box.stop()


# ---- replies ----


@contained_only
def test_a_result_that_is_not_json_raises_type_error(worker):
    error = raised(worker, "not_json")
    assert error.kind == "TypeError" and "not JSON serializable" in error.message


@contained_only
def test_an_oversized_result_fails_and_the_worker_stays(worker):
    pid = worker.pid
    with pytest.raises(SandboxFailed, match="over the limit"):
        worker.call("too_large")
    assert worker.call("add", 1) == 1 and (pid is None or worker.pid == pid)


@pytest.mark.parametrize(
    "body, size, message",
    [
        ("{}", 1 << 40, "claims 1099511627776 bytes"),
        ("not json {", None, "not JSON"),
        ("[1, 2]", None, "not an object"),
        ('{"id": "x", "raised": "no"}', None, "neither a value"),
    ],
)
def test_garbage_on_the_reply_pipe_fails_and_kills_the_worker(body, size, message):
    box = Sandbox(attempt, seconds=5, contained=REASON is None)
    assert box.call("add", 1) == 1
    first = box.pid
    with pytest.raises(SandboxFailed, match=message) as info:
        box.call("garble", body, size)
    assert info.value.genenv_reason == "score_error" and box.pid is None
    assert box.call("add", 2) == 2 and box.pid != first
    box.stop()


def test_a_reply_forged_for_another_call_is_skipped():
    box = Sandbox(attempt, seconds=5, contained=REASON is None)
    forged = '{"id": "0000000000000000", "value": "forged"}'
    assert box.call("garble", forged) == "the real result"
    first = box.pid
    assert box.call("add", 7) == 7 and box.pid == first
    box.stop()


@pytest.mark.parametrize(
    "action, args, message", [("exit_with", (3,), "exited with code 3"), ("kill_itself", (), "was killed by SIGKILL")]
)
def test_a_worker_that_dies_mid_call_fails_and_is_replaced(action, args, message):
    box = Sandbox(attempt, seconds=5, contained=REASON is None)
    with pytest.raises(SandboxFailed, match=message):
        box.call(action, *args)
    assert box.pid is None and box.call("add", 8) == 8
    box.stop()


# ---- contain: this process, for good ----


CONTAINED_CHILD = """
import os, sys
from genenv_engine.environments.sandbox import contain
contain()
print(os.write(int(sys.argv[2]), b"overwritten"), flush=True)
try:
    open(sys.argv[1], "w")
except PermissionError:
    print("refused", flush=True)
"""


@contained_only
def test_contain_holds_a_child_process_of_its_own_keeping_its_output(tmp_path):
    target = tmp_path / "parent.db"
    target.write_bytes(PRECIOUS)
    fd = os.open(target, os.O_WRONLY)
    try:
        result = subprocess.run(
            [sys.executable, "-c", CONTAINED_CHILD, str(tmp_path / "new.txt"), str(fd)],
            pass_fds=(fd,),
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        os.close(fd)
    assert (result.returncode, result.stdout) == (0, "11\nrefused\n"), result.stderr
    assert target.read_bytes() == PRECIOUS and not (tmp_path / "new.txt").exists()


# ---- pickling, threads ----


def test_a_pickled_sandbox_arrives_unstarted_and_works():
    box = Sandbox(add, seconds=3, contained=REASON is None, name="adder")
    assert box.call(1) == 1
    copy = pickle.loads(pickle.dumps(box))
    assert (copy.function, copy.seconds, copy.contained, copy.name) == (add, 3, REASON is None, "adder")
    assert copy.pid is None
    assert copy.call(2, 3) == 5 and copy.pid not in (None, box.pid)
    copy.stop()
    box.stop()
    box.stop()  # idempotent
    assert box.pid is None


def test_calls_from_other_threads_take_turns():
    box = Sandbox(add, seconds=5, contained=REASON is None)
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(box.call, range(20), range(20))) == [2 * n for n in range(20)]
    box.stop()


# ---- the filter itself, and the tables ----


@pytest.mark.parametrize("machine", sorted(seccomp.MACHINES))
def test_the_filter_refuses_each_denied_syscall_and_allows_the_rest(machine):
    column = seccomp.MACHINES[machine][0]
    program = seccomp.filter_program(machine, pid=4242)
    nr = {name: numbers[column] for name, numbers in seccomp.SYSCALLS.items() if numbers[column] is not None}

    def answer(name, *args):
        return seccomp.evaluate(program, machine, nr[name], args)

    assert {name: answer(name) for name in seccomp.DENIED if name in nr} == {
        name: "errno EPERM" for name in seccomp.DENIED if name in nr
    }
    assert [answer(name) for name in seccomp.NOSYS] == ["errno ENOSYS"] * 2
    assert [answer("read"), answer("write"), answer("seccomp")] == ["allow"] * 3
    assert [answer("openat", -100, 0, flags) for flags in (0, 0o2000000, 1, 2, 0o100, 0o1000, 0o2000)] == [
        "allow",
        "allow",
    ] + ["errno EPERM"] * 5
    assert [answer("clone", 0x3D0F00), answer("clone", 0x1200011)] == ["allow", "errno EPERM"]
    assert [answer(name, 4242) for name in seccomp.SELF_ONLY] == ["allow"] * 5
    assert [answer(name, 4243) for name in seccomp.SELF_ONLY] == ["errno EPERM"] * 5
    assert [answer("ioctl", 0, 0x5401), answer("ioctl", 0, 0x5412), answer("ioctl", 0, 0x40086602)] == [
        "allow",
        "errno EPERM",
        "errno EPERM",
    ]
    assert [answer("fcntl", 0, 1), answer("fcntl", 0, 6), answer("fcntl", 0, 1024)] == [
        "allow",
        "errno EPERM",
        "errno EPERM",
    ]
    assert [answer("prlimit64", 0, 7, 0, 1), answer("prlimit64", 0, 7, 1 << 40)] == ["allow", "errno EPERM"]
    assert seccomp.evaluate(program, machine, 0, (), arch=0x40000003) == "kill"  # i386
    assert seccomp.evaluate(program, machine, seccomp.FIRST_UNKNOWN) == "errno ENOSYS"
    if machine == "x86_64":
        assert [answer("open", 0, 0), answer("open", 0, 0o101)] == ["allow", "errno EPERM"]


HEADERS = {0: Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"), 1: Path("/usr/include/asm-generic/unistd.h")}


@pytest.mark.parametrize("column", sorted(HEADERS))
def test_the_tables_match_the_kernel_headers(column):
    header = HEADERS[column]
    if not header.is_file():
        pytest.skip(f"{header} is not installed")
    numbers = dict(re.findall(r"#define __NR(?:3264)?_(\w+)\s+(\d+)", header.read_text()))
    known = {name: int(numbers[name]) for name in seccomp.SYSCALLS if name in numbers}
    assert len(known) > 90
    assert {name: seccomp.SYSCALLS[name][column] for name in known} == known
    absent = [name for name, pair in seccomp.SYSCALLS.items() if pair[column] is None]
    assert len(absent) == (0 if column == 0 else 19) and not any(name in numbers for name in absent)
