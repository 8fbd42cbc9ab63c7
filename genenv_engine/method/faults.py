"""Plugin faults in a run: counted per benchmark each epoch, kept out of the agent's update, and held-out answers
a broken checker scored re-scored once it is fixed.

A plugin's ``check``, ``validate``, ``sibling`` or sampler draw that raises or runs past ``simulator.plugin_timeout``
fails its item with the reason ``plugin_error: <type>`` or ``plugin_timeout``
(`genenv_engine.core.limits.fault_kind`). The epoch goes on, and counts them as ``plugin_faults``: benchmark ->
where (`WHERE`) -> fault kind -> items (`add_fault`, `rollout_faults`, `draft_faults`, `merge_faults`), stored in the
epoch's metrics when there are any (an epoch without the key is read from the stored rows: `Store.plugin_faults`).
`usable` keeps a rollout that failed so out of the agent's GRPO update and its batch's p̂: its reward says nothing
about the agent. `rescore_heldout` (``genenv resume SESSION --rescore-heldout``) checks every stored held-out answer of
the finished epochs again with the environment as it is now, updates the answers whose verdict changed and their
epochs' held-out figures, and logs the old values as a ``HeldoutRescored`` event.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from genenv_engine.backends.base import Completion
from genenv_engine.core.curriculum import is_success
from genenv_engine.core.limits import check_response, fault_kind, plugin_failure
from genenv_engine.core.records import Task
from genenv_engine.environments.base import Environment
from genenv_engine.training.agent import Attempt, TaskAttempts, result_strings

WHERE = ("rollouts", "drafts", "heldout", "siblings", "probes")
"""Where an epoch counts a plugin's faults: training rollouts, the simulator's drafts (or the sampler's draws),
held-out answers, sibling draws (the simulator's warm-start pairs, its update's anchors and drift probe, the
grounded reward's probe siblings) and the grounded reward's probe answers."""

Faults = dict[str, dict[str, dict[str, int]]]
"""benchmark -> where -> ``plugin_error`` / ``plugin_timeout`` -> items."""


def add_fault(faults: Faults, benchmark: str, where: str, reason: str | None, n: int = 1) -> None:
    """Count ``n`` items of ``benchmark`` at ``where`` when ``reason`` records a plugin fault (else nothing).

    >>> f = {}
    >>> add_fault(f, "flaky", "rollouts", "plugin_error: KeyError"); add_fault(f, "flaky", "rollouts", "wrong_value")
    >>> add_fault(f, "flaky", "rollouts", "plugin_error: ValueError", 2); f
    {'flaky': {'rollouts': {'plugin_error': 3}}}
    """
    kind = fault_kind(reason)
    if kind and n:
        counts = faults.setdefault(benchmark, {}).setdefault(where, {})
        counts[kind] = counts.get(kind, 0) + n


def merge_faults(faults: Faults, more: Faults) -> Faults:
    """Add the counts of ``more`` to ``faults`` (returned).

    >>> merge_faults({"a": {"drafts": {"plugin_timeout": 1}}}, {"a": {"drafts": {"plugin_timeout": 2}}})
    {'a': {'drafts': {'plugin_timeout': 3}}}
    """
    for benchmark, places in more.items():
        for where, kinds in places.items():
            for kind, n in kinds.items():
                add_fault(faults, benchmark, where, kind, n)
    return faults


def rollout_faults(faults: Faults, scored: Iterable[TaskAttempts], where: str = "rollouts") -> Faults:
    """Count the rollouts (or held-out answers) of ``scored`` that a plugin's fault failed."""
    for s in scored:
        for a in s.attempts:
            add_fault(faults, s.task.benchmark, where, a.result.error_type)
    return faults


def draft_faults(faults: Faults, tasks: Iterable[Task]) -> Faults:
    """Count the drafts a plugin's fault rejected."""
    for t in tasks:
        if not t.valid:
            add_fault(faults, t.benchmark, "drafts", t.reason)
    return faults


def usable(scored: list[TaskAttempts]) -> list[TaskAttempts]:
    """``scored`` without the rollouts a plugin's fault failed (a task left with none is left out), for the agent's
    update and the batches' p̂; the same list when there is none."""
    if not any(fault_kind(a.result.error_type) for s in scored for a in s.attempts):
        return scored
    kept = [
        TaskAttempts(s.task, s.prompt, [a for a in s.attempts if not fault_kind(a.result.error_type)]) for s in scored
    ]
    return [s for s in kept if s.attempts]


def heldout_summary(
    envs: dict[str, Environment], scored: list[TaskAttempts]
) -> tuple[dict[str, float], dict[str, dict[str, float]], dict[str, str]]:
    """Greedy held-out success per benchmark, per difficulty bucket, and per task (a ``0``/``1`` string in held-out
    order) of the scored held-out answers (one attempt each), as an epoch's metrics store them."""
    rates: dict[str, float] = {}
    for name in sorted({s.task.benchmark for s in scored}):
        group = [s for s in scored if s.task.benchmark == name]
        rates[name] = sum(s.successes for s in group) / len(group)
    by_level: dict[str, dict[str, float]] = {}
    for name, env in envs.items():
        buckets: dict[str, list[int]] = {}
        for s in scored:
            if s.task.benchmark == name:
                buckets.setdefault(env.bucket(s.task), []).append(s.successes)
        by_level[name] = {b: sum(v) / len(v) for b, v in sorted(buckets.items())}
    return rates, by_level, result_strings(envs, scored)


def rescore_heldout(session: Any) -> dict[str, Any]:
    """Check every stored held-out answer of the session's finished epochs again (the environments built from its
    config, plugins under its time limit), update the answers whose reward, success or error type changed and the
    held-out figures and counted faults of their epochs, and log the old values (``HeldoutRescored``). Returns what
    was done: answers checked and changed, the epochs changed, and each one's held-out before and after."""
    from genenv_engine.environments import environments_of
    from genenv_engine.environments.plugin_worker import release_plugins, time_limit_plugins

    cfg, store = session.config, session.store
    envs = environments_of(cfg)
    time_limit_plugins(envs, cfg.simulator.plugin_timeout)
    checked, changes, epochs = 0, [], {}
    tasks: dict[str, Task | None] = {}  # every epoch evaluates the same held-out tasks
    try:
        for m in store.epoch_metrics():
            if m["status"] != "done" or not m.get("heldout"):
                continue
            scored, mine = [], []
            for row in store.heldout_rollouts(m["epoch"]):
                if row["task_id"] not in tasks:
                    tasks[row["task_id"]] = store.get_task(row["task_id"])
                task = tasks[row["task_id"]]
                if task is None or task.benchmark not in envs:
                    continue
                env = envs[task.benchmark]
                result = check_response(env, task, row["response"] or "")
                reward = env.reward(result)
                success = is_success(reward, cfg.agent.success_threshold)
                checked += 1
                if (reward, success, result.error_type) != (row["reward"], bool(row["success"]), row["error_type"]):
                    mine.append((row, reward, success, result.error_type))
                scored.append(
                    TaskAttempts(task, "", [Attempt(Completion(row["response"] or "", []), result, reward, success)])
                )
            if not mine:
                continue
            changes += mine
            rates, by_level, correct = heldout_summary(envs, scored)
            faults = {
                b: {w: dict(k) for w, k in places.items() if w != "heldout"}
                for b, places in (m.get("plugin_faults") or {}).items()
            }
            faults = {b: places for b, places in rollout_faults(faults, scored, "heldout").items() if places}
            note = {
                "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "changed": len(mine),
                "heldout_before": m["heldout"],
            }
            epochs[m["epoch"]] = {
                "before": m["heldout"],
                "after": rates,
                "metrics": {
                    "heldout": rates,
                    "heldout_by_level": by_level,
                    "heldout_correct": correct,
                    "plugin_faults": faults,
                    "heldout_rescored": [*(m.get("heldout_rescored") or []), note],
                },
            }  # faults {}: none left
    except Exception as exc:
        failure = plugin_failure(exc, envs.values())  # raised in a plugin's code: one line, as in a run
        if failure is None:
            raise
        raise failure from exc
    finally:
        release_plugins(envs)
    if changes:
        with store.write():  # one transaction: the answers, their epochs' figures and the old values, or nothing
            store.rescore_rollouts([(row["id"], reward, success, error) for row, reward, success, error in changes])
            for epoch, done in epochs.items():
                store.set_epoch_metrics(epoch, done.pop("metrics"))
            store.log_event(
                "HeldoutRescored",
                None,
                {
                    "checked": checked,
                    "changed": len(changes),
                    "epochs": sorted(epochs),
                    "before": [[row["id"], row["reward"], row["success"], row["error_type"]] for row, *_ in changes],
                },
            )
    return {"checked": checked, "changed": len(changes), "epochs": epochs}


def rescore_line(done: dict[str, Any]) -> str:
    """What `rescore_heldout` did, as the one line ``genenv resume --rescore-heldout`` prints.

    >>> rescore_line({"checked": 16, "changed": 0, "epochs": {}})
    're-scored 16 stored held-out answers: none changed'
    >>> rescore_line({"checked": 16, "changed": 3, "epochs": {0: {"before": {"f": 0.0}, "after": {"f": 0.375}}}})
    're-scored 16 stored held-out answers: 3 changed (epoch 0: f 0.000 -> 0.375); the old values are in the event log'
    """
    if not done["changed"]:
        return f"re-scored {done['checked']} stored held-out answers: none changed"
    epochs = "; ".join(
        f"epoch {e}: "
        + ", ".join(f"{b} {v.get('before', {}).get(b, 0.0):.3f} -> {r:.3f}" for b, r in sorted(v["after"].items()))
        for e, v in sorted(done["epochs"].items())
    )
    return (
        f"re-scored {done['checked']} stored held-out answers: {done['changed']} changed ({epochs}); "
        "the old values are in the event log"
    )
