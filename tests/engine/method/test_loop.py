"""End-to-end tests of the co-evolution controller on the micro preset, with real tiny models and SQLite.

Where a test needs the simulator to write valid tasks or the agent to succeed some of the time
(which seconds-old micro models cannot), it swaps the role's generation backend for a scripted
test double (`ScriptedSimulator`, `ScriptedAgent` from `genenv_engine.testing`); the policies, trainers and store stay
real.
"""

from __future__ import annotations

import json
import random
import threading

import pytest

from genenv_engine.config import ConfigError, config_from_file, load_config
from genenv_engine.core.events import RunControl
from genenv_engine.environments.bfcl.mini import generate_task
from genenv_engine.interfaces.cli import status_json
from genenv_engine.method.loop import run
from genenv_engine.storage.session import Session
from genenv_engine.testing import scripted_backends
from genenv_engine.training.roles import load_roles


def scripted(sim_texts: list[str] | None = None, p: float = 0.5):
    return scripted_backends(sim_texts, p)


def always_succeeds():
    """Scripted backends whose agent solves every task (every batch gets p_hat = 1)."""
    factory = scripted()

    def make(role, policy):
        backend = factory(role, policy)
        if role == "agent":
            backend.p = 1.0
        return backend

    return make


def micro_session(tmp_path, name="s", **overrides) -> Session:
    return Session.create(load_config("micro", overrides=overrides or None), tmp_path / name)


def collect():
    events = []
    return events, events.append


def test_micro_run_event_order_rows_and_checkpoints(tmp_path):
    session = micro_session(tmp_path)
    events, sink = collect()
    summary = run(session, sink)
    assert summary == {"epochs_done": 2}
    kinds = [e.kind for e in events if e.kind not in ("BatchProgressed", "WarmStartProgressed")]
    assert kinds[:2] == ["RunStarted", "EpochStarted"] and kinds[-1] == "RunFinished"
    phases = [e.phase for e in events if e.kind == "PhaseFinished" and e.epoch == 1]
    assert phases == [
        "generate",
        "validate",
        "rollout",
        "agent_update",
        "simulator_update",
        "heldout_eval",
        "checkpoint",
    ]
    metrics = session.store.epoch_metrics()
    assert [(m["epoch"], m["status"]) for m in metrics] == [(0, "done"), (1, "done"), (2, "done")]
    cfg = session.config
    for m in metrics[1:]:
        assert m["generated"] == cfg.simulator.seeds_per_epoch * cfg.simulator.variations
        n_rollouts = len(
            session.store.db.execute(
                "select 1 from rollouts where epoch = ? and purpose = 'train'", [m["epoch"]]
            ).fetchall()
        )
        assert n_rollouts == m["tasks_trained"] * cfg.agent.rollouts
        answers = session.store.heldout_answers(m["epoch"])  # one greedy answer per held-out task, as scored
        assert len(answers) == cfg.heldout_size
        correct = m["heldout_correct"]["bfcl"]
        from genenv_engine.environments import environments_of
        from genenv_engine.training.agent import heldout_tasks

        order = [t.id for t in heldout_tasks(environments_of(cfg), cfg.heldout_size)]
        assert "".join(str(int(answers[i]["success"])) for i in order) == correct
        assert set(m["heldout"]) == {"bfcl"} and 0.0 <= m["heldout"]["bfcl"] <= 1.0
    assert session.checkpoint_epochs() == [0, 1, 2]
    assert all((session.checkpoint_dir(e) / "COMPLETE").exists() for e in (0, 1, 2))
    status = status_json(session.path)
    assert [e["epoch"] for e in status["epochs"]] == [0, 1, 2]
    assert set(status["epochs"][1]) >= {
        "epoch",
        "generated_success",
        "calibration_error",
        "valid_fraction",
        "unique_fraction",
        "difficulty_mix",
        "heldout",
        "phase_seconds",
        "tasks_trained",
    }
    validity = status["epochs"][1]["validity"]["bfcl"]
    assert validity["drafts"] == metrics[1]["generated"] and validity["valid"] == metrics[1]["valid"]
    assert sum(validity["rejected"].values()) == validity["drafts"] - validity["valid"]
    assert status["epochs"][0]["validity"] == {}
    workers = status["epochs"][1]["rollout_workers"]
    assert len(workers) == 1 and workers[0]["tasks"] == status["epochs"][1]["tasks_trained"]
    json.dumps(status)  # serialisable as printed by `genenv status --json`


def test_resume_continues_at_next_epoch_with_same_config(tmp_path):
    session = micro_session(tmp_path, epochs=1)
    run(session)
    epoch1 = session.store.epoch_metrics()[1]
    saved = config_from_file(session.path / "config.toml")
    assert saved == session.config
    again = Session.open(session.path)
    again.set_epochs(2)
    events, sink = collect()
    assert run(again, sink) == {"epochs_done": 2}
    started = [e.epoch for e in events if e.kind == "EpochStarted"]
    assert started == [2]
    assert again.config == saved.with_overrides({"epochs": 2})
    assert again.store.epoch_metrics()[1] == epoch1


def test_malformed_simulator_output_is_stored_invalid_with_reason(tmp_path):
    texts = [
        "hello there",
        "F: add(a:int,b:int) | Q: add 3 and 5 => add(a=3,b=9)",
        "=> x => y",
        "F: fly(a:int) | Q: fly 3 => fly(a=3)",
    ]
    session = micro_session(tmp_path, epochs=1)
    run(session, backend_factory=scripted(texts))
    rows = session.store.query_tasks(origin="generated", limit=100, order="id")
    assert rows and not any(r["valid"] for r in rows)
    reasons = {r["prompt"] or r["answer"]: r["reason"] for r in rows}
    assert any(v.startswith("parse_error") for v in reasons.values())
    assert reasons["F: add(a:int,b:int) | Q: add 3 and 5"].startswith("answer_mismatch")
    assert reasons["F: fly(a:int) | Q: fly 3"].startswith("unknown_function")
    metrics = session.store.epoch_metrics()[1]
    assert metrics["valid_fraction"] == 0.0 and metrics["generated_success"] is None


@pytest.mark.parametrize("mode", ["trained", "frozen"])
def test_rwr_changes_simulator_only_when_trained(tmp_path, mode):
    session = micro_session(tmp_path, epochs=2, **{"simulator.mode": mode, "curriculum.reward": "uniform"})
    run(session, backend_factory=scripted())
    prints = [m["simulator_fingerprint"] for m in session.store.epoch_metrics()]
    agent_prints = [m["agent_fingerprint"] for m in session.store.epoch_metrics()]
    if mode == "trained":
        assert prints[0] != prints[1] != prints[2]
        update = session.store.epoch_metrics()[1]["simulator_update"]
        assert update["steps"] > 0
        # warm-start anchors ride along: init_replay (2.0) times the epoch's in-band and repaired examples
        assert update["anchor_examples"] == round(2.0 * (update["current_examples"] + update["repair_examples"]))
        assert update["examples"] == (
            update["current_examples"]
            + update["replayed_examples"]
            + update["anchor_examples"]
            + update["repair_examples"]
        )
    else:
        assert prints[0] == prints[1] == prints[2]
    assert agent_prints[0] != agent_prints[1]  # mixed rewards -> GRPO moved the agent
    m = session.store.epoch_metrics()[1]
    assert m["valid"] > 0 and 0.0 < m["generated_success"] < 1.0
    batches = session.store.batches(1)
    assert all(b["r_env"] == 1.0 and b["in_band"] for b in batches)
    # every generated task, valid or not, records the simulator version that wrote it: the epoch of the last RWR
    # update before its epoch (trained: epoch 1 updated, so epoch 2 writes with version 1), else the warm start's 0
    assert simulator_versions(session) == ({1: {0}, 2: {1}} if mode == "trained" else {1: {0}, 2: {0}})


def simulator_versions(session) -> dict[int, set[int | None]]:
    """The simulator versions the stored generated tasks of each epoch record."""
    out: dict[int, set[int | None]] = {}
    for row in session.store.db.query("SELECT epoch, simulator_version FROM tasks WHERE origin = 'generated'"):
        out.setdefault(row["epoch"], set()).add(row["simulator_version"])
    return out


def test_simulator_version_survives_a_resume_and_stays_when_no_update_ran(tmp_path):
    """A resumed run reads the version from the stored epochs: epoch 1 updated the simulator, so the resumed
    epoch 2 writes with version 1. With no batch in the band (the agent always succeeds) nothing updates, and
    every epoch writes with the warm start's 0; built-in tasks record none."""
    session = micro_session(tmp_path, "updated", epochs=1, **{"curriculum.reward": "uniform"})
    run(session, backend_factory=scripted())
    assert session.store.epoch_metrics()[1]["simulator_update"]["steps"] > 0
    again = Session.open(session.path)
    again.set_epochs(2)
    run(again, backend_factory=scripted())
    assert simulator_versions(again) == {1: {0}, 2: {1}}
    still = micro_session(tmp_path, "still", epochs=2)
    run(still, backend_factory=always_succeeds())
    assert simulator_versions(still) == {1: {0}, 2: {0}}
    assert {
        r["simulator_version"]
        for r in still.store.db.query("SELECT simulator_version FROM tasks WHERE origin = 'seed'")
    } == {None}


def test_alpha_band_filter_keeps_simulator_still_when_no_batch_in_band(tmp_path):
    # the scripted agent always succeeds: every batch has p_hat = 1, outside [0.4, 0.6]
    session = micro_session(tmp_path, epochs=1)
    run(session, backend_factory=always_succeeds())
    m = session.store.epoch_metrics()
    assert m[1]["generated_success"] == 1.0 and m[1]["calibration_error"] == pytest.approx(0.5)
    assert m[1]["simulator_update"]["skipped"] == "no batch in the band"
    assert m[0]["simulator_fingerprint"] == m[1]["simulator_fingerprint"]
    assert all(not b["in_band"] and b["r_env"] == pytest.approx(0.60653, abs=1e-4) for b in session.store.batches(1))


def test_static_mode_generates_once_and_off_mode_never(tmp_path):
    static = micro_session(tmp_path, "static", epochs=2, **{"simulator.mode": "static"})
    run(static, backend_factory=scripted())
    seeds = len(static.store.query_tasks(benchmark="bfcl", limit=10_000, text=None, origin="seed", order="id"))
    n_static = static.store.count_tasks(origin="static")
    assert n_static == 200 * static.config.simulator.static_multiplier  # the seed split, 5x, written once
    assert static.store.count_tasks(origin="generated") == 0
    assert static.store.epoch_metrics()[2]["generated"] == 0 and seeds > 0
    assert static.store.epoch_metrics()[2]["tasks_trained_by_origin"].get("static", 0) > 0
    off = micro_session(tmp_path, "off", epochs=1, **{"simulator.mode": "off"})
    run(off, backend_factory=scripted())
    assert off.store.count_tasks(origin="generated") + off.store.count_tasks(origin="static") == 0
    assert set(off.store.epoch_metrics()[1]["tasks_trained_by_origin"]) == {"seed"}


def test_stop_leaves_partial_epoch_that_resume_redoes(tmp_path):
    session = micro_session(tmp_path, epochs=2)
    control = RunControl()

    def sink(event):
        if event.kind == "PhaseFinished" and event.epoch == 1 and event.phase == "rollout":
            control.stop()

    summary = run(session, sink, control)
    assert summary == {"stopped_at": 1, "epochs_done": 0}
    assert [(m["epoch"], m["status"]) for m in session.store.epoch_metrics()] == [(0, "done"), (1, "partial")]
    assert run(Session.open(session.path)) == {"epochs_done": 2}
    assert [(m["epoch"], m["status"]) for m in session.store.epoch_metrics()] == [(0, "done"), (1, "done"), (2, "done")]
    kinds = [e["kind"] for e in session.store.events(limit=10_000)]
    assert "RunStopped" in kinds and "PartialEpochDiscarded" in kinds


def test_run_control_checker_emits_its_epoch_and_raises_on_stop():
    """The control is only flags; each epoch's check carries the sink and epoch it reports pauses with."""
    from genenv_engine.core.events import StopRequested

    control, got = RunControl(), []
    check = control.checker(got.append, 3)
    check()
    assert got == []  # running: nothing emitted
    control.pause()
    threading.Timer(0.05, control.resume).start()
    check()
    assert [(e.kind, e.epoch) for e in got] == [("RunPaused", 3), ("RunResumed", 3)]
    control.stop()
    with pytest.raises(StopRequested):
        check()
    with pytest.raises(StopRequested):
        control.checker()()  # a stop holds for every later epoch's check too


def run_pausing_at(tmp_path, kind: str, phase: str) -> tuple[Session, list]:
    """Run one micro epoch, pausing when the event (kind, phase) arrives; a thread resumes once RunPaused is seen."""
    session = micro_session(tmp_path, epochs=1)
    control = RunControl()
    events, sink = collect()
    paused = threading.Event()

    def pausing_sink(event):
        sink(event)
        if event.kind == kind and event.phase == phase:
            control.pause()
        if event.kind == "RunPaused":
            paused.set()

    resumer = threading.Thread(target=lambda: (paused.wait(30), control.resume()))
    resumer.start()
    run(session, pausing_sink, control)
    resumer.join()
    return session, events


def test_pause_blocks_between_batches_until_resumed(tmp_path):
    session, events = run_pausing_at(tmp_path, "PhaseFinished", "generate")
    kinds = [e.kind for e in events]
    assert kinds.index("RunPaused") < kinds.index("RunResumed") < kinds.index("RunFinished")
    assert session.store.epoch_metrics()[1]["status"] == "done"


def test_hand_edit_made_between_epochs_is_trained_on_next_epoch(tmp_path):
    session = micro_session(tmp_path, epochs=1)
    factory = scripted()
    run(session, backend_factory=factory)
    original = session.store.query_tasks(origin="generated", valid=True, limit=1, order="id")[0]
    env_task = session.store.get_task(original["id"])
    prompt, answer, expected, tools, features = generate_task(2, random.Random(99))
    edited = env_task.with_(id=env_task.id + "/r1", prompt=prompt, answer=answer, expected=expected, tools=tools)
    session.store.revise_task(env_task.id, edited)
    resumed = Session.open(session.path)
    resumed.set_epochs(2)
    run(resumed, backend_factory=factory)
    trained = {
        r["task_id"]
        for r in resumed.store.db.execute(
            "select task_id from rollouts where epoch = 2 and purpose = 'train'"
        ).fetchall()
        for r in [dict(zip(["task_id"], r, strict=False))]
    }
    assert edited.id in trained
    assert env_task.id not in trained  # the superseded revision is no longer used


def test_roles_reload_from_checkpoint_with_optimizer_state(tmp_path):
    session = micro_session(tmp_path, epochs=1)
    run(session, backend_factory=scripted())
    roles = load_roles(session, 1)
    assert roles.agent.fingerprint() == pytest.approx(session.store.epoch_metrics()[1]["agent_fingerprint"], rel=1e-6)
    assert roles.grpo.steps > 0


def test_generated_copies_of_heldout_tasks_are_rejected(tmp_path):
    from genenv_engine.environments import get_environment

    heldout = get_environment("bfcl", 0).splits()["heldout"]
    texts = [f"{t.prompt} => {t.answer}" for t in heldout[:3]]
    session = micro_session(tmp_path, epochs=1)
    run(session, backend_factory=scripted(texts))
    rows = session.store.query_tasks(origin="generated", limit=100, order="id")
    assert rows and all(r["reason"].startswith("heldout_copy") for r in rows)
    assert session.store.epoch_metrics()[1]["valid"] == 0


def test_banned_and_edited_base_tasks_leave_the_replay_sample(tmp_path):
    from genenv_engine.environments import get_environment
    from genenv_engine.method.phases import base_tasks, replay_tasks
    from genenv_engine.method.strategies import resolve

    session = micro_session(tmp_path, epochs=0)
    run(session, backend_factory=scripted())
    envs = {"bfcl": get_environment("bfcl", 0)}
    train = envs["bfcl"].splits()["train"]
    banned, edited, pinned = train[0], train[1], train[2]
    session.store.set_status(banned.id, "banned")
    session.store.set_status(pinned.id, "pinned")
    session.store.revise_task(edited.id, edited.with_(id=edited.id + "/r1", prompt=edited.prompt + " "))
    plan = resolve(session.config)
    base_ids = {t.id for t in base_tasks(session, envs, plan)}
    assert len(base_ids) == len(train) - 3 and not {banned.id, edited.id, pinned.id} & base_ids
    replay = {t.id for t in replay_tasks(session, envs, set(), random.Random(0), 0, plan)}
    assert pinned.id in replay and edited.id + "/r1" in replay  # pinned always, a fresh edit once
    assert banned.id not in replay and edited.id not in replay


def test_stop_during_warm_start_leaves_no_cache_and_resume_trains_it(tmp_path, monkeypatch):
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "cache"))
    session = micro_session(tmp_path, epochs=0)
    control = RunControl()

    def sink(event):
        if event.kind == "WarmStartProgressed":
            control.stop()

    assert run(session, sink, control) == {"stopped_at": 0, "epochs_done": -1}
    assert not list((tmp_path / "cache").glob("warmstart/*"))
    assert [(m["epoch"], m["status"]) for m in session.store.epoch_metrics()] == [(0, "partial")]
    assert run(Session.open(session.path)) == {"epochs_done": 0}
    assert [p.name.endswith(".tmp") for p in (tmp_path / "cache" / "warmstart").iterdir()] == [False]


def test_pause_takes_effect_inside_a_generate_call(tmp_path):
    session, events = run_pausing_at(tmp_path, "PhaseStarted", "generate")
    kinds = [(e.kind, getattr(e, "phase", None)) for e in events]
    # the pause lands between decoding steps, before the generate batch reports any progress
    assert kinds.index(("RunPaused", None)) < kinds.index(("BatchProgressed", "generate:bfcl"))
    assert session.store.epoch_metrics()[1]["status"] == "done"


def test_filter_none_agent0_reward_and_per_benchmark_alpha(tmp_path):
    # every batch has p_hat = 1 (the scripted agent always succeeds): the paper's band keeps none of them
    # (previous test); with filter = none every batch is kept with its R_env, here Agent0's 1 - 2|1 - 0.7| = 0.4
    session = micro_session(
        tmp_path,
        epochs=1,
        **{"curriculum.filter": "none", "curriculum.reward": "agent0", "curriculum.alpha_by_benchmark": {"bfcl": 0.7}},
    )
    run(session, backend_factory=always_succeeds())
    m = session.store.epoch_metrics()
    batches = session.store.batches(1)
    assert batches and all(b["in_band"] and b["r_env"] == pytest.approx(0.4) for b in batches)
    assert m[1]["calibration_error"] == pytest.approx(0.3) and m[1]["in_band_fraction"] == 1.0
    assert m[1]["simulator_update"]["steps"] > 0 and m[1]["simulator_update"]["current_examples"] > 0
    assert m[0]["simulator_fingerprint"] != m[1]["simulator_fingerprint"]


def test_seed_levels_draw_every_conditioning_seed_from_those_levels(tmp_path):
    from genenv_engine.environments import get_environment

    session = micro_session(tmp_path, "weak", epochs=1, **{"simulator.seed_levels": [4]})
    run(session, backend_factory=scripted())
    level = {t.id: t.level for t in get_environment("bfcl", session.config.seed).splits()["seed"]}
    generated = session.store.query_tasks(benchmark="bfcl", limit=10_000, text=None, origin="generated", order="id")
    assert len(generated) == session.config.simulator.seeds_per_epoch * session.config.simulator.variations
    assert {level[t["parent_id"]] for t in generated} == {4}
    static = micro_session(
        tmp_path, "static", epochs=1, **{"simulator.mode": "static", "simulator.seed_levels": [2, 3]}
    )
    run(static, backend_factory=scripted())
    parents = {
        t["parent_id"]
        for t in static.store.query_tasks(benchmark="bfcl", limit=10_000, text=None, origin="static", order="id")
    }
    assert {level[p] for p in parents} == {2, 3}
    assert len(parents) == sum(v in (2, 3) for v in level.values())  # every seed at those levels, augmented once


def test_seed_levels_no_seed_has_fail_before_the_warm_start(tmp_path):
    session = micro_session(tmp_path, epochs=1, **{"simulator.seed_levels": [1]})  # bfcl seeds are L2-L4
    with pytest.raises(ConfigError, match="seed_levels.*no task at levels \\[1\\].*levels are \\[2, 3, 4\\]"):
        run(session, backend_factory=scripted())
    assert session.store.epoch_metrics() == []
    with pytest.raises(ConfigError, match="positive integer levels"):
        load_config("micro", overrides={"simulator.seed_levels": ["hard"]})


def test_base_levels_restrict_the_base_replay_and_not_held_out(tmp_path):
    from genenv_engine.environments import get_environment

    session = micro_session(tmp_path, epochs=1, **{"simulator.mode": "off", "agent.base_levels": [3]})
    run(session, backend_factory=scripted())
    env = get_environment("bfcl", session.config.seed)
    level = {t.id: t.level for split in env.splits().values() for t in split}
    rows = session.store.db.execute("select task_id, purpose from rollouts where epoch = 1").fetchall()
    trained = {r[0] for r in rows if r[1] != "heldout"}
    assert trained and {level[t] for t in trained} == {3}
    assert len(trained) == session.store.epoch_metrics()[1]["tasks_trained"]
    assert len(session.store.epoch_metrics()[1]["heldout_by_level"]["bfcl"]) > 1  # held-out keeps every level
    with pytest.raises(ConfigError, match="base_levels.*no task at levels \\[9\\]"):
        run(micro_session(tmp_path, "none", epochs=1, **{"agent.base_levels": [9]}), backend_factory=scripted())
    with pytest.raises(ConfigError, match="positive integer levels"):
        load_config("micro", overrides={"agent.base_levels": [0]})


def test_unseen_base_source_trains_on_stored_tasks_no_split_has(tmp_path):
    from genenv_engine.environments import get_environment
    from genenv_engine.environments.base import Environment
    from genenv_engine.method.variants import base_choices

    session = micro_session(
        tmp_path,
        epochs=1,
        **{"simulator.mode": "off", "agent.base_source": "unseen", "agent.base_levels": [3], "agent.unseen_tasks": 300},
    )
    run(session, backend_factory=scripted())
    env = get_environment("bfcl", session.config.seed)
    split_prompts = {t.prompt for split in env.splits().values() for t in split}
    trained = {
        r[0]
        for r in session.store.db.execute(
            "select task_id from rollouts where epoch = 1 and purpose != 'heldout'"
        ).fetchall()
    }
    assert len(trained) == session.store.epoch_metrics()[1]["tasks_trained"] > 0
    tasks = [session.store.get_task(t) for t in trained]  # stored, so the console and reports can show them
    assert all(t is not None and t.id.startswith("bfcl/unseen/") and t.split == "unseen" for t in tasks)
    assert {t.level for t in tasks} == {3} and not {t.prompt for t in tasks} & split_prompts
    from genenv_engine.method.phases import base_tasks
    from genenv_engine.method.strategies import resolve

    banned = sorted(trained)[0]  # a ban in the console keeps an unseen task out of later epochs, as for train tasks
    session.store.set_status(banned, "banned")
    choices = {t.id for t in base_tasks(session, {"bfcl": env}, resolve(session.config))}
    assert banned not in choices and len(choices) == 299
    again = get_environment("bfcl", session.config.seed).unseen_tasks(300, (3,))  # a resumed run draws the same pool
    assert [(t.id, t.prompt) for t in again] == [(t.id, t.prompt) for t in env.unseen_tasks(300, (3,))]
    assert len({t.prompt for t in again}) == 300
    env.unseen_tasks = lambda n, levels=(): Environment.unseen_tasks(env, n, levels)  # a benchmark with fixed data
    with pytest.raises(ConfigError, match="base_source.*needs a generated benchmark"):
        base_choices(env, (), "unseen", 10)
    with pytest.raises(ConfigError, match="base_source"):
        load_config("micro", overrides={"agent.base_source": "elsewhere"})


def test_base_pool_keeps_n_train_tasks_and_replays_them_to_the_full_budget(tmp_path):
    from genenv_engine.environments import get_environment
    from genenv_engine.method.variants import base_choices

    session = micro_session(
        tmp_path,
        epochs=2,
        **{"simulator.mode": "off", "agent.base_levels": [3], "agent.base_pool": 5, "agent.tasks_per_epoch": 24},
    )
    run(session, backend_factory=scripted())
    env = get_environment("bfcl", session.config.seed)
    pool = base_choices(env, (3,), "train", pool=5, seed=session.config.seed)
    level3 = env.split_at_levels("train", (3,), "agent.base_levels")
    assert len(pool) == 5 and len({t.id for t in pool}) == 5 and all(t.level == 3 for t in pool)
    assert {t.id for t in pool} <= {t.id for t in level3} and len(level3) > 5
    assert [t.id for t in base_choices(env, (3,), "train", pool=5, seed=session.config.seed)] == [t.id for t in pool]
    assert [t.id for t in base_choices(env, (3,), "train", pool=5, seed=1)] != [t.id for t in pool]
    assert len(base_choices(env, (3,), "train", pool=10**6)) == len(level3)  # a cap above the split keeps it all
    for epoch in (1, 2):  # every epoch trains on the 5 tasks only, replayed to the 24 the budget asks for
        rows = session.store.db.execute(
            "select task_id, count(*) from rollouts where epoch = ? and purpose != 'heldout' group by task_id", (epoch,)
        ).fetchall()
        assert {r[0] for r in rows} == {t.id for t in pool}
        assert sum(r[1] for r in rows) == 24 * session.config.agent.rollouts
        assert session.store.epoch_metrics()[epoch]["tasks_trained"] == 24
    with pytest.raises(ConfigError, match="agent.base_pool"):
        load_config("micro", overrides={"agent.base_pool": -1})
    with pytest.raises(ConfigError, match="agent.base_pool.*unseen_tasks"):
        load_config("micro", overrides={"agent.base_pool": 5, "agent.base_source": "unseen"})
