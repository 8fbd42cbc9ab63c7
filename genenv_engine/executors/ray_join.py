"""Whether a Ray cluster given by address can be used from the host that runs genenv, checked before anything is run and
without joining it in this process: `check_reachable` (its head accepts a TCP connection within `REACH_SECONDS`)
and `check_joinable` (a trial driver in a child process joins it within `JOIN_SECONDS`), each failing with one
`ConfigError` line on ``ray.address``; `join_failure` reads the telling line out of a failed trial's output.

Ray is not imported here: the trial driver imports it in its own process
(`genenv_engine.executors.ray_exec.preflight` runs both checks).
"""

from __future__ import annotations

import contextlib
import os
import sys

from genenv_engine.core.errors import ConfigError

REACH_SECONDS = 5.0
"""How long `check_reachable` waits for a cluster's head to accept a connection."""
JOIN_SECONDS = 60.0
"""How long a trial driver (`check_joinable`) may take to join a cluster before it is taken to be unusable from
the local machine: ``ray.init`` on a head that answers but cannot be used from here can retry for ever."""

_HINT = (
    "each address the cluster advertises must be reachable from here (`ray status` on the head lists them; a "
    "head in a container, a VM or behind a tunnel often advertises one that only its own network reaches), or "
    "run with --ray local; nothing was run"
)
"""What to check, ending each message of `check_joinable`."""

_JOIN_TRIAL = """
import sys
import ray
try:
    ray.init(address=sys.argv[1], log_to_driver=False, configure_logging=False)
    ray.shutdown()
except Exception as exc:
    first = (str(exc).strip().splitlines() or [""])[0]
    print(f"genenv-join-error: {type(exc).__name__}: {first}", file=sys.stderr, flush=True)
    sys.exit(3)
"""
"""The trial driver `check_joinable` runs in a child process: join the cluster at ``argv[1]``, then leave."""


def check_reachable(address: str, seconds: float = REACH_SECONDS) -> None:
    """Raise `ConfigError` (``ray.address``) unless ``HOST:PORT`` accepts a TCP connection within ``seconds``:
    ``ray.init`` on an unreachable head retries for minutes, logging, before it fails. Other forms (``auto``,
    ``ray://...``) are left to Ray.

    >>> check_reachable("127.0.0.1:1")
    Traceback (most recent call last):
    ...
    genenv_engine.core.errors.ConfigError: config error in 'ray.address': cannot reach a Ray cluster at 127.0.0.1:1 ...
    """
    import socket

    if (parsed := host_port(address)) is None:
        return
    try:
        with socket.create_connection(parsed, timeout=seconds):
            pass
    except OSError as exc:
        raise ConfigError(
            "ray.address",
            f"cannot reach a Ray cluster at {address} ({exc.strerror or exc}): check "
            f"that `ray status --address {address}` works from the machine running genenv, or run with --ray local; "
            "nothing was run",
        ) from None


def host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a ``HOST:PORT`` address (the form `check_reachable` checks), else None.

    >>> host_port("10.0.0.1:6379"), host_port("[::1]:6379"), host_port("auto"), host_port("ray://h:10001")
    (('10.0.0.1', 6379), ('::1', 6379), None, None)
    """
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host or "://" in address:
        return None
    return host.strip("[]"), int(port)


def check_joinable(address: str, seconds: float | None = None) -> None:
    """Raise `ConfigError` (``ray.address``, one line) unless a trial driver in a child process joins the cluster
    at ``address`` within ``seconds`` (`JOIN_SECONDS`). A head that answers while an address the cluster
    advertises (its raylet's, or the head's own as Ray rewrites a loopback address) is not reachable from here
    makes ``ray.init`` in this process either retry for ever or end the whole process from Ray's core, with no
    Python exception to catch; in a child process the attempt can be timed, ended (its process group killed) and
    its last error read (`join_failure`)."""
    import signal
    import subprocess

    seconds = JOIN_SECONDS if seconds is None else seconds
    answers = ", though its head answers" if host_port(address) else ""  # checked by `check_reachable` first
    trial = subprocess.Popen(
        [sys.executable, "-c", _JOIN_TRIAL, address],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        _, err = trial.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(trial.pid, signal.SIGKILL)
        try:
            _, err = trial.communicate(timeout=10)
        except subprocess.TimeoutExpired:  # a descendant outside its group holds the pipe: read no further
            err = b""
        said = join_failure(err.decode(errors="replace"))
        loopback = (host_port(address) or ("",))[0] in ("127.0.0.1", "localhost", "::1")
        hint = (
            "Ray takes a loopback address for the local machine's own address, so the head must answer there too "
            "(a tunnel listening on loopback alone does not do); "
            if loopback
            else ""
        ) + _HINT
        raise ConfigError(
            "ray.address",
            f"a driver started here did not join the Ray cluster at {address} "
            f"within {seconds:g} s{answers} (Ray said: {said or 'nothing'}): "
            f"{hint}",
        ) from None
    if trial.returncode != 0:
        said = join_failure(err.decode(errors="replace")) or f"exit status {trial.returncode}"
        raise ConfigError(
            "ray.address",
            f"a driver started here could not join the Ray cluster at {address}{answers} (Ray said: {said}): {_HINT}",
        )


def join_failure(text: str, width: int = 240) -> str:
    """The telling part of a failed trial join's output: the last error line of Ray's core (the one that ended the
    driver), else its last warning, then the Python exception `_JOIN_TRIAL` reports, each cut to ``width``.

    >>> join_failure("[2026-01-01 00:00:00,000 W 1 1] gcs_client.cc:210: Failed to get cluster ID\\n"
    ...              "[2026-01-01 00:00:01,000 E 1 2] core_worker_process.cc:1029: Failed to get the system config "
    ...              "from raylet because it is dead. Status: RpcError: RPC error: failed to connect to all addresses; "
    ...              "last error: UNKNOWN: ipv4:10.0.0.7:41203: Failed to connect to remote host: Connection refused "
    ...              "rpc_code: 14 .Please see `raylet.out` for more details.")
    'failed to connect to all addresses; last error: UNKNOWN: ipv4:10.0.0.7:41203: Failed to connect to remote host: Connection refused'
    >>> join_failure("[2026-01-01 00:00:00,000 W 1 1] gcs_client.cc:210: Failed to get cluster ID: TimedOut\\n"
    ...              "genenv-join-error: ConnectionError: Failed to connect to Ray cluster at 10.0.0.2:6379")
    'Failed to get cluster ID: TimedOut; ConnectionError: Failed to connect to Ray cluster at 10.0.0.2:6379'
    >>> join_failure("")
    ''
    """  # noqa: E501
    import re

    core = {"E": "", "W": ""}
    python = ""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("genenv-join-error: "):
            python = line.removeprefix("genenv-join-error: ")
        elif found := re.match(r"^\[\S+ \S+ ([EFW]) \d+ \d+\] \S+:\d+: (.+)$", line):
            core["W" if found[1] == "W" else "E"] = found[2]
    said = core["E"] or core["W"]
    said = said.split("RPC error: ", 1)[-1].split(" rpc_code:", 1)[0].strip()
    return "; ".join(part[:width] for part in (said, python) if part)
