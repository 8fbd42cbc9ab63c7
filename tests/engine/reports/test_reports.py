"""Session reports (`genenv report`) built from real micro sessions, checked against the database.

Sessions run the real loop, store and trainers on the micro preset; the agent and simulator
generation backends are scripted test doubles (as in test_loop.py) so epochs have valid generated
tasks and mixed success. Every number a test checks is read back from the session's SQLite store.
"""

from __future__ import annotations

import argparse
import base64
import importlib.metadata
import platform
import re
import shutil
import tomllib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from genenv_engine.config import load_config
from genenv_engine.core.events import RunControl
from genenv_engine.method.loop import run
from genenv_engine.reports import add_report_parser, build_report, run_report
from genenv_engine.storage.session import Session
from genenv_engine.storage.store import Store
from genenv_engine.testing import scripted_backends
from genenv_engine.training.warmstart.training import built_on

USER = re.compile(r"<\|user\|>(.*)<\|assistant\|>", re.S)
HOSTILE = (
    "<script>alert(1)</script> *star* _under_ `tick` | pipe |\n```\n# hash [x](y) &amp; \\ end\n"
    "````\n<img src=x onerror=alert(2)>"
)
HOSTILE_ANSWER = "add(a=1,b=2) <b>bold</b> | `x`"
PNG = b"\x89PNG\r\n\x1a\n"


def scripted(crash: bool = False):
    return scripted_backends(crash=crash)


LIGHT = {"heldout_size": 12, "agent.replay_tasks": 4, "simulator.seeds_per_epoch": 3}
"""Smaller than micro where it does not matter for reports (the warm-start cache key is unchanged)."""


def micro(root: Path, name: str, **overrides) -> Session:
    return Session.create(load_config("micro", overrides={**LIGHT, **overrides}), root / name)


# -- sessions, built once for the module ----------------------------------------------------------


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    root = tmp_path_factory.mktemp("report-sessions")
    out: dict[str, Path] = {}
    trained = micro(root, "trained", epochs=2)
    run(trained, backend_factory=scripted())
    store = trained.store
    gen = store.query_tasks(origin="generated", valid=True, limit=10, order="id")
    old = store.get_task(gen[0]["id"])
    edited = store.revise_task(old.id, old.with_(id=old.id + "/r1<i>|`*", prompt=HOSTILE, answer=HOSTILE_ANSWER))
    store.set_status(edited.id, "pinned")
    store.set_status(gen[1]["id"], "banned")
    out["trained"] = trained.path

    frozen = micro(root, "frozen", epochs=2, **{"simulator.mode": "frozen"})
    run(frozen, backend_factory=scripted())
    out["frozen"] = frozen.path

    stopped = micro(root, "stopped", epochs=1)
    control = RunControl()

    def stop_after_rollout(event):
        if event.kind == "PhaseFinished" and event.epoch == 1 and event.phase == "rollout":
            control.stop()

    assert run(stopped, stop_after_rollout, control, backend_factory=scripted()) == {"stopped_at": 1, "epochs_done": 0}
    shutil.copytree(stopped.path, root / "stopped-snapshot")
    out["partial"] = root / "stopped-snapshot"
    assert run(Session.open(stopped.path), backend_factory=scripted()) == {"epochs_done": 1}
    out["resumed"] = stopped.path

    crashed = micro(root, "crashed", epochs=1)
    with pytest.raises(RuntimeError, match="scripted crash"):
        run(crashed, backend_factory=scripted(crash=True))
    out["crashed"] = crashed.path
    return out


# -- readers for the written reports --------------------------------------------------------------


class Page(HTMLParser):
    """Collects tags with attributes, tables by id (cell texts), heading texts and <pre> texts."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.tables: dict[str, list[list[str]]] = {}
        self.row_classes: dict[str, list[str]] = {}
        self.headings: list[str] = []
        self.pres: list[str] = []
        self.codes: list[str] = []
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._text: list[str] | None = None
        self._kind = ""

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "table":
            self._table = a.get("id") or f"anon{len(self.tables)}"
            self.tables[self._table] = []
            self.row_classes[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
            self.row_classes[self._table].append(a.get("class") or "")
        elif tag in ("td", "th"):
            self._cell = []
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6", "pre", "code"):
            self._text, self._kind = [], tag

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._table is not None:
            self.tables[self._table][-1].append("".join(self._cell))
            self._cell = None
        elif tag == "table":
            self._table = None
        elif tag == self._kind and self._text is not None:
            text = "".join(self._text)
            {"pre": self.pres, "code": self.codes}.get(tag, self.headings).append(text)
            self._text, self._kind = None, ""

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._text is not None:
            self._text.append(data)


def parse_html(text: str) -> Page:
    page = Page()
    page.feed(text)
    page.close()
    return page


def table(page: Page, ident: str) -> list[dict[str, str]]:
    """A table of the page as dicts keyed by its header cells."""
    head, *rows = page.tables[ident]
    return [dict(zip(head, r, strict=False)) for r in rows]


def md_tables(text: str) -> list[list[dict[str, str]]]:
    """Every GFM table of a Markdown text, rendered by markdown-it (so escapes are undone as a reader sees them)."""
    from markdown_it import MarkdownIt

    page = parse_html(MarkdownIt("commonmark").enable("table").render(text))
    return [[dict(zip(t[0], r, strict=False)) for r in t[1:]] for t in page.tables.values()]


def md_table(text: str, first_headers: list[str]) -> list[dict[str, str]]:
    for t in md_tables(text):
        if t and list(t[0])[: len(first_headers)] == first_headers:
            return t
    raise AssertionError(f"no Markdown table with headers {first_headers}")


def f3(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


SECTIONS = [
    "Run",
    "Runs",
    "Versions and machine",
    "Time by phase",
    "Generated and trained",
    "Configuration",
    "Difficulty calibration",
    "Agent progress",
    "Policy updates",
    "Tasks",
    "Sample of generated tasks by difficulty bucket",
    "Hand edits",
    "Pinned tasks",
    "Banned tasks",
]


def check_self_contained(html_text: str, n_images: int) -> Page:
    page = parse_html(html_text)
    names = [t for t, _ in page.tags]
    assert "script" not in names and "link" not in names and "iframe" not in names
    assert "http://" not in html_text and "https://" not in html_text
    for _, attrs in page.tags:
        for key in ("src", "href", "action", "data", "srcset", "poster"):
            value = attrs.get(key)
            if value is not None:
                assert value.startswith(("#", "data:image/png;base64,")), (key, value[:80])
    images = [a["src"] for t, a in page.tags if t == "img"]
    assert len(images) == n_images
    for src in images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG)
    return page


# -- tests ----------------------------------------------------------------------------------------


def test_single_session_report_holds_every_section_with_database_numbers(sessions):
    path = sessions["trained"]
    written = build_report([path])
    assert written == {"md": path / "report" / "report.md", "html": path / "report" / "report.html"}
    md, html_text = written["md"].read_text(), written["html"].read_text()
    page = check_self_contained(html_text, 5)
    for title in SECTIONS:
        assert title in page.headings
        assert re.search(rf"^#+ {re.escape(title)}$", md, re.M), title
    for link in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md):
        assert not link.startswith(("/", "http")) and (written["md"].parent / link).read_bytes().startswith(PNG)

    store = Store(path / "genenv.db")
    metrics = store.epoch_metrics()
    # the run: every config value, versions
    config = tomllib.loads((path / "config.toml").read_text())
    flat = {}
    for key, value in config.items():
        for sub, item in value.items() if isinstance(value, dict) else [(None, value)]:
            flat[key if sub is None else f"{key}.{sub}"] = item
    cfg_rows = {r["setting"]: r["value"] for r in table(page, "config-table")}
    for key, value in flat.items():
        if isinstance(value, (list, dict)) or key == "data_dirs":
            continue
        assert cfg_rows[key] == str(value), key
    assert cfg_rows["simulator.mode"] == "trained" and cfg_rows["curriculum.alpha"] == "0.5"
    assert {r["setting"]: r["value"] for r in md_table(md, ["setting", "value"])}["agent.rollouts"] == "4"
    versions = {r["software"]: r["version"] for r in table(page, "versions-table")}
    assert versions == {
        "genenv-console": importlib.metadata.version("genenv-console"),
        "torch": importlib.metadata.version("torch"),
        "transformers": importlib.metadata.version("transformers"),
        "python": platform.python_version(),
    }
    assert {r["machine"] for r in table(page, "machine-table")} >= {"cpu", "cores", "gpu"}
    time_rows = {r["phase"]: r for r in table(page, "time-table")}
    total = sum(s for m in metrics for s in m["phase_seconds"].values())
    assert time_rows["total"]["seconds (done epochs)"] == f"{total:.1f}"
    assert float(time_rows["agent_update"]["seconds (done epochs)"]) == pytest.approx(
        sum(m["phase_seconds"].get("agent_update", 0) for m in metrics), abs=0.06
    )
    volume = {r["quantity"]: r["value"] for r in table(page, "volume-table")}
    assert volume["warm start: trained on (agent)"] == metrics[0]["warm_start"]["built_on"] == built_on()
    assert (
        volume["agent GRPO sequences trained"] == f"{sum(int(m['agent_update']['sequences']) for m in metrics[1:]):,}"
    )
    tokens = sum(m["tokens_generated"] for m in metrics[1:])
    assert tokens > 0 and volume["tokens generated (agent and simulator sampling, done epochs)"] == f"{tokens:,}"

    # difficulty calibration: per epoch, from the metrics and the batches table
    cal = table(page, "calibration-table")
    assert cal == md_table(md, ["epoch", "status", "mean p̂"])
    assert [r["epoch"] for r in cal] == ["1", "2"]
    for row, m in zip(cal, metrics[1:], strict=False):
        batches = store.batches(m["epoch"])
        r_envs = [b["r_env"] for b in batches]
        assert row["status"] == "done"
        assert row["mean p̂"] == f3(m["generated_success"]) and row["p̂ bfcl"] == f3(
            m["generated_success_by_benchmark"]["bfcl"]
        )
        assert row["batches"] == str(len(batches))
        assert row["batch p̂ mean"] == f3(sum(b["p_hat"] for b in batches) / len(batches))
        assert row["in band"] == f3(m["in_band_fraction"]) and row["calibration error"] == f3(m["calibration_error"])
        assert row["R_env mean"] == f3(m["r_env_mean"]) == f3(sum(r_envs) / len(r_envs))
        assert (row["R_env min"], row["R_env max"]) == (f3(min(r_envs)), f3(max(r_envs)))
        assert row["valid fraction"] == f3(m["valid_fraction"]) and row["unique fraction"] == f3(m["unique_fraction"])

    # agent progress: held-out per epoch, best and final
    held = table(page, "heldout-table")
    assert [(r["epoch"], r["bfcl"]) for r in held] == [(str(m["epoch"]), f3(m["heldout"]["bfcl"])) for m in metrics]
    rates = [(m["epoch"], m["heldout"]["bfcl"]) for m in metrics]
    best = max(rates, key=lambda p: (p[1], -p[0]))
    (row,) = table(page, "best-table")
    assert row["best"] == f"{best[1]:.3f} (epoch {best[0]})" and row["final"] == f"{rates[-1][1]:.3f} (epoch 2)"
    assert row["epoch 0"] == f3(rates[0][1])

    # tasks: counts per epoch and origin, samples per bucket with lineage, the edit, the pin and the ban
    counts = {(r["epoch"], r["origin"]): r for r in table(page, "counts-table")}
    for epoch in (1, 2):
        n = store.count_tasks(origin="generated", epoch=epoch)
        assert n > 0 and counts[(str(epoch), "generated")]["total"] == str(n)
    assert counts[("0", "seed (train split)")]["total"] == str(
        store.db.execute("select count(*) from tasks where split = 'train' and origin = 'seed'").fetchone()[0]
    )
    assert counts[(str(store.get_task(sessions_edit_id(store)).epoch), "edited")]["pinned"] == "1"
    levels = {r[0] for r in store.db.execute("select level from tasks where origin = 'generated' and valid = 1")}
    for level in levels:
        assert f"Bucket L{level}" in page.headings
    sample_ids = [h.removeprefix("Task ") for h in page.headings if h.startswith("Task ")]
    assert sample_ids
    for task_id in sample_ids:
        task = store.get_task(task_id)
        assert task is not None and task.valid and task.origin == "generated"
        assert store.lineage(task_id)[-1].origin == "seed"
        assert f"{task.parent_id} (seed, epoch 0)" in html_text
    edit_id = sessions_edit_id(store)
    parent = store.get_task(edit_id).parent_id
    assert f"Edit 1: {parent} -> {edit_id}" in page.headings
    assert HOSTILE in page.pres and store.get_task(parent).prompt in page.pres
    assert [r["id"] for r in table(page, "pins-table")] == [edit_id]
    banned = [r["id"] for r in store.query_tasks(status="banned", limit=10, order="id")]
    assert [r["id"] for r in table(page, "bans-table")] == banned
    assert [r["id"] for r in md_table(md, ["id", "benchmark", "origin"])] == [edit_id]  # pinned table, | escaped
    store.close()


def sessions_edit_id(store: Store) -> str:
    return store.query_tasks(origin="edited", limit=1, order="id")[0]["id"]


def test_hostile_task_text_is_shown_as_text_in_both_formats(sessions, tmp_path):
    from markdown_it import MarkdownIt

    written = build_report([sessions["trained"]], out=tmp_path / "r")
    html_text = written["html"].read_text()
    page = parse_html(html_text)
    assert "<script>" not in html_text and "&lt;script&gt;alert(1)&lt;/script&gt;" in html_text
    assert HOSTILE in page.pres and HOSTILE_ANSWER in page.pres
    assert not any(t == "b" for t, _ in page.tags) and not any(t == "a" and a.get("href") == "y" for t, a in page.tags)
    assert not any("onerror" in a for _, a in page.tags)
    assert all(a["src"].startswith("data:image/png;base64,") for t, a in page.tags if t == "img")

    md = written["md"].read_text()
    rendered = MarkdownIt("commonmark").enable("table").render(md)
    view = parse_html(rendered)
    tags = [t for t, _ in view.tags]
    assert "script" not in tags and "b" not in tags and "i" not in tags
    assert not any(t == "a" for t in tags)  # [x](y) never became a link
    assert not any("onerror" in a for _, a in view.tags) and "h1" not in tags[1:] and "hr" not in tags
    assert all(a["src"].endswith(".png") and "/" not in a["src"] for t, a in view.tags if t == "img")
    assert HOSTILE + "\n" in view.codes and HOSTILE_ANSWER + "\n" in view.codes
    edit_id = sessions_edit_id(Store(sessions["trained"] / "genenv.db"))
    assert any(h.endswith(f"-> {edit_id}") for h in view.headings)  # escaped id survives in a heading
    assert not any(("star" in e or "under" in e) for e in re.findall(r"<(?:em|strong)>(.*?)</", rendered))


def test_two_sessions_compare_side_by_side_labelled_by_simulator_mode(sessions, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    written = build_report([sessions["trained"], sessions["frozen"]])
    folder = written["html"].parent
    assert folder.parent == Path("reports") and folder.name.startswith("compare-")
    assert sorted(p.name for p in folder.glob("*.png")) == sorted(
        ["compare_heldout.png", "compare_calibration.png"]
        + [f"s{i}_{k}.png" for i in (1, 2) for k in ("time", "calibration", "phat_hist", "generation", "heldout")]
    )
    page = check_self_contained(written["html"].read_text(), 12)
    md = written["md"].read_text()
    assert "Comparison" in page.headings
    assert "Session 1: trained (GenEnv (trained))" in page.headings
    assert "Session 2: frozen (GenEnv-Random (frozen))" in page.headings
    rows = table(page, "comparison-table")
    assert rows == md_table(md, ["session", "label"])
    assert [(r["session"], r["label"]) for r in rows] == [
        ("trained", "GenEnv (trained)"),
        ("frozen", "GenEnv-Random (frozen)"),
    ]
    for row, name in zip(rows, ("trained", "frozen"), strict=False):
        store = Store(sessions[name] / "genenv.db")
        metrics = store.epoch_metrics()
        assert row["bfcl epoch 0"] == f3(metrics[0]["heldout"]["bfcl"])
        assert row["bfcl final"] == f"{metrics[-1]['heldout']['bfcl']:.3f} (e2)"
        assert row["last mean p̂"] == f3(metrics[-1]["generated_success"])
        cal = [m["calibration_error"] for m in metrics[1:]]
        assert row["mean calibration error"] == f3(sum(cal) / len(cal))
        assert row["epochs done / target"] == "2 / 2" and row["partial epochs"] == "—"
        store.close()
    # each session keeps its own full sections, with ids prefixed per session
    assert table(page, "s2-calibration-table")[0]["mean p̂"] == f3(
        Store(sessions["frozen"] / "genenv.db").epoch_metrics()[1]["generated_success"]
    )


def test_stopped_session_marks_the_partial_epoch_and_resumed_one_records_the_discarded_attempt(sessions, tmp_path):
    partial = sessions["partial"]
    written = build_report([partial], out=tmp_path / "partial")
    page = check_self_contained(written["html"].read_text(), 5)
    md = written["md"].read_text()
    store = Store(partial / "genenv.db")
    assert [(m["epoch"], m["status"]) for m in store.epoch_metrics()] == [(0, "done"), (1, "partial")]
    (row,) = table(page, "calibration-table")
    assert row["epoch"] == "1" and row["status"].startswith("PARTIAL")
    assert page.row_classes["calibration-table"][1] == "partial"
    # the partial epoch's p-hat is rebuilt from its stored rollouts and batches
    pooled = store.db.execute(
        "select avg(success) from rollouts r join tasks t on t.id = r.task_id "
        "where r.epoch = 1 and t.batch_id in (select id from batches where epoch = 1)"
    ).fetchone()[0]
    batches = store.batches(1)
    assert batches and row["mean p̂"] == f3(pooled) and row["batches"] == str(len(batches))
    assert row["valid fraction"] == f3(
        store.count_tasks(origin="generated", epoch=1, valid=True) / store.count_tasks(origin="generated", epoch=1)
    )
    held = table(page, "heldout-table")
    assert held[1]["status"].startswith("PARTIAL") and held[1]["bfcl"] == "—"
    assert "Epoch 1 is PARTIAL (stopped or crashed mid-epoch)" in md and "PARTIAL (stopped or crashed mid-epoch)" in md
    runs = table(page, "runs-table")
    assert [r["end"] for r in runs] == ["stopped"] and runs[0]["detail"] == "stop requested"
    store.close()

    resumed = sessions["resumed"]
    written = build_report([resumed], out=tmp_path / "resumed")
    page = parse_html(written["html"].read_text())
    store = Store(resumed / "genenv.db")
    assert [(m["epoch"], m["status"]) for m in store.epoch_metrics()] == [(0, "done"), (1, "done")]
    (row,) = table(page, "calibration-table")
    assert row["status"] == "done" and row["mean p̂"] == f3(store.epoch_metrics()[1]["generated_success"])
    assert [r["end"] for r in table(page, "runs-table")] == ["stopped", "finished"]
    assert "A partial attempt at epoch 1 was discarded" in written["md"].read_text()
    time_rows = {r["phase"]: r for r in table(page, "time-table")}
    assert float(time_rows["rollout"]["seconds (all attempts)"]) >= float(time_rows["rollout"]["seconds (done epochs)"])
    store.close()


def test_crashed_and_still_running_epochs_render_as_partial(sessions, tmp_path):
    crashed = sessions["crashed"]
    written = build_report([crashed], out=tmp_path / "crashed", formats="html")
    assert set(written) == {"html"}
    page = parse_html(written["html"].read_text())
    runs = table(page, "runs-table")
    assert [r["end"] for r in runs] == ["failed"] and "scripted crash" in runs[0]["detail"]
    assert table(page, "heldout-table")[1]["status"] == "PARTIAL (stopped or crashed mid-epoch)"

    running = tmp_path / "running"
    shutil.copytree(crashed, running)
    with Store(running / "genenv.db") as store:
        store.start_epoch(1)  # as if a process were killed mid-epoch: status 'running', no end recorded
    written = build_report([running], out=tmp_path / "running-report", formats=["md"])
    md = written["md"].read_text()
    assert set(written) == {"md"} and "PARTIAL (running: no end recorded)" in md
    assert "Epoch 1 is PARTIAL (running, no end recorded)" in md


def test_cli_parser_and_errors(sessions, tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="genenv")
    add_report_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["report", str(sessions["frozen"]), "--format", "md", "--out", str(tmp_path / "o")])
    assert run_report(args) == 0
    assert (tmp_path / "o" / "report.md").exists() and not (tmp_path / "o" / "report.html").exists()
    assert f"md: {tmp_path / 'o' / 'report.md'}" in capsys.readouterr().out
    args = parser.parse_args(["report", str(tmp_path / "nowhere")])
    assert run_report(args) == 2 and "not a genenv session" in capsys.readouterr().err


def test_importing_reports_is_light():
    import subprocess
    import sys

    code = "import json, sys, genenv_engine.reports; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = {m.split(".")[0] for m in __import__("json").loads(out.stdout.strip().splitlines()[-1])}
    assert not loaded & {"matplotlib", "torch", "transformers", "textual"}


# -- sessions written through the store alone (no engine run) ---------------------------------------------------


def written_session(root: Path, name: str, **overrides) -> Session:
    """A micro session folder with a finished epoch 0 and an epoch 1 that stopped after scoring its batches."""
    session = micro(root, name, **overrides)
    store = session.store
    store.start_epoch(0)
    store.finish_epoch(0, {"heldout": {"bfcl": 0.25}, "phase_seconds": {"warm_start": 1.0}})
    store.start_epoch(1)
    return session


def test_a_partial_epoch_is_scored_against_its_benchmarks_own_alpha(tmp_path):
    from genenv_engine.reports.data import load_session

    session = written_session(tmp_path, "per-benchmark", **{"curriculum.alpha_by_benchmark": {"bfcl": 0.3}})
    p_hats = [0.25, 0.5, 0.625]
    # as an older genenv stored them: no alpha column value, so the report takes the benchmark's from the config
    session.store.upsert_batches(
        [
            {
                "id": f"e1/s{i}",
                "epoch": 1,
                "benchmark": "bfcl",
                "seed_task_id": f"s{i}",
                "n_generated": 2,
                "n_valid": 2,
                "p_hat": p,
                "r_env": 0.9,
                "in_band": i == 0,
            }
            for i, p in enumerate(p_hats)
        ]
    )
    session.store.mark_partial(1)
    session.store.close()
    (epoch,) = [e for e in load_session(session.path).epochs if e.epoch == 1]
    assert epoch.source == "database" and epoch.batch_p_hats == p_hats
    assert epoch.calibration_error == pytest.approx(sum(abs(p - 0.3) for p in p_hats) / 3)  # 0.175
    assert epoch.calibration_error != pytest.approx(sum(abs(p - 0.5) for p in p_hats) / 3)  # 0.125: global alpha
    assert epoch.r_envs == [0.9, 0.9, 0.9] and epoch.in_band_fraction == pytest.approx(1 / 3)  # as stored


def test_a_stored_batch_alpha_wins_over_the_config(tmp_path):
    from genenv_engine.reports.data import load_session

    session = written_session(tmp_path, "stored-alpha")
    session.store.upsert_batches(
        [
            {
                "id": "e1/s",
                "epoch": 1,
                "benchmark": "bfcl",
                "seed_task_id": "s",
                "n_generated": 2,
                "n_valid": 2,
                "p_hat": 0.5,
                "r_env": 0.5,
                "in_band": False,
                "alpha": 0.25,
            }
        ]
    )
    session.store.close()
    (epoch,) = [e for e in load_session(session.path).epochs if e.epoch == 1]
    assert epoch.status == "running" and epoch.calibration_error == pytest.approx(0.25)


@pytest.mark.parametrize(
    "reward, label, formula",
    [
        ("agent0", "GenEnv (trained), agent0 R_env", "max(0, 1 - 2 |p̂ - 0.5|)"),
        ("uniform", "GenEnv (trained), uniform R_env", "1"),
        ("alpha", "GenEnv (trained)", "exp(-2.0 (p̂ - 0.5)²)"),
    ],
)
def test_the_report_names_the_curriculum_reward_by_its_kind(tmp_path, reward, label, formula):
    from genenv_engine.reports.data import load_session

    session = written_session(tmp_path, reward, **{"curriculum.reward": reward})
    session.store.close()
    data = load_session(session.path)
    assert data.reward == reward and data.label == label
    written = build_report([session.path], formats=["md"])
    md = written["md"].read_text().replace("\\", "")  # markdown escapes dropped
    assert f"| simulator mode | {label} |" in md and f"R_env = {formula} per variation batch ({reward} reward" in md


def test_funnel_section_has_one_table_per_benchmark_with_the_store_funnel(sessions, tmp_path):
    path = sessions["trained"]
    written = build_report([path], out=tmp_path / "funnel")
    md, page = written["md"].read_text(), parse_html(written["html"].read_text())
    assert "Funnel" in page.headings and "Funnel: bfcl" in page.headings
    assert re.search(r"^## Funnel$", md, re.M)
    rows = table(page, "funnel-bfcl-table")
    assert rows == md_table(md, ["epoch", "drafts", "passed validator"])
    store = Store(path / "genenv.db")
    funnel = store.funnel()
    metrics = {m["epoch"]: m for m in store.epoch_metrics()}
    store.close()
    assert [r["epoch"] for r in rows] == [str(e["epoch"]) for e in funnel] == ["1", "2"]
    for row, e in zip(rows, funnel, strict=False):
        m = metrics[e["epoch"]]
        assert row["drafts"] == str(e["drafts"]) == str(m["generated"])
        assert row["kept by duplicate cap"] == str(e["valid"]) == str(m["valid"])
        assert row["passed validator"] == str(e["passed"]) and row["trained"] == str(e["trained"])
        assert row["trained"] == str(m["tasks_trained"])
        for source, n in e["trained_by_source"].items():
            assert f"{source} {n}" in row["trained by source"]
        assert row["levels: kept"] == ", ".join(f"{k} {v}" for k, v in sorted(m["difficulty_mix"].items()))
