"""The grounded study's verdict table: each pair read from two run records on the same re-scored tasks, refused when
the epoch-0 agents answered differently, waiting while a record or its re-score is missing, and the plan's rule
applied over the seeds."""

from __future__ import annotations

import json
from pathlib import Path

from genenv_lab import figures, reading

ROOT = Path(__file__).resolve().parents[2]


def _record(path: Path, e0: str, e8: str | None = None, rescored: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"rescored": {"400": {"0": {"bfcl": e0}, "8": {"bfcl": e8 if e8 is not None else e0}}}} if rescored else {}
    path.write_text(json.dumps(body))
    return path


def test_a_pair_is_the_paired_difference_at_the_last_epoch(tmp_path):
    a = _record(tmp_path / "a.json", "0000", "1110")
    b = _record(tmp_path / "b.json", "0000", "1000")
    got = reading.pair(a, b)
    assert (got.diff, got.epoch0_differ, got.tasks, got.read) == (0.5, 0, 4, True)
    assert round(got.se, 4) == 0.2887  # sd of (0, 1, 1, 0) over sqrt(4)


def test_epoch0_answers_that_differ_refuse_the_pair_even_when_it_would_pass(tmp_path):
    a = _record(tmp_path / "a.json", "0" * 100, "1" * 100)
    b = _record(tmp_path / "b.json", "1" + "0" * 99, "0" * 100)
    got = reading.pair(a, b)
    assert got.diff == 1.0 and got.epoch0_differ == 1 and not got.passes
    assert got.text().endswith("refused: epoch-0 answers differ on 1 of 100")
    assert reading.verdict("a", "b", [got, got]) == "not read: a pair is refused"


def test_a_missing_record_or_rescore_waits(tmp_path):
    a = _record(tmp_path / "a.json", "01")
    assert reading.pair(a, tmp_path / "none.json").missing == "no record yet"
    b = _record(tmp_path / "b.json", "01", rescored=False)
    assert reading.pair(a, b).missing == "waiting for the re-score"


def test_the_rule_needs_the_difference_and_two_se_on_every_seed():
    small = reading.Pair(0.02, 0.001, tasks=400)  # above 2 SE, under +0.03
    noisy = reading.Pair(0.06, 0.031, tasks=400)  # above +0.03, under 2 SE
    win = reading.Pair(0.06, 0.02, tasks=400)
    assert not small.passes and not noisy.passes and win.passes
    assert reading.verdict("x", "y", [win, win]) == "`x` beats `y`"
    assert reading.verdict("x", "y", [small, noisy]) == "`x` does not beat `y`"
    assert reading.verdict("x", "y", [win, noisy]) == "split: a third seed decides"


def test_a_split_is_decided_by_the_third_seed_two_of_three():
    win, flat = reading.Pair(0.06, 0.02, tasks=400), reading.Pair(0.0, 0.02, tasks=400)
    waiting, refused = reading.Pair(missing="no record yet"), reading.Pair(0.06, 0.02, 1, 400)
    assert reading.verdict("x", "y", [win, flat, win]) == "`x` beats `y` on 2 of 3 seeds"
    assert reading.verdict("x", "y", [flat, win, flat]) == "`x` does not beat `y` (1 of 3 seeds)"
    assert reading.verdict("x", "y", [win, flat, waiting]) == "split: a third seed decides"
    assert reading.verdict("x", "y", [win, flat, refused]) == "not read: a pair is refused"
    # seeds 0 and 1 that agree are the answer: a third seed neither changes nor is needed for it
    assert reading.verdict("x", "y", [flat, flat, win]) == "`x` does not beat `y`"
    assert reading.third_needed([win, flat]) and not reading.third_needed([win, win])
    assert not reading.third_needed([win, waiting]) and not reading.third_needed([win, refused])


def test_the_table_counts_seed2_only_where_seeds_0_and_1_split_and_shows_it_where_run(tmp_path):
    base = tmp_path / "docs/results/smol-l34/grounded/records"
    for arm, wins in (("grounded", (30, 30)), ("frozen", (0, 0)), ("controller", (30, 0, 30))):
        for seed, n in enumerate(wins):
            _record(base / f"{arm}-s{seed}.json", "0" * 100, "1" * n + "0" * (100 - n))
    _record(base / "frozen-s2.json", "0" * 100, "1" * 40 + "0" * 60)
    rows = {line.split(" | ")[0]: line.split(" | ") for line in reading.grounded_table(tmp_path).splitlines()}
    assert rows["| `grounded` − `frozen`"][1:] == ["**+0.300 (.046)**"] * 2 + [
        "not run: not needed",
        "2 of 2",
        "`grounded` beats `frozen` |",
    ]
    assert rows["| `controller` − `frozen`"][1:] == [
        "**+0.300 (.046)**",
        "+0.000 (.000)",
        "−0.100 (.030)",
        "1 of 3",
        "`controller` does not beat `frozen` (1 of 3 seeds) |",
    ]
    assert rows["| `grounded` − `controller`"][3:] == ["no record yet", "1 of 2", "split: a third seed decides |"]
    assert rows["| `grounded` − `off(20)`"][3] == "—"  # seeds 0 and 1 not both read yet
    # a seed 2 run for another comparison is shown where seeds 0 and 1 agree, not counted and never bold
    _record(base / "grounded-s2.json", "0" * 100)
    table = reading.grounded_table(tmp_path)
    rows = {line.split(" | ")[0]: line.split(" | ") for line in table.splitlines()}
    assert rows["| `grounded` − `frozen`"][3:5] == ["−0.400 (.049), not counted", "2 of 2"]
    assert "it passes the rule the other way: `frozen` − `grounded` +0.400 on seed 2 (8.1 paired SE)." in " ".join(
        table.split()
    )


def test_pairs_of_two_builds_of_one_warm_start_or_two_thread_counts_are_marked_and_named(tmp_path):
    base = tmp_path / reading.STUDY_RECORDS
    made = {
        "grounded": (51513.352, 1, None),
        "trained": (51513.355, 2, "AMD EPYC (avx2)"),
        "frozen": (51513.352, 1, None),
    }
    for arm, (fingerprint, threads, built_on) in made.items():
        path = _record(base / f"{arm}-s1.json", "0" * 100, ("1" * (40 if arm == "grounded" else 10)).ljust(100, "0"))
        data = json.loads(path.read_text())
        data["warm_start"] = {"key": "k-s1", "fingerprints": {"agent": fingerprint}, "built_on": built_on}
        data["config"] = {"model": {"threads": threads}}
        path.write_text(json.dumps(data))
    got = reading.seed_pair(tmp_path, "grounded", "trained", 1)
    assert (got.rebuilt, got.threads_differ, got.flags) == (True, True, " § ‡")
    assert reading.seed_pair(tmp_path, "grounded", "frozen", 1).flags == ""
    table = " ".join(reading.grounded_table(tmp_path).split())
    assert "| **+0.300 (.046)** § ‡ |" in table
    assert "`grounded`-s1 51513.352 against `trained`-s1 51513.355; `trained`-s1's record: built on AMD EPYC" in table
    assert "`grounded`-s1 at 1 against `trained`-s1 at 2" in table


def test_the_study_reads_its_own_rerun_before_the_committed_record(tmp_path):
    committed = reading.record(tmp_path, "trained", 0)
    assert committed == tmp_path / "docs/results/smol-l34/genenv20/records/trained-s0.json"
    own = _record(tmp_path / "docs/results/smol-l34/grounded/records/trained-s0.json", "0")
    assert reading.record(tmp_path, "trained", 0) == own
    assert reading.record(tmp_path, "grounded", 1).parent.name == "records"


def test_the_committed_table_reads_the_seed0_records():
    rows = {line.split(" | ")[0]: line for line in reading.grounded_table(ROOT).splitlines()}
    assert "**+0.135 (.020)**" in rows["| `grounded` − `off(20)`"]  # 0.715 against 0.580 on the same 400 tasks
    assert rows["| `grounded` − `frozen`"].split(" | ")[1] == "+0.015 (.012)"
    assert f"{reading.GROUNDED_PAGE}#reading" not in figures.stale(ROOT)


def test_the_index_cell_waits_for_every_pair_then_gives_the_rule(tmp_path):
    base = tmp_path / "docs/results/smol-l34"
    for arm in ("grounded", "controller", "frozen", "off", "unseen", "trained", "static"):
        for seed in (0, 1):
            wins = {"grounded": 30, "controller": 10}.get(arm, 0)  # of 100 tasks, all wrong at epoch 0
            _record(base / "grounded/records" / f"{arm}-s{seed}.json", "0" * 100, "1" * wins + "0" * (100 - wins))
    cell = reading.grounded_finding(tmp_path)
    assert "grounded − frozen +0.300 / +0.300" in cell and "By the plan's rule: `grounded` beats `frozen`" in cell
    assert "`controller` does not beat `unseen`" not in cell and "`controller` beats `unseen`" in cell
    (base / "grounded/records/off-s1.json").unlink()
    cell = reading.grounded_finding(tmp_path)
    assert "grounded − off(20) +0.300 / …" in cell and "runs under way" in cell and "By the plan's rule" not in cell


def test_the_committed_index_cell_lists_seed0():
    cell = dict(figures.index_rows(ROOT))
    finding = next(v for k, v in cell.items() if k.startswith("[smol-l34 at N = 20, a grounded"))
    assert finding.startswith(
        "seeds 0 / 1 on 400 tasks, and seed 2 where they split (in brackets where it is run but not counted): "
        "grounded − frozen +0.015 / +0.013 / (−0.038); "
    )
    # the ⚠ legend stands by the comparison whose pairs it marks
    assert "grounded − static +0.020 ⚠ / +0.028 ⚠ (⚠ refused: epoch-0 agents differ);" in finding


def test_the_readme_finding_follows_the_verdicts(tmp_path):
    base = tmp_path / "docs/results/smol-l34/grounded/records"
    for arm in ("grounded", "controller", "frozen", "off", "unseen", "trained", "static"):
        for seed in (0, 1):
            _record(base / f"{arm}-s{seed}.json", "0" * 100, ("1" * {"off": 0}.get(arm, 10)).ljust(100, "0"))
    line = " ".join(reading.grounded_summary(tmp_path).split())  # unwrapped
    assert "the simulator beats neither itself frozen nor α-trained;" in line
    assert "neither it nor a procedural controller beats the other (" in line  # two seeds: no reading on three
    assert "match" not in line
    for arm in ("grounded", "controller", "frozen", "trained"):
        _record(base / f"{arm}-s2.json", "0" * 100, ("1" * 10).ljust(100, "0"))
    line = " ".join(reading.grounded_summary(tmp_path).split())
    assert "with a procedural controller, no arm is apart from another on 3 seeds (" in line
    for arm in ("grounded", "controller", "frozen", "trained"):
        (base / f"{arm}-s2.json").unlink()
    _record(base / "controller-s1.json", "0" * 100, "1" * 40 + "0" * 60)  # seed 1 only: a split
    line = " ".join(reading.grounded_summary(tmp_path).split())
    assert line.endswith("is apart from it is still open ([grounded](docs/results/smol-l34/grounded/README.md)).")
    _record(base / "controller-s0.json", "0" * 100, "1" * 40 + "0" * 60)
    line = " ".join(reading.grounded_summary(tmp_path).split())
    assert "a procedural controller beats the frozen and α-trained simulators" in line
    _record(base / "controller-s0.json", "0" * 100, ("1" * 10).ljust(100, "0"))
    _record(base / "controller-s2.json", "0" * 100, "1" * 40 + "0" * 60)  # seed 2 decides both splits
    _record(base / "frozen-s2.json", "0" * 100, "1" * 40 + "0" * 60)
    _record(base / "trained-s2.json", "0" * 100, ("1" * 10).ljust(100, "0"))
    line = " ".join(reading.grounded_summary(tmp_path).split())
    assert "a procedural controller beats the α-trained simulator (" in line
    _record(base / "grounded-s1.json", "0" * 100, "1" * 40 + "0" * 60)  # seed 1 only: both comparisons split
    assert "beats itself frozen is being measured" in " ".join(reading.grounded_summary(tmp_path).split())
    _record(base / "grounded-s2.json", "0" * 100, "1" * 40 + "0" * 60)  # level with frozen-s2, ahead of trained-s2
    line = " ".join(reading.grounded_summary(tmp_path).split())
    assert "the simulator does not beat itself frozen but beats it α-trained;" in line
    (base / "trained-s2.json").unlink()  # grounded − trained open again: the sentence names frozen only
    assert "the simulator does not beat itself frozen; " in " ".join(reading.grounded_summary(tmp_path).split())
    (base / "frozen-s1.json").unlink()
    assert "beats itself frozen is being measured" in " ".join(reading.grounded_summary(tmp_path).split())


def test_a_refused_pair_is_read_from_two_runs_of_genenv20s_start_and_marked(tmp_path):
    own, start = tmp_path / reading.STUDY_RECORDS, tmp_path / reading.SAME_START
    _record(own / "controller-s1.json", "0" * 100, "1" * 10 + "0" * 90)
    _record(tmp_path / "docs/results/smol-l34/genenv20/records/trained-s1.json", "1" + "0" * 99)  # another start
    assert reading.seed_pair(tmp_path, "controller", "trained", 1).epoch0_differ == 1
    _record(start / "trained-s1.json", "1" + "0" * 99, "1" + "0" * 99)
    assert reading.seed_pair(tmp_path, "controller", "trained", 1).epoch0_differ == 1  # one run there is not a pair
    _record(start / "controller-s1.json", "1" + "0" * 99, "1" * 41 + "0" * 59)
    got = reading.seed_pair(tmp_path, "controller", "trained", 1)
    assert (got.diff, got.epoch0_differ, got.same_start, got.passes) == (0.4, 0, True, True)
    table = reading.grounded_table(tmp_path)
    assert "| `controller` − `trained` | no record yet | **+0.400 (.049)** † |" in table
    assert "\n\n† read from two runs that started from genenv20's warm start" in table
    cell = reading.grounded_finding(tmp_path)
    assert "controller − trained … / +0.400 † († two runs from genenv20's warm start);" in cell


def test_the_studys_own_pair_is_read_before_genenv20s_start_whatever_that_gives(tmp_path):
    own, start = tmp_path / reading.STUDY_RECORDS, tmp_path / reading.SAME_START
    for arm, n in (("controller", 10), ("trained", 0)):
        _record(own / f"{arm}-s0.json", "0" * 100, ("1" * n).ljust(100, "0"))
        _record(start / f"{arm}-s0.json", "0" * 100, ("1" * (4 * n)).ljust(100, "0"))
    got = reading.seed_pair(tmp_path, "controller", "trained", 0)
    assert (round(got.diff, 3), got.same_start) == (0.1, False)
    assert "†" not in reading.grounded_table(tmp_path)
