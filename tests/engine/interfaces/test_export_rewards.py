"""Exported tasks keep their reward: ``ability`` by what a task asks, and the veRL ``compute_score`` and TRL reward of
`genenv_engine.interfaces.interop.rewards` (written as ``reward.py`` beside an export) give every exported gold 1.0 and
a corrupted answer 0.0, scored by each benchmark's own checker; a ``module:Class`` plugin's rows score in a fresh
process from the source they carry, an unknown benchmark fails once with one message, a family with
``structured = False`` is rewarded by its check's score, and an export leaves out rejected drafts unless asked;
a missing import file says so."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import genenv_engine.environments as environments
from genenv_engine.config import load_config
from genenv_engine.environments import SplitSizes, Task, get_environment
from genenv_engine.interfaces import interop
from genenv_engine.interfaces.cli import main
from genenv_engine.interfaces.interop import rewards
from genenv_engine.interfaces.interop.rewards import REWARD_MODULE, compute_score, compute_success, reward, success
from genenv_engine.storage.session import Session

BENCHMARKS = ("bfcl", "bamboogle", "alfworld", "apibank", "travelplanner")
SIZES = SplitSizes(seed=6, train=8, heldout=4)


@pytest.fixture(scope="module")
def export_session(tmp_path_factory) -> Path:
    """A session holding every split task of five small benchmarks (no run: the tasks are all an export reads)."""
    folder = tmp_path_factory.mktemp("rewards") / "s"
    config = load_config("micro", overrides={"epochs": 1, "benchmarks": list(BENCHMARKS)})
    session = Session.create(config, folder)
    for name in BENCHMARKS:
        splits = get_environment(name, config.seed, sizes=SIZES).splits()
        session.store.insert_tasks([t for split in ("seed", "heldout") for t in splits[split]])
    session.store.close()
    return folder


def corrupted(rows: list[dict]) -> list[tuple[dict, str]]:
    """Per row, two wrong answers: its gold with a stray word after it, and another task's gold of the same
    benchmark (one that differs)."""
    out = []
    for row in rows:
        gold = row["reward_model"]["ground_truth"]
        same = [r["reward_model"]["ground_truth"] for r in rows if r["data_source"] == row["data_source"]]
        other = next(g for g in same if g != gold)
        out += [(row, gold + " zzz"), (row, other)]
    return out


def test_ability_says_what_each_task_asks(export_session, tmp_path):
    path, n = interop.export_tasks(export_session, tmp_path / "t.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert n == len(rows) == len(BENCHMARKS) * (SIZES.seed + SIZES.heldout)
    by = Counter((r["extra_info"]["benchmark"], r["ability"]) for r in rows)
    assert {b: a for b, a in by if b in ("bfcl", "apibank", "alfworld", "travelplanner")} == {
        "bfcl": "tool_call",
        "apibank": "tool_call",
        "alfworld": "plan",
        "travelplanner": "plan",
    }
    bamboogle = {
        json.loads(r["extra_info"]["expected"])["action"]: r["ability"]
        for r in rows
        if r["extra_info"]["benchmark"] == "bamboogle"
    }
    assert bamboogle == {"answer": "answer", "search": "tool_call"}
    flags = {(r["extra_info"]["benchmark"], r["extra_info"]["source"], r["extra_info"]["structured"]) for r in rows}
    assert flags == {(b, "", b != "bamboogle") for b in BENCHMARKS}  # built in: no source; Bamboogle's F1 is graded


def test_verl_compute_score_gives_every_exported_gold_1_and_a_corrupted_answer_0(export_session, tmp_path):
    path, _ = interop.export_tasks(export_session, tmp_path / "t.parquet", "parquet")
    rows = interop.read_rows(path)  # extra_info back from Parquet, as veRL hands it over
    assert len({r["data_source"] for r in rows}) == len(BENCHMARKS)
    golds = [
        compute_score(
            r["data_source"], r["reward_model"]["ground_truth"], r["reward_model"]["ground_truth"], r["extra_info"]
        )
        for r in rows
    ]
    assert golds == [1.0] * len(rows)
    wrong = [
        compute_score(r["data_source"], answer, r["reward_model"]["ground_truth"], r["extra_info"])
        for r, answer in corrupted(rows)
    ]
    assert wrong == [0.0] * (2 * len(rows))
    with pytest.raises(ValueError, match="not a genenv task"):
        compute_score("openai/gsm8k", "4", "4", {})
    with pytest.raises(ValueError, match="extra_info"):
        compute_score(rows[0]["data_source"], "x", "x", None)


def test_trl_reward_scores_string_and_chat_completions_with_the_dataset_columns(export_session, tmp_path):
    path, _ = interop.export_tasks(export_session, tmp_path / "t.jsonl")
    rows = interop.read_rows(path)
    columns = {key: [r[key] for r in rows] for key in ("data_source", "ability", "reward_model", "extra_info")}
    golds = [r["reward_model"]["ground_truth"] for r in rows]
    prompts = [r["prompt"] for r in rows]
    assert reward(golds, prompts=prompts, **columns) == [1.0] * len(rows)
    chat = [[{"role": "assistant", "content": g}] for g in golds]
    assert reward(chat, prompts=prompts, **columns) == [1.0] * len(rows)
    pairs = corrupted(rows)
    wrong = reward([answer for _, answer in pairs], **{k: [r[k] for r, _ in pairs] for k in columns})
    assert wrong == [0.0] * len(pairs)
    mixed = reward(
        ["4", golds[0]],
        data_source=["openai/gsm8k", rows[0]["data_source"]],
        reward_model=[{"ground_truth": "4"}, rows[0]["reward_model"]],
        extra_info=[{}, rows[0]["extra_info"]],
    )
    assert mixed == [None, 1.0]  # another dataset's row is left to its own reward


def test_export_writes_reward_py_beside_the_file_and_it_scores(export_session, tmp_path):
    path, _ = interop.export_tasks(export_session, tmp_path / "out" / "t.jsonl")
    file = path.parent / "reward.py"
    assert file.read_text() == REWARD_MODULE
    spec = importlib.util.spec_from_file_location("exported_reward", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    row = interop.read_rows(path)[0]
    gold = row["reward_model"]["ground_truth"]
    assert module.compute_score(row["data_source"], gold, gold, row["extra_info"]) == 1.0
    assert module.reward(
        [gold], data_source=[row["data_source"]], reward_model=[row["reward_model"]], extra_info=[row["extra_info"]]
    ) == [1.0]
    file.write_text(rewards.REWARD_MARK + "\n(an earlier genenv's text)\n")
    interop.export_tasks(export_session, path)  # a second export beside its own (or an earlier) reward.py: fine
    assert file.read_text() == REWARD_MODULE
    foreign = tmp_path / "theirs"
    foreign.mkdir()
    (foreign / "reward.py").write_text("def compute_score(*a): return 0\n")
    with pytest.raises(ValueError, match="not genenv's reward module"):
        interop.export_tasks(export_session, foreign / "t.jsonl")
    assert sorted(p.name for p in foreign.iterdir()) == ["reward.py"]  # nothing written


def test_import_of_a_missing_file_says_no_such_file(export_session, tmp_path, capsys):
    for name in ("gone.parquet", "gone.jsonl"):
        assert main(["tasks", "import", str(export_session), "bfcl", str(tmp_path / name)]) == 2
        assert capsys.readouterr().err.strip() == f"genenv: no such file: {tmp_path / name}"


EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "countdown"
PLUGIN = '''"""Two Countdown families: LinEq rewarded by success, Near (structured = False) by closeness."""

from countdown_env import Countdown, evaluate

from genenv_engine.environments import CheckResult


class LinEq(Countdown):
    name = "lineq"


class Near(Countdown):
    name = "near"
    structured = False

    def check(self, task, response):
        try:
            total, _ = evaluate(response)
        except (ValueError, ZeroDivisionError):
            return CheckResult(False, 0.0, error_type="unparsable")
        target = task.expected["target"]
        hit = total == target
        return CheckResult(hit, max(0.0, 1.0 - abs(float(total) - target) / target),
                           error_type=None if hit else "wrong_value")
'''
PLUGIN_SIZES = SplitSizes(seed=3, train=4, heldout=2)
DRAFT = Task(
    id="lineq/gen/e1/0000",
    benchmark="lineq",
    prompt="numbers: 2 2 | target: 7",
    answer="",
    split="generated",
    origin="generated",
    epoch=1,
    valid=False,
    reason="unreachable",
)
"""A rejected draft, stored as the loop stores one: no gold."""


def halved(row: dict) -> str:
    """A reply whose value is half the row's target: Near scores it 0.5, LinEq 0 (its number is not given)."""
    return f"{json.loads(row['extra_info']['expected'])['target']} / 2"


@pytest.fixture(scope="module")
def plugin_session(tmp_path_factory):
    """A session on two ``module:Class`` plugins (its module folder on sys.path while the module's tests run),
    holding their split tasks and one rejected draft; yields the session folder and the plugin folder."""
    root = tmp_path_factory.mktemp("plugin")
    folder = root / "plugin"
    folder.mkdir()
    shutil.copy(EXAMPLE / "countdown_env.py", folder)
    (folder / "lineq_env.py").write_text(PLUGIN)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(environments, "_FOUND", {})
        mp.setattr(rewards, "_ENVIRONMENTS", {})
        mp.setattr(rewards, "_UNKNOWN", {})
        mp.syspath_prepend(str(folder))
        config = load_config("micro", overrides={"epochs": 1, "benchmarks": ["lineq_env:LinEq", "lineq_env:Near"]})
        session = Session.create(config, root / "s")
        for name in config.benchmarks:
            splits = get_environment(name, config.seed, sizes=PLUGIN_SIZES).splits()
            session.store.insert_tasks([t for split in ("seed", "heldout") for t in splits[split]])
        session.store.insert_tasks([DRAFT])
        session.store.close()
        yield root / "s", folder
        for module in ("lineq_env", "countdown_env"):
            sys.modules.pop(module, None)


def test_a_module_class_plugins_rows_score_in_a_fresh_process_with_only_its_folder_on_the_path(
    plugin_session, tmp_path
):
    session, folder = plugin_session
    path, n = interop.export_tasks(session, tmp_path / "out" / "tasks.jsonl")
    rows = interop.read_rows(path)
    assert n == len(rows) == 2 * (PLUGIN_SIZES.seed + PLUGIN_SIZES.heldout)
    assert {(r["extra_info"]["benchmark"], r["extra_info"]["source"], r["extra_info"]["structured"]) for r in rows} == {
        ("lineq", "module lineq_env:LinEq", True),
        ("near", "module lineq_env:Near", False),
    }
    script = """
import json, sys
import genenv_engine.environments as environments
from reward import compute_score, compute_success, reward
rows = [json.loads(line) for line in open("tasks.jsonl")]
known = sorted(environments._FOUND)
half = [f"{json.loads(r['extra_info']['expected'])['target']} / 2" for r in rows]
golds = [r["reward_model"]["ground_truth"] for r in rows]
args = [(r["data_source"], g, r["extra_info"]) for r, g in zip(rows, golds)]
print(json.dumps({
    "known_before": known,
    "gold": [compute_score(s, g, g, i) for s, g, i in args],
    "half": [compute_score(s, h, g, i) for (s, g, i), h in zip(args, half)],
    "half_success": [compute_success(s, h, g, i) for (s, g, i), h in zip(args, half)],
    "trl": reward(golds + half, **{k: [r[k] for r in rows] * 2 for k in ("data_source", "reward_model", "extra_info")}),
}))
"""
    env = {**os.environ, "PYTHONPATH": str(folder)}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=path.parent, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout)
    assert got["known_before"] == []  # the fresh process's registry knew neither plugin before a row named it
    kinds = [r["extra_info"]["benchmark"] for r in rows]
    assert got["gold"] == [1.0] * n
    assert got["half"] == [0.5 if k == "near" else 0.0 for k in kinds]
    assert got["half_success"] == [0.0] * n
    assert got["trl"] == got["gold"] + got["half"]


def test_an_unknown_benchmark_fails_once_with_one_message_and_is_not_looked_for_again(monkeypatch):
    monkeypatch.setattr(rewards, "_ENVIRONMENTS", {})
    monkeypatch.setattr(rewards, "_UNKNOWN", {})
    monkeypatch.setattr(environments, "_FOUND", {})
    imports, lookups = [], []
    real_import, real_lookup = importlib.import_module, environments._entry_points
    monkeypatch.setattr(importlib, "import_module", lambda name, *a: imports.append(name) or real_import(name, *a))
    monkeypatch.setattr(environments, "_entry_points", lambda: lookups.append(1) or real_lookup())
    gone = {"benchmark": "ghost", "source": "module ghost_env_nowhere:Ghost", "prompt": "Q", "expected": "{}"}
    messages = []
    for _ in range(3):
        with pytest.raises(ValueError) as err:
            compute_score("genenv/ghost", "x", "y", gone)
        messages.append(str(err.value))
    assert (
        messages
        == [
            "benchmark 'ghost' comes from module ghost_env_nowhere:Ghost, which is not importable here "
            "(No module named 'ghost_env_nowhere'); put its folder on PYTHONPATH"
        ]
        * 3
    )
    assert imports.count("ghost_env_nowhere") == 1  # the later rows fail without importing again
    with pytest.raises(ValueError, match="^benchmark 'ghost' comes from module") as err:
        reward(["x"], data_source=["genenv/ghost"], reward_model=[{"ground_truth": "y"}], extra_info=[gone])
    assert str(err.value) == messages[0] and imports.count("ghost_env_nowhere") == 1
    nameless = {"benchmark": "phantom", "prompt": "Q"}
    before = len(lookups)
    for _ in range(2):
        with pytest.raises(
            ValueError,
            match="^benchmark 'phantom' is not known here: install the package that provides it .*records no source",
        ):
            compute_score("genenv/phantom", "x", "y", nameless)
    assert len(lookups) == before + 1  # the installed entry points read once, for the first row


def test_a_family_not_structured_is_rewarded_by_its_checks_score_and_success_stays_apart(plugin_session, tmp_path):
    session, _ = plugin_session
    path, _ = interop.export_tasks(session, tmp_path / "t.parquet", "parquet")
    rows = [r for r in interop.read_rows(path) if r["extra_info"]["benchmark"] == "near"]
    assert rows and all(r["extra_info"]["structured"] is False for r in rows)
    env = get_environment("near", 0)
    replies = [halved(r) for r in rows]
    tasks = [
        rewards.task_of(r["extra_info"]["prompt"], r["reward_model"]["ground_truth"], r["extra_info"]) for r in rows
    ]
    checked = [env.check(t, reply) for t, reply in zip(tasks, replies, strict=False)]
    assert [c.score for c in checked] == [0.5] * len(rows) and not any(c.success for c in checked)
    args = [
        (r["data_source"], reply, r["reward_model"]["ground_truth"], r["extra_info"])
        for r, reply in zip(rows, replies, strict=False)
    ]
    assert [compute_score(*a) for a in args] == [0.5] * len(rows)
    assert [compute_success(*a) for a in args] == [0.0] * len(rows)
    columns = {k: [r[k] for r in rows] for k in ("data_source", "reward_model", "extra_info")}
    assert reward(replies, **columns) == [0.5] * len(rows)
    assert success(replies, **columns) == [0.0] * len(rows)
    golds = [r["reward_model"]["ground_truth"] for r in rows]
    assert reward(golds, **columns) == success(golds, **columns) == [1.0] * len(rows)


def test_an_export_leaves_out_rejected_drafts_unless_asked(plugin_session, tmp_path, capsys):
    session, _ = plugin_session
    admitted = 2 * (PLUGIN_SIZES.seed + PLUGIN_SIZES.heldout)
    out = tmp_path / "t.jsonl"
    assert main(["tasks", "export", str(session), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {admitted} tasks to {out}"
    rows = interop.read_rows(out)
    assert DRAFT.id not in {r["extra_info"]["id"] for r in rows}
    assert all(r["reward_model"]["ground_truth"] for r in rows)
    assert main(["tasks", "export", str(session), "--out", str(out), "--include-rejected"]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {admitted + 1} tasks to {out}"
    (draft,) = [r for r in interop.read_rows(out) if r["extra_info"]["id"] == DRAFT.id]
    assert (draft["extra_info"]["valid"], draft["reward_model"]["ground_truth"]) == (False, "")
    assert main(["tasks", "export", str(session), "--out", str(out), "--valid", "no"]) == 0  # asks for them
    assert [r["extra_info"]["id"] for r in interop.read_rows(out)] == [DRAFT.id]
