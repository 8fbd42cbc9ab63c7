"""The published figures: the README's performance table and the results index are what their JSON gives, a
changed or newer JSON makes them stale, the figures read back from the run records, and the README stays short."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from genenv_lab import figures, index, reading

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
        "16.4 min; its SFT and held-out 2.08× (agent 2.2×, simulator 2.0×); defaults now: 14.9 min, 1.64× (2026-12-06,"
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


GROUNDED = "docs/results/smol-l34/grounded/records"


def test_grounded_seed2_that_the_rule_does_not_count_is_shown_from_its_records():
    got = reading.seed_pair(ROOT, "grounded", "frozen", 2)
    ratio = f"{abs(got.diff) / got.se:.1f}"
    assert (figures.signed(got.diff), figures.bare(got.se), ratio) == ("−0.038", ".013", "2.8")
    page = (ROOT / reading.GROUNDED_PAGE).read_text()
    assert "| `grounded` − `frozen` | +0.015 (.012) | +0.013 (.013) | −0.038 (.013) ‡, not counted | 0 of 2 |" in page
    assert "`frozen` − `grounded` +0.038 on seed 2 (2.8 paired SE)" in " ".join(page.split())
    assert "not needed |" not in page.replace("not run: not needed |", "")  # every seed-2 pair that was run is shown


def test_grounded_probe_answers_are_counted_from_the_records():
    assert reading.probe_answers(ROOT) == [(0, 2992), (1, 2672), (2, 2832)]  # eval_generations over epochs 1-8
    readme, index = ((ROOT / rel).read_text() for rel in (figures.README, figures.INDEX))
    assert "progress on 2,992 / 2,672 / 2,832 probe answers (seeds 0–2)" in " ".join(readme.split())
    assert "the grounded reward read 2,992 / 2,672 / 2,832 probe answers on seeds 0–2" in index
    assert "no arm is apart from another on 3 seeds" in " ".join(readme.split()) and "matches it" not in readme


def test_a_grounded_record_that_drifts_makes_its_figures_stale(copy_root):
    path = copy_root / GROUNDED / "grounded-s2.json"
    data = json.loads(path.read_text())
    last = max(data["rescored"]["400"], key=int)
    answers = data["rescored"]["400"][last]["bfcl"]
    flip = answers.index("0")
    data["rescored"]["400"][last]["bfcl"] = answers[:flip] + "1" + answers[flip + 1 :]  # seed 2: −0.038 -> −0.035
    data["epochs"][1]["eval_generations"] += 8  # 2,832 -> 2,840 probe answers
    path.write_text(json.dumps(data))
    assert set(figures.stale(copy_root)) == {
        f"{figures.README}#findings",
        f"{figures.INDEX}#index",
        f"{reading.GROUNDED_PAGE}#reading",
        f"{reading.GROUNDED_PAGE}#arms",
    }
    figures.write(copy_root)
    assert "2,992 / 2,672 / 2,840 probe answers" in (copy_root / figures.INDEX).read_text()
    assert "−0.035 (.014) ‡, not counted" in (copy_root / reading.GROUNDED_PAGE).read_text()


def test_the_index_marks_each_pair_whose_epoch0_agents_differ():
    rows = dict(figures.index_rows(ROOT))
    smol = rows["[smol-l34](smol-l34/README.md): L4 in the training mix"]
    assert "(+0.028 ⚠, +0.048 ⚠, −0.038; ⚠ epoch-0 agents differ on 2–3 of 400 tasks; mean +0.013 ± .044)" in smol
    assert "(+0.078, +0.015 ⚠, +0.005)" in smol and "(+0.153, +0.095 ⚠, +0.088; 4.9–7.2 SE)" in smol
    base = "docs/results/smol-l34"
    assert index.epoch0_differ(ROOT, f"{base}/genenv20/records/trained-s0.json", f"{base}/records/off-s0.json") == 2
    assert "`off`: −0.018 (.018) ⚠ and +0.020 (.018)" in (ROOT / base / "genenv20/README.md").read_text()
    replication = next(v for k, v in rows.items() if k.startswith("[smol-l3-replication]"))
    assert "adds no draw" not in replication and "not deterministic across machines" in replication


def test_chains_lead_is_stated_as_marginal_from_its_records():
    lead = index.chain_lead(ROOT)
    assert (round(lead["p"], 3), lead["passing"], lead["comparisons"]) == (0.052, 1, 6)  # t 2.74 on 4 df
    for rel in (figures.README, figures.INDEX, index.CHAIN_PAGE):
        text = " ".join((ROOT / rel).read_text().split())
        assert "marginal" in text and "p ≈ 0.05" in text, rel
    assert "leads GenEnv, marginally (p ≈ 0.05, one of 6 comparisons)" in " ".join(
        (ROOT / figures.README).read_text().split()
    )
