"""Tasks out as veRL-layout JSONL/Parquet (read back by `datasets`), and in again through the environment's
validator: wrong rows rejected with reasons, valid ones in the training pool."""

from __future__ import annotations

import importlib.util
import json

import pytest

from genenv_engine.config import load_config
from genenv_engine.environments import get_environment
from genenv_engine.interfaces import interop
from genenv_engine.interfaces.cli import main
from genenv_engine.method.loop import run
from genenv_engine.storage.session import Session
from genenv_engine.storage.store import Store, TaskFilter
from genenv_engine.testing import scripted_backends

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("datasets") is None, reason="the interop extra (datasets) is not installed"
)
"""Checked without importing datasets (seconds): collection imports every test module in every worker."""


@pytest.fixture(scope="module")
def datasets():
    """Hugging Face datasets, imported by the tests that read with it."""
    import datasets

    return datasets


@pytest.fixture(scope="module")
def session_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("interop") / "s"
    session = Session.create(load_config("micro", overrides={"epochs": 1}), folder)
    run(session, backend_factory=scripted_backends())
    session.store.close()
    return folder


def test_export_writes_every_task_in_the_verl_layout_and_parquet_reads_back_with_datasets(
    session_dir, tmp_path, datasets
):
    with Store(session_dir / "genenv.db") as store:
        total = store.count_tasks()
        generated = store.count_tasks(origin="generated")
        one = store.query_tasks(origin="generated", limit=1, order="id")[0]
    assert total > generated > 0
    path, n = interop.export_tasks(session_dir, tmp_path / "all.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert n == len(rows) == total
    row = next(r for r in rows if r["extra_info"]["id"] == one["id"])
    assert row["data_source"] == "genenv/bfcl" and row["ability"] == "tool_call"
    assert row["prompt"] == [{"role": "user", "content": one["prompt"]}]
    assert row["reward_model"] == {"style": "rule", "ground_truth": one["answer"]}
    info = row["extra_info"]
    assert (info["origin"], info["level"], info["epoch"], info["batch_id"]) == (
        "generated",
        one["level"],
        one["epoch"],
        one["batch_id"],
    )
    assert info["parent_id"] == one["parent_id"] and json.loads(info["expected"]) == one["expected"]
    assert info["p_hat"] == one["p_hat"] and info["simulator_version"] is not None

    parquet, m = interop.export_tasks(session_dir, tmp_path / "gen.parquet", "parquet", TaskFilter(origin="generated"))
    assert m == generated
    loaded = datasets.load_dataset("parquet", data_files=str(parquet), split="train")
    assert len(loaded) == generated and set(loaded.column_names) == {
        "data_source",
        "prompt",
        "ability",
        "reward_model",
        "extra_info",
    }
    back = {r["extra_info"]["id"]: r for r in loaded}
    assert back[one["id"]]["prompt"][0]["content"] == one["prompt"]
    assert back[one["id"]]["reward_model"]["ground_truth"] == one["answer"]
    assert interop.read_rows(parquet) == [r for r in rows if r["extra_info"]["origin"] == "generated"]


def test_import_validates_each_row_and_adds_only_the_valid_ones_to_the_pool(session_dir, tmp_path):
    env = get_environment("bfcl", 0)
    fresh = env.unseen_tasks(3, (2,))
    good = interop.verl_row({**fresh[0].__dict__, "expected": fresh[0].expected})
    plain = {"prompt": fresh[1].prompt, "answer": fresh[1].answer}
    wrong = {"prompt": fresh[2].prompt, "answer": fresh[1].answer}  # another task's answer
    rows = [good, plain, wrong, {"answer": "x"}, good]
    file = tmp_path / "in.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with Store(session_dir / "genenv.db") as store:
        before = store.count_tasks()
    result = interop.import_tasks(session_dir, "bfcl", file)
    assert len(result.added) == 2 and [n for n, _ in result.rejected] == [3, 4, 5]
    reasons = dict(result.rejected)
    assert reasons[4].startswith("no prompt") and reasons[5].startswith("duplicate")
    assert reasons[3] and "duplicate" not in reasons[3]
    with Store(session_dir / "genenv.db") as store:
        assert store.count_tasks() == before + 2
        added = [store.get_task(i) for i in result.added]
        assert [t.prompt for t in added] == [fresh[0].prompt, fresh[1].prompt]
        assert all(t.origin == "imported" and t.split == "train" and t.valid for t in added)
        assert set(result.added) <= {t.id for t in store.pool(["bfcl"])}  # the next epochs replay them
    with pytest.raises(ValueError, match="line 2 is not JSON"):
        bad = tmp_path / "bad.jsonl"
        bad.write_text(json.dumps(plain) + "\n{oops\n")
        interop.import_tasks(session_dir, "bfcl", bad)
    with pytest.raises(ValueError, match="not one of the session's benchmarks"):
        interop.import_tasks(session_dir, "chain", file)


def test_cli_export_and_import(session_dir, tmp_path, capsys):
    out = tmp_path / "seed.parquet"
    assert (
        main(["tasks", "export", str(session_dir), "--format", "parquet", "--origin", "seed", "--out", str(out)]) == 0
    )
    with Store(session_dir / "genenv.db") as store:
        seeds = store.count_tasks(origin="seed")
    assert capsys.readouterr().out.strip() == f"wrote {seeds} tasks to {out}"
    assert len(interop.read_rows(out)) == seeds
    assert main(["tasks", "import", str(session_dir), "bfcl", str(out)]) == 1  # all already in the session
    captured = capsys.readouterr()
    assert captured.out.startswith(f"imported 0 tasks from {seeds} rows") and "rejected: duplicate" in captured.err


def test_imported_seeds_condition_the_simulator_and_stay_out_of_the_agents_pool(tmp_path):
    config = load_config("micro", overrides={"epochs": 1, "simulator.seeds_per_epoch": 500})
    session = Session.create(config, tmp_path / "s")
    session.store.close()
    fresh = get_environment("bfcl", 0).unseen_tasks(2, (3,))
    file = tmp_path / "seeds.jsonl"
    file.write_text("".join(json.dumps({"prompt": t.prompt, "answer": t.answer}) + "\n" for t in fresh))
    result = interop.import_tasks(tmp_path / "s", "bfcl", file, split="seed")
    assert len(result.added) == 2 and not result.rejected
    session = Session.open(tmp_path / "s")
    assert [t.prompt for t in session.store.imported_seeds("bfcl")] == [t.prompt for t in fresh]
    assert session.store.imported_seeds("bfcl", (1,)) == []
    assert not set(result.added) & {t.id for t in session.store.pool(["bfcl"])}
    factory = scripted_backends()
    run(session, backend_factory=factory)
    prompts = "\n".join(factory.made["simulator"].prompts)
    assert all(t.prompt in prompts for t in fresh)  # every seed drawn (500 asked): the imported ones too
    session.store.close()
    with pytest.raises(ValueError, match="split must be one of"):
        interop.import_tasks(tmp_path / "s", "bfcl", file, split="heldout")


def test_round_trip_export_datasets_import_gives_the_same_tasks(session_dir, tmp_path, datasets):
    out, n = interop.export_tasks(
        session_dir, tmp_path / "gen.parquet", "parquet", TaskFilter(origin="generated", valid=True)
    )
    assert n > 0
    rows = list(datasets.load_dataset("parquet", data_files=str(out), split="train"))
    file = tmp_path / "rows.jsonl"
    file.write_text(
        "".join(json.dumps(r) + "\n" for r in rows)
        + json.dumps({"prompt": "\x1b[2J" * 50, "answer": "rm -rf /"})
        + "\n"
    )
    target = Session.create(load_config("micro", overrides={"epochs": 0}), tmp_path / "t")
    target.store.close()
    result = interop.import_tasks(tmp_path / "t", "bfcl", file)
    assert [n for n, _ in result.rejected] == [len(rows) + 1]  # the hostile row, with its reason
    assert result.rejected[0][1]
    assert sorted(result.added) == sorted(r["extra_info"]["id"] for r in rows)  # the same ids
    with Store(session_dir / "genenv.db") as source, Store(tmp_path / "t" / "genenv.db") as store:
        for task_id in result.added:
            a, b = source.get_task(task_id), store.get_task(task_id)
            assert (b.prompt, b.answer, b.expected, b.level) == (a.prompt, a.answer, a.expected, a.level)
        assert store.count_tasks() == n  # nothing else was written


def test_a_held_out_prompt_is_refused_even_before_the_held_out_split_is_stored(tmp_path):
    folder = tmp_path / "new"
    Session.create(load_config("micro", overrides={"epochs": 1}), folder).store.close()  # no epoch run yet
    held = get_environment("bfcl", 0).splits()["heldout"][0]
    file = tmp_path / "leak.jsonl"
    file.write_text(json.dumps({"prompt": held.prompt, "answer": held.answer}) + "\n")
    result = interop.import_tasks(folder, "bfcl", file)
    assert result.added == [] and result.rejected == [(1, "heldout_copy: the prompt of a held-out task")]
    with Store(folder / "genenv.db") as store:
        assert store.count_tasks() == 0
