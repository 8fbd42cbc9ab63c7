"""The ablation tables' simulator validity per benchmark (`genenv_engine.ablation.validity`): drafts, valid and
rejections by reason, read from each session's stored funnel, summed over epochs from 1 and seeds, rendered as the
"Validity by benchmark" section; run records written before the field render as no data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from genenv_engine.ablation.arms import Plan
from genenv_engine.ablation.bench import run_plan
from genenv_engine.ablation.markdown import markdown
from genenv_engine.ablation.tables import collect, summarise
from genenv_engine.storage.session import Session

RESULTS = Path(__file__).resolve().parents[3] / "docs" / "results"


def _funnel_sums(folder: Path) -> tuple[dict[str, dict], list[dict]]:
    """Per benchmark, the stored funnel's drafts, valid and rejections summed over epochs from 1; and the
    epoch metrics the loop stored."""
    session = Session.open(folder)
    try:
        funnel, metrics = session.store.funnel(), session.store.epoch_metrics()
    finally:
        session.store.close()
    sums: dict[str, dict] = {}
    for e in funnel:
        if e["epoch"] >= 1:
            s = sums.setdefault(e["benchmark"], {"drafts": 0, "valid": 0, "rejected": {}})
            s["drafts"] += e["drafts"]
            s["valid"] += e["valid"]
            for reason, n in e["rejected"].items():
                s["rejected"][reason] = s["rejected"].get(reason, 0) + n
    return sums, [m for m in metrics if m["status"] == "done"]


def test_validity_is_the_sum_of_the_stored_funnel_and_survives_the_run_record(tmp_path):
    plan = Plan(
        tmp_path / "bench",
        ("trained", "off"),
        (0,),
        2,
        "micro",
        None,
        None,
        {"agent.tasks_per_epoch": 24, "agent.steps_per_epoch": 3},
    )
    results = run_plan(plan, quiet=True)
    sums, metrics = _funnel_sums(plan.out / "trained-s0")
    v = results["summary"]["trained"]["validity"]["bfcl"]
    assert v["drafts"] > 0 and (v["drafts"], v["valid"]) == (sums["bfcl"]["drafts"], sums["bfcl"]["valid"])
    assert v["rejected"] == sums["bfcl"]["rejected"] and v["valid_fraction"] == v["valid"] / v["drafts"]
    counts = list(v["rejected"].values())
    assert counts == sorted(counts, reverse=True)  # most frequent first
    # each epoch row agrees with the epoch metrics the loop stored (one benchmark: its totals are the epoch's)
    rows = {r["epoch"]: r["validity"]["bfcl"] for r in results["runs"]["trained"]["0"]["epochs"] if r["epoch"]}
    assert [(e, r["drafts"], r["valid"], r["rejected"]) for e, r in rows.items()] == [
        (m["epoch"], m["generated"], m["valid"], m["invalid_reasons"]) for m in metrics if m["epoch"] >= 1
    ]
    assert sum(v["rejected"].values()) == v["drafts"] - v["valid"]
    # the off arm writes no drafts: every epoch row says so, and the section names it instead of tabling it
    assert all(r["validity"] == {} for r in results["runs"]["off"]["0"]["epochs"])
    assert results["summary"]["off"]["validity"]["bfcl"]["drafts"] == 0
    md = (plan.out / "ablation.md").read_text()
    reasons = ", ".join(f"{r}: {n}" for r, n in list(v["rejected"].items())[:3]) or "–"
    # with the answer check on, every valid task was admitted as written (a run with none counts no admission)
    assert ("admitted" in v) == (v["valid"] > 0)
    ways = ""
    if v["valid"]:
        assert v["admitted"] == {"as_written": v["valid"], "on_gold": 0, "mended": 0}
        ways = f" {v['valid']} / 0 / 0 |"
    row = f"| trained | bfcl | {v['drafts']} | {v['valid_fraction']:.3f} ({v['valid']}) |{ways} {reasons} | 1/1 |"
    assert row in md
    assert "## Validity by benchmark" in md and "No drafts: off." in md and "| off | bfcl |" not in md
    # a run record carries the rows: read back elsewhere, the same validity
    there = collect(tmp_path / "elsewhere", plan.arms, plan.seeds, records=plan.records_folder())
    assert there["summary"]["trained"]["validity"] == results["summary"]["trained"]["validity"]


def _rows(*epochs):
    return {
        "epochs": [
            {"epoch": e, "heldout": {}, "tasks_trained": 0, "p_hat": None, **({"validity": v} if v is not None else {})}
            for e, v in epochs
        ],
        "_correct": {},
        "heldout_size": 4,
    }


def test_summary_sums_epochs_from_one_over_seeds_and_the_section_names_the_top_three():
    seed0 = _rows(
        (0, {"bfcl": {"drafts": 50, "valid": 50, "rejected": {}}}),  # epoch 0 is not counted
        (1, {"bfcl": {"drafts": 10, "valid": 6, "rejected": {"parse_error": 3, "duplicate": 1}}}),
        (2, {"bfcl": {"drafts": 10, "valid": 5, "rejected": {"parse_error": 2, "no_answer": 2, "checker_failed": 1}}}),
    )
    seed1 = _rows((1, {"bfcl": {"drafts": 8, "valid": 4, "rejected": {"duplicate_cap": 4}}}), (2, {}))
    summary = summarise({"trained": {0: seed0, 1: seed1}, "off": {0: _rows((1, {}), (2, {}))}}, 0.5, ["bfcl"])
    v = summary["trained"]["validity"]["bfcl"]
    assert (v["drafts"], v["valid"], v["valid_fraction"]) == (28, 15, pytest.approx(15 / 28))
    assert list(v["rejected"].items()) == [
        ("parse_error", 5),
        ("duplicate_cap", 4),
        ("no_answer", 2),
        ("checker_failed", 1),
        ("duplicate", 1),
    ]
    assert (v["seeds"], v["seeds_with_data"]) == (2, 2)
    results = {
        "arms": ["trained", "off"],
        "seeds": [0, 1],
        "alpha": 0.5,
        "benchmarks": ["bfcl"],
        "runs": {"trained": {"0": seed0, "1": seed1}, "off": {"0": _rows((1, {}))}},
        "summary": summary,
    }
    from genenv_engine.ablation.validity import markdown as section

    assert section(results) == [
        "## Validity by benchmark",
        "",
        "The simulator's drafts from epoch 1 on, summed over seeds: the share the store kept as valid, and the 3 "
        "most frequent rejection reasons (reason prefix: count).",
        "",
        "| arm | benchmark | drafts | valid fraction (valid) | top rejections | seeds |",
        "|---|---|---|---|---|---|",
        "| trained | bfcl | 28 | 0.536 (15) | parse_error: 5, duplicate_cap: 4, no_answer: 2 | 2/2 |",
        "",
        "No drafts: off.",
        "",
    ]


def test_rows_without_validity_are_no_data_and_a_partly_recorded_arm_counts_its_seeds():
    new = _rows((1, {"bfcl": {"drafts": 4, "valid": 4, "rejected": {}}}))
    old = _rows((1, None), (2, None))
    v = summarise({"trained": {0: new, 1: old}}, 0.5, ["bfcl"])["trained"]["validity"]["bfcl"]
    assert (v["drafts"], v["valid"], v["rejected"], v["seeds"], v["seeds_with_data"]) == (4, 4, {}, 2, 1)
    v = summarise({"trained": {1: old}}, 0.5, ["bfcl"])["trained"]["validity"]["bfcl"]
    assert (v["drafts"], v["valid_fraction"], v["seeds_with_data"]) == (0, None, 0)


def test_committed_records_written_before_validity_still_render(tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    for name in ("trained-s0", "off-s0"):
        data = json.loads((RESULTS / "steer" / "records" / f"{name}.json").read_text())
        assert all("validity" not in row for row in data["epochs"])
        (records / f"{name}.json").write_text(json.dumps(data))
    results = collect(tmp_path / "bench", ("trained", "off"), (0,), records=records)
    assert results["summary"]["trained"]["validity"]["bfcl"]["seeds_with_data"] == 0
    md = markdown(results)
    assert "## Validity by benchmark" in md and "No validity data (run records written before it): trained, off." in md
    assert "| trained | bfcl |" not in md.split("## Validity by benchmark")[1].split("##")[0]
    assert "## bfcl" in md and "## Per epoch (mean over seeds)" in md  # the rest renders as before


def test_the_section_splits_valid_tasks_by_how_they_were_admitted_where_runs_counted_it():
    from genenv_engine.ablation.validity import markdown as section

    counted = _rows(
        (
            1,
            {
                "bfcl": {
                    "drafts": 10,
                    "valid": 6,
                    "rejected": {"x": 4},
                    "admitted": {"as_written": 1, "on_gold": 2, "mended": 3},
                }
            },
        ),
        (2, {"bfcl": {"drafts": 10, "valid": 2, "rejected": {"x": 8}, "admitted": {"mended": 2}}}),
    )
    older = _rows((1, {"bfcl": {"drafts": 5, "valid": 5, "rejected": {}}}))
    summary = summarise({"trained": {0: counted}, "frozen": {0: older}}, 0.5, ["bfcl"])
    assert summary["trained"]["validity"]["bfcl"]["admitted"] == {"as_written": 1, "on_gold": 2, "mended": 5}
    assert "admitted" not in summary["frozen"]["validity"]["bfcl"]
    results = {
        "arms": ["trained", "frozen"],
        "seeds": [0],
        "alpha": 0.5,
        "benchmarks": ["bfcl"],
        "runs": {"trained": {"0": counted}, "frozen": {"0": older}},
        "summary": summary,
    }
    lines = section(results)
    assert (
        "| arm | benchmark | drafts | valid fraction (valid) | admitted as written / on the gold / mended | "
        "top rejections | seeds |" in lines
    )
    assert "| trained | bfcl | 20 | 0.400 (8) | 1 / 2 / 5 | x: 12 | 1/1 |" in lines
    assert "| frozen | bfcl | 5 | 1.000 (5) | – | – | 1/1 |" in lines
