"""No reply reaches reasoning-gym code that runs it: every dataset's scorer gets a file-writing and a
process-spawning reply in the contained worker and nothing is written or run (a control in an uncontained worker
shows the same reply does write and spawn through the scorers that evaluate text); the scan names those scorers;
the eligibility check refuses scorers that accept wrong answers and generators that do not finish, in one line;
the environment's checker and the exported rewards score through the contained worker."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

INSTALLED = importlib.util.find_spec("reasoning_gym") is not None
pytestmark = pytest.mark.skipif(not INSTALLED, reason="reasoning-gym is not installed (the `environments` extra)")

from genenv_engine.core.errors import ConfigError  # noqa: E402
from genenv_engine.environments.reasoning_gym import eligibility as elig  # noqa: E402
from genenv_engine.environments.reasoning_gym.calls import serve  # noqa: E402
from genenv_engine.environments.reasoning_gym.spec import config_of  # noqa: E402
from genenv_engine.environments.sandbox import Sandbox, SandboxError, unavailable_reason  # noqa: E402

RUN_TEXT = (
    "string_insertion",
    "spiral_matrix",
    "binary_matrix",
    "n_queens",
    "simple_integration",
    "intermediate_integration",
    "puzzle24",
    "countdown",
    "polynomial_multiplication",
)
"""The datasets whose scorers evaluate the reply (read in reasoning-gym 0.1.25's code): the control shows each one
writing and spawning when uncontained."""


def hostile_replies(folder: Path) -> dict[str, str]:
    """A reply that creates a file and one that starts a process creating another, as Python expressions that
    both ``eval`` and sympy's ``parse_expr`` run."""
    return {
        "written": f"open({str(folder / 'written')!r}, 'w')",
        "spawned": f"__import__('os').system('touch {folder / 'spawned'}')",
    }


def level_one(dataset: str) -> dict:
    from genenv_engine.environments.reasoning_gym.calls import read_curriculum

    attributes = read_curriculum(dataset)
    return config_of(attributes, [a.levels[0] for a in attributes])


def curriculum_datasets() -> list[str]:
    from reasoning_gym.factory import DATASETS, has_curriculum

    return sorted(d for d in DATASETS if has_curriculum(d))


def score_all(sandbox: Sandbox, datasets: list[str], folder: Path) -> dict[str, str]:
    """Each dataset's level-1 entry scored with the hostile replies in ``sandbox``; what went wrong per dataset
    (generation that failed or timed out is skipped: no reply reaches a scorer then)."""
    notes = {}
    for dataset in datasets:
        try:
            config = level_one(dataset)
            sandbox.call("entry", dataset, config, 0, None)
        except (SandboxError, Exception) as exc:  # noqa: BLE001 - a generator that fails at level 1
            notes[dataset] = f"no entry: {type(exc).__name__}"
            continue
        for reply in hostile_replies(folder).values():
            try:
                sandbox.call("score", dataset, config, 0, reply)
            except SandboxError as exc:
                notes[dataset] = f"score: {type(exc).__name__}"
    return notes


@pytest.mark.skipif(unavailable_reason() is not None, reason=f"no containment here: {unavailable_reason()}")
def test_no_dataset_scorer_writes_or_spawns_from_a_reply_in_the_contained_worker(tmp_path):
    contained = tmp_path / "contained"
    contained.mkdir()
    datasets = curriculum_datasets()
    assert set(RUN_TEXT) <= set(datasets) and len(datasets) > 80
    sandbox = Sandbox(serve, seconds=20, contained=True, name="rg:all")
    try:
        notes = score_all(sandbox, datasets, contained)
    finally:
        sandbox.stop()
    assert sorted(os.listdir(contained)) == []  # nothing written, nothing run
    assert not set(RUN_TEXT) & set(notes), notes  # the scorers that run text were reached


def test_the_control_an_uncontained_worker_lets_the_same_replies_write_and_spawn(tmp_path):
    """What the contained test guards against is real: outside the containment each scorer that evaluates text
    creates the file and starts the process."""
    for dataset in RUN_TEXT:
        folder = tmp_path / dataset
        folder.mkdir()
        sandbox = Sandbox(serve, seconds=20, contained=False, name=f"control:{dataset}")
        try:
            assert score_all(sandbox, [dataset], folder) == {}
        finally:
            sandbox.stop()
        assert sorted(os.listdir(folder)) == ["spawned", "written"], dataset


def test_the_scan_names_every_scorer_that_evaluates_the_reply_and_passes_the_plain_ones():
    from reasoning_gym.factory import DATASETS

    from genenv_engine.environments.reasoning_gym.scan import scan_scorer

    flagged = {d for d in curriculum_datasets() if scan_scorer(DATASETS[d][0])}
    assert set(RUN_TEXT) <= flagged
    for plain in ("basic_arithmetic", "letter_counting", "knights_knaves", "chain_sum", "word_sorting"):
        assert plain not in flagged
    assert any(
        f.startswith("eval@reasoning_gym.algorithmic.string_insertion:")
        for f in scan_scorer(DATASETS["string_insertion"][0])
    )
    assert any(
        f.startswith("sympy.parse_expr@reasoning_gym.games.puzzle24:") for f in scan_scorer(DATASETS["puzzle24"][0])
    )


@pytest.mark.skipif(unavailable_reason() is not None, reason=f"no containment here: {unavailable_reason()}")
def test_a_sandboxed_dataset_checks_through_the_contained_worker_and_so_do_the_exported_rewards(tmp_path):
    from genenv_engine.environments import get_environment, resolve_benchmarks
    from genenv_engine.environments.base import SplitSizes
    from genenv_engine.interfaces.interop.rewards import compute_score, reward

    (name,), _ = resolve_benchmarks(["rg:string_insertion"], {})
    env = get_environment(name, 0, SplitSizes(seed=4, train=4, heldout=4))
    assert (env.scoring, env.contained) == ("sandboxed", True)
    task = env.splits()["train"][0]
    assert env.check(task, task.answer).success and not env.check(task, "x").success
    replies = hostile_replies(tmp_path)
    for reply in replies.values():
        result = env.check(task, reply)
        assert not result.success and result.error_type == "wrong_answer"
    info = {
        "benchmark": name,
        "id": task.id,
        "prompt": task.prompt,
        "expected": task.expected,
        "checker": task.checker,
        "level": task.level,
    }
    for reply in replies.values():
        assert compute_score(f"genenv/{name}", reply, task.answer, info) == 0.0
    assert reward(
        list(replies.values()),
        data_source=[f"genenv/{name}"] * 2,
        reward_model=[{"ground_truth": task.answer}] * 2,
        extra_info=[info] * 2,
    ) == [0.0, 0.0]
    assert compute_score(f"genenv/{name}", task.answer, task.answer, info) == 1.0
    assert sorted(os.listdir(tmp_path)) == []


@pytest.mark.parametrize(
    "dataset, share", [("puzzle24", "another entry's different gold"), ("game_of_life_halting", "")]
)
def test_a_scorer_that_accepts_wrong_answers_is_refused_with_its_share(dataset, share):
    with pytest.raises(ConfigError) as refused:
        elig.check_eligibility(dataset, (), unavailable_reason())
    line = str(refused.value)
    assert line.count("\n") == 0 and f"rg:{dataset}: its score_answer accepts" in line and share in line
    accepted, asked = map(int, line.rsplit(" on ", 1)[1].split(" probed")[0].split(" of "))
    assert asked > 0 and accepted / asked > elig.MAX_WRONG_SHARE


def test_a_plain_dataset_is_admitted_with_the_shares_it_showed():
    verdict = elig.check_eligibility("basic_arithmetic", (), unavailable_reason())
    assert verdict.scoring == "direct" and verdict.entries == 15
    assert verdict.other_gold_share <= elig.MAX_WRONG_SHARE and verdict.constant_share <= elig.MAX_WRONG_SHARE


def test_a_scorer_that_runs_text_is_refused_in_one_line_where_nothing_contains_it():
    with pytest.raises(ConfigError) as refused:
        elig.check_eligibility(
            "string_insertion",
            ("eval@reasoning_gym.algorithmic.string_insertion:88",),
            "seccomp is not available on this platform",
        )
    assert str(refused.value).endswith(
        "rg:string_insertion: its score_answer runs the reply as code "
        "(eval@reasoning_gym.algorithmic.string_insertion:88) and the sandbox "
        "cannot contain it here (seccomp is not available on this platform)"
    )


def test_a_probe_that_does_not_finish_is_refused_in_one_line_naming_where_it_was(monkeypatch):
    """A generator that never returns (the probe bounded to 3 s here; arc_1d's loops forever on some seeds)."""
    monkeypatch.setattr(elig, "PROBE_SEEDS", (0,))
    with pytest.raises(ConfigError) as refused:
        elig.check_eligibility("sokoban", (), None, seconds=3)
    line = str(refused.value)
    assert "\n" not in line and "rg:sokoban: the eligibility probe did not finish within 3 s" in line


@pytest.mark.skipif(sys.platform != "linux", reason="the worker is forked")
def test_a_generation_past_its_time_fails_that_call_and_the_next_one_goes_on():
    """arc_1d's generator loops forever at genenv level 4 with seed 254841 (reasoning-gym 0.1.25)."""
    from genenv_engine.environments.reasoning_gym.calls import CallFailed, RgCalls, read_curriculum

    attributes = read_curriculum("arc_1d")
    config = config_of(attributes, [a.levels[3] for a in attributes])
    calls = RgCalls("arc_1d", contained=unavailable_reason() is None, seconds=2)
    try:
        with pytest.raises(CallFailed) as failed:
            calls.entry(config, 254841)
        assert failed.value.genenv_reason == "score_timeout" and failed.value.reason.startswith("timeout")
        question, gold = calls.entry(config, 1)
        assert question and calls.score(config, 1, gold) == 1.0
    finally:
        calls.stop()


def test_a_slow_entry_and_a_generation_past_its_time_are_kept_and_not_made_again(tmp_path, monkeypatch):
    """The entries kept on disk: a second environment reads them instead of calling the generator."""
    from genenv_engine.environments import get_environment, resolve_benchmarks
    from genenv_engine.environments.base import SplitSizes
    from genenv_engine.environments.reasoning_gym import entry_cache
    from genenv_engine.environments.reasoning_gym.calls import CallFailed

    monkeypatch.setenv("GENENV_CACHE", str(tmp_path))
    monkeypatch.setattr(entry_cache, "SLOW_SECONDS", 0.0)  # keep every entry
    (name,), _ = resolve_benchmarks(["rg:basic_arithmetic"], {})
    first = get_environment(name, 0, SplitSizes(seed=4, train=4, heldout=4))
    splits = {k: [(t.prompt, t.answer) for t in v] for k, v in first.splits().items()}
    config, seed = first._where(first.splits()["train"][0].expected["spec"])
    first.kept.put_failed(config, seed + 1, "timeout: no result within 20 s")
    kept = first.kept.path.read_text().splitlines()
    assert len(kept) == 13 and first.kept.path.parent.name == first.rg_version

    second = get_environment(name, 0, SplitSizes(seed=4, train=4, heldout=4))

    def no_generation(*_):
        raise AssertionError("a kept entry was generated again")

    monkeypatch.setattr(second.calls, "entry", no_generation)
    assert {k: [(t.prompt, t.answer) for t in v] for k, v in second.splits().items()} == splits
    spec = first.splits()["train"][0].expected["spec"].replace(f"seed {seed}", f"seed {seed + 1}")
    with pytest.raises(CallFailed) as failed:
        second._entry(spec)
    assert failed.value.reason == "timeout: no result within 20 s"
    with open(first.kept.path, "a", encoding="utf-8") as file:
        file.write('{"key": "cut sho')  # a line a killed process left unfinished
    assert entry_cache.EntryCache("basic_arithmetic", first.rg_version).get(config, seed) == (
        first.splits()["train"][0].prompt,
        first.splits()["train"][0].answer,
    )


def test_the_worker_forgets_its_kept_entries_once_they_have_grown_it_past_its_bound(monkeypatch):
    """arc_agi's dataset objects each hold the whole ARC corpus: kept by the thousand they exhaust the worker."""
    from genenv_engine.environments.reasoning_gym import calls

    monkeypatch.setattr(calls, "_WORKER_CACHE", {})
    monkeypatch.setattr(calls, "_WORKER_START", [])
    sizes = iter([100, 100, 100, 100 + calls.WORKER_GROWTH, 101 + calls.WORKER_GROWTH])  # the first: the start
    monkeypatch.setattr(calls, "resident_bytes", lambda: next(sizes))
    for key in "abc":
        calls._keep(key, (None, {}))
    assert sorted(calls._WORKER_CACHE) == ["a", "b", "c"]  # grown by exactly the bound: kept
    calls._keep("d", (None, {}))
    assert sorted(calls._WORKER_CACHE) == ["d"]
