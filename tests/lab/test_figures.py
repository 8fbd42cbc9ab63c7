"""The published figures: the README's performance table and the results index are what their JSON gives, a
changed or newer JSON makes them stale, the figures read back from the run records, and the README stays short."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from genenv_lab import figures

ROOT = Path(__file__).resolve().parents[2]


def test_committed_sections_equal_what_the_json_gives():
    names = figures.stale(ROOT)
    assert names == [], f"stale: {', '.join(names)} (not what the JSON gives now): run `make figures`"


@pytest.fixture
def copy_root(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / figures.RESULTS, tmp_path / figures.RESULTS, ignore=shutil.ignore_patterns("*.png"))
    shutil.copy(ROOT / figures.README, tmp_path / figures.README)
    assert figures.stale(tmp_path) == []
    return tmp_path


def test_a_changed_json_makes_its_section_stale_and_write_mends_it(copy_root, capsys):
    path = copy_root / figures.PERFORMANCE / "2026-12-05c" / "bench-epoch.json"
    data = json.loads(path.read_text())
    data["median_seconds"] = 21.04
    path.write_text(json.dumps(data))
    assert figures.stale(copy_root) == [f"{figures.README}#performance", f"{figures.INDEX}#index"]
    assert figures.main(["--check", "--root", str(copy_root)]) == 1
    assert "README.md#performance" in capsys.readouterr().err
    assert figures.write(copy_root) == [figures.README, figures.INDEX]
    assert figures.stale(copy_root) == []
    assert "| tiny epoch, median, peak RSS (quiet cores) | 21.0 s, 1,033 MB" in (copy_root / figures.README).read_text()


def test_a_hand_edited_figure_is_stale(copy_root):
    readme = copy_root / figures.README
    readme.write_text(readme.read_text().replace("13.9 s, 1,033 MB", "13.5 s, 1,033 MB"))
    assert figures.stale(copy_root) == [f"{figures.README}#performance"]


def test_the_newest_dated_folder_is_the_source_and_older_ones_are_cited_by_date(copy_root):
    old = copy_root / figures.PERFORMANCE / "2026-12-04" / "bench-store.json"
    new = copy_root / figures.PERFORMANCE / "2026-12-07" / "bench-store.json"
    new.parent.mkdir()
    data = json.loads(old.read_text())
    data["search_ms"] = 12.34
    new.write_text(json.dumps(data))
    assert figures.dated(copy_root, "bench-store.json") == ["2026-12-07", "2026-12-04", "2026-12-02"]
    row = next(r for r in figures.performance_rows(copy_root) if r[0].startswith("console page, search or filter"))
    assert row[1].startswith("≤ 12.3 ms (2026-12-07, [JSON](docs/results/performance/2026-12-07/bench-store.json))")
    assert row[1].endswith("; 2026-12-04: ≤ 28.1 ms; 2026-12-02: ≤ 44.9 ms")


def test_performance_rows_read_their_json():
    rows = {what: (measured, goal, met) for what, measured, goal, met in figures.performance_rows(ROOT)}
    epoch = rows["tiny epoch, median, peak RSS (quiet cores)"]
    assert epoch[0].startswith("13.9 s, 1,033 MB (median of 5: 14.3 s) (2026-12-05c,") and epoch[2] == "yes"
    warm = rows["tiny warm start trained afresh"]
    assert warm[0].startswith("8.5 min (2026-12-05c,") and warm[0].endswith("; 2026-12-02: 17.8 min")  # 1,070.9 s
    assert warm[1:] == ("≤ 3 min", "no (seed 0 ships)")
    assert rows["rollouts vs one `generate` per prompt"][0].startswith("13.5×")
    smol = rows["`smol` warm start, float32, over its compute bound"]  # 244.8 + 727.1 + 18.4 s over 475.7 s of bound
    assert smol[0].startswith(
        "16.4 min; its SFT and held-out 2.08× (agent 2.2×, simulator 2.0×); opt-in: 14.9 min, 1.64× (2026-12-06,"
    )  # 207.4 + 674.7 + 19.9 s over 549.3 s of bound
    assert smol[2] == "yes"
    epochs = rows["`smol` / `smol-l34` epoch: float32; static decode; bfloat16"]
    assert epochs[0].startswith(
        "252 / 603 s (2.25× / 2.33×); 242 / 520 s (2.22× / 2.10×); 224 / 404 s; `smol-l34` "
        "opt-in: 482 s (1.81×) (2026-12-06,"
    )
    assert epochs[1:] == ("≤ 2× (float32)", "yes")


def test_genenv20_figures_come_from_the_run_records():
    base = "docs/results/smol-l34"
    trained, static = (
        figures.held_out(ROOT, f"{base}/genenv20/records/{arm}-s0.json")[1] for arm in ("trained", "static")
    )
    assert (trained.count("1"), static.count("1"), len(trained)) == (276, 278, 400)
    diff, se = figures.versus(
        ROOT, f"{base}/genenv20/records/trained-s0.json", f"{base}/genenv20/records/static-s0.json"
    )
    assert figures.signed(diff) == "−0.005" and figures.bare(se) == ".017"
    off = figures.versus(ROOT, f"{base}/genenv20/records/trained-s0.json", f"{base}/pool20/records/off-s0.json")
    assert figures.signed(off[0]) == "+0.108"
    row = dict(figures.index_rows(ROOT))
    finding = next(v for k, v in row.items() if k.startswith("[smol-l34 at N = 20"))
    assert "trained − static −0.005 / +0.003" in finding and "GenEnv beats `off(20)`" in finding


def test_chain_row_reads_learnability_ahead_from_the_records():
    finding = next(v for k, v in figures.index_rows(ROOT) if k.startswith("[chain]"))
    assert "trained − learnability −0.0075 ± .0061, below zero on 4 of 5 seeds, 2.7 SE over seeds" in finding
    assert "0 k = 6 tasks solved" in finding and "pass@8 .14 at k = 3, 0 at k ≥ 4" in finding


def test_the_readme_is_a_five_minute_page():
    text = (ROOT / "README.md").read_text()
    words = len(text.split())
    assert words <= 1000, f"README.md has {words} words (at most 1,000)"
    for link in ("docs/reference/cli.md", "docs/results/README.md", "docs/guide/console.md"):
        assert f"]({link})" in text


def test_the_generator_imports_no_torch():
    code = "import sys, genenv_lab.figures; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"
