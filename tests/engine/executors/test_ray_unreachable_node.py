"""A real Ray head whose GCS port answers but which advertises an address the driver's machine cannot reach.

The head runs in a network namespace of its own (``unshare -n``) with its node address, 198.51.100.7 (TEST-NET-2),
on that namespace's loopback. The driver (genenv, in a child process) runs in a second namespace whose default
route leads, over a veth pair, into a third one that does not forward: packets to the head's node address vanish
there without an answer, as they do to a private address of another network (a head in a container, a VM, or
behind a tunnel). A forwarder in this test process (threads entering the namespaces with ``setns``) makes the
head's GCS port answer at a port of the driver's namespace, so the head answers at ``HOST:PORT`` and only the
address it advertises is out of reach.

Everything lives in the namespaces of processes this module starts in their own process groups: ending them
(`ray start --block` ends the Ray processes it started) removes the namespaces and the veth pair; nothing on the
machine's own network is changed. Skipped where the tools (``ip``, ``unshare``, ``nsenter``) or the privileges
(creating network namespaces and veth pairs: root, or CAP_SYS_ADMIN and CAP_NET_ADMIN) are missing, and when the
``ray`` extra is not installed.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray

ray = pytest.importorskip("ray")

NODE_IP = "198.51.100.7"
"""The address the head advertises: a documentation network, local to the head's namespace only."""
DRIVER_IP = "10.77.0.2"
"""The driver's namespace's own address (on its veth end); Ray takes it for the local machine's address."""
GCS_PORT = 6390
"""The head's GCS port inside its namespace."""
CLONE_NEWNET = 0x40000000
LOOPBACK_JOIN = 20.0
"""The join limit of the loopback test: Ray names the address it tried only when its own 5 s wait for the GCS
ends, and that wait starts after ``import ray``, which takes seconds on a loaded machine."""

HEAD = """set -e
ip link set lo up
ip addr add {ip}/32 dev lo
exec "$RAY_BIN" start --head --block --node-ip-address={ip} --port={port} --num-cpus=1 --include-dashboard=false \
  --disable-usage-stats --temp-dir="$RAY_TMP"
"""
"""The head's namespace: its node address on loopback, then a head that ends its processes when it is ended."""

DRIVER = """set -e
ip link set lo up
unshare -n sleep infinity &
sink=$!
while [ "$(readlink /proc/$sink/ns/net)" = "$(readlink /proc/$$/ns/net)" ]; do sleep 0.05; done
ip link add gx0 type veth peer name gx1 netns $sink
ip addr add {ip}/24 dev gx0
ip link set gx0 up
nsenter -t $sink -n sh -c 'ip addr add {gateway}/24 dev gx1 && ip link set gx1 up'
ip route add default via {gateway}
echo ready
wait
"""
"""The driver's namespace: a default route into a sink namespace that drops what it is sent."""


def missing_tools() -> str | None:
    """Why the namespaces cannot be built here, or None."""
    if not sys.platform.startswith("linux"):
        return "network namespaces are Linux's"
    absent = [tool for tool in ("ip", "unshare", "nsenter") if shutil.which(tool) is None]
    if absent:
        return f"needs {', '.join(absent)} (iproute2, util-linux)"
    try:
        trial = subprocess.run(
            ["unshare", "-n", "sh", "-c", "ip link add gx0 type veth peer name gx1"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare -n failed: {exc}"
    if trial.returncode != 0:
        return (
            f"cannot create a network namespace with a veth pair (root or CAP_SYS_ADMIN/CAP_NET_ADMIN): "
            f"{trial.stderr.strip()[:200]}"
        )
    return None


def enter(pid: int) -> None:
    """Move the calling thread into the network namespace of process ``pid`` (a thread's own, on Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into the network namespace of {pid}")
    finally:
        os.close(fd)


class Forwarder:
    """Accept TCP connections at ``host`` (an ephemeral port, `port`) in the namespace of ``listen_pid`` and pipe
    each to ``127.0.0.1:target_port`` in the namespace of ``target_pid``."""

    def __init__(self, listen_pid: int, host: str, target_pid: int, target_port: int) -> None:
        self.target_pid, self.target_port = target_pid, target_port
        self.port = 0
        ready = threading.Event()
        failed: list[BaseException] = []

        def listen() -> None:
            try:
                enter(listen_pid)
                self.server = socket.create_server((host, 0))
                self.port = self.server.getsockname()[1]
            except BaseException as exc:  # noqa: BLE001 - reported by the constructor
                failed.append(exc)
                return
            finally:
                ready.set()
            while True:
                try:
                    conn, _ = self.server.accept()
                except OSError:
                    return  # closed
                threading.Thread(target=self._pipe, args=(conn,), daemon=True).start()

        threading.Thread(target=listen, daemon=True).start()
        ready.wait(30)
        if failed or not self.port:
            raise RuntimeError(f"forwarder did not start: {failed}")

    def _pipe(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            enter(self.target_pid)
            with socket.create_connection(("127.0.0.1", self.target_port), timeout=10) as up:
                up.settimeout(None)
                sel = selectors.DefaultSelector()
                sel.register(conn, selectors.EVENT_READ, up)
                sel.register(up, selectors.EVENT_READ, conn)
                while True:
                    for key, _ in sel.select():
                        data = key.fileobj.recv(65536)
                        if not data:
                            return
                        key.data.sendall(data)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.server.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.server.close()


def end(process: subprocess.Popen, seconds: float = 20.0) -> None:
    """End ``process`` (SIGTERM), then, after ``seconds`` or at once when it is gone, its whole process group."""
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(seconds)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(10)


class Cluster:
    """The head, the driver's namespace and the forwarders; `run` runs a command in the driver's namespace."""

    def __init__(self, head: subprocess.Popen, driver: subprocess.Popen) -> None:
        self.head, self.driver = head, driver
        self.port = 0
        """The GCS port at every address of the driver's namespace (``127.0.0.1``, `DRIVER_IP`)."""
        self.loopback_port = 0
        """The GCS port at ``127.0.0.1`` only of the driver's namespace."""

    def run(self, argv: list[str], timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["nsenter", f"--net=/proc/{self.driver.pid}/ns/net", *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            cwd=Path(__file__).parents[3],
        )


def wait_for(check, seconds: float, what: str, log: Path | None = None) -> None:
    """Poll ``check()`` for ``seconds``; skip (naming ``what`` and the tail of ``log``) when it never holds."""
    end_at = time.monotonic() + seconds
    while time.monotonic() < end_at:
        if check():
            return
        time.sleep(0.5)
    tail = log.read_text(errors="replace")[-600:] if log and log.exists() else ""
    pytest.skip(f"{what} within {seconds:g} s: {tail}")


@pytest.fixture(scope="module")
def cluster():
    """A head advertising `NODE_IP`, reachable by its GCS port only, from a driver namespace that drops packets
    sent to that address. Ended, with its namespaces, after the module's tests, also when they fail."""
    why = missing_tools()
    if why:
        pytest.skip(why)
    folder = Path(tempfile.mkdtemp(prefix="gx-ray-", dir="/tmp"))  # short: Ray's socket paths are length-limited
    log = folder / "head.log"
    env = {
        **os.environ,
        "RAY_BIN": str(Path(sys.executable).with_name("ray")),
        "RAY_TMP": str(folder / "r"),
        "RAY_AUTH_MODE": "disabled",
        "RAY_worker_niceness": "0",
    }
    started: list[subprocess.Popen] = []
    forwarders: list[Forwarder] = []
    try:
        with open(log, "w") as out:
            head = subprocess.Popen(
                ["unshare", "-n", "sh", "-c", HEAD.format(ip=NODE_IP, port=GCS_PORT)],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        started.append(head)
        driver = subprocess.Popen(
            ["unshare", "-n", "sh", "-c", DRIVER.format(ip=DRIVER_IP, gateway="10.77.0.1")],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        started.append(driver)
        line = driver.stdout.readline().strip()
        if line != "ready":
            pytest.skip(f"the driver's namespace was not built: {line} {driver.stdout.read()[:300]}")
        wait_for(
            lambda: head.poll() is None and "Ray runtime started" in log.read_text(errors="replace"),
            120,
            "the head did not start",
            log,
        )
        here = Cluster(head, driver)
        forwarders.append(Forwarder(driver.pid, "0.0.0.0", head.pid, GCS_PORT))
        forwarders.append(Forwarder(driver.pid, "127.0.0.1", head.pid, GCS_PORT))
        here.port, here.loopback_port = forwarders[0].port, forwarders[1].port
        yield here
    finally:
        for forwarder in forwarders:
            forwarder.close()
        for process in reversed(started):
            end(process)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow  # about 50 s on the 2-core machine: the warm start, then Ray's own give-up (about 25 s)
def test_a_run_on_a_cluster_whose_node_is_unreachable_ends_in_one_line_and_resumes(cluster, tmp_path, capsys):
    """``genenv run --ray HOST:PORT`` from the driver's namespace: the head answers, the node address it
    advertises swallows the driver's packets (Ray, in the driver's process, would end the whole process from its
    core after about 25 s, printing one C++ log line and no Python exception). genenv exits with status 2 and one
    line on stderr that names the address, the advertised address Ray tried and what to check; no traceback. The
    check comes before the warm start, so no epoch is left partial, and `resume --ray none` runs the session to
    the end in this process."""
    from genenv_engine.interfaces.cli import main

    folder = tmp_path / "s"
    address = f"{DRIVER_IP}:{cluster.port}"
    began = time.monotonic()
    done = cluster.run(
        [
            sys.executable,
            "-m",
            "genenv_engine.interfaces.cli",
            "run",
            "--preset",
            "micro",
            "--session",
            str(folder),
            "--epochs",
            "1",
            "--quiet",
            "--ray",
            address,
        ],
        timeout=400,
    )
    seconds = time.monotonic() - began
    err = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and len(err) == 1, done.stderr[-3000:]
    assert err[0].startswith(
        f"genenv: config error in 'ray.address': a driver started here could not join the Ray "
        f"cluster at {address}, though its head answers (Ray said: "
    ), err[0]
    assert f"{NODE_IP}:" in err[0] and "loopback" not in err[0] and err[0].endswith("nothing was run"), err[0]
    assert seconds < 300, seconds
    assert main(["status", str(folder), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["epochs"] == []  # checked before the warm start: nothing partial
    assert f'address = "{address}"' in (folder / "config.toml").read_text()
    assert main(["resume", str(folder), "--quiet", "--ray", "none"]) == 0
    capsys.readouterr()
    assert main(["status", str(folder), "--json"]) == 0
    assert [(e["epoch"], e["status"]) for e in json.loads(capsys.readouterr().out)["epochs"]] == [
        (0, "done"),
        (1, "done"),
    ]


def test_a_head_that_answers_on_loopback_only_is_given_up_after_the_join_limit(cluster):
    """The head answers at ``127.0.0.1:PORT`` of the driver's namespace only (as through an SSH tunnel); Ray takes
    the loopback address for the local machine's own address and retries that one for ever. `connect` gives up after
    `JOIN_SECONDS` (`LOOPBACK_JOIN` here) with one line naming both addresses, and leaves Ray uninitialised in the
    process."""
    code = (
        "import sys, time\n"
        "import ray\n"
        "from genenv_engine.core.errors import ConfigError\n"
        "from genenv_engine.executors import ray_exec, ray_join\n"
        f"ray_join.JOIN_SECONDS = {LOOPBACK_JOIN}\n"
        "began = time.monotonic()\n"
        "try:\n"
        "    ray_exec.connect(sys.argv[1], 1)\n"
        "except ConfigError as exc:\n"
        "    print(f'{time.monotonic() - began:.1f}', ray.is_initialized())\n"
        "    print(exc)\n"
    )
    address = f"127.0.0.1:{cluster.loopback_port}"
    done = cluster.run([sys.executable, "-c", code, address], timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    timing, message = done.stdout.strip().splitlines()
    seconds, initialised = timing.split()
    assert float(seconds) < LOOPBACK_JOIN + 30 and initialised == "False", timing
    assert message.startswith(
        f"config error in 'ray.address': a driver started here did not join the Ray cluster "
        f"at {address} within {LOOPBACK_JOIN:g} s, though its head answers (Ray said: "
    ), message
    assert f"{DRIVER_IP}:{cluster.loopback_port}" in message  # what Ray tried instead
    assert "Ray takes a loopback address for the local machine's own" in message
    assert message.endswith("nothing was run")
