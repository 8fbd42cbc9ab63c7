"""Re-score saved agent checkpoints on a larger held-out sample, for the ablation bench's tables.

A run evaluates ``heldout_size`` held-out tasks per epoch; its checkpoints keep every epoch's agent, and greedy
evaluation draws no random numbers, so evaluating a checkpoint on the first ``n`` held-out tasks gives exactly what
a run with ``heldout_size = n`` would have stored for that epoch, without training anything again. `rescore`
does that for the epochs the bench's tables compare (0 and the last ones) and caches each result as
``<session>/rescore/heldout-<n>-e<epoch>.json``; it checks that the first ``heldout_size`` tasks score as the
database says (a different split or model would not; up to 2 % may differ, float-level ties decoded in other
batches), and refuses the session otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from genenv_engine.ablation.runs import heldout_levels
from genenv_engine.ablation.stats import level_rates
from genenv_engine.core.errors import ConfigError


class RescoreMismatch(RuntimeError):
    """A checkpoint's re-scored held-out disagrees with what its run stored: the numbers would not be comparable."""


def cache_path(folder: Path, n: int, epoch: int) -> Path:
    """Where one checkpoint's re-scored results are kept."""
    return folder / "rescore" / f"heldout-{n}-e{epoch}.json"


def cached_results(folder: Path) -> dict[str, dict[str, dict[str, str]]]:
    """Every re-scored result a session's cache holds (the files `cache_path` names):
    ``{n: {epoch: {benchmark: string}}}``, string keys as in JSON."""
    out: dict[str, dict[str, dict[str, str]]] = {}
    for path in sorted((folder / "rescore").glob("heldout-*-e*.json")):
        n, _, epoch = path.stem.removeprefix("heldout-").partition("-e")
        if n.isdigit() and epoch.isdigit():
            out.setdefault(n, {})[epoch] = json.loads(path.read_text())["correct"]
    return out


def rescore_session(
    folder: Path, n: int, epochs: list[int], stored: dict[int, dict[str, str]], emit: Any = print
) -> tuple[dict[int, dict[str, str]], dict[int, dict[str, list[int]]]]:
    """Per epoch, each benchmark's ``0``/``1`` string over its first ``n`` held-out tasks (cached per epoch), and
    per epoch and benchmark ``[tasks scored differently, tasks compared]`` against the run's own results.

    ``stored`` is the run's own ``heldout_correct`` per epoch: the re-scored string must start with it."""
    out: dict[int, dict[str, str]] = {}
    todo = []
    for epoch in epochs:
        path = cache_path(folder, n, epoch)
        if path.exists():
            out[epoch] = json.loads(path.read_text())["correct"]
        else:
            todo.append(epoch)
    if todo:
        out.update(_evaluate(folder, n, todo, emit))
    checked: dict[int, dict[str, list[int]]] = {}
    for epoch in epochs:
        for bench, prefix in (stored.get(epoch) or {}).items():
            differ = disagreements(prefix, out[epoch].get(bench, ""))
            checked.setdefault(epoch, {})[bench] = [differ, len(prefix)]
            if differ > MAX_DISAGREEMENT * len(prefix):
                raise RescoreMismatch(
                    f"{folder} epoch {epoch}: {bench} re-scored differs from the stored held-out "
                    f"results on {differ} of its first {len(prefix)} tasks (another split, model "
                    "or code)"
                )
    return out, checked


MAX_DISAGREEMENT = 0.02
"""Share of the run's own held-out tasks a re-scored checkpoint may score differently: greedy decoding in other
batches can flip a float-level tie between two tokens (the prefill groups change with the number of prompts)."""


def disagreements(stored: str, rescored: str) -> int:
    """Tasks of ``stored`` that ``rescored`` scores differently (all of them if it is shorter).

    >>> disagreements("1101", "110011"), disagreements("11", "1")
    (1, 2)
    """
    if len(rescored) < len(stored):
        return len(stored)
    return sum(a != b for a, b in zip(stored, rescored, strict=False))


def _evaluate(folder: Path, n: int, epochs: list[int], emit: Any) -> dict[int, dict[str, str]]:
    import time

    import torch

    from genenv_engine.environments import environments_of
    from genenv_engine.storage.session import Session
    from genenv_engine.training.agent import evaluate, heldout_tasks, result_strings
    from genenv_engine.training.roles import load_roles

    session = Session.open(folder)
    try:
        cfg = session.config
        torch.set_num_threads(cfg.runtime.threads)
        envs = environments_of(cfg)
        tasks = heldout_tasks(envs, n)
        out: dict[int, dict[str, str]] = {}
        for epoch in epochs:
            started = time.perf_counter()
            roles = load_roles(session, epoch)
            _, scored = evaluate(
                roles.agent_backend, roles.agent, envs, tasks, cfg.agent.max_new_tokens, cfg.agent.success_threshold
            )
            correct = result_strings(envs, scored)
            path = cache_path(folder, n, epoch)
            path.parent.mkdir(exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"epoch": epoch, "heldout_size": n, "correct": correct}))
            tmp.replace(path)
            out[epoch] = correct
            emit(
                f"rescored {folder.name} epoch {epoch} on {len(tasks)} held-out tasks in "
                f"{time.perf_counter() - started:.0f} s: "
                + ", ".join(f"{b} {c.count('1') / len(c):.3f}" for b, c in correct.items())
            )
            del roles
    finally:
        session.store.close()
    return out


def recorded_rescore(run: dict[str, Any], n: int, epochs: list[int]) -> dict[int, dict[str, str]]:
    """The re-scored held-out on ``n`` tasks at ``epochs`` that a recorded run carries (a clear error if not)."""
    have = run.get("_rescored", {}).get(str(n), {})
    missing = [e for e in epochs if str(e) not in have]
    if missing:
        raise ConfigError(
            run.get("recorded", "record"),
            f"holds no held-out re-scored on {n} tasks at epoch(s) "
            f"{', '.join(map(str, missing))}, and a record has no checkpoints to re-score",
        )
    return {e: have[str(e)] for e in epochs}


def rescored_runs(
    runs: dict[str, dict[int, dict[str, Any]]], n: int, emit: Any = print
) -> dict[str, dict[int, dict[str, Any]]]:
    """The bench's runs with held-out re-scored on ``n`` tasks at epoch 0 and at every epoch that is some arm's
    last finished epoch on that seed (so `_change` and `versus` find the epochs they compare); the rows keep only
    those epochs, with their held-out rates recomputed from the re-scored strings."""
    from dataclasses import replace

    lasts: dict[int, set[int]] = {}
    for by_seed in runs.values():
        for seed, run in by_seed.items():
            if run["epochs"]:
                lasts.setdefault(seed, set()).add(run["epochs"][-1]["epoch"])
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for arm, by_seed in runs.items():
        for seed, run in by_seed.items():
            finished = {r["epoch"] for r in run["epochs"]}
            epochs = sorted(({0} | lasts.get(seed, set())) & finished)
            if run["_folder"] is None:  # a run record: only what it already carries
                correct, checked = recorded_rescore(run, n, epochs), {}
            else:
                correct, checked = rescore_session(run["_folder"], n, epochs, run["_correct"], emit)
            levels = heldout_levels(replace(run["_config"], heldout_size=n), [])
            rows = [
                {
                    **r,
                    "heldout": {b: c.count("1") / len(c) for b, c in correct[r["epoch"]].items()},
                    "heldout_by_level": {
                        b: level_rates(c, levels[b]) for b, c in correct[r["epoch"]].items() if b in levels
                    },
                }
                for r in run["epochs"]
                if r["epoch"] in correct
            ]
            out.setdefault(arm, {})[seed] = {
                **run,
                "epochs": rows,
                "_correct": correct,
                "heldout_size": n,
                "rescore_check": checked,
                "_levels": levels,
            }
    return out
