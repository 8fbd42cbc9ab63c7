"""Run records are checked when read, and pairings of runs whose epoch-0 agents differ are flagged.

`genenv_engine.ablation.run_records.check_results` refuses a record whose per-task held-out strings are cut, hold
other characters than ``0``/``1``, or no longer give the held-out rate stored beside them; every committed record
passes. `genenv_engine.ablation.runs.warm_start_mismatches` flags an arm-against-arm pairing of one seed whose
epoch-0 agents differ (agent fingerprints, or epoch-0 held-out strings), in the tables' JSON and Markdown. The
runs here are the committed records of docs/results (read back, never re-run) and copies of them changed in one
place, so no model runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from genenv_engine.ablation.markdown import markdown
from genenv_engine.ablation.run_records import read_record
from genenv_engine.ablation.runs import epoch0_difference
from genenv_engine.ablation.tables import collect
from genenv_engine.config import ConfigError

RESULTS = Path(__file__).resolve().parents[3] / "docs" / "results"
OWN_FORMAT = {"trainers"}
"""Studies whose ``records/`` hold records of their own format, not the ablation bench's (the trainers study's:
`genenv_lab.trainers`, checked by its figure tests)."""
COMMITTED = sorted(p for p in RESULTS.glob("*/records/*.json") if p.parts[-3] not in OWN_FORMAT)


def _copy(tmp_path: Path, study: str, name: str, change=None) -> Path:
    """A committed record copied into ``tmp_path/records`` (changed by ``change(data)`` if given)."""
    folder = tmp_path / "records"
    folder.mkdir(exist_ok=True)
    data = json.loads((RESULTS / study / "records" / f"{name}.json").read_text())
    if change:
        change(data)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


def test_every_committed_record_loads_and_passes_the_checks():
    assert len(COMMITTED) >= 23
    for path in COMMITTED:
        run = read_record(path)
        size = run["heldout_size"]
        assert run["_correct"] and all(len(s) == size for by in run["_correct"].values() for s in by.values())
        assert {r["epoch"] for r in run["epochs"]} == set(run["_correct"])
        if "warm_start" not in json.loads(path.read_text()):  # written before records carried their warm start
            assert run["_fingerprints"] == {} and run["_warm_start"] is None


def test_a_truncated_result_string_is_refused_with_the_reason(tmp_path):
    def cut(data):  # the bug this check is for: epoch 0's string cut from 400 to 395 results, rate kept
        data["correct"]["0"]["bfcl"] = data["correct"]["0"]["bfcl"][:395]

    path = _copy(tmp_path, "steer", "off-s0", cut)
    with pytest.raises(
        ConfigError,
        match=r"off-s0\.json.*epoch 0: the bfcl held-out result string has 395 "
        r"results, not 400",
    ):
        read_record(path)
    with pytest.raises(ConfigError, match="has 395 results, not 400"):  # the bench refuses it too
        collect(tmp_path / "bench", ("off",), (0,), records=tmp_path / "records")


def test_a_flipped_result_that_no_longer_gives_the_stored_rate_is_refused(tmp_path):
    original = json.loads((RESULTS / "steer" / "records" / "off-s0.json").read_text())
    last = str(max(int(e) for e in original["correct"]))
    s = original["correct"][last]["bfcl"]
    i = s.index("0")
    ones = s.count("1")
    rate = next(r["heldout"]["bfcl"] for r in original["epochs"] if r["epoch"] == int(last))
    assert rate == ones / 400

    def flip(data):
        data["correct"][last]["bfcl"] = s[:i] + "1" + s[i + 1 :]

    with pytest.raises(
        ConfigError,
        match=rf"epoch {last}: the bfcl held-out result string gives {ones + 1}/400 = "
        rf"{(ones + 1) / 400:.6f}, not the stored held-out rate {rate:.6f}",
    ):
        read_record(_copy(tmp_path, "steer", "off-s0", flip))

    def flip_both(data):  # the string and its rate changed together is a consistent record: accepted
        flip(data)
        next(r for r in data["epochs"] if r["epoch"] == int(last))["heldout"]["bfcl"] = (ones + 1) / 400

    assert (
        read_record(_copy(tmp_path, "steer", "off-s0", flip_both))["_correct"][int(last)]["bfcl"].count("1") == ones + 1
    )


def test_characters_other_than_0_and_1_are_refused(tmp_path):
    def other(data):
        s = data["correct"]["3"]["bfcl"]
        data["correct"]["3"]["bfcl"] = "x" + s[1:]

    with pytest.raises(
        ConfigError,
        match=r"epoch 3: the bfcl held-out result string holds characters other than "
        r"0 and 1 \('x'\)",
    ):
        read_record(_copy(tmp_path, "steer", "off-s0", other))

    def listed(data):
        data["correct"]["3"]["bfcl"] = list(data["correct"]["3"]["bfcl"])

    with pytest.raises(ConfigError, match=r"epoch 3: the bfcl held-out result string is not a string \(list\)"):
        read_record(_copy(tmp_path, "steer", "off-s0", listed))


def test_rescored_strings_must_have_the_length_they_were_rescored_on(tmp_path):
    def cut(data):
        data["rescored"]["400"]["8"]["bfcl"] = data["rescored"]["400"]["8"]["bfcl"][:399]

    with pytest.raises(
        ConfigError, match="epoch 8: the bfcl result string re-scored on 400 tasks has 399 results, not 400"
    ):
        read_record(_copy(tmp_path, "smol-l34", "unseen-s0", cut))

    def bad(data):
        data["rescored"]["400"]["0"]["bfcl"] = "2" + data["rescored"]["400"]["0"]["bfcl"][1:]

    with pytest.raises(ConfigError, match=r"re-scored on 400 tasks holds characters other than 0 and 1 \('2'\)"):
        read_record(_copy(tmp_path, "smol-l34", "unseen-s0", bad))


def test_levels_of_another_length_and_a_string_without_its_rate_are_refused(tmp_path):
    def short_levels(data):
        data["levels"]["bfcl"] = data["levels"]["bfcl"][:-1]

    with pytest.raises(ConfigError, match="bfcl held-out levels for 199 tasks, not 200"):
        read_record(_copy(tmp_path, "smol-l34", "unseen-s0", short_levels))

    def no_rate(data):
        data["epochs"] = [r for r in data["epochs"] if r["epoch"] != 4]

    with pytest.raises(
        ConfigError, match="epoch 4: has a bfcl held-out result string but no stored bfcl held-out rate"
    ):
        read_record(_copy(tmp_path, "smol-l34", "unseen-s0", no_rate))


def test_a_heldout_split_smaller_than_the_sample_is_the_length_to_check(tmp_path):
    """A benchmark whose held-out split has fewer tasks than ``heldout_size`` (official data) is evaluated on all of
    them: its record says so (``heldout_split``), and its strings are that long."""

    def smaller(data):
        for e, by in data["correct"].items():
            by["bfcl"] = by["bfcl"][:125]
            next(r for r in data["epochs"] if r["epoch"] == int(e))["heldout"]["bfcl"] = by["bfcl"].count("1") / 125
        data["levels"]["bfcl"] = data["levels"]["bfcl"][:125]
        for by in data["rescored"]["400"].values():
            by["bfcl"] = by["bfcl"][:125]

    path = _copy(tmp_path, "smol-l34", "unseen-s0", smaller)
    with pytest.raises(ConfigError, match="has 125 results, not 200"):  # nothing says the split is smaller
        read_record(path)
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "heldout_split": {"bfcl": 125}}))
    assert read_record(path)["_heldout_split"] == {"bfcl": 125}


def _results(tmp_path, arms, seeds, rescore=None):
    results = collect(tmp_path / "bench", arms, seeds, rescore=rescore, records=tmp_path / "records")
    return json.loads(json.dumps(results, default=str)), markdown(results)


def test_runs_whose_epoch0_heldout_differs_are_flagged_in_json_and_markdown(tmp_path):
    """The committed smol-l34 Off control (seed 0) was run after its Unseen arm: their epoch-0 agents score one of
    the 200 held-out tasks differently (two of 400 re-scored), so unseen − off on seed 0 includes that."""
    for name in ("off-s0", "unseen-s0", "unseen-s1"):
        _copy(tmp_path, "smol-l34", name)
    data, md = _results(tmp_path, ("off", "unseen"), (0, 1))
    (m,) = data["warm_start_mismatches"]
    assert (m["seed"], m["a"], m["b"], m["differs"]) == (0, "unseen", "off", ["epoch-0 held-out"])
    assert m["epoch0_heldout"] == {"bfcl": {"differ": 1, "tasks": 200}}
    assert m["agent_fingerprints"] == [None, None]  # records from before fingerprints: unknown, not compared
    (vs,) = data["summary"]["_versus"]
    assert vs["per_seed"][0]["epoch0_differs"]["epoch0_heldout"] == {"bfcl": {"differ": 1, "tasks": 200}}
    assert (
        "**⚠ Seed 0: unseen and off started from different epoch-0 agents** (epoch-0 held-out scored "
        "differently on 1 of 200 bfcl tasks)" in md
    )
    assert (
        "- ⚠ **unseen − off, seed 0: the epoch-0 agents differ** (epoch-0 held-out scored differently on 1 of "
        "200 bfcl tasks); this difference includes theirs." in md
    )
    assert f"s0 {vs['per_seed'][0]['diff']:+.3f} ({vs['per_seed'][0]['paired_se']:.3f}) @ 8 ⚠" in md

    data, md = _results(tmp_path, ("off", "unseen"), (0,), rescore=400)  # the re-scored epoch-0 strings
    (m,) = data["warm_start_mismatches"]
    assert m["epoch0_heldout"] == {"bfcl": {"differ": 2, "tasks": 400}}
    assert "2 of 400 bfcl tasks" in md


def test_runs_with_the_same_epoch0_agent_are_not_flagged(tmp_path):
    for arm in ("trained", "frozen", "static", "off"):
        for seed in (0, 1, 2):
            _copy(tmp_path, "steer", f"{arm}-s{seed}")
    data, md = _results(tmp_path, ("trained", "frozen", "static", "off"), (0, 1, 2))
    assert data["warm_start_mismatches"] == []
    pairs = data["summary"]["_versus"]
    assert len(pairs) == 5 and all(len(v["per_seed"]) == 3 for v in pairs)
    assert all(h["epoch0_differs"] is None for v in pairs for h in v["per_seed"])
    assert "⚠" not in md and "different epoch-0 agents" not in md


def _with_warm_start(key=None, **prints):
    def change(data):
        data["warm_start"] = {"key": key, "fingerprints": prints}

    return change


def test_agent_fingerprints_that_differ_are_flagged_even_with_equal_heldout(tmp_path):
    # steer's trained and off arms of seed 0 share their epoch-0 held-out results; only the fingerprints say more
    _copy(tmp_path, "steer", "trained-s0", _with_warm_start("k", agent=1234.5, simulator=99.0))
    _copy(tmp_path, "steer", "off-s0", _with_warm_start("k", agent=1234.75))
    data, md = _results(tmp_path, ("trained", "off"), (0,))
    (m,) = data["warm_start_mismatches"]
    assert (m["a"], m["b"], m["differs"], m["agent_fingerprints"]) == (
        "trained",
        "off",
        ["agent fingerprint"],
        [1234.5, 1234.75],
    )
    assert m["epoch0_heldout"] == {"bfcl": {"differ": 0, "tasks": 400}}
    assert (
        "(agent fingerprints differ (trained 1234.5, off 1234.75); epoch-0 held-out scored differently on 0 "
        "of 400 bfcl tasks)" in md
    )
    assert "- ⚠ **trained − off, seed 0: the epoch-0 agents differ**" in md

    # the same weights summed in another order: equal within the fingerprint's float precision, not flagged
    _copy(tmp_path, "steer", "off-s0", _with_warm_start("other threads", agent=1234.5 * (1 + 1e-8)))
    data, md = _results(tmp_path, ("trained", "off"), (0,))
    assert data["warm_start_mismatches"] == [] and "⚠" not in md


def test_warm_start_keys_decide_only_where_a_fingerprint_is_unknown():
    base = {"_correct": {0: {"bfcl": "0110"}}}
    assert epoch0_difference({**base, "_warm_start": "a"}, {**base, "_warm_start": "b"})["differs"] == [
        "warm-start key"
    ]
    assert (
        epoch0_difference(
            {**base, "_warm_start": "a", "_fingerprints": {"agent": 5.0}},
            {**base, "_warm_start": "b", "_fingerprints": {"agent": 5.0}},
        )
        is None
    )
    assert epoch0_difference({**base, "_warm_start": "a"}, base) is None  # nothing known to compare
    # strings of other lengths are other tasks: not compared, not flagged
    assert epoch0_difference(base, {"_correct": {0: {"bfcl": "01101"}}}) is None


def test_records_carry_the_warm_start_and_read_it_back(tmp_path):
    run = read_record(_copy(tmp_path, "steer", "trained-s0", _with_warm_start("key-1", agent=1.5, simulator=2.5)))
    assert (run["_warm_start"], run["_fingerprints"]) == ("key-1", {"agent": 1.5, "simulator": 2.5})
    with pytest.raises(ConfigError, match="fingerprints that are not numbers"):
        read_record(_copy(tmp_path, "steer", "trained-s0", _with_warm_start("key-1", agent="1.5")))


def test_records_carry_the_machine_that_built_the_warm_start_and_a_mismatch_names_both(tmp_path):
    def built_on(machine, agent):
        def change(data):
            data["warm_start"] = {"key": "k", "fingerprints": {"agent": agent}, "built_on": machine}

        return change

    _copy(tmp_path, "steer", "trained-s0", built_on("Xeon (avx2 avx512f); torch 2.13.0+cpu, CPU kernels AVX512", 7.5))
    _copy(tmp_path, "steer", "off-s0", built_on("EPYC (avx2); torch 2.13.0+cpu, CPU kernels AVX2", 7.25))
    assert read_record(tmp_path / "records" / "off-s0.json")["_built_on"].startswith("EPYC (avx2)")
    data, md = _results(tmp_path, ("trained", "off"), (0,))
    (m,) = data["warm_start_mismatches"]
    assert m["built_on"] == [
        "Xeon (avx2 avx512f); torch 2.13.0+cpu, CPU kernels AVX512",
        "EPYC (avx2); torch 2.13.0+cpu, CPU kernels AVX2",
    ]
    assert (
        "warm starts built on different machines (trained: Xeon (avx2 avx512f); torch 2.13.0+cpu, CPU kernels "
        "AVX512; off: EPYC (avx2); torch 2.13.0+cpu, CPU kernels AVX2)" in md
    )
    # the same machine is not named as a cause; an unknown one (older records) is not compared
    _copy(tmp_path, "steer", "off-s0", built_on("Xeon (avx2 avx512f); torch 2.13.0+cpu, CPU kernels AVX512", 7.25))
    assert "built on different machines" not in _results(tmp_path, ("trained", "off"), (0,))[1]
    _copy(tmp_path, "steer", "off-s0", built_on(None, 7.25))
    assert "built on different machines" not in _results(tmp_path, ("trained", "off"), (0,))[1]
    with pytest.raises(ConfigError, match="machine with something that is not text"):
        read_record(_copy(tmp_path, "steer", "off-s0", built_on(["Xeon"], 7.25)))
