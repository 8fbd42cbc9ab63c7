"""A plugin environment's ``check`` and ``validate`` run in a worker process under a wall-clock limit.

Provides `time_limit_plugins` (``simulator.plugin_timeout`` above 0): every environment from outside genenv
(`genenv_engine.core.limits.third_party`) has its ``check`` and ``validate`` replaced, on that instance, by calls to a
forked worker process holding a copy of it. A call that runs past the limit kills the worker (the next call forks
a new one) and raises `PluginTimeout`, which the loop records as ``plugin_timeout`` (the task rejected, the rollout
failed) where it records a plugin's exception as ``plugin_error: <type>``; an exception the plugin raises comes
back as `PluginRaised` naming its type. `release_plugins` stops the workers and restores the methods. Built-in
environments are never wrapped, and with the limit at 0 nothing is: plugin calls then run in this process.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Mapping
from typing import Any

from genenv_engine.core.limits import third_party

METHODS = ("check", "validate")
"""The plugin methods run in the worker."""


class PluginTimeout(RuntimeError):
    """A plugin call ran past its wall-clock limit (``genenv_reason``: what the task or rollout is recorded as)."""

    genenv_reason = "plugin_timeout"


class PluginRaised(RuntimeError):
    """A plugin call raised in the worker: ``genenv_reason`` names the exception's type, as in this process."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.genenv_reason = f"plugin_error: {kind}"


def _serve(env: Any, conn: Any) -> None:
    """The worker: the environment's own methods, called as the parent asks, until the pipe closes."""
    for name in (*METHODS, "_plugin_worker"):
        vars(env).pop(name, None)  # this copy calls the class's methods (validate calls its own check here)
    while True:
        try:
            method, args, kwargs = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply = (True, getattr(env, method)(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - the plugin's own error, sent back by its type
            reply = (False, (type(exc).__name__, str(exc)[:200]))
        try:
            conn.send(reply)
        except Exception as exc:  # noqa: BLE001 - a result that does not pickle
            conn.send((False, (type(exc).__name__, str(exc)[:200])))


class _Worker:
    """One environment's worker process, forked when first called and again after a timeout."""

    def __init__(self, env: Any, seconds: float) -> None:
        self.env, self.seconds = env, seconds
        self.process: Any = None
        self.conn: Any = None

    def call(self, method: str, args: tuple, kwargs: dict) -> Any:
        if self.process is None or not self.process.is_alive():
            context = multiprocessing.get_context("fork")
            self.conn, child = context.Pipe()
            self.process = context.Process(target=_serve, args=(self.env, child), daemon=True)
            self.process.start()
            child.close()
        self.conn.send((method, args, kwargs))
        if not self.conn.poll(self.seconds):
            self.stop()
            raise PluginTimeout(f"{self.env.name}.{method} ran past {self.seconds:g} s")
        done, value = self.conn.recv()
        if not done:
            raise PluginRaised(*value)
        return value

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.join()
            self.conn.close()
            self.process = self.conn = None


def _method(worker: _Worker, name: str) -> Callable[..., Any]:
    return lambda *args, **kwargs: worker.call(name, args, kwargs)


def time_limit_plugins(envs: Mapping[str, Any], seconds: float) -> None:
    """Run each plugin environment's ``check`` and ``validate`` in a worker process limited to ``seconds`` per call
    (nothing when ``seconds`` is 0)."""
    if seconds <= 0:
        return
    for env in envs.values():
        if third_party(env) and "_plugin_worker" not in vars(env):
            worker = _Worker(env, seconds)
            env._plugin_worker = worker
            for name in METHODS:
                setattr(env, name, _method(worker, name))


def release_plugins(envs: Mapping[str, Any]) -> None:
    """Stop the workers `time_limit_plugins` started and give the environments their own methods back."""
    for env in envs.values():
        worker = vars(env).pop("_plugin_worker", None)
        if worker is not None:
            worker.stop()
            for name in METHODS:
                vars(env).pop(name, None)
