"""Validator feedback: a rejected draft whose prompt was sound is taught back to the simulator with its recomputed
gold answer, and the simulator's drafts are sampled under their benchmark's grammar.

A scripted simulator (a test double that writes fixed texts) drives a micro run, so what the update trains on
is known exactly; the pairs themselves are checked on a real byte-tokenizer policy.
"""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
import torch

from genenv_engine.config import ConfigError, ModelConfig, load_config
from genenv_engine.environments import get_environment
from genenv_engine.environments.bfcl.mini import generate_task
from genenv_engine.method.loop import run
from genenv_engine.method.simulator_update import repair_pairs
from genenv_engine.method.strategies import resolve
from genenv_engine.storage.session import Session
from genenv_engine.testing import scripted_backends
from genenv_engine.training.policy import Policy, build_tiny_model
from genenv_engine.training.simulator import Draft, job_grammar, validate
from genenv_engine.training.tokenizer import build_byte_tokenizer

PROMPT, GOLD, *_ = generate_task(2, random.Random(5))  # "F: move(...) ... sq(x:int) | Q: sq 32", "sq(x=32)"
WRONG = GOLD.replace("32", "33")


def drafts(env, texts):
    seed = env.splits()["seed"][0]
    return [Draft(seed, "b0", "ctx", text, [1], f"gen/e1/bfcl/0000-{i}") for i, text in enumerate(texts)]


def test_a_wrong_answer_carries_its_repair_and_nothing_else_does():
    env = get_environment("bfcl", 0)
    good, wrong, broken, unknown = validate(
        env,
        drafts(
            env,
            [f"{PROMPT} => {GOLD}", f"{PROMPT} => {WRONG}", f"{PROMPT} {GOLD}", f"F: zz(x:int) | Q: zz 3 => {GOLD}"],
        ),
        epoch=1,
        generator="test",
    )
    assert good.task.valid and good.repair is None
    assert not wrong.task.valid and wrong.task.reason.startswith("answer_mismatch")
    assert wrong.repair is not None and (wrong.repair.prompt, wrong.repair.answer) == (PROMPT, GOLD)
    assert wrong.task.answer == WRONG  # the stored record keeps what the simulator wrote
    assert broken.repair is None and broken.task.reason.startswith("parse_error")
    assert unknown.repair is None and not unknown.task.valid


def test_repair_pairs_teach_the_recomputed_gold():
    env = get_environment("bfcl", 0)
    tok = build_byte_tokenizer()
    policy = Policy(
        build_tiny_model(ModelConfig(hidden_size=16, num_layers=1, num_heads=1, intermediate_size=32), tok, seed=0),
        tok,
        torch.device("cpu"),
        max_length=256,
    )
    gens = validate(env, drafts(env, [f"{PROMPT} => {WRONG}", f"{PROMPT} => {GOLD}"]), epoch=1, generator="test")
    cfg = load_config("micro")
    note = resolve(cfg).note
    ((context, target, weight),) = repair_pairs(SimpleNamespace(simulator=policy), {"bfcl": env}, gens, cfg, note)
    assert context == policy.encode("ctx") and weight == 1.0
    assert target == policy.encode(f"{PROMPT} => {GOLD}") + [tok.eos_token_id]


def scripted_run(tmp_path, name, **overrides):
    cfg = load_config("micro", overrides={"epochs": 1, "curriculum.reward": "uniform", **overrides})
    session = Session.create(cfg, tmp_path / name)
    factory = scripted_backends([f"{PROMPT} => {GOLD}", f"{PROMPT} => {WRONG}", "no separator here"])
    run(session, backend_factory=factory)
    update = session.store.epoch_metrics()[1]["simulator_update"]
    mismatched = session.store.db.execute(
        "select count(*) from tasks where origin = 'generated' and reason like 'answer_mismatch%'"
    ).fetchone()[0]
    return update, mismatched, factory.made["simulator"].grammars


def test_the_update_trains_on_every_repair_when_on_and_none_when_off(tmp_path):
    on, mismatched, grammars = scripted_run(tmp_path, "on")
    assert mismatched > 0 and on["repair_examples"] == mismatched
    assert on["examples"] == (
        on["current_examples"] + on["replayed_examples"] + on["anchor_examples"] + on["repair_examples"]
    )
    assert on["anchor_examples"] == round(2.0 * (on["current_examples"] + on["repair_examples"]))
    off, mismatched_off, _ = scripted_run(tmp_path, "off", **{"simulator.repairs": False})
    assert mismatched_off == mismatched and off.get("repair_examples", 0) == 0


def test_drafts_are_sampled_under_the_benchmark_grammar_unless_turned_off(tmp_path):
    env = get_environment("bfcl", 0)
    _, _, grammars = scripted_run(tmp_path, "constrained")
    expected = job_grammar(load_config("micro"), env)
    assert grammars and set(grammars) == {expected}
    assert (expected is None) == (env.task_grammar() is None)
    _, _, free = scripted_run(tmp_path, "free", **{"simulator.constrained": False})
    assert set(free) == {None}


def test_a_name_listed_twice_is_mended_and_taught_with_the_gold():
    from genenv_engine.training.simulator import judge

    bfcl = get_environment("bfcl", 0)
    seed = bfcl.splits()["seed"][0]
    task, repair = judge(
        bfcl,
        "F: sq(x:int) neg(x:int) sq(x:int) | Q: sq 7 => sq(x=8)",
        task_id="t",
        seed=seed,
        epoch=1,
        generator="test",
    )
    assert task.reason == "duplicate_function: sq" and task.prompt.count("sq(x:int)") == 2  # stored as written
    assert (repair.prompt, repair.answer, repair.valid) == ("F: sq(x:int) neg(x:int) | Q: sq 7", "sq(x=7)", True)
    alfworld = get_environment("alfworld", 0)
    source = alfworld.splits()["train"][5]
    parts = source.prompt.split(" | ")
    listed = parts[3].split("; ")
    twice = " | ".join(parts[:3] + ["; ".join(listed + [listed[0]])])
    task, repair = judge(
        alfworld,
        f"{twice} => {source.answer}",
        task_id="t",
        seed=alfworld.splits()["seed"][0],
        epoch=1,
        generator="test",
    )
    assert task.reason.startswith("duplicate_name") and repair is not None
    assert (repair.prompt, repair.answer) == (source.prompt, source.answer)
    # no mend for what is not a repeated name
    task, repair = judge(bfcl, "F: zz(x:int) | Q: zz 3 => zz(x=3)", task_id="t", seed=seed, epoch=1, generator="test")
    assert not task.valid and repair is None


def test_a_travel_plan_that_breaks_a_rule_is_cut_before_it_and_asks_for_that_field():
    from genenv_engine.training.simulator import judge

    env = get_environment("travelplanner", 0)
    seed = env.splits()["seed"][0]
    # lunch repeats breakfast's restaurant (A2): the plan is cut to breakfast and the task asks for lunch
    task, repair = judge(
        env, "A>B 2d 1p $600 | dAB A2 Aa A2 ?dinner => A5", task_id="t", seed=seed, epoch=1, generator="test"
    )
    assert task.reason.startswith("bad_prefix: violates_commonsense:diverse_restaurants at day 1 lunch A2")
    assert repair is not None and repair.prompt == "A>B 2d 1p $600 | dAB A2 Aa ?lunch"
    assert env.check(repair, repair.answer).success and not env.check(repair, "A2").success
    # a plan with no broken rule has nothing to cut
    assert env.repair_prompt("A>B 1d 1p $300 | dAB A2 ?sight", "bad_prefix: x") is None
    assert env.repair_prompt("A>B 2d 1p $600 | dAB A2 Aa A2 ?dinner", "infeasible_prefix") is None


def test_a_mended_draft_is_admitted_only_with_admit_mended(tmp_path):
    twice = "F: sq(x:int) neg(x:int) sq(x:int) | Q: sq 7"
    mended = "F: sq(x:int) neg(x:int) | Q: sq 7"

    def one(name, **overrides):
        cfg = load_config(
            "micro",
            overrides={"epochs": 1, "curriculum.reward": "uniform", "simulator.answer_check": False, **overrides},
        )
        session = Session.create(cfg, tmp_path / name)
        run(session, backend_factory=scripted_backends([f"{twice} => sq(x=8)"]))
        rows = session.store.db.execute(
            "select prompt, answer, valid, reason from tasks where origin = 'generated'"
        ).fetchall()
        metrics = session.store.epoch_metrics()[1]
        session.store.close()
        return rows, metrics

    rows, metrics = one("off")
    assert rows and all(
        not valid and reason.startswith("duplicate_function") and prompt == twice for prompt, _, valid, reason in rows
    )
    assert metrics["valid"] == 0 and metrics["admitted"] == {}
    rows, metrics = one("on", **{"simulator.admit_mended": True})
    kept = [(prompt, answer) for prompt, answer, valid, _ in rows if valid]
    # the mended prompt, on its gold (the near-duplicate cap drops the repeats)
    assert kept and set(kept) == {(mended, "sq(x=7)")}
    assert metrics["admitted"] == {"bfcl": {"mended": len(kept)}}
    with pytest.raises(ConfigError, match="answer_check"):
        load_config("micro", overrides={"simulator.admit_mended": True})
