"""Tasks in from each benchmark's upstream layout: rows converted by the benchmark's own upstream reader and
validated like hand edits, bad and hostile rows reported with their reasons, and nothing written by a file whose
every row is bad."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from genenv_engine.config import load_config
from genenv_engine.environments import get_environment
from genenv_engine.interfaces import interop
from genenv_engine.interfaces.cli import main
from genenv_engine.interfaces.interop.upstream import UNMAPPABLE, candidates
from genenv_engine.storage.session import Session
from genenv_engine.storage.store import Store

FIXTURES = Path(__file__).parents[2] / "fixtures"
UPSTREAM = FIXTURES / "interop"
BENCHES = ["bfcl", "alfworld", "apibank", "bamboogle", "travelplanner"]


def make_session(folder: Path, benchmarks: list[str]) -> Path:
    session = Session.create(load_config("micro", overrides={"epochs": 0, "benchmarks": benchmarks}), folder)
    session.store.close()
    return folder


@pytest.fixture
def session(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a row that ran its text would leave PWNED here
    return make_session(tmp_path / "s", BENCHES)


def dump(folder: Path) -> list[str]:
    with sqlite3.connect(folder / "genenv.db") as db:
        return list(db.iterdump())


def added_tasks(folder: Path, result: interop.ImportResult) -> list:
    with Store(folder / "genenv.db") as store:
        return [store.get_task(i) for i in result.added]


def assert_nothing_written(folder: Path, benchmark: str, file: Path) -> interop.ImportResult:
    before = dump(folder)
    result = interop.import_tasks(folder, benchmark, file)
    assert result.added == [] and result.rejected
    assert dump(folder) == before
    return result


def test_alfworld_trials_import_as_expert_steps_and_bad_trials_say_why(session, tmp_path):
    file = UPSTREAM / "alfworld" / "trials.jsonl"
    result = interop.import_tasks(session, "alfworld", file)
    assert result.rows == 4 and len(result.added) == 8
    reasons = dict(result.rejected)
    assert sorted(reasons) == [3, 4]
    assert "'pick_and_place_with_movable_recep' is not one of ALFWorld's six" in reasons[3]
    assert reasons[4].startswith("the trial does not map: goal outside the mini grammar")
    assert all(c.isprintable() for c in reasons[4])  # the row's escape code is quoted, not replayed
    tasks = added_tasks(session, result)
    first = tasks[0]
    assert first.prompt == "G: put book in sofa | at: - | has: - | sidetable 1: book 1; sofa 1"
    assert first.answer == "go to sidetable 1"
    assert [t.answer for t in tasks[4:]] == [
        "go to dresser 1",
        "take cd 1 from dresser 1",
        "go to desk 1",
        "use desklamp 1",
    ]
    assert [t.level for t in tasks] == [2, 2, 1, 1, 2, 2, 1, 1]
    assert all(t.origin == "imported" and t.split == "train" and t.valid for t in tasks)
    with Store(session / "genenv.db") as store:
        assert set(result.added) <= {t.id for t in store.pool(["alfworld"])}
    assert not (tmp_path / "PWNED").exists()

    one = next((FIXTURES / "alfworld" / "json_2.1.1" / "valid_seen").glob("pick_clean*/*/traj_data.json"))
    seeds = interop.import_tasks(session, "alfworld", one, split="seed")  # a traj_data.json file as published
    assert seeds.rows == 1 and len(seeds.added) == 7 and not seeds.rejected
    assert {t.split for t in added_tasks(session, seeds)} == {"seed"}

    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(file.read_text().splitlines(keepends=True)[2:]))
    assert [n for n, _ in assert_nothing_written(session, "alfworld", bad).rejected] == [1, 2]


def test_apibank_dialogue_turns_import_the_calls_the_mini_reads(session):
    result = interop.import_tasks(session, "apibank", UPSTREAM / "apibank" / "AddAlarm-level-1-1.jsonl")
    assert result.rows == 8 and len(result.added) == 1
    (task,) = added_tasks(session, result)
    assert task.prompt == "APIs: AddAlarm(time) DeleteAlarm(time) | U: wake me at 5pm"
    assert task.answer == "API-Request: [AddAlarm(time='17:00')]" and task.level == 2
    reasons = dict(result.rejected)
    assert sorted(reasons) == [5, 6, 8]
    assert reasons[5].startswith("bad_dialogue")  # a follow-up call: upstream renders the result, the mini does not
    assert reasons[6] == "API-Bank turn: an API turn needs an identifier 'api_name'"
    assert reasons[8] == "the dialogue is broken at row 6"
    real = FIXTURES / "apibank" / "good" / "level-1-given-desc" / "Calculator-level-1-1.jsonl"
    assert [n for n, _ in assert_nothing_written(session, "apibank", real).rejected] == [3]


def test_travelplanner_plans_over_the_sandbox_import_as_plan_steps(session, tmp_path):
    result = interop.import_tasks(session, "travelplanner", UPSTREAM / "travelplanner" / "train.csv")
    assert result.rows == 6 and len(result.added) == 12
    tasks = added_tasks(session, result)
    assert [t.prompt for t in tasks[:3]] == [
        "A>B 1d 2p $900 | ?go",
        "A>B 1d 2p $900 | dAB ?bfast",
        "A>B 1d 2p $900 | dAB A2 ?sight",
    ]
    assert tasks[11].prompt == "C>J 1d 1p $600 c:thai | FCJ1 C4 Ca J5 J6 ?go"
    plans = ["dAB", "A2", "Aa", "B1", "B7", "dBA", "FCJ1", "C4", "Ca", "J5", "J6", "FJC1"]
    env = get_environment("travelplanner", 0)
    assert all(
        env.check(t, code).success for t, code in zip(tasks, plans, strict=False)
    )  # each plan field passes its step
    assert [t.answer for t in tasks[:6]] == ["dAB", "B1", "Aa", "B1", "B7", "dBA"]  # the gold: the cheapest field
    assert [t.level for t in tasks] == [1] * 6 + [2] * 6
    reasons = dict(result.rejected)
    assert sorted(reasons) == [3, 4, 5, 6]
    assert reasons[3].startswith("'Fernvale' is not a city or region of the mini's sandbox")
    assert reasons[4].startswith("no annotated_plan")
    assert reasons[5] == "bad local_constraint: not a literal: Call"
    assert reasons[6] == "day 1 lunch: 'blue kettle, B' is not in the mini's sandbox"
    assert not (tmp_path / "PWNED").exists()
    real = FIXTURES / "travelplanner" / "validation.csv"  # upstream's own layout, cities outside the sandbox
    assert len(assert_nothing_written(session, "travelplanner", real).rejected) == 3


def test_bfcl_official_entries_import_with_the_answers_beside_them(tmp_path, monkeypatch):
    pytest.importorskip("bfcl_eval")
    from genenv_engine.environments.bfcl.official.data import BfclUnavailable, require_package

    try:
        require_package()
    except BfclUnavailable as err:
        pytest.skip(str(err))
    monkeypatch.chdir(tmp_path)
    folder = make_session(tmp_path / "s", ["bfcl_official"])
    result = interop.import_tasks(folder, "bfcl_official", UPSTREAM / "bfcl" / "BFCL_v4_simple_python.json")
    assert result.rows == 4 and len(result.added) == 2
    area, temperature = added_tasks(folder, result)
    assert area.prompt.endswith('\nuser: "What is the area of a circle with a radius of 3 units?"')
    assert area.answer == "geometry.circle_area(radius=3)" and area.level == 1
    assert temperature.answer == "convert_temperature(value=20.0, from_scale='celsius', to_scale='fahrenheit')"
    reasons = dict(result.rejected)
    assert reasons[3].startswith("bad_function_doc")  # a function named with Python code
    assert reasons[4].startswith("no ground truth")
    irrelevance = interop.import_tasks(folder, "bfcl_official", UPSTREAM / "bfcl" / "BFCL_v4_irrelevance.json")
    assert [t.answer for t in added_tasks(folder, irrelevance)] == ["[]"]
    assert irrelevance.rejected == [(2, "not a BFCL entry: expected a string 'id' and a 'question' list")]

    entry = json.loads((UPSTREAM / "bfcl" / "BFCL_v4_simple_python.json").read_text().splitlines()[3])
    merged = tmp_path / "merged.jsonl"  # an entry carrying its own possible answer
    merged.write_text(
        json.dumps({**entry, "ground_truth": [{"days_between": {"start": ["2024-01-01"], "end": ["2024-03-01"]}}]})
        + "\n"
    )
    (task,) = added_tasks(folder, interop.import_tasks(folder, "bfcl_official", merged))
    assert task.answer == "days_between(start='2024-01-01', end='2024-03-01')"
    turn = {
        "id": "multi_turn_base_0",
        "question": [[{"role": "user", "content": "cd into docs"}]],
        "initial_config": {},
        "involved_classes": ["GorillaFileSystem"],
    }
    (multi,) = candidates("bfcl_official", [(1, turn)], merged)
    assert multi.reason.startswith("multi-turn entries do not map")
    assert not (tmp_path / "PWNED").exists()


def test_benchmarks_whose_rows_cannot_map_reject_every_row_and_write_nothing(session, capsys):
    bfcl = assert_nothing_written(session, "bfcl", UPSTREAM / "bfcl" / "BFCL_v4_simple_python.json")
    assert bfcl.rejected == [(n, UNMAPPABLE["bfcl"]) for n in (1, 2, 3, 4)]
    bamboogle = assert_nothing_written(session, "bamboogle", UPSTREAM / "bamboogle" / "test.jsonl")
    assert bamboogle.rejected == [
        (1, UNMAPPABLE["bamboogle"]),
        (2, UNMAPPABLE["bamboogle"]),
        (3, "Bamboogle row: the question must be a non-empty string"),
    ]
    csv_file = FIXTURES / "bamboogle" / "upstream" / "bamboogle.csv"  # the Question/Answer CSV as published
    assert main(["tasks", "import", str(session), "bamboogle", str(csv_file)]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("imported 0 tasks from 4 rows")
    assert captured.err.count("rejected: Bamboogle rows do not map to bamboogle") == 4
