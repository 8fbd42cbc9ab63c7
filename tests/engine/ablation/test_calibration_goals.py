"""The per-seed calibration goals of the ablation report: each goal judged on its own rows, missing data never 'met'."""

from __future__ import annotations

from genenv_engine.ablation.goals import goals_table, markdown, seed_goals


def _row(epoch, p_hat, unique=0.8, mix=None):
    return {
        "epoch": epoch,
        "p_hat": p_hat,
        "pool_unique_fraction": unique,
        "difficulty_mix": {"L1": 2, "L2": 2, "L3": 1} if mix is None else mix,
    }


def test_a_seed_that_enters_late_or_drifts_out_fails_the_band_goals():
    on_time = [_row(0, None, None, {}), _row(1, 0.2), _row(2, 0.58), _row(3, 0.5), _row(4, 0.52), _row(5, 0.46)]
    assert seed_goals(on_time, 0.5)["met"] is True
    late = [_row(1, 0.2), _row(2, 0.31), _row(3, 0.45), _row(4, 0.5)]
    assert (seed_goals(late, 0.5)["first_in_band"], seed_goals(late, 0.5)["in_band_by_2"]) == (3, False)
    drifts = on_time[:-1] + [_row(5, 0.44)]  # 0.06 from alpha at epoch 5
    g = seed_goals(drifts, 0.5)
    assert (g["in_band_by_2"], g["held_from_4"], g["met"]) == (True, False, False)


def test_collapse_and_a_one_level_mix_fail_the_diversity_goals():
    rows = [_row(1, 0.5), _row(2, 0.5, unique=0.49), _row(4, 0.5, mix={"L2": 8, "L3": 2})]
    g = seed_goals(rows, 0.5)
    assert (g["unique_kept"], g["levels_mixed"], g["max_level_share"], g["met"]) == (False, False, 0.8, False)


def test_no_data_is_not_met():
    g = seed_goals([_row(1, None, None, {}), _row(2, None, None, {})], 0.5)
    assert (g["in_band_by_2"], g["held_from_4"], g["unique_kept"], g["levels_mixed"], g["met"]) == (
        False,
        None,
        None,
        None,
        False,
    )


def test_the_table_has_one_row_per_simulator_arm_and_seed_in_seed_order():
    off = {"epochs": [{"epoch": 0, "p_hat": None}, {"epoch": 1, "p_hat": None}]}
    trained = {"epochs": [_row(1, 0.3), _row(2, 0.5)]}
    runs = {"off": {"0": off}, "trained": {"10": trained, "2": trained}}
    assert [(r["arm"], r["seed"]) for r in goals_table(runs, 0.5)] == [("trained", 2), ("trained", 10)]
    text = "\n".join(markdown(runs, 0.5))
    assert "| trained | 2 | 0.30 0.50 | 0.100 | 2 | yes | – |" in text
    assert "| off |" not in text
    assert markdown({"off": {"0": off}}, 0.5) == []
