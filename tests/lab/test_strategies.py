"""The lab's study variants of the epoch's strategies (`genenv_lab.strategies`): the ``alpha`` seed sampler draws seeds
level first by its weights and never repeats one, and a run with it weights each level by its recent batches."""

from __future__ import annotations

from collections import Counter

from genenv_engine.config import load_config
from genenv_engine.core.records import Task
from genenv_engine.method.loop import run
from genenv_engine.storage.session import Session
from genenv_engine.testing import scripted_backends


def micro_session(tmp_path, name="s", **overrides) -> Session:
    return Session.create(load_config("micro", overrides=overrides or None), tmp_path / name)


def test_draw_seeds_follows_level_weights_and_never_repeats_a_seed():
    import random

    from genenv_lab.strategies import draw_seeds

    seeds = [
        Task(id=f"t{i}", benchmark="bfcl", prompt=f"p{i}", answer="a", difficulty={"level": 2 + i % 3})
        for i in range(30)
    ]
    only3 = draw_seeds(seeds, 8, random.Random(0), {2: 0.0, 3: 1.0, 4: 0.0})
    assert len(only3) == 8 and {t.level for t in only3} == {3} and len({t.id for t in only3}) == 8
    more = draw_seeds(seeds, 14, random.Random(0), {2: 0.0, 3: 1.0, 4: 0.0})  # 10 level-3 seeds, then the rest
    assert len({t.id for t in more}) == 14 and sum(t.level == 3 for t in more) == 10
    drawn = Counter(
        t.level for _ in range(200) for t in draw_seeds(seeds, 1, random.Random(_), {2: 0.1, 3: 0.1, 4: 0.8})
    )
    assert drawn[4] > 130 and drawn[2] + drawn[3] > 10  # about 160 : 40
    assert len(draw_seeds(seeds, 99, random.Random(1), {})) == 30


def test_alpha_seed_sampler_weights_levels_by_their_recent_batches(tmp_path):
    from genenv_engine.core.curriculum import seed_level_weights
    from genenv_engine.environments import get_environment
    from genenv_lab.strategies import seed_level_stats

    session = micro_session(tmp_path, epochs=2, **{"simulator.seed_sampling": "alpha"})
    run(session, backend_factory=scripted_backends(None, 0.5))
    first, second = session.store.epoch_metrics()[1], session.store.epoch_metrics()[2]
    assert first["seed_level_weights"]["bfcl"] == {"L2": 0.333, "L3": 0.333, "L4": 0.333}  # nothing measured yet
    level_of = {t.id: t.level for t in get_environment("bfcl", session.config.seed).splits()["seed"]}
    batches = [b for b in session.store.batches() if b["epoch"] == 1]
    assert batches and all(level_of[b["seed_task_id"]] for b in batches)
    want = seed_level_weights(seed_level_stats(batches, level_of, 2), 0.5, 20.0)
    assert second["seed_level_weights"]["bfcl"] == {f"L{k}": round(v, 3) for k, v in want.items()}
    assert second["seed_level_weights"]["bfcl"] != first["seed_level_weights"]["bfcl"]
    for m in (first, second):
        assert sum(m["seed_levels_drawn"]["bfcl"].values()) == session.config.simulator.seeds_per_epoch
