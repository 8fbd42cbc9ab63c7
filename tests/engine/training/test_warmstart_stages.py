"""The warm start's two stages: a run without a simulator trains the agent alone, and a later run that needs the
simulator trains it from that entry to the same weights as a warm start made in one go."""

from __future__ import annotations

import json

import pytest
from safetensors.torch import load_file

from genenv_engine.config import ModelConfig, load_config
from genenv_engine.environments import get_environment
from genenv_engine.method.loop import run
from genenv_engine.storage.session import Session
from genenv_engine.training import warmstart
from genenv_engine.training.policy import build_tiny_model
from genenv_engine.training.roles import load_roles
from genenv_engine.training.tokenizer import build_byte_tokenizer

SMALL = dict(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_length=384)


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory):
    """A local checkpoint folder standing for a pretrained base (LoRA roles need one)."""
    folder = tmp_path_factory.mktemp("base")
    tok = build_byte_tokenizer()
    build_tiny_model(ModelConfig(**SMALL), tok, seed=3).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def config(mode: str, base=None):
    overrides = {"simulator.mode": mode}
    if base is not None:
        overrides.update(
            {
                "model.kind": "hf",
                "model.path": str(base),
                "model.agent_tuning": "lora",
                "model.simulator_tuning": "lora",
                "model.lora_r": 4,
                "model.lora_alpha": 8,
            }
        )
    return load_config("micro", overrides=overrides)


def warm(monkeypatch, cache, cfg, events=None, sink=None):
    """Warm-start ``cfg`` in the cache folder ``cache``, events into the list ``events`` or the callable ``sink``."""
    monkeypatch.setenv("GENENV_CACHE", str(cache))
    envs = {"bfcl": get_environment("bfcl", cfg.seed)}
    return warmstart.warm_start(cfg, envs, sink or (events.append if events is not None else lambda e: None))


def weights(folder):
    """Every tensor a saved role holds (a full model or a PEFT adapter)."""
    files = sorted(folder.glob("*.safetensors"))
    assert files, folder
    out = {}
    for f in files:
        out.update(load_file(f))
    return out


def assert_same(a, b):
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    for name in wa:
        assert (wa[name] == wb[name]).all(), name


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_agent_first_then_simulator_gives_the_one_go_weights(tmp_path, monkeypatch, base_dir, lora):
    base = base_dir if lora else None
    one_go, info_one = warm(monkeypatch, tmp_path / "a", config("trained", base))

    events = []
    half, info_half = warm(monkeypatch, tmp_path / "b", config("off", base), events)
    assert sorted(p.name for p in half.iterdir()) == ["agent", "agent.json", "rng.pt"]  # no simulator, not finished
    assert {e.role for e in events if e.kind == "WarmStartProgressed"} == {"agent"}
    assert "simulator_steps" not in info_half and info_half["simulator"].startswith("not trained")
    assert info_half["agent_final_loss"] == info_one["agent_final_loss"] and "rng" not in info_half
    assert_same(half / "agent", one_go / "agent")
    assert not warmstart.is_cached(config("trained", base)) and warmstart.is_cached(config("off", base))

    events = []
    done, info_done = warm(monkeypatch, tmp_path / "b", config("trained", base), events)
    assert done == half and {e.role for e in events if e.kind == "WarmStartProgressed"} == {"simulator"}
    assert_same(done / "simulator", one_go / "simulator")  # the restored random states continue the same SFT
    assert_same(done / "agent", one_go / "agent")
    keys = set(info_one) - {"simulator_seconds", "agent_seconds"}
    # each stage names the machine that trained it
    assert info_one["built_on"] == info_done["simulator_built_on"] == warmstart.training.built_on()
    assert {k: info_done[k] for k in keys} == {k: info_one[k] for k in keys}
    assert json.loads((done / "info.json").read_text())["simulator_final_loss"] == info_one["simulator_final_loss"]
    assert not list((tmp_path / "b" / "warmstart").glob("*.tmp*"))

    # a finished entry serves a run without a simulator as well (nothing is trained again)
    events = []
    again, _ = warm(monkeypatch, tmp_path / "b", config("off", base), events)
    assert again == done and not [e for e in events if e.kind == "WarmStartProgressed"]


def test_without_restored_random_states_the_simulator_would_differ(tmp_path, monkeypatch):
    """The check above can fail: skipping the restore gives other simulator weights."""
    one_go, _ = warm(monkeypatch, tmp_path / "a", config("trained"))
    half, _ = warm(monkeypatch, tmp_path / "b", config("off"))
    real = warmstart.training.restore

    def fresh_states(folder):
        rng, info = real(folder)
        rng.seed(12345)
        return rng, info

    monkeypatch.setattr(warmstart.training, "restore", fresh_states)
    done, _ = warm(monkeypatch, tmp_path / "b", config("trained"))
    wa, wb = weights(done / "simulator"), weights(one_go / "simulator")
    assert any(not (wa[k] == wb[k]).all() for k in wa)


def test_a_run_without_a_simulator_starts_from_an_agent_only_warm_start_and_resumes(tmp_path, monkeypatch):
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "cache"))
    session = Session.create(load_config("micro", overrides={"simulator.mode": "off", "epochs": 1}), tmp_path / "s")
    assert run(session) == {"epochs_done": 1}
    (entry,) = (tmp_path / "cache" / "warmstart").iterdir()
    assert not (entry / "simulator").exists() and not (entry / "info.json").exists()
    m0 = session.store.epoch_metrics()[0]
    assert m0["warm_start"]["simulator"].startswith("not trained")
    # the simulator role starts as the agent's copy, and checkpoint 0 holds it, so the session reloads alone
    roles = load_roles(Session.open(session.path), 0)
    assert roles.simulator.fingerprint() == pytest.approx(roles.agent.fingerprint(), rel=1e-6)
    assert (session.checkpoint_dir(0) / "simulator").is_dir()
    assert m0["simulator_fingerprint"] == pytest.approx(m0["agent_fingerprint"], rel=1e-6)


def test_a_stop_during_the_simulators_sft_keeps_the_trained_agent(tmp_path, monkeypatch):
    class Stop(Exception):
        pass

    def sink(event):
        if event.kind == "WarmStartProgressed" and event.role == "simulator":
            raise Stop

    with pytest.raises(Stop):
        warm(monkeypatch, tmp_path / "c", config("trained"), sink=sink)
    (entry,) = (tmp_path / "c" / "warmstart").iterdir()
    assert sorted(p.name for p in entry.iterdir()) == ["agent", "agent.json", "rng.pt"]  # temp folder gone
    events = []
    warm(monkeypatch, tmp_path / "c", config("trained"), events)
    assert {e.role for e in events if e.kind == "WarmStartProgressed"} == {"simulator"}
    assert (entry / "info.json").exists() and (entry / "simulator").is_dir()


def test_a_run_that_finished_the_entry_first_wins(tmp_path, monkeypatch):
    """Two runs finishing one agent-only entry: the later one keeps the earlier one's simulator and figures."""
    half, _ = warm(monkeypatch, tmp_path / "d", config("off"))
    real = warmstart.training.train_simulator

    def and_another_run_finishes(*args):
        info = real(*args)
        (half / "simulator").mkdir()
        (half / "info.json").write_text(json.dumps({"by": "the other run"}))
        return info

    monkeypatch.setattr(warmstart.training, "train_simulator", and_another_run_finishes)
    folder, info = warm(monkeypatch, tmp_path / "d", config("trained"))
    assert folder == half and info == {"by": "the other run"}
    assert list((half / "simulator").iterdir()) == []  # theirs, not replaced by this run's
    assert not list((tmp_path / "d" / "warmstart").glob("*.tmp*"))


def test_only_an_agent_only_warm_start_lends_the_agent_to_the_simulator(tmp_path, monkeypatch):
    """A finished warm start (or a checkpoint) missing simulator/ is damaged, not agent-only: loading it fails."""
    import shutil

    from genenv_engine.training.models import is_agent_only as is_agent_only_warm_start
    from genenv_engine.training.models import load_role_policies

    half, _ = warm(monkeypatch, tmp_path / "e", config("off"))
    assert is_agent_only_warm_start(half)
    cfg = config("off")
    policies = load_role_policies(cfg.model, cfg.runtime, half, half)
    assert policies["simulator"].fingerprint() == policies["agent"].fingerprint()
    done, _ = warm(monkeypatch, tmp_path / "e", config("trained"))
    shutil.rmtree(done / "simulator")
    assert not is_agent_only_warm_start(done)
    with pytest.raises(OSError):
        load_role_policies(cfg.model, cfg.runtime, done, done)


def test_a_second_process_waits_for_the_entry_another_one_trains_then_reuses_it(monkeypatch, tmp_path):
    """While another process holds an entry's lock (a test double: a child that only holds the lock and then
    writes a finished entry), a warm start of the same key waits, says who it waits for, and returns that entry
    without training anything."""
    import subprocess
    import sys
    import textwrap
    import time

    cfg = config("trained")
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path))
    folder = warmstart.cache_root() / "warmstart" / warmstart.cache_key(cfg)
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import json, pathlib, time
        from genenv_engine.storage.lease import waiting_lock
        folder = pathlib.Path({str(folder)!r})
        with waiting_lock({str(warmstart.entry_lock(folder))!r}, what="a test double"):
            print("held", flush=True)
            time.sleep(2)
            for part in ("agent", "simulator"):
                (folder / part).mkdir(parents=True)
            (folder / {warmstart.DONE!r}).write_text(json.dumps({{"trained_by": "the other process"}}))
    """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "held"
        monkeypatch.setattr(warmstart.training, "train_agent", lambda *a, **k: pytest.fail("trained a second time"))
        started = time.monotonic()
        with pytest.warns(UserWarning, match="being trained by a test double .*waiting to reuse it"):
            got, info = warm(monkeypatch, tmp_path, cfg)
        assert time.monotonic() - started > 0.5  # it did wait for the holder
        assert got == folder and info == {"trained_by": "the other process"}
    finally:
        child.wait(timeout=30)
    assert child.returncode == 0


def test_a_stop_while_waiting_for_the_entry_lock_gives_up_waiting(tmp_path):
    """The run's stop check runs while it waits, so a stopped run does not hang on another process's lock."""
    import fcntl
    import os

    from genenv_engine.storage.lease import waiting_lock

    path = tmp_path / "entry.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another open file description: flock treats it as another holder
    calls = []

    def check():
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt

    try:
        with pytest.raises(KeyboardInterrupt):
            with waiting_lock(path, check, poll=0.01):
                pytest.fail("entered while another holder had the lock")
    finally:
        os.close(fd)
    assert len(calls) == 3
    with waiting_lock(path, poll=0.01):  # free again once the holder let go
        assert json.loads(path.read_text())["pid"] == os.getpid()
