"""``genenv bench passk``: greedy success and pass@n per difficulty level of a preset's epoch-0 (warm-started) agent.

What the agent can do before any RL: the preset's run is made up to epoch 0 in a temporary run folder
(``genenv run --epochs 0``: the warm start from the real warm-start cache, trained and cached there when
missing, so later ``genenv run`` and ablation runs with the same settings reuse it; then the greedy
held-out evaluation), the epoch-0 agent is loaded back from that run's epoch-0 checkpoint, and ``--n``
completions are sampled for each of the first ``--tasks`` held-out tasks of every benchmark (the agent's
``max_new_tokens``, ``--temperature``, seeded by ``--seed``), each scored by the environment's checker.
Per benchmark and per difficulty level (the environment's ``bucket``, e.g. ``L3``) it reports the tasks,
greedy success (the run's stored epoch-0 held-out result of each task), mean per-sample success,
pass@n (the share of tasks with at least one of the n right) and the unbiased pass@k estimator of
Chen et al. 2021 for k = 1 and n (and any ``--k``). The result also names the warm-start cache key and
the agent's fingerprint, so a reader can tell which warm start was measured.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from genenv_engine.interfaces.benches.common import peak_rss_mb, rich_table

ROWS_PER_CALL = 128
"""Sampled rows per seeded generation call when the backend does not say how many it decodes together."""


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples of which ``c`` are right: ``1 - C(n-c, k) / C(n, k)`` (Chen et al. 2021),
    the chance that ``k`` of the ``n`` drawn without replacement hold at least one right one.

    >>> pass_at_k(8, 0, 8), pass_at_k(8, 8, 1)
    (0.0, 1.0)
    >>> pass_at_k(4, 1, 2)  # 1 - C(3, 2) / C(4, 2) = 1 - 3/6
    0.5
    >>> pass_at_k(8, 2, 1), pass_at_k(8, 2, 8)  # k = 1: the share right; k = n: whether any is right
    (0.25, 1.0)
    >>> round(pass_at_k(10, 3, 5), 4)  # 1 - C(7, 5) / C(10, 5) = 1 - 21/252
    0.9167
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def summarize(greedy: list[int], successes: list[int], n: int, ks: tuple[int, ...]) -> dict[str, Any]:
    """The figures of one group of tasks: each task's greedy result (0/1) and its right samples out of ``n``.

    >>> s = summarize([1, 0, 0], [3, 1, 0], 4, (1, 4))
    >>> s["tasks"], s["greedy_solved"], s["greedy"], s["mean_success"], s["solved_any"], s["pass_at_n"]
    (3, 1, 0.3333333333333333, 0.3333333333333333, 2, 0.6666666666666666)
    >>> s["pass_at_k"]
    {'1': 0.3333333333333333, '4': 0.6666666666666666}
    """
    tasks = len(successes)
    if not tasks:
        return {
            "tasks": 0,
            "greedy_solved": 0,
            "greedy": None,
            "mean_success": None,
            "solved_any": 0,
            "pass_at_n": None,
            "pass_at_k": {str(k): None for k in ks},
        }
    solved_any = sum(c > 0 for c in successes)
    return {
        "tasks": tasks,
        "greedy_solved": sum(greedy),
        "greedy": sum(greedy) / tasks,
        "mean_success": sum(successes) / (tasks * n),
        "solved_any": solved_any,
        "pass_at_n": solved_any / tasks,
        "pass_at_k": {str(k): sum(pass_at_k(n, c, k) for c in successes) / tasks for k in ks},
    }


def level_key(bucket: str, levels: list[int]) -> tuple[int, str]:
    """Order of the level rows: by the lowest task level in the bucket, then by name (``L2`` before ``L10``)."""
    return (min(levels), bucket)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``genenv bench passk``."""
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--seed", type=int, default=0, help="the run's seed (warm start) and the sampling seed")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override, as for genenv run (part of the warm-start key when it is a warm-start setting)",
    )
    parser.add_argument("--n", type=int, default=8, help="samples per task (default 8)")
    parser.add_argument(
        "--tasks",
        type=int,
        default=None,
        help="first N held-out tasks per benchmark (default: the config's heldout_size)",
    )
    parser.add_argument(
        "--temperature", type=float, default=None, help="sampling temperature (default: the config's agent.temperature)"
    )
    parser.add_argument(
        "--k", type=int, action="append", default=[], help="another k for the pass@k estimator, besides 1 and n"
    )
    parser.add_argument(
        "--samples",
        type=Path,
        default=None,
        metavar="PATH",
        help="also write every sample as a JSON line: task id, level, completion, success, error type",
    )


def _rows_per_call(backend, policy, max_new_tokens: int) -> int:
    """How many rows one seeded call may hold without two of its rows drawing the same random numbers: the
    ``hf`` backend reseeds every chunk it decodes, so a call is at most one of its chunks."""
    from genenv_engine.backends.hf import HFBackend, chunk_for

    if isinstance(backend, HFBackend):
        return chunk_for(len(policy.tokenizer), max_new_tokens, backend.chunk_size)
    return ROWS_PER_CALL


def sample_successes(
    backend,
    policy,
    envs,
    tasks,
    n: int,
    temperature: float,
    max_new_tokens: int,
    threshold: float,
    seed: int,
    sink: list[dict[str, Any]] | None = None,
) -> tuple[list[int], str]:
    """Right samples out of ``n`` for each task, and a digest of every sampled text (two runs that drew the same
    completions have the same digest). The ``n`` copies of every task are sampled in calls of at most one
    decoding chunk, each call with its own seed drawn from ``seed``: the same numbers for the same seed.
    ``sink``, when given, receives one row per sample (task id, level, completion, success, error type)."""
    import hashlib

    from genenv_engine.backends.base import Sampling
    from genenv_engine.training.agent import rollout

    flat = [i for i in range(len(tasks)) for _ in range(n)]
    rows = max(1, _rows_per_call(backend, policy, max_new_tokens))
    rng = random.Random(seed)
    successes = [0] * len(tasks)
    digest = hashlib.sha256()
    for start in range(0, len(flat), rows):
        part = flat[start : start + rows]
        sampling = Sampling(temperature=temperature, max_new_tokens=max_new_tokens, seed=rng.randrange(2**31))
        scored = rollout(backend, policy, envs, [tasks[i] for i in part], 1, sampling, threshold, chunk=rows)
        for i, s in zip(part, scored, strict=False):
            successes[i] += s.successes
            attempt = s.attempts[0]
            digest.update(attempt.completion.text.encode() + b"\0")
            if sink is not None:
                sink.append(
                    {
                        "id": tasks[i].id,
                        "level": tasks[i].level,
                        "completion": attempt.completion.text,
                        "success": attempt.success,
                        "error_type": attempt.result.error_type,
                    }
                )
    return successes, digest.hexdigest()[:16]


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Entry point."""
    from genenv_engine.config import load_config, parse_sets, replace_config
    from genenv_engine.environments import environments_of
    from genenv_engine.method.loop import run as run_loop
    from genenv_engine.storage.session import Session
    from genenv_engine.training.agent import heldout_tasks
    from genenv_engine.training.policy import quiet_transformers
    from genenv_engine.training.roles import load_roles
    from genenv_engine.training.warmstart import cache_key, cache_root, is_cached

    if args.n < 1:
        raise SystemExit("--n must be at least 1")
    if args.tasks is not None and args.tasks < 1:
        raise SystemExit("--tasks must be at least 1")
    if any(not 1 <= k <= args.n for k in args.k):
        raise SystemExit(f"--k must be between 1 and --n ({args.n})")
    quiet_transformers()
    overrides: dict[str, Any] = {"seed": args.seed}
    overrides.update(parse_sets(args.set))
    overrides["epochs"] = 0
    config = load_config(args.preset, None, overrides)
    tasks_n = config.heldout_size if args.tasks is None else args.tasks
    # the greedy epoch-0 figures cover the tasks sampled: a larger --tasks widens the temporary run's held-out
    # evaluation (heldout_size is not part of the warm-start key, so the warm start is the run's own)
    session_config = replace_config(config, heldout_size=max(config.heldout_size, tasks_n))
    key = cache_key(config)
    if cache_key(session_config) != key:
        raise RuntimeError("heldout_size changed the warm-start key: --tasks must not exceed heldout_size")
    temperature = config.agent.temperature if args.temperature is None else args.temperature
    n, max_new = args.n, config.agent.max_new_tokens
    ks = tuple(sorted({1, n, *args.k}))
    was_cached = config.warm_start.cache and is_cached(config)
    if not config.warm_start.cache:
        note = "trained now, not cached (warm_start.cache is off)"
    elif was_cached:
        note = f"found in {cache_root() / 'warmstart'}"
    else:
        note = f"not in {cache_root() / 'warmstart'}: trained now and kept there"
    print(f"passk: warm start {key} {note}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        session = Session.create(session_config, Path(tmp) / "bench-passk")
        try:
            run_loop(session)
            m = session.store.epoch_metrics()[0]
            envs = environments_of(session_config)
            roles = load_roles(session, 0)
            fingerprint = roles.agent.fingerprint()
            tasks = heldout_tasks(envs, tasks_n)
            sampling_started = time.perf_counter()
            rows: list[dict[str, Any]] | None = [] if args.samples else None
            successes, digest = sample_successes(
                roles.agent_backend,
                roles.agent,
                envs,
                tasks,
                n,
                temperature,
                max_new,
                config.agent.success_threshold,
                args.seed,
                rows,
            )
            sampling_seconds = time.perf_counter() - sampling_started
        finally:
            session.store.close()
    if args.samples:
        import json

        args.samples.parent.mkdir(parents=True, exist_ok=True)
        args.samples.write_text("".join(json.dumps(r) + "\n" for r in rows or []))
    stored = m.get("heldout_correct") or {}
    position: dict[str, int] = {}
    greedy = []
    for t in tasks:  # held-out order: each benchmark's first tasks_n, as the stored strings
        i = position.get(t.benchmark, 0)
        position[t.benchmark] = i + 1
        greedy.append(int(stored[t.benchmark][i]))
    benchmarks: dict[str, Any] = {}
    per_task: dict[str, list[dict[str, Any]]] = {}
    for name, env in envs.items():
        idx = [i for i, t in enumerate(tasks) if t.benchmark == name]
        buckets: dict[str, list[int]] = {}
        for i in idx:
            buckets.setdefault(env.bucket(tasks[i]), []).append(i)
        order = sorted(buckets, key=lambda b: level_key(b, [tasks[i].level for i in buckets[b]]))
        benchmarks[name] = {
            **summarize([greedy[i] for i in idx], [successes[i] for i in idx], n, ks),
            "levels": {
                b: summarize([greedy[i] for i in buckets[b]], [successes[i] for i in buckets[b]], n, ks) for b in order
            },
        }
        per_task[name] = [
            {"id": tasks[i].id, "level": env.bucket(tasks[i]), "greedy": greedy[i], "successes": successes[i]}
            for i in idx
        ]
    phase = m.get("phase_seconds") or {}
    return {
        "preset": args.preset,
        "seed": args.seed,
        "overrides": args.set,
        "benchmarks_measured": list(envs),
        "n": n,
        "ks": list(ks),
        "tasks_per_benchmark": tasks_n,
        "tasks": len(tasks),
        "temperature": temperature,
        "max_new_tokens": max_new,
        "success_threshold": config.agent.success_threshold,
        "warm_start_key": key,
        "warm_start_folder": str(cache_root() / "warmstart" / key),
        "warm_start_cached": was_cached,
        "warm_start": m.get("warm_start"),
        "agent_fingerprint": m.get("agent_fingerprint"),
        "loaded_agent_fingerprint": fingerprint,
        "epoch0_heldout": m.get("heldout"),
        "epoch0_heldout_size": session_config.heldout_size,
        "greedy_correct": {b: s[:tasks_n] for b, s in stored.items()},
        "benchmarks": benchmarks,
        "per_task": per_task,
        "sample_digest": digest,
        "warm_start_seconds": round(phase.get("warm_start", 0.0), 1),
        "greedy_seconds": round(phase.get("heldout_eval", 0.0), 1),
        "sampling_seconds": round(sampling_seconds, 1),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "peak_rss_mb": peak_rss_mb(),
    }


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def table(result: dict[str, Any]):
    """Rich table: one row per benchmark and difficulty level, then the benchmark's total."""
    n = result["n"]
    others = [k for k in result["ks"] if k not in (1, n)]
    fp = result["agent_fingerprint"]
    t = rich_table(
        f"passk: {result['preset']} preset, seed {result['seed']}, epoch-0 agent "
        f"(warm start {result['warm_start_key']}, fingerprint {fp if fp is None else round(fp, 4)}); "
        f"n={n} samples at temperature {result['temperature']}, first {result['tasks_per_benchmark']} "
        f"held-out tasks per benchmark",
        ("benchmark", "level", "tasks", "greedy", "mean", *(f"pass@{k}" for k in others), f"pass@{n}"),
        left=("benchmark", "level"),
        caption="greedy: the stored epoch-0 held-out result; mean: per-sample success (= pass@1); "
        f"pass@{n}: share of tasks with at least 1 of {n} right; pass@k: unbiased estimator",
    )
    for name, b in result["benchmarks"].items():
        rows = [*b["levels"].items(), ("all", b)]
        for level, r in rows:
            t.add_row(
                name if level == "all" or level == next(iter(b["levels"])) else "",
                level,
                str(r["tasks"]),
                _fmt(r["greedy"]),
                _fmt(r["mean_success"]),
                *(_fmt(r["pass_at_k"][str(k)]) for k in others),
                _fmt(r["pass_at_n"]),
                end_section=level == "all",
            )
    return t
