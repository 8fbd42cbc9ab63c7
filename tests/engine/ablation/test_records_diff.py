"""`genenv bench records-diff`: two committed run records compared on the same re-scored held-out tasks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from genenv_engine.interfaces.cli import main

ROOT = Path(__file__).resolve().parents[3]
RECORDS = ROOT / "docs" / "results" / "smol-l34" / "records"


def test_unseen_minus_off_on_seed_2_is_the_published_figure(tmp_path):
    argv = [
        "bench",
        "records-diff",
        str(RECORDS / "unseen-s2.json"),
        str(RECORDS / "off-s2.json"),
        "--rescore",
        "400",
        "--json",
        "--out",
        str(tmp_path),
    ]
    assert main(argv) == 0
    result = json.loads((tmp_path / "bench-records-diff.json").read_text())
    bfcl = result["benchmarks"]["bfcl"]
    assert result["epoch"] == 8 and bfcl["tasks"] == 400 and bfcl["epoch0_differ"] == 0
    assert bfcl["a_minus_b"]["diff"] == pytest.approx(-0.0375) and bfcl["a_minus_b"]["paired_se"] == pytest.approx(
        0.015, abs=0.001
    )
    assert bfcl["a"]["change"][0] == pytest.approx(0.0375) and bfcl["b"]["change"][0] == pytest.approx(0.075)
    assert sum(v["n"] for v in bfcl["by_level"].values()) == 400
    # per level, A - B adds up to the total (equal level shares)
    assert sum(v["a_minus_b"] * v["n"] for v in bfcl["by_level"].values()) / 400 == pytest.approx(-0.0375)


def test_records_diff_refuses_what_it_cannot_pair(tmp_path, capsys):
    argv = ["bench", "records-diff", str(RECORDS / "unseen-s2.json"), str(RECORDS / "off-s1.json"), "--rescore", "400"]
    assert main(argv) != 0
    assert "not on the same held-out tasks: seed 2 / 1" in capsys.readouterr().err
    assert (
        main(
            ["bench", "records-diff", str(RECORDS / "unseen-s2.json"), str(RECORDS / "off-s2.json"), "--rescore", "300"]
        )
        != 0
    )
    assert "no re-score on 300 tasks" in capsys.readouterr().err
