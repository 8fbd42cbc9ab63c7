"""Exported tasks keep their reward: ``ability`` by what a task asks, and the veRL ``compute_score`` and TRL reward of
`genenv_engine.interfaces.interop.rewards` (written as ``reward.py`` beside an export) give every exported gold 1.0 and
a corrupted answer 0.0, scored by each benchmark's own checker; a missing import file says so."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest

from genenv_engine.interfaces import interop
from genenv_engine.interfaces.cli import main
from genenv_engine.config import load_config
from genenv_engine.environments import SplitSizes, get_environment
from genenv_engine.interfaces.interop.rewards import REWARD_MODULE, compute_score, reward
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
        "bfcl": "tool_call", "apibank": "tool_call", "alfworld": "plan", "travelplanner": "plan"}
    bamboogle = {json.loads(r["extra_info"]["expected"])["action"]: r["ability"] for r in rows
                 if r["extra_info"]["benchmark"] == "bamboogle"}
    assert bamboogle == {"answer": "answer", "search": "tool_call"}


def test_verl_compute_score_gives_every_exported_gold_1_and_a_corrupted_answer_0(export_session, tmp_path):
    path, _ = interop.export_tasks(export_session, tmp_path / "t.parquet", "parquet")
    rows = interop.read_rows(path)  # extra_info back from Parquet, as veRL hands it over
    assert len({r["data_source"] for r in rows}) == len(BENCHMARKS)
    golds = [compute_score(r["data_source"], r["reward_model"]["ground_truth"], r["reward_model"]["ground_truth"],
                           r["extra_info"]) for r in rows]
    assert golds == [1.0] * len(rows)
    wrong = [compute_score(r["data_source"], answer, r["reward_model"]["ground_truth"], r["extra_info"])
             for r, answer in corrupted(rows)]
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
    mixed = reward(["4", golds[0]], data_source=["openai/gsm8k", rows[0]["data_source"]],
                   reward_model=[{"ground_truth": "4"}, rows[0]["reward_model"]],
                   extra_info=[{}, rows[0]["extra_info"]])
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
    assert module.reward([gold], data_source=[row["data_source"]], reward_model=[row["reward_model"]],
                         extra_info=[row["extra_info"]]) == [1.0]
    interop.export_tasks(export_session, path)  # a second export beside its own reward.py: fine
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
