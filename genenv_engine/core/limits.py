"""Limits that keep one pathological task from hanging an epoch: text size caps and search budgets.

Both are deterministic (no threads, signals or clocks), so a verdict never depends on machine load. A third
guard is for environments from outside genenv (:func:`third_party`): their ``check`` or ``validate`` raising
fails that rollout or rejects that task as ``plugin_error: <type>`` and the epoch goes on, and a wrong return type
stops it with one line (:class:`PluginError`). :func:`fault_kind` tells such a recorded fault from the checker's own
verdicts; :class:`PluginFailed` is the one line a run stops with where going on would train on nothing or on
garbage, and :func:`plugin_failure` turns any other exception raised in a plugin's code into that line.

- **size**: an agent completion longer than :data:`MAX_RESPONSE_CHARS` is scored as a failure with
  ``error_type = "too_long"`` before the checker parses it (:func:`check_response`, used by every
  rollout); simulator output longer than :data:`MAX_GENERATION_CHARS` is rejected with the reason
  ``too_long: ...`` before parsing (:func:`generation_too_long`, used by
  :func:`genenv_engine.training.simulator.parse_and_validate`). Each validator also has its own, much
  smaller, prompt and answer caps.
- **search budget**: the search-based planners and solvers (ALFWorld-mini's breadth-first planner,
  TravelPlanner-mini's completion solver) count the states or candidates they try in a
  :class:`Budget` and give up past it: a task whose search would explode is rejected with the reason
  ``budget: ...`` by its validator, and a rollout whose check would is scored ``error_type = "budget"``.

Defaults are far above anything the built-in benchmarks reach, so they change no result: completions
are at most ``max_new_tokens`` long (96 tokens by default) and every checker already rejects a long
one on its own; the largest planner searches over the seed 0 splits and 500 sibling pairs are 1,579
states (ALFWorld-mini, budget 100,000) and 2,280 solver nodes (TravelPlanner-mini, budget 50,000;
the worst query the step grammar allows needs about 15,000). The budgets live next to their
searches (``alfworld.planner.MAX_STATES``, ``travelplanner.solver.MAX_NODES``) and are read at call
time. Generated text is never eval'd or exec'd, limits or not.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from genenv_engine.core.errors import ConfigError
from genenv_engine.core.records import CheckResult

if TYPE_CHECKING:
    from genenv_engine.core.records import Task
    from genenv_engine.environments.base import Environment

MAX_RESPONSE_CHARS = 32_000
"""Longest agent completion the checker sees (bfcl_official's longest gold answer is 10,000 characters)."""
MAX_GENERATION_CHARS = 100_000
"""Longest simulator output parsed (bfcl_official's prompt and answer caps together are 70,000)."""
LIMIT_ERROR_TYPES = ("too_long", "budget")
"""Error types :func:`check_response` adds to the checkers' own."""


class PluginError(ValueError):
    """An environment that is not built into genenv returned the wrong type from one of its methods: the epoch
    stops with one line naming the environment, the method and the task (the session resumes once it is fixed)."""

    def __init__(self, env: Environment, method: str, task_id: str, returned: object, expected: str) -> None:
        super().__init__(
            f"environment {env.name!r} ({type(env).__module__}.{type(env).__name__}): {method} returned "
            f"{type(returned).__name__}, not {expected} (task {task_id}); fix it, then genenv resume"
        )


def third_party(env: Environment) -> bool:
    """Whether ``env``'s class comes from outside genenv (a plugin), whose exceptions are caught at the edges.

    >>> from fractions import Fraction
    >>> third_party(CheckResult(True, 1.0)), third_party(Fraction(1))
    (False, True)
    """
    return not type(env).__module__.startswith("genenv_engine.")


PLUGIN_FAULTS = ("plugin_error", "plugin_timeout")
"""The kinds of recorded plugin fault: the plugin's code raised, or ran past ``simulator.plugin_timeout``."""


def fault_kind(reason: str | None) -> str | None:
    """``plugin_error`` or ``plugin_timeout`` when ``reason`` (an error type or a rejection reason) records a plugin's
    fault, else None.

    >>> fault_kind("plugin_error: KeyError"), fault_kind("plugin_timeout"), fault_kind("wrong_value"), fault_kind(None)
    ('plugin_error', 'plugin_timeout', None, None)
    """
    kind = (reason or "").split(":")[0]
    return kind if kind in PLUGIN_FAULTS else None


class PluginFailed(ValueError):
    """A plugin's code failed where the run cannot go on without it (its warm start drew no sibling, its splits
    could not be built, ...): the run stops with this one line naming the environment, the method and the
    exception, and the session resumes once the plugin is fixed."""

    def __init__(self, env: Environment, method: str, error: str, where: str = "") -> None:
        super().__init__(
            f"environment {env.name!r} ({type(env).__module__}.{type(env).__name__}): {method} failed "
            f"({error}){f' {where}' if where else ''}; fix it, then genenv resume"
        )


def error_line(exc: BaseException) -> str:
    """An exception as ``Type: message`` on one line (the message cut to 200 characters); one from a plugin's worker
    process (`genenv_engine.environments.plugin_worker`) as the plugin's, or as its time limit.

    >>> error_line(KeyError("boom")), error_line(RuntimeError("a\\nb"))
    ("KeyError: 'boom'", 'RuntimeError: a b')
    """
    message = " ".join(str(exc).split())[:200]
    reason = getattr(exc, "genenv_reason", None)
    if reason == "plugin_timeout":
        return f"plugin_timeout: {message}"
    if reason:  # the worker's message is the plugin's exception, type first
        return message
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def plugin_failure(exc: BaseException, envs: Iterable[Environment]) -> PluginFailed | None:
    """The one line to stop with when ``exc`` was raised in the code of one of ``envs`` that is a plugin (a frame of
    its class's module, or of a module it inherits from outside genenv), or came back from its worker process;
    None for an exception of genenv's own (a bug, shown in full) and for one already said in one line (a
    `ConfigError`, `PluginError`, `PluginFailed`)."""
    plugins = [env for env in envs if third_party(env)]
    if not plugins or isinstance(exc, PluginError | PluginFailed | ConfigError):
        return None
    modules = {
        cls.__module__: env
        for env in plugins
        for cls in type(env).__mro__
        if not cls.__module__.startswith(("genenv_engine.", "builtins", "abc"))
    }
    call = getattr(exc, "genenv_call", None)  # from the worker: its frames are not here, its name and method are
    if call is not None:
        env = next((e for e in plugins if e.name == call[0]), None)
        return None if env is None else PluginFailed(env, call[1], error_line(exc))
    found = None
    tb = exc.__traceback__
    while tb is not None:  # the innermost frame of plugin code
        name = tb.tb_frame.f_globals.get("__name__")
        if name in modules:
            found = (modules[name], tb.tb_frame.f_code.co_name, f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}")
        tb = tb.tb_next
    if found is None:
        return None
    env, method, where = found
    return PluginFailed(env, method, error_line(exc), f"at {where}")


def plugin_error(exc: BaseException) -> str:
    """The reason or error type a plugin's exception is recorded as (one from a plugin's worker process,
    `genenv_engine.environments.plugin_worker`, says its own: ``plugin_timeout``, or the type raised there).

    >>> plugin_error(KeyError("x"))
    'plugin_error: KeyError'
    """
    return getattr(exc, "genenv_reason", None) or f"plugin_error: {type(exc).__name__}"


class BudgetExceeded(RuntimeError):
    """A planner or solver used up its search budget; ``str()`` says which and how large it was."""


class Budget:
    """A countdown of search steps: :meth:`spend` raises :class:`BudgetExceeded` once ``limit`` is passed.

    >>> b = Budget(2, "states")
    >>> b.spend(); b.spend(); b.used
    2
    >>> b.spend()
    Traceback (most recent call last):
    ...
    genenv_engine.core.limits.BudgetExceeded: search budget of 2 states exhausted
    """

    def __init__(self, limit: int, unit: str = "steps") -> None:
        self.limit = limit
        self.unit = unit
        self.used = 0

    def spend(self, n: int = 1) -> None:
        """Count ``n`` more steps; raise once more than ``limit`` have been counted."""
        self.used += n
        if self.used > self.limit:
            raise BudgetExceeded(f"search budget of {self.limit} {self.unit} exhausted")


def check_response(env: Environment, task: Task, response: str, max_chars: int | None = None) -> CheckResult:
    """``env.check`` under the limits: over-long text fails as ``too_long``, a spent search as ``budget``, and a
    plugin's check that raises as ``plugin_error: <type>``; one that returns another type than `CheckResult` raises
    `PluginError`.

    ``max_chars`` defaults to :data:`MAX_RESPONSE_CHARS` (read at call time).
    """
    if len(response) > (MAX_RESPONSE_CHARS if max_chars is None else max_chars):
        return CheckResult(False, 0.0, {}, "too_long")
    try:
        result = env.check(task, response)
    except BudgetExceeded:
        return CheckResult(False, 0.0, {}, "budget")
    except Exception as exc:
        if not third_party(env):
            raise
        return CheckResult(False, 0.0, {}, plugin_error(exc))
    if not isinstance(result, CheckResult) and third_party(env):
        raise PluginError(env, "check", task.id, result, "CheckResult")
    return result


def generation_too_long(text: str, max_chars: int | None = None) -> str | None:
    """The rejection reason for simulator output over the size limit, or None.

    >>> generation_too_long("x" * 11, max_chars=10)
    'too_long: 11 characters of simulator output (limit 10)'
    """
    limit = MAX_GENERATION_CHARS if max_chars is None else max_chars
    if len(text) > limit:
        return f"too_long: {len(text)} characters of simulator output (limit {limit})"
    return None
