"""The warm start shows what each role writes while it trains (greedy samples), without changing what it trains."""

from __future__ import annotations

import json

from genenv_engine.config import load_config
from genenv_engine.environments import get_environment
from genenv_engine.training import warmstart
from genenv_engine.training.policy import Policy, pick_device


def _warm(tmp_path, monkeypatch, name):
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / name))
    config = load_config("micro")
    envs = {"bfcl": get_environment("bfcl", config.seed)}
    events = []
    folder, _ = warmstart.warm_start(config, envs, events.append)
    return config, envs, folder, events


def test_each_role_shows_checked_samples_up_to_its_last_step(tmp_path, monkeypatch):
    config, envs, _, events = _warm(tmp_path, monkeypatch, "a")
    samples = [e for e in events if e.kind == "WarmStartSample"]
    by_role = {role: [e for e in samples if e.role == role] for role in ("agent", "simulator")}
    env = envs["bfcl"]
    shown, seed = env.splits()["heldout"][0], env.splits()["seed"][0]
    for role, steps in (("agent", config.warm_start.agent_steps), ("simulator", config.warm_start.simulator_steps)):
        got = by_role[role]
        assert 2 <= len(got) <= warmstart.SAMPLES + 1  # the first always, the last always, others within 5 % of time
        assert got[-1].step == steps == got[-1].steps
        assert [e.step for e in got] == sorted({e.step for e in got})
        assert all(isinstance(e.ok, bool) for e in got)
    agent_last = by_role["agent"][-1]
    assert agent_last.prompt == shown.prompt and agent_last.detail == f"gold: {shown.answer}"
    assert agent_last.ok == env.check(shown, agent_last.text).success  # the verdict is the checker's
    sim_last = by_role["simulator"][-1]
    assert sim_last.prompt == seed.prompt
    assert sim_last.ok == (sim_last.detail == "")  # valid, or the validator's reason why not
    assert all(json.dumps(e.payload()) for e in samples)  # stored with the other events


def test_samples_do_not_change_the_trained_weights(tmp_path, monkeypatch):
    _, _, with_samples, _ = _warm(tmp_path, monkeypatch, "a")
    monkeypatch.setattr(warmstart.training, "_agent_sample", lambda *a: ("p", "t", False, ""))
    monkeypatch.setattr(warmstart.training, "_simulator_sample", lambda *a: ("p", "t", False, ""))
    _, _, without, events = _warm(tmp_path, monkeypatch, "b")
    assert [e.text for e in events if e.kind == "WarmStartSample"][-1] == "t"  # the stand-ins ran
    device = pick_device("cpu")
    for role in ("agent", "simulator"):
        a = Policy.load(with_samples / role, device, 384).fingerprint()
        b = Policy.load(without / role, device, 384).fingerprint()
        assert a == b, role
