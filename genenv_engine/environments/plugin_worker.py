"""A plugin environment's calls run in a worker process under a wall-clock limit.

Provides `time_limit_plugins` (``simulator.plugin_timeout`` above 0): every environment from outside genenv
(`genenv_engine.core.limits.third_party`) has its ``check``, ``validate``, ``sibling`` and ``task_at`` (the sampler's
draw, which calls ``draft``) replaced, on that instance, by calls to a forked worker process holding a copy of it. A
call that runs past the limit kills the worker (the next call forks a new one) and raises `PluginTimeout`, which the
loop records as ``plugin_timeout`` (the task rejected, the rollout failed, the sibling or draw left out) where it
records a plugin's exception as ``plugin_error: <type>``; an exception the plugin raises comes back as `PluginRaised`
naming its type. A call that draws from a ``random.Random`` argument leaves it in the state the worker's draws left,
and a set argument (the sampler's prompts taken) gains what the worker added, so a draw is the same as in this
process. `release_plugins` stops the workers and restores the methods. Built-in environments are never wrapped, and
with the limit at 0 nothing is: plugin calls then run in this process.

Limit or not, the draws the loop makes of a plugin's tasks are contained here: `sibling_pairs` (the simulator's
warm-start pairs, its update's anchors and its drift probe) leaves out a pair whose sibling raised or timed out and
counts it (`Draws`), `one_sibling` and `one_task` do the same for one sibling (the grounded reward's probe) or one
sampler draw. A built-in environment's exception is a bug and propagates.
"""

from __future__ import annotations

import multiprocessing
import random
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from genenv_engine.core.limits import error_line, fault_kind, plugin_error, third_party
from genenv_engine.core.records import Task

METHODS = ("check", "validate", "sibling", "task_at")
"""The plugin methods run in the worker (``sibling`` and ``task_at`` where the class has them)."""


class PluginTimeout(RuntimeError):
    """A plugin call ran past its wall-clock limit (``genenv_reason``: what the task or rollout is recorded as;
    ``genenv_call``: the environment's name and the method)."""

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
        sets = [set(a) for a in args if isinstance(a, set)]
        try:
            value = getattr(env, method)(*args, **kwargs)
            reply = (
                True,
                (
                    value,
                    [a.getstate() for a in args if isinstance(a, random.Random)],
                    [a - before for a, before in zip((a for a in args if isinstance(a, set)), sets, strict=False)],
                ),
            )
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
            timeout = PluginTimeout(f"{self.env.name}.{method} ran past {self.seconds:g} s")
            timeout.genenv_call = (self.env.name, method)
            raise timeout
        done, reply = self.conn.recv()
        if not done:
            raised = PluginRaised(*reply)
            raised.genenv_call = (self.env.name, method)
            raise raised
        value, states, added = reply
        for rng, state in zip((a for a in args if isinstance(a, random.Random)), states, strict=False):
            rng.setstate(state)  # the draws the worker made, as if made here
        for taken, more in zip((a for a in args if isinstance(a, set)), added, strict=False):
            taken.update(more)
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
                if callable(getattr(env, name, None)):
                    setattr(env, name, _method(worker, name))


def release_plugins(envs: Mapping[str, Any]) -> None:
    """Stop the workers `time_limit_plugins` started and give the environments their own methods back."""
    for env in envs.values():
        worker = vars(env).pop("_plugin_worker", None)
        if worker is not None:
            worker.stop()
            for name in METHODS:
                vars(env).pop(name, None)


GIVE_UP = 8
"""Sibling draws that fail in a row, none having succeeded, after which `sibling_pairs` draws no more (a plugin
whose every sibling fails would otherwise be called, and perhaps waited on, for every pair asked for)."""


@dataclass
class Draws:
    """What a contained draw of sibling pairs gave: the pairs, and the pairs left out by fault kind."""

    pairs: list[tuple[Task, Task]] = field(default_factory=list)
    failed: Counter = field(default_factory=Counter)
    """``plugin_error`` / ``plugin_timeout`` -> pairs left out (those not drawn after `GIVE_UP` counted as the last)."""
    error: str = ""
    """The first failure, as ``Type: message`` (`genenv_engine.core.limits.error_line`)."""

    def fail(self, exc: Exception, n: int = 1) -> None:
        self.failed[fault_kind(plugin_error(exc)) or "plugin_error"] += n
        self.error = self.error or error_line(exc)


def sibling_pairs(env: Any, tasks: list[Task], rng: random.Random, n: int) -> Draws:
    """``n`` (source, sibling) pairs of ``env`` as its ``sibling_pairs`` draws them; for a plugin, a pair whose
    sibling raises (or runs past the time limit) is left out and counted, and after `GIVE_UP` failures in a row with
    no pair drawn the rest are counted as failed too. A ladder plugin's pairs are drawn one at a time from
    `LadderEnvironment.sibling_sources` (the same random draws, ids and pairs as its ``sibling_pairs`` when nothing
    fails); one that
    writes its own ``sibling_pairs`` is called once, all ``n`` failing together."""
    from genenv_engine.environments.base import LadderEnvironment

    out = Draws()
    if not third_party(env):
        out.pairs = env.sibling_pairs(tasks, rng, n)
        return out
    if type(env).sibling_pairs is not LadderEnvironment.sibling_pairs:
        try:
            out.pairs = env.sibling_pairs(tasks, rng, n)
        except Exception as exc:  # noqa: BLE001 - the plugin's fault, counted
            out.fail(exc, n)
        return out
    sources = env.sibling_sources(tasks, rng, n)
    for i in range(n):
        if not out.pairs and sum(out.failed.values()) >= GIVE_UP:
            out.failed[max(out.failed, key=out.failed.get)] += n - i
            break
        source, task_id = next(sources)
        try:
            out.pairs.append((source, env.sibling(source, rng, task_id)))
        except Exception as exc:  # noqa: BLE001 - the plugin's fault, counted
            out.fail(exc)
    return out


def one_sibling(env: Any, source: Task, rng: random.Random, task_id: str) -> tuple[Task | None, str | None]:
    """``env.sibling(source, rng, task_id)``, and None with the reason (``plugin_error: <type>``, ``plugin_timeout``)
    where a plugin's raised or ran past its limit."""
    try:
        return env.sibling(source, rng, task_id), None
    except Exception as exc:
        if not third_party(env):
            raise
        return None, plugin_error(exc)


def one_task(env: Any, *args: Any, **kwargs: Any) -> tuple[Task | None, str | None]:
    """``env.task_at(*args, **kwargs)`` (a sampler's draw, which calls the environment's ``draft``), and None with
    the reason where a plugin's raised or ran past its limit."""
    try:
        return env.task_at(*args, **kwargs), None
    except Exception as exc:
        if not third_party(env):
            raise
        return None, plugin_error(exc)
