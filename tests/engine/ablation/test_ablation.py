"""`genenv bench ablation` bookkeeping on the micro preset: equal compute asserted, arms resumable, table numbers
read back from the sessions' databases, the CLI entry writing its files."""

from __future__ import annotations

import json
import os

import pytest

from genenv_engine.ablation.arms import Plan, arm_config, check_equal_compute
from genenv_engine.ablation.bench import open_or_create, run_plan, write_outputs
from genenv_engine.ablation.stats import paired_change
from genenv_engine.ablation.tables import collect
from genenv_engine.config import ConfigError, load_config
from genenv_engine.interfaces.cli import main
from genenv_engine.storage.session import Session

EQUAL = {"agent.tasks_per_epoch": 24, "agent.steps_per_epoch": 3}


def micro_plan(tmp_path, arms=("trained", "off"), epochs=2, **sets):
    return Plan(tmp_path / "bench", arms, (0,), epochs, "micro", None, None, {**EQUAL, **sets})


def test_unequal_compute_is_refused():
    with pytest.raises(ConfigError, match="tasks_per_epoch"):
        check_equal_compute({"trained": load_config("micro"), "off": load_config("micro")})
    a = load_config("micro", overrides=EQUAL)
    b = load_config("micro", overrides={**EQUAL, "agent.rollouts": 8})
    with pytest.raises(ConfigError, match="agent.rollouts"):
        check_equal_compute({"trained": a, "off": b})
    budget = check_equal_compute({"trained": a, "frozen": a})
    assert (budget["tasks_per_epoch"], budget["rollouts_per_epoch"], budget["steps_per_epoch"]) == (24, 96, 3)
    hard = load_config("micro", overrides={**EQUAL, "agent.base_levels": [3]})
    with pytest.raises(ConfigError, match="agent.base_levels"):  # a different base distribution is another budget
        check_equal_compute({"trained": a, "off": hard})
    assert budget["base_levels"] == () and check_equal_compute({"off": hard})["base_levels"] == (3,)


def test_budget_too_small_for_fresh_tasks_is_a_config_error():
    # micro static mode brings up to 4 seeds x 5 = 20 fresh tasks an epoch
    with pytest.raises(ConfigError, match="at least the most fresh tasks"):
        load_config("micro", overrides={"agent.tasks_per_epoch": 12})


def test_arm_switches_and_plan_errors(tmp_path):
    plan = micro_plan(tmp_path, arms=("trained", "frozen", "static", "off", "uniform"))
    modes = {
        arm: (arm_config(plan, arm, 1).simulator.mode, arm_config(plan, arm, 1).curriculum.reward) for arm in plan.arms
    }
    assert modes == {
        "trained": ("trained", "alpha"),
        "frozen": ("frozen", "alpha"),
        "static": ("static", "alpha"),
        "off": ("off", "alpha"),
        "uniform": ("trained", "uniform"),
    }
    assert arm_config(plan, "off", 1).seed == 1 and arm_config(plan, "off", 1).agent.tasks_per_epoch == 24
    oracle = arm_config(plan, "unseen", 1)  # not a default arm: the paper's five run without --arms
    assert (oracle.simulator.mode, oracle.agent.base_source, arm_config(plan, "off", 1).agent.base_source) == (
        "off",
        "unseen",
        "train",
    )
    assert "unseen" not in Plan(tmp_path).arms and check_equal_compute(
        {"off": arm_config(plan, "off", 1), "unseen": oracle}
    )
    for arm in ("predicted", "shrunk"):  # GenEnv on a more reliable success estimate: the reward strategy named so
        cfg = arm_config(plan, arm, 1)
        assert (cfg.simulator.mode, cfg.curriculum.reward) == ("trained", arm)
        assert check_equal_compute({"trained": arm_config(plan, "trained", 1), arm: cfg})
    with pytest.raises(ConfigError, match="unknown arm"):
        Plan(tmp_path, ("trained", "gemini"))


def test_bench_runs_equal_compute_resumes_and_reads_back(tmp_path):
    plan = micro_plan(tmp_path)
    # a partial arm left by an earlier, interrupted bench: one epoch of two done
    first = open_or_create(plan, "off", 0)
    from genenv_engine.core.events import RunControl
    from genenv_engine.method.loop import run

    first.set_epochs(1)
    run(first, control=RunControl())
    epoch1 = [m for m in first.store.epoch_metrics() if m["epoch"] == 1][0]
    first.store.close()
    results = run_plan(plan, quiet=True)
    out = plan.out
    assert json.loads((out / "ablation.json").read_text())["summary"]["off"]["label"] == "Off (base data only)"
    assert (out / "ablation.md").read_text().startswith("# Ablation")
    assert "24 tasks × 4 rollouts = 96 rollouts, 3 optimizer steps" in (out / "ablation.md").read_text()
    assert results["budget"]["tasks_per_epoch"] == 24  # read back from the sessions' configs
    assert (out / "heldout.png").read_bytes()[:4] == b"\x89PNG" and (out / "calibration.png").exists()
    for arm in ("trained", "off"):
        session = Session.open(out / f"{arm}-s0")
        metrics = [m for m in session.store.epoch_metrics() if m["status"] == "done"]
        assert [m["epoch"] for m in metrics] == [0, 1, 2]
        rows = results["runs"][arm]["0"]["epochs"]
        # equal agent compute in every arm and epoch, as configured
        assert [r["tasks_trained"] for r in rows[1:]] == [24, 24]
        assert [r["rollouts"] for r in rows[1:]] == [96, 96]
        assert all(r["agent_steps"] in (0.0, 3.0) for r in rows[1:])
        # table numbers are the databases' numbers
        assert [r["heldout"]["bfcl"] for r in rows] == [m["heldout"]["bfcl"] for m in metrics]
        correct = [m["heldout_correct"]["bfcl"] for m in metrics]
        assert all(len(c) == 24 and set(c) <= {"0", "1"} for c in correct)
        assert [c.count("1") / 24 for c in correct] == [m["heldout"]["bfcl"] for m in metrics]
        change = results["summary"][arm]["bfcl"]["per_seed"][0]
        assert change["delta"] == pytest.approx(metrics[-1]["heldout"]["bfcl"] - metrics[0]["heldout"]["bfcl"])
        assert change["paired_se"] == pytest.approx(paired_change(correct[0], correct[-1])[1])
        # per level: rebuilt from the environment and equal to the rates the database stored for each level
        levels = change["by_level"]
        assert set(levels) == set(metrics[0]["heldout_by_level"]["bfcl"]) and sum(v["n"] for v in levels.values()) == 24
        for level, v in levels.items():
            assert v["before"] == pytest.approx(metrics[0]["heldout_by_level"]["bfcl"][level])
            assert v["after"] == pytest.approx(metrics[-1]["heldout_by_level"]["bfcl"][level])
        session.store.close()
    # trained against off: the paired difference of the two databases' last epoch on the same held-out tasks
    (vs,) = results["summary"]["_versus"]
    final = {arm: results["runs"][arm]["0"]["epochs"][-1]["heldout"]["bfcl"] for arm in ("trained", "off")}
    assert (vs["a"], vs["b"], vs["per_seed"][0]["epoch"]) == ("trained", "off", 2)
    assert vs["per_seed"][0]["diff"] == pytest.approx(final["trained"] - final["off"])
    assert "| trained − off |" in (out / "ablation.md").read_text()
    # the off arm was continued, not restarted: its epoch 1 is the one written before the bench ran
    assert results["runs"]["off"]["0"]["epochs"][1]["heldout"] == epoch1["heldout"]
    reopened = Session.open(out / "off-s0")
    assert [m for m in reopened.store.epoch_metrics() if m["epoch"] == 1][0]["agent_fingerprint"] == epoch1[
        "agent_fingerprint"
    ]
    assert sum(e["kind"] == "RunStarted" for e in reopened.store.events()) == 2
    reopened.store.close()
    # a finished bench reruns nothing
    stamp = os.path.getmtime(out / "trained-s0" / "checkpoints" / "epoch_002" / "COMPLETE")
    again = run_plan(plan, quiet=True)
    assert os.path.getmtime(out / "trained-s0" / "checkpoints" / "epoch_002" / "COMPLETE") == stamp
    assert again["runs"] == results["runs"]
    # more epochs resume each arm from its last checkpoint, earlier epochs untouched
    longer = run_plan(micro_plan(tmp_path, epochs=3), quiet=True)
    for arm in ("trained", "off"):
        assert longer["runs"][arm]["0"]["epochs"][:3] == results["runs"][arm]["0"]["epochs"]
        assert len(longer["runs"][arm]["0"]["epochs"]) == 4


def test_folder_with_other_settings_is_refused_untouched(tmp_path):
    plan = micro_plan(tmp_path)
    session = open_or_create(plan, "trained", 0)
    session.store.close()
    before = (plan.out / "trained-s0" / "config.toml").read_text()
    with pytest.raises(ConfigError, match="other settings"):
        open_or_create(micro_plan(tmp_path, **{"agent.lr": 1e-3}), "trained", 0)
    assert (plan.out / "trained-s0" / "config.toml").read_text() == before


def test_cli_report_only_and_bad_arm(tmp_path, capsys):
    out = tmp_path / "empty"
    assert (
        main(
            [
                "bench",
                "ablation",
                "--preset",
                "micro",
                "--out",
                str(out),
                "--report-only",
                "--arms",
                "off",
                "--seeds",
                "0",
            ]
        )
        == 0
    )
    assert (out / "ablation.md").exists()
    assert main(["bench", "ablation", "--arms", "nope", "--out", str(out)]) == 2
    assert "unknown arm" in capsys.readouterr().err


def test_presets_with_equal_settings_share_one_warm_start(tmp_path):
    from genenv_engine.training.warmstart import cache_key, cached_folder

    tiny, ablation = load_config("tiny", None, {"model.sft_length_groups": 0}), load_config("ablation")
    assert cache_key(tiny).split("-", 1)[1] == cache_key(ablation).split("-", 1)[1]  # same seed and hash
    made = tmp_path / cache_key(tiny)
    made.mkdir()
    assert cached_folder(tmp_path / cache_key(ablation)) is None  # unfinished (no info.json): not reused
    (made / "info.json").write_text("{}")
    assert cached_folder(tmp_path / cache_key(ablation)) == made
    other_seed = cache_key(load_config("ablation", overrides={"seed": 1}))
    assert cached_folder(tmp_path / other_seed) is None


def test_epoch_row_adds_up_the_seed_levels_drawn_over_benchmarks():
    from genenv_engine.ablation.runs import _epoch_row

    row = _epoch_row(
        {"epoch": 2, "seed_levels_drawn": {"bfcl": {"L2": 3, "L4": 5}, "apibank": {"L4": 1, "L3": 2}}}, 8, {}
    )
    assert row["seed_levels"] == {"L2": 3, "L3": 2, "L4": 6}
    assert _epoch_row({"epoch": 1}, 8, {})["seed_levels"] == {}


def _run(correct_by_epoch):
    return {
        "epochs": [{"epoch": e} for e in correct_by_epoch],
        "_correct": {e: {"bfcl": c} for e, c in correct_by_epoch.items()},
    }


def test_versus_pairs_arms_on_the_last_common_epoch_and_counts_each_direction():
    from genenv_engine.ablation.tables import head_to_head, versus

    # a partial arm (2 epochs) against a finished one (3): compared at epoch 2, not at either's last
    trained = _run({0: "0000", 1: "1100", 2: "1111"})
    off = _run({0: "0000", 1: "0000", 2: "1100", 3: "0000"})
    trained["_levels"] = {"bfcl": ["L1", "L1", "L2", "L2"]}
    assert head_to_head(trained, off, "bfcl") == {
        "epoch": 2,
        "diff": 0.5,
        "paired_se": pytest.approx(paired_change("1100", "1111")[1]),
        "by_level": {"L1": {"diff": 0.0, "paired_se": 0.0, "n": 2}, "L2": {"diff": 1.0, "paired_se": 0.0, "n": 2}},
    }
    assert head_to_head(trained, _run({0: "0000"}), "bfcl") is None  # no common epoch after 0
    # held-out strings of different lengths are not the same tasks: that epoch is skipped
    assert head_to_head(_run({0: "0", 1: "11", 2: "1"}), _run({0: "0", 1: "00", 2: "0000"}), "bfcl")["epoch"] == 1
    big = "1" * 90 + "0" * 10
    runs = {
        "trained": {0: _run({0: "0" * 100, 1: big}), 1: _run({0: "0" * 100, 1: "0" * 100})},
        "off": {0: _run({0: "0" * 100, 1: "0" * 100}), 1: _run({0: "0" * 100, 1: big})},
        "frozen": {0: _run({0: "0" * 100, 1: big})},
    }
    out = {(v["a"], v["b"]): v for v in versus(runs, ["bfcl"])}
    assert set(out) == {("trained", "off"), ("frozen", "off"), ("trained", "frozen")}
    v = out[("trained", "off")]
    assert [h["diff"] for h in v["per_seed"]] == [0.9, -0.9]
    assert (v["mean"], v["a_above_2se"], v["b_above_2se"]) == (0.0, 1, 1)
    assert [h["seed"] for h in out[("trained", "frozen")]["per_seed"]] == [0]  # frozen has seed 0 only
    assert out[("trained", "frozen")]["mean"] == 0.0 and out[("trained", "frozen")]["a_above_2se"] == 0


def test_smol_l3_preset_is_smol_ablation_with_the_settings_of_its_runs():
    """The smol-l3 runs of docs/results/smol were made as `--preset smol-ablation --set …`; the preset must be that
    run, so
    `--preset smol-l3` reopens those sessions instead of refusing them."""
    from genenv_engine.ablation.arms import same_run

    sets = {"agent.base_levels": [3], "agent.tasks_per_epoch": 80, "agent.steps_per_epoch": 4, "agent.lr": 2e-4}
    made = load_config("smol-ablation", overrides={**sets, "simulator.mode": "off", "agent.base_source": "unseen"})
    preset = load_config("smol-l3", overrides={"simulator.mode": "off", "agent.base_source": "unseen"})
    assert (preset.epochs, preset.agent.base_levels, preset.agent.lr) == (8, (3,), 2e-4)
    assert same_run(made, preset) and preset.preset == "smol-l3"
    assert not same_run(made, load_config("smol-l3", overrides={"simulator.mode": "off"}))  # base source differs
    assert not same_run(load_config("smol-ablation"), load_config("smol-l3"))


def test_heldout_levels_are_dropped_when_they_do_not_reproduce_the_stored_rates():
    from genenv_engine.ablation.runs import heldout_levels
    from genenv_engine.ablation.stats import by_level

    cfg = load_config("micro")
    n = cfg.heldout_size
    levels = heldout_levels(cfg, [])["bfcl"]
    assert len(levels) == n and set(levels) <= {"L1", "L2", "L3", "L4"}
    first = levels[0]
    right = {level: (1.0 if level == first else 0.0) for level in set(levels)}
    correct = "".join("1" if lv == first else "0" for lv in levels)
    good = {"heldout_by_level": {"bfcl": right}, "heldout_correct": {"bfcl": correct}}
    assert heldout_levels(cfg, [good]) == {"bfcl": levels}
    wrong = {"heldout_by_level": {"bfcl": {**right, first: 0.5}}, "heldout_correct": {"bfcl": correct}}
    assert heldout_levels(cfg, [good, wrong]) == {}  # another split than the one scored: no levels, not wrong ones
    assert by_level("01", "011", ["L1", "L2"]) == {} and by_level("01", "11", None) == {}


def test_rescore_reads_checkpoints_on_more_heldout_tasks_and_checks_them_against_the_run(tmp_path):
    from genenv_engine.ablation.rescore import RescoreMismatch, cache_path

    plan = micro_plan(tmp_path)
    results = run_plan(plan, quiet=True)
    stored = {
        arm: {e["epoch"]: e["heldout"]["bfcl"] for e in results["runs"][arm]["0"]["epochs"]}
        for arm in ("trained", "off")
    }
    again = collect(plan.out, plan.arms, plan.seeds, rescore=30)
    assert again["budget"]["heldout_size"] == 30
    for arm in ("trained", "off"):
        rows = again["runs"][arm]["0"]["epochs"]
        assert [r["epoch"] for r in rows] == [0, 2]  # epoch 0 and the last: only what the tables compare
        for r in rows:
            cached = json.loads(cache_path(plan.out / f"{arm}-s0", 30, r["epoch"]).read_text())["correct"]["bfcl"]
            assert len(cached) == 30 and r["heldout"]["bfcl"] == cached.count("1") / 30
            assert cached[:24].count("1") / 24 == stored[arm][r["epoch"]]  # the run's own 24 tasks, as stored
            assert sum(
                r["heldout_by_level"]["bfcl"][lv] * v["n"]
                for lv, v in again["summary"][arm]["bfcl"]["per_seed"][0]["by_level"].items()
            ) == pytest.approx(cached.count("1"))
        change = again["summary"][arm]["bfcl"]["per_seed"][0]
        assert sum(v["n"] for v in change["by_level"].values()) == 30
        assert {e: c["bfcl"][1] for e, c in again["runs"][arm]["0"]["rescore_check"].items()} == {0: 24, 2: 24}
    write_outputs(plan.out, again)
    assert "0 of 96 task results differ" in (plan.out / "rescore-30.md").read_text()
    assert "png" not in (plan.out / "rescore-30.md").read_text()  # its tables have no plots of their own
    assert json.loads((plan.out / "rescore-30.json").read_text())["rescore"] == 30
    (vs,) = again["summary"]["_versus"]
    assert vs["per_seed"][0]["epoch"] == 2
    # cached: a second read evaluates nothing (a checkpoint that was gone would fail to load)
    path = cache_path(plan.out / "off-s0", 30, 2)
    stamp = path.stat().st_mtime_ns
    assert collect(plan.out, plan.arms, plan.seeds, rescore=30)["summary"]["_versus"] == again["summary"]["_versus"]
    assert path.stat().st_mtime_ns == stamp
    # a re-scored result that disagrees with what the run stored is refused, not mixed in
    data = json.loads(path.read_text())
    first = data["correct"]["bfcl"]
    data["correct"]["bfcl"] = ("1" if first[0] == "0" else "0") + first[1:]
    path.write_text(json.dumps(data))
    with pytest.raises(RescoreMismatch):
        collect(plan.out, plan.arms, plan.seeds, rescore=30)
    assert (
        main(
            [
                "bench",
                "ablation",
                "--preset",
                "micro",
                "--arms",
                "off",
                "--seeds",
                "0",
                "--out",
                str(plan.out),
                "--rescore",
                "0",
            ]
        )
        == 2
    )


def test_how_a_run_computes_does_not_make_it_another_run():
    """Threads and micro-batching change how an arm computes, not what: a seed run on one thread belongs in the
    table beside seeds run on two; a changed learning rate does not."""
    from genenv_engine.ablation.arms import same_run

    two = load_config("smol-l3")
    assert same_run(two, load_config("smol-l3", overrides={"runtime.threads": 1, "runtime.micro_batch": 8}))
    assert not same_run(two, load_config("smol-l3", overrides={"runtime.threads": 1, "agent.lr": 1e-4}))
    assert not same_run(two, load_config("smol-l3", overrides={"runtime.static_decode": False}))


def test_smol_l34_preset_is_smol_l3_with_l4_in_the_replay_and_shares_its_warm_start():
    """docs/results/smol-l34 ran as `--preset smol-l3 --set 'agent.base_levels=[3,4]'`: the preset reopens those
    sessions, and its warm-start key differs from smol-l3's in the readable prefix only."""
    from genenv_engine.ablation.arms import same_run
    from genenv_engine.training.warmstart import cache_key

    arm = {"simulator.mode": "off", "agent.base_source": "unseen"}
    made = load_config("smol-l3", overrides={**arm, "agent.base_levels": [3, 4], "runtime.threads": 1})
    preset = load_config("smol-l34", overrides=arm)
    assert preset.agent.base_levels == (3, 4) and same_run(made, preset)
    assert not same_run(load_config("smol-l3", overrides=arm), preset)
    assert cache_key(preset).removeprefix("smol-l34") == cache_key(load_config("smol-l3")).removeprefix("smol-l3")


def test_each_finished_arm_is_recorded_before_the_next_one_runs(tmp_path, monkeypatch):
    """A bench stopped while its second arm runs keeps the first arm's run record, written when that arm finished."""
    import genenv_engine.method.loop as loop
    from genenv_engine.ablation.run_records import read_record, record_path

    plan = micro_plan(tmp_path, arms=("off", "trained"), epochs=1)
    real_run, calls = loop.run, []

    def stopped_on_second_arm(session, *args, **kwargs):  # test double: the bench is stopped as arm 2 starts
        calls.append(session.path.name)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_run(session, *args, **kwargs)

    monkeypatch.setattr(loop, "run", stopped_on_second_arm)
    with pytest.raises(KeyboardInterrupt):
        run_plan(plan, quiet=True)
    assert calls == ["off-s0", "trained-s0"]
    first = read_record(record_path(plan.records_folder(), "off", 0))
    assert first is not None and [row["epoch"] for row in first["epochs"]] == [0, 1]
    session = Session.open(plan.out / "off-s0")
    stored = [m["heldout"]["bfcl"] for m in session.store.epoch_metrics() if m["status"] == "done"]
    session.store.close()
    assert [row["heldout"]["bfcl"] for row in first["epochs"]] == stored
    assert read_record(record_path(plan.records_folder(), "trained", 0)) is None
