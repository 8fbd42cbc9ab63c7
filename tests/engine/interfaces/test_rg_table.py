"""``genenv env rg-table``: each reasoning-gym dataset checked in its own process, a refused one recorded with the
eligibility check's line, an admitted one with how its replies are scored; the JSON is written as rows come and a
second survey keeps them; the Markdown page is generated from the JSON."""

from __future__ import annotations

import importlib.util
import json

import pytest

from genenv_engine.interfaces import rg_table

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("reasoning_gym") is None,
    reason="reasoning-gym is not installed (the `environments` extra)",
)


def test_a_survey_records_each_outcome_keeps_its_rows_and_renders_them(tmp_path, monkeypatch, capsys):
    from genenv_engine.interfaces.cli import main

    out = tmp_path / "table"
    assert main(["env", "rg-table", "--out", str(out), "--datasets", "acre,string_insertion"]) == 0
    table = json.loads((out / "datasets.json").read_text())
    rows = table["rows"]
    assert rows["acre"]["outcome"] == "refused" and rows["acre"]["scoring"] == "refused"
    assert (
        rows["acre"]["detail"] == "rg:acre: the reasoning-gym dataset has no curriculum, so it has no difficulty levels"
    )
    admitted = rows["string_insertion"]
    assert (admitted["outcome"], admitted["scoring"], admitted["failures"]) == ("passes", "sandboxed", [])
    assert admitted["findings"] and admitted["findings"][0].startswith("eval@")
    assert admitted["other_gold_share"] == 0.0 and "gold_passes" in admitted["checked"]

    def no_second_check(*_):
        raise AssertionError("a dataset already in the table was checked again")

    monkeypatch.setattr(rg_table, "_check", no_second_check)
    assert main(["env", "rg-table", "--out", str(out), "--datasets", "acre,string_insertion"]) == 0
    assert json.loads((out / "datasets.json").read_text()) == table
    page = (out / "datasets.md").read_text()
    assert "Of 2 datasets: 1 passes, 1 refused." in page and "1 sandboxed" in page
    assert "| string_insertion | passes | sandboxed | 0% / 0% |" in page


def test_a_child_that_runs_past_its_limit_or_dies_is_a_row_that_says_so():
    late = rg_table.verdict("slow", None, "", "", 900.0)
    assert (late["outcome"], late["detail"]) == ("no result", f"no result within {rg_table.DATASET_SECONDS} s")
    crashed = rg_table.verdict("bad", 1, "", "Traceback (most recent call last):\n  ...\nKeyError: 'x'\n", 2.0)
    assert (crashed["outcome"], crashed["detail"]) == ("crashed", "KeyError: 'x'")
    broken = rg_table.verdict(
        "b",
        1,
        json.dumps(
            {"ok": False, "failures": [["gold_passes", "1 of 9 fail"]], "checked": [], "scoring": {"mode": "direct"}}
        ),
        "",
        3.0,
    )
    assert (broken["outcome"], broken["detail"]) == ("breaks", "gold_passes: 1 of 9 fail")


def test_a_contract_that_ran_out_of_time_is_checked_once_more_and_both_tries_are_shown(monkeypatch):
    tries = iter(
        [
            {
                "dataset": "slow",
                "outcome": "breaks",
                "scoring": "direct",
                "seconds": 300.0,
                "detail": "splits_deterministic: did not finish in 120 s",
            },
            {"dataset": "slow", "outcome": "passes", "scoring": "direct", "seconds": 40.0, "detail": ""},
        ]
    )
    monkeypatch.setattr(rg_table, "_check_once", lambda *_: next(tries))
    row = rg_table._check("slow", 900)
    assert row["outcome"] == "passes" and row["first_try"] == {
        "outcome": "breaks",
        "seconds": 300.0,
        "detail": "splits_deterministic: did not finish in 120 s",
    }
    page = rg_table.render({"reasoning_gym": "0.1.25", "seconds_per_dataset": 900, "rows": {"slow": row}})
    assert (
        "| slow | passes | direct |  | 40.0 |  (second try; the first, 300.0 s: splits_deterministic: did not "
        "finish in 120 s) |" in page
    )
    broken = {"dataset": "b", "outcome": "breaks", "scoring": "direct", "seconds": 1.0, "detail": "gold_passes: x"}
    monkeypatch.setattr(rg_table, "_check_once", lambda *_: dict(broken))
    assert "first_try" not in rg_table._check("b", 900)  # a contract broken otherwise is not tried again
