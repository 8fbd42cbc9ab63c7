"""`genenv bench passk`: the pass@k estimator, the seeded sampling, and the bench on the micro preset."""

from __future__ import annotations

import json
import random

import pytest

from genenv_engine.backends.base import Completion, Sampling
from genenv_engine.interfaces.benches import passk
from genenv_engine.interfaces.cli import main


def test_pass_at_k_known_cases():
    assert passk.pass_at_k(8, 0, 1) == 0.0 and passk.pass_at_k(8, 0, 8) == 0.0  # nothing right: never
    assert passk.pass_at_k(8, 8, 1) == 1.0 and passk.pass_at_k(5, 5, 3) == 1.0  # all right: always
    # n = 5, c = 2, k = 2: 1 - C(3, 2) / C(5, 2) = 1 - 3/10
    assert passk.pass_at_k(5, 2, 2) == pytest.approx(0.7)
    # by hand: the chance that 2 draws without replacement from {R, R, W, W, W} hold an R
    assert 1 - (3 / 5) * (2 / 4) == pytest.approx(0.7)
    assert passk.pass_at_k(8, 3, 1) == pytest.approx(3 / 8)  # k = 1: the share right
    assert passk.pass_at_k(8, 1, 8) == 1.0 and passk.pass_at_k(8, 7, 2) == 1.0  # fewer wrong than k: certain
    with pytest.raises(ValueError):
        passk.pass_at_k(4, 5, 1)
    with pytest.raises(ValueError):
        passk.pass_at_k(4, 1, 5)


def test_summarize_by_hand():
    s = passk.summarize([1, 0, 0, 0], [4, 2, 0, 0], 4, (1, 2, 4))
    assert (s["tasks"], s["greedy_solved"], s["solved_any"]) == (4, 1, 2)
    assert s["greedy"] == 0.25 and s["mean_success"] == pytest.approx(6 / 16) and s["pass_at_n"] == 0.5
    # pass@2 per task: 1, 1 - C(2,2)/C(4,2) = 5/6, 0, 0
    assert s["pass_at_k"] == {"1": pytest.approx(6 / 16), "2": pytest.approx((1 + 5 / 6) / 4), "4": 0.5}
    assert passk.summarize([], [], 4, (1, 4))["pass_at_n"] is None


class _Policy:
    """Only what `agent.rollout` asks of a policy: the chat template."""

    def chat(self, messages):
        return messages[0]["content"]


class _SeededAgent:
    """Test double: answers a task right with a per-level chance, drawing from the call's sampling seed."""

    def __init__(self, golds: dict[str, tuple[str, int]]) -> None:
        self.golds = golds
        self.calls: list[tuple[int, int]] = []
        self.tokens_generated = 0
        self.tick = None

    def generate(self, prompts: list[str], sampling: Sampling) -> list[Completion]:
        self.calls.append((len(prompts), sampling.seed))
        rng = random.Random(sampling.seed)
        out = []
        for p in prompts:
            answer, level = self.golds[p]
            text = answer if rng.random() < 1 - level / 4 else "wrong"
            out.append(Completion(text, [0]))
        return out


def _chain_tasks(count: int):
    from genenv_engine.config import load_config
    from genenv_engine.environments import environments_of

    envs = environments_of(load_config("micro", None, {"benchmarks": ["chain"]}))
    return envs, envs["chain"].splits()["heldout"][:count]


def test_sampling_is_seeded_per_call_and_counts_each_task():
    envs, tasks = _chain_tasks(50)
    golds = {t.prompt: (t.answer, t.level) for t in tasks}

    def sample(seed):
        agent = _SeededAgent(golds)
        out = passk.sample_successes(agent, _Policy(), envs, tasks, 3, 1.0, 8, 0.5, seed)
        return out, agent.calls

    (successes, digest), calls = sample(7)
    # 150 rows in calls of at most 128, each with its own seed
    assert [c[0] for c in calls] == [128, 22] and calls[0][1] != calls[1][1]
    assert all(0 <= c <= 3 for c in successes) and len(successes) == 50
    assert all(c == 0 for c, t in zip(successes, tasks, strict=False) if t.level >= 4)  # a chance of 1 - level/4
    assert (
        0
        < sum(c for c, t in zip(successes, tasks, strict=False) if t.level == 1)
        < 3 * sum(t.level == 1 for t in tasks)
    )
    assert sample(7)[0] == (successes, digest)  # the same seed draws the same
    assert sample(8)[0][1] != digest


def _bench(tmp_path, *argv: str) -> dict:
    assert main(["bench", "passk", *argv, "--out", str(tmp_path)]) == 0
    return json.loads((tmp_path / "bench-passk.json").read_text())


def test_micro_chain_levels_greedy_and_reproducibility(tmp_path, monkeypatch):
    from genenv_engine.config import load_config
    from genenv_engine.method.loop import run as run_loop
    from genenv_engine.storage.session import Session
    from genenv_engine.training.warmstart import cache_key

    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "cache"))
    argv = ("--preset", "micro", "--set", 'benchmarks=["chain"]', "--tasks", "10", "--n", "2", "--seed", "0")
    out = _bench(tmp_path / "a", *argv)
    config = load_config("micro", None, {"benchmarks": ["chain"], "seed": 0})
    assert out["warm_start_key"] == cache_key(config) and not out["warm_start_cached"]
    assert (tmp_path / "cache" / "warmstart" / out["warm_start_key"] / "info.json").exists()  # kept in the cache
    assert out["agent_fingerprint"] == out["loaded_agent_fingerprint"]
    assert (out["n"], out["ks"], out["tasks"], out["tasks_per_benchmark"]) == (2, [1, 2], 10, 10)
    chain = out["benchmarks"]["chain"]
    levels = chain["levels"]
    assert sum(r["tasks"] for r in levels.values()) == chain["tasks"] == 10
    assert list(levels) == sorted(levels, key=lambda b: int(b[1:]))
    for r in [*levels.values(), chain]:
        assert r["pass_at_n"] >= r["mean_success"]
        assert r["pass_at_k"]["1"] == pytest.approx(r["mean_success"])
        assert r["pass_at_k"]["2"] == pytest.approx(r["pass_at_n"])
    # the greedy figures are the stored epoch-0 result of each task, split by level
    tasks = out["per_task"]["chain"]
    assert "".join(str(t["greedy"]) for t in tasks) == out["greedy_correct"]["chain"]
    for level, r in levels.items():
        mine = [t for t in tasks if t["level"] == level]
        assert r["greedy_solved"] == sum(t["greedy"] for t in mine) and r["tasks"] == len(mine)
        assert r["solved_any"] == sum(t["successes"] > 0 for t in mine)
        assert all(0 <= t["successes"] <= 2 for t in mine)
    # a run with the same settings reuses the cached warm start: same agent, same epoch-0 held-out string
    session = Session.create(
        load_config("micro", None, {"benchmarks": ["chain"], "seed": 0, "epochs": 0}), tmp_path / "run"
    )
    run_loop(session)
    m = session.store.epoch_metrics()[0]
    session.store.close()
    assert m["agent_fingerprint"] == out["agent_fingerprint"] and m["warm_start"] == out["warm_start"]
    assert m["heldout_correct"]["chain"][:10] == out["greedy_correct"]["chain"]
    # the same seed again (the warm start now cached): the same numbers and the same samples
    again = _bench(tmp_path / "b", *argv, "--samples", str(tmp_path / "samples.jsonl"))
    assert again["warm_start_cached"] and again["agent_fingerprint"] == out["agent_fingerprint"]
    assert (again["benchmarks"], again["per_task"], again["sample_digest"]) == (
        out["benchmarks"],
        out["per_task"],
        out["sample_digest"],
    )
    # --samples writes each sample with its verdict: n rows a task, their successes the per-task counts
    rows = [json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 10 * 2 and {r["id"] for r in rows} == {t["id"] for t in tasks}
    for t in tasks:
        mine = [r for r in rows if r["id"] == t["id"]]
        assert len(mine) == 2 and sum(r["success"] for r in mine) == t["successes"]
        assert all((r["error_type"] is None) == r["success"] for r in mine)
    # more tasks than the preset's held-out size: the greedy evaluation covers them too
    wide = _bench(tmp_path / "c", *argv[:4], "--tasks", "30", "--n", "1", "--seed", "0")
    assert wide["warm_start_cached"] and wide["epoch0_heldout_size"] == 30
    assert len(wide["greedy_correct"]["chain"]) == 30 == wide["benchmarks"]["chain"]["tasks"]
    assert wide["greedy_correct"]["chain"][:10] == out["greedy_correct"]["chain"]
