"""``genenv tasks export --format verifiers`` writes a verifiers (v1) taskset package that verifiers loads by id with
no network, whose reward is the benchmark's checker (1.0 for every gold, 0.0 for a corrupted answer; the check's
score for a family with ``structured = False``, its success recorded as a metric) and whose every gold
``vf-validate`` finds valid; rejected drafts stay out unless asked for."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_export_rewards import (  # noqa: F401  (the fixtures)
    BENCHMARKS,
    DRAFT,
    PLUGIN_SIZES,
    SIZES,
    corrupted,
    export_session,
    halved,
    plugin_session,
)

from genenv_engine.interfaces.cli import main
from genenv_engine.interfaces.interop.verifiers_export import default_name, export_verifiers

NAME = "genenv_export_check"


@pytest.fixture(scope="module")
def vf():
    """verifiers' v1 API, imported by the tests that use it (a few seconds: not at collection, in every worker)."""
    return pytest.importorskip("verifiers.v1")


@pytest.fixture(scope="module")
def package(export_session, tmp_path_factory, vf) -> Path:  # noqa: F811
    """The session exported as a taskset package, its folder on ``sys.path`` while the module's tests run."""
    out = tmp_path_factory.mktemp("vf")
    assert (
        main(["tasks", "export", str(export_session), "--format", "verifiers", "--out", str(out), "--name", NAME]) == 0
    )
    sys.path.insert(0, str(out))
    yield out
    sys.path.remove(str(out))
    sys.modules.pop(NAME, None)


def scored(vf, task, reply: str, metrics: dict | None = None) -> float:
    """The reward verifiers records for a trace whose reply is ``reply`` (scored as a rollout is, no runtime); its
    metrics are put in ``metrics`` when given."""
    trace = vf.Trace(
        task=vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
        agent=vf.AgentInfo(config=vf.AgentConfig(), name="check", trainable=False),
        root_reply=reply,
    )
    asyncio.run(task.score(trace))
    assert set(trace.rewards) == {"correct"} and set(trace.metrics) == {"success"}
    if metrics is not None:
        metrics.update(trace.metrics)
    return trace.reward


def test_the_package_loads_by_id_and_scores_gold_1_and_corrupted_0(package, vf):
    taskset = vf.load_taskset(vf.TasksetConfig(id=NAME))
    module = sys.modules[NAME]
    assert module.__all__ == ["GenenvTaskset"] and type(taskset) is module.GenenvTaskset
    tasks = list(taskset)
    rows = [json.loads(line) for line in (package / NAME / "tasks.jsonl").read_text().splitlines()]
    assert len(tasks) == len(rows) == len(BENCHMARKS) * (SIZES.seed + SIZES.heldout)
    assert [t.data.id for t in tasks] == [r["extra_info"]["id"] for r in rows]
    assert [t.data.prompt for t in tasks] == [r["prompt"][0]["content"] for r in rows]
    assert [scored(vf, t, t.data.answer) for t in tasks] == [1.0] * len(tasks)
    assert [asyncio.run(t.validate(None)) for t in tasks] == [True] * len(tasks)
    pairs = corrupted(rows)
    by_id = {t.data.id: t for t in tasks}
    assert [scored(vf, by_id[r["extra_info"]["id"]], answer) for r, answer in pairs] == [0.0] * len(pairs)


def test_vf_validate_finds_every_gold_valid(package, tmp_path):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(package), os.environ.get("PYTHONPATH", "")]),
        "HF_HUB_OFFLINE": "1",
    }
    cli = Path(sys.executable).with_name("vf-validate")
    done = subprocess.run(
        [str(cli), NAME, "--runtime.type", "subprocess"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (summary,) = tmp_path.glob("outputs/*/summary.json")
    result = json.loads(summary.read_text())
    total = len(BENCHMARKS) * (SIZES.seed + SIZES.heldout)
    assert (result["total"], result["outcomes"]["valid"], result["valid_rate"]) == (total, total, 1.0)
    assert result["checks"]["gold"]["valid"] == result["checks"]["noop"]["valid"] == total


def test_export_refuses_a_foreign_folder_and_a_bad_name(export_session, tmp_path):  # noqa: F811
    (tmp_path / "mine").mkdir()
    with pytest.raises(ValueError, match="not a taskset genenv wrote"):
        export_verifiers(export_session, tmp_path, "mine")
    with pytest.raises(ValueError, match="lowercase letters"):
        export_verifiers(export_session, tmp_path, "My-Tasks")
    folder, n = export_verifiers(export_session, tmp_path, "again")
    assert export_verifiers(export_session, tmp_path, "again") == (folder, n)  # its own package: rewritten
    assert default_name(export_session) == "genenv_s"
    assert main(["tasks", "export", str(export_session), "--format", "verifiers"]) == 2  # --out is required


def test_a_family_not_structured_gets_its_score_and_a_rejected_draft_stays_out(plugin_session, tmp_path, vf):  # noqa: F811
    session, _ = plugin_session
    name = "genenv_plugin_check"
    folder, n = export_verifiers(session, tmp_path, name)
    assert n == 2 * (PLUGIN_SIZES.seed + PLUGIN_SIZES.heldout)  # the rejected draft left out
    rows = [json.loads(line) for line in (folder / "tasks.jsonl").read_text().splitlines()]
    assert DRAFT.id not in {r["extra_info"]["id"] for r in rows}
    sys.path.insert(0, str(tmp_path))
    try:
        tasks = {t.data.id: t for t in vf.load_taskset(vf.TasksetConfig(id=name))}
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(name, None)
    assert all(asyncio.run(t.validate(None)) for t in tasks.values())
    for row in rows:
        task, metrics = tasks[row["extra_info"]["id"]], {}
        want = 0.5 if row["extra_info"]["benchmark"] == "near" else 0.0
        assert (scored(vf, task, halved(row), metrics), metrics) == (want, {"success": 0.0})
        assert (scored(vf, task, task.data.answer, metrics), metrics) == (1.0, {"success": 1.0})
    assert export_verifiers(session, tmp_path, name, include_rejected=True)[1] == n + 1
