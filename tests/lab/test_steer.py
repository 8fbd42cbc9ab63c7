"""The ``steer`` note (``simulator.note = "steer"``): the compact prompt's success note. Warm-start pairs ask for the
level change they show, an epoch's prompts ask for the direction the agent's measured success calls for, and its
study settings (``study.steer_hold``, ``study.steer_relabel``) hold the word and relabel the RWR update's tasks."""

from __future__ import annotations

import random

import pytest

from genenv_engine.config import ConfigError, load_config
from genenv_engine.environments import get_environment
from genenv_engine.method.strategies import resolve
from genenv_engine.training.warmstart import cache_key, simulator_pairs
from genenv_lab.strategies import STEER_WORDS, direction, steer_word

STEER = {"simulator.note": "steer"}


class _Chat:
    """Test double for the simulator policy: renders a chat as plain text and encodes it as characters."""

    def chat(self, messages):
        return "".join(f"<{m['role']}>{m['content']}" for m in messages)

    def encode(self, text):
        return [ord(c) for c in text]

    def completion_ids(self, text):
        return [ord(c) for c in text]


def _user(ids) -> str:
    return "".join(map(chr, ids)).split("<user>", 1)[1]


def test_warm_start_pairs_ask_for_the_level_change_each_sibling_shows():
    cfg = load_config("micro", overrides=STEER)
    env = get_environment("bfcl", cfg.seed)
    note = resolve(cfg).note
    pairs = simulator_pairs(_Chat(), {"bfcl": env}, cfg, random.Random(3), pair_note=note.pair_note)
    pool = env.splits()["train"] + env.splits()["seed"]
    same_draw = env.sibling_pairs(pool, random.Random(3), len(pairs))
    words = []
    for (prompt, _), (src, sib) in zip(pairs, same_draw, strict=False):
        word, seed_text = _user(prompt).split("| ", 1)
        assert seed_text == env.simulator_text(src)
        assert word == direction(src.level, sib.level)
        words.append(word)
    # every direction is taught, "same" about half the time (the sibling keeps its source's level w.p. 0.5)
    assert set(words) == set(STEER_WORDS)
    assert 0.4 < words.count("same") / len(words) < 0.75
    plain = simulator_pairs(_Chat(), {"bfcl": env}, load_config("micro"), random.Random(3))
    assert not any(_user(p).split("| ", 1)[0] in STEER_WORDS for p, _ in plain)


def test_steer_changes_the_warm_start_key_and_needs_the_compact_prompt():
    assert cache_key(load_config("tiny")) != cache_key(load_config("tiny", overrides=STEER))
    assert cache_key(load_config("tiny")) == cache_key(load_config("tiny", overrides={"simulator.note": "auto"}))
    with pytest.raises(ConfigError) as err:
        resolve(load_config("smol-ablation", overrides=STEER))
    assert err.value.field == "simulator.note"


def test_a_config_of_the_steer_study_spelled_as_it_was_runs_the_same_strategy():
    with pytest.warns(DeprecationWarning, match="simulator.steer"):
        old = load_config("micro", overrides={"simulator.steer": True, "simulator.steer_hold": True})
    assert old == load_config("micro", overrides=STEER | {"study.steer_hold": True})
    note = resolve(old).note
    assert type(note).__name__ == "SteerNote" and note.settings.steer_hold


@pytest.mark.parametrize("p", [0.95, 0.05])
def test_an_epochs_prompts_ask_for_what_the_measured_success_calls_for(tmp_path, p):
    from genenv_engine.method.loop import run
    from genenv_engine.storage.session import Session
    from genenv_engine.testing import scripted_backends

    cfg = load_config("micro", overrides=STEER | {"epochs": 2})
    session = Session.create(cfg, tmp_path / "s")
    factory = scripted_backends(p=p)
    assert run(session, backend_factory=factory) == {"epochs_done": 2}
    rate = session.store.epoch_metrics()[1]["generated_success_by_benchmark"]["bfcl"]
    wanted = steer_word(rate, cfg.curriculum.alpha, cfg.curriculum.k_min)
    assert wanted == ("harder" if p > 0.5 else "easier")
    prompts = factory.made["simulator"].prompts
    per_epoch = cfg.simulator.seeds_per_epoch * cfg.simulator.variations
    assert len(prompts) == 2 * per_epoch
    assert all("same| " in t for t in prompts[:per_epoch])  # epoch 1: nothing measured yet
    assert all(f"{wanted}| " in t for t in prompts[per_epoch:])


@pytest.mark.parametrize("hold", [True, False])
def test_steer_hold_keeps_the_word_that_reached_the_band(tmp_path, hold):
    from genenv_engine.core.events import EpochFinished
    from genenv_engine.method.loop import run
    from genenv_engine.storage.session import Session
    from genenv_engine.testing import scripted_backends

    cfg = load_config("micro", overrides=STEER | {"study.steer_hold": hold, "epochs": 3})
    session = Session.create(cfg, tmp_path / "s")
    factory = scripted_backends(p=0.05)

    def sink(event):  # the agent double turns from weak to just-right after epoch 1
        if isinstance(event, EpochFinished) and event.epoch == 1:
            factory.made["agent"].p = 0.6

    assert run(session, sink=sink, backend_factory=factory) == {"epochs_done": 3}
    rates = [session.store.epoch_metrics()[e]["generated_success_by_benchmark"]["bfcl"] for e in (1, 2)]
    assert rates[0] < cfg.curriculum.alpha - cfg.curriculum.k_min
    assert abs(rates[1] - cfg.curriculum.alpha) <= cfg.curriculum.k_min
    prompts = factory.made["simulator"].prompts
    per_epoch = cfg.simulator.seeds_per_epoch * cfg.simulator.variations
    words = [
        {p.split("| ", 1)[0].rsplit(">", 1)[-1] for p in prompts[i * per_epoch : (i + 1) * per_epoch]} for i in range(3)
    ]
    assert words == [{"same"}, {"easier"}, {"easier" if hold else "same"}]


@pytest.mark.parametrize("setting", ["study.steer_hold", "study.steer_relabel"])
def test_a_steer_study_setting_needs_the_steer_note(setting):
    with pytest.raises(ConfigError) as err:
        resolve(load_config("micro", overrides={setting: True}))
    assert err.value.field == setting and "simulator.note = 'steer'" in str(err.value)
    resolve(load_config("micro", overrides=STEER | {setting: True}))


@pytest.mark.parametrize("relabel", [True, False])
def test_rwr_relabels_a_generated_task_with_the_level_change_it_shows(relabel):
    from genenv_engine.method.simulator_update import rwr_context
    from genenv_engine.training.simulator import simulator_prompt

    cfg = load_config("micro", overrides=STEER | {"study.steer_relabel": relabel})
    note = resolve(cfg).note
    env = get_environment("bfcl", cfg.seed)
    seeds = env.splits()["seed"]
    seed = next(t for t in seeds if t.level == 2)
    same = next(t for t in seeds if t.level == 2 and t.id != seed.id)
    harder = next(t for t in seeds if t.level == 3)
    asked = simulator_prompt(_Chat(), env, seed, "compact", "harder")
    got_same = rwr_context(_Chat(), env, seed, same, cfg, asked, note)
    got_harder = rwr_context(_Chat(), env, seed, harder, cfg, asked, note)
    assert got_harder == asked  # it did come out harder: the asked prompt either way
    if relabel:
        assert got_same == simulator_prompt(_Chat(), env, seed, "compact", "same") != asked
    else:
        assert got_same == asked
    assert rwr_context(_Chat(), env, seed, same.with_(difficulty={}), cfg, asked, note) == asked  # no level: as asked
