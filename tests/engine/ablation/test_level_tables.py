"""The ablation tables' per-level figures over seeds, checked against the committed run records of the steer study
(4 arms x 3 seeds): each arm's final rate per level, and each compared pair's per-level paired difference, as the
mean over seeds of what one seed's held-out strings give."""

from __future__ import annotations

from pathlib import Path

import pytest

from genenv_engine.ablation.markdown import level_lines
from genenv_engine.ablation.tables import collect

RECORDS = Path(__file__).parents[3] / "docs" / "results" / "steer" / "records"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return collect(tmp_path_factory.mktemp("empty"), ("trained", "frozen", "static", "off"), (0, 1, 2), records=RECORDS)


def rate(correct: str, levels: list[str], level: str) -> float:
    picked = [c for c, lv in zip(correct, levels, strict=False) if lv == level]
    return picked.count("1") / len(picked)


def test_final_rate_per_level_is_the_mean_over_seeds(results):
    import json

    for arm in ("trained", "off"):
        by_level = results["summary"][arm]["bfcl"]["final_by_level"]
        for level in ("L1", "L4"):
            per_seed = []
            for seed in (0, 1, 2):  # read here from the record files, without the bench's code
                record = json.loads((RECORDS / f"{arm}-s{seed}.json").read_text())
                last = str(max(int(e) for e in record["correct"]))
                per_seed.append(rate(record["correct"][last]["bfcl"], record["levels"]["bfcl"], level))
            assert by_level[level]["mean"] == pytest.approx(sum(per_seed) / 3)
            assert by_level[level]["seeds"] == 3


def test_pair_difference_per_level_is_the_mean_of_the_seeds_differences(results):
    pair = next(v for v in results["summary"]["_versus"] if (v["a"], v["b"]) == ("trained", "off"))
    for level, figures in pair["by_level"].items():
        diffs = [h["by_level"][level]["diff"] for h in pair["per_seed"]]
        assert figures["mean"] == pytest.approx(sum(diffs) / len(diffs))
        assert figures["positive"] == sum(d > 0 for d in diffs) and figures["seeds"] == len(diffs)
    lines = level_lines(results, "bfcl")
    row = next(line for line in lines if line.startswith("| trained − off |"))
    first = pair["by_level"]["L1"]
    assert f"({first['positive']}/{first['seeds']})" in row.split("|")[2]
