"""The reasoning-gym adapter (``rg:<dataset>``): three datasets of different families (arithmetic, algorithmic,
logic) keep the environment contract, specifications are read, ranged, materialized and constrained by their
grammar, ``rg:`` on an ineligible dataset stops with one line naming the condition, and a micro run on one makes
valid tasks from the simulator's specifications."""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import random
import subprocess
import sys
from collections import Counter
from importlib import metadata

import pytest

INSTALLED = importlib.util.find_spec("reasoning_gym") is not None
"""Checked without importing reasoning-gym (seconds): collection imports every test module in every worker."""
pytestmark = pytest.mark.skipif(not INSTALLED, reason="reasoning-gym is not installed (the `environments` extra)")

from genenv_engine.backends.grammar import matches, task_grammar  # noqa: E402
from genenv_engine.environments import SplitSizes, get_environment, resolve_benchmarks  # noqa: E402
from genenv_engine.environments.base import SEP  # noqa: E402
from genenv_engine.environments.reasoning_gym import adapter, calls  # noqa: E402
from genenv_engine.environments.reasoning_gym.spec import spec_text  # noqa: E402
from genenv_engine.training.tokenizer import build_byte_tokenizer  # noqa: E402

DATASETS = {"basic_arithmetic": 5, "letter_counting": 7, "knights_knaves": 4}
"""Cheap datasets of three families (arithmetic, algorithmic, logic) and their number of genenv levels."""
SIZES = SplitSizes(seed=16, train=32, heldout=16)
VERSION = metadata.version("reasoning-gym") if INSTALLED else ""


def _env(dataset: str):
    (name,), sources = resolve_benchmarks([f"rg:{dataset}"], {})
    assert name == f"rg_{dataset}" and sources == {name: f"adapter rg:{dataset} from reasoning-gym {VERSION}"}
    return get_environment(name, 0, SIZES)


def _digests() -> dict[str, str]:
    rows = {}
    for dataset in DATASETS:
        env = _env(dataset)
        rows[dataset] = [
            (split, t.id, t.prompt, t.answer, env.simulator_text(t))
            for split, tasks in sorted(env.splits().items())
            for t in tasks
        ]
    return {d: json.dumps(r) for d, r in rows.items()}


def test_splits_are_the_same_in_processes_with_other_hash_seeds():
    """The child takes this process's eligibility verdicts instead of probing each dataset again (two processes a
    dataset): the probe runs its children under fixed hash seeds 0 and 1 whatever the parent's, so its verdict is
    the same in any process by construction, and the splits built on it are what this test compares."""
    code = (
        "import json, pickle, sys\nsys.path.insert(0, sys.argv[1])\nimport test_rg_adapter as t\n"
        "from genenv_engine.environments.reasoning_gym import adapter\n"
        "adapter.eligibility = pickle.loads(sys.stdin.buffer.read()).__getitem__\n"
        "print(json.dumps(t._digests()))"
    )
    here = _digests()
    verdicts = pickle.dumps({dataset: adapter.eligibility(dataset) for dataset in DATASETS})
    hash_seed = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"  # unlike this process's (random unless set)
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code, os.path.dirname(__file__)],
        env=env,
        input=verdicts,
        capture_output=True,
        timeout=300,
        check=True,
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == here


@pytest.mark.parametrize("dataset", DATASETS)
def test_a_dataset_keeps_the_environment_contract(dataset):
    env = _env(dataset)
    splits = env.splits()
    assert env.data_version == adapter.version_number(VERSION) and env.rg_version == VERSION
    assert VERSION in env.source and dataset in env.source
    prompts = [t.prompt for tasks in splits.values() for t in tasks]
    assert len(prompts) == len(set(prompts)) == 64  # disjoint splits
    assert {t.level for t in splits["train"]} == set(range(1, DATASETS[dataset] + 1))
    tasks = [t for tasks in splits.values() for t in tasks]
    for i, task in enumerate(tasks):
        assert task.id.startswith(f"rg_{dataset}/") and task.benchmark == f"rg_{dataset}"
        assert env.check(task, task.answer).success  # the gold scores 1.0 with the dataset's own score_answer
        other = next(t.answer for t in tasks[i + 1 :] + tasks[:i] if t.answer != task.answer)
        assert not env.check(task, other).success and not env.check(task, "").success
        # the simulator's text is the specification alone: neither question nor gold
        text = env.simulator_text(task)
        assert task.prompt not in text and f"{SEP}seed " in text
        verdict = env.validate(*env.parse_generation(text), task_id="gen/1", epoch=2, generator="sim@e1")
        assert verdict.ok, verdict.reason
        made = verdict.task
        assert (made.prompt, made.answer, made.level) == (task.prompt, task.answer, task.level)
        assert (made.id, made.split, made.epoch, made.generator) == ("gen/1", "generated", 2, "sim@e1")
    pairs = env.sibling_pairs(splits["seed"], random.Random(0), 8)
    for source, sibling in pairs:
        assert sibling.parent_id == source.id and sibling.prompt != source.prompt
        assert env.validate(*env.parse_generation(env.simulator_text(sibling)), task_id="g", parent=source).ok


@pytest.mark.parametrize("dataset", DATASETS)
def test_the_grammar_accepts_every_split_specification_and_nothing_out_of_range(dataset):
    env = _env(dataset)
    tok, grammar = build_byte_tokenizer(), task_grammar(env.task_grammar())
    for task in env.splits()["seed"] + env.splits()["heldout"]:
        assert matches(tok, grammar, env.simulator_text(task)), env.simulator_text(task)
    spec = env.simulator_text(env.splits()["seed"][0])
    first = env.ATTRIBUTES[0]
    outside = spec.replace(f"{first.name}=", f"{first.name}=999999", 1)
    assert not matches(tok, grammar, outside)
    assert not matches(tok, grammar, spec.replace("seed ", "seed 0", 1))  # a leading zero
    ranges = [i for i, a in enumerate(env.ATTRIBUTES) if a.is_range]
    if ranges:  # a range's lower value above its upper one
        settings = list(env.level_settings(1))
        values = env.ATTRIBUTES[ranges[0]].values
        settings[ranges[0]] = (values[-1], values[0])
        assert not matches(tok, grammar, spec_text(env.ATTRIBUTES, settings, 5))
        settings[ranges[0]] = (values[0], values[-1])
        assert matches(tok, grammar, spec_text(env.ATTRIBUTES, settings, 5))


def test_validate_refuses_a_specification_out_of_range_with_its_reason():
    env = _env("basic_arithmetic")
    assert [a.name for a in env.ATTRIBUTES] == ["num_terms", "num_digits"]
    ok = env.validate("num_terms=3..5 num_digits=2..2", "seed 17", task_id="g")
    assert (
        ok.ok and ok.task.level == 4 and ok.task.difficulty["features"] == {"num_terms": "3..5", "num_digits": "2..2"}
    )
    data, entry = calls.materialize(
        "basic_arithmetic", {"min_terms": 3, "max_terms": 5, "min_digits": 2, "max_digits": 2}, 17
    )
    assert (ok.task.prompt, ok.task.answer) == (entry["question"], entry["answer"])  # the dataset's own generator
    assert ok.task.expected == {"spec": "num_terms=3..5 num_digits=2..2 => seed 17"}
    reasons = {
        ("num_terms=2..9 num_digits=1..2", "seed 1"): "out_of_range: num_terms=2..9 (values 2, 3, 4, 5, 6)",
        ("num_terms=5..3 num_digits=1..2", "seed 1"): "out_of_range: num_terms=5..3 (lower at most upper)",
        ("num_terms=2..3", "seed 1"): "bad_spec: 2 attributes (num_terms, num_digits), got 1 parts",
        ("num_digits=1..2 num_terms=2..3", "seed 1"): "bad_spec: expected num_terms=... first, got 'num_digits=1..2'",
        ("num_terms=2..3 num_digits=1..2", "seed 0123"): "bad_seed: expected 'seed <0-999999>', got 'seed 0123'",
        ("num_terms=2..3 num_digits=1..2", "seed 1000000"): "bad_seed: expected 'seed <0-999999>', got 'seed 1000000'",
    }
    for (prompt, answer), reason in reasons.items():
        verdict = env.validate(prompt, answer, task_id="g")
        assert (verdict.ok, verdict.reason, verdict.task, verdict.repair) == (False, reason, None, None)
    source = ok.task
    assert (
        env.validate("num_terms=3..5 num_digits=2..2", "seed 17", task_id="g", parent=source).reason == "copy_of_parent"
    )


def test_a_level_is_the_curriculum_global_level_below_it():
    from reasoning_gym.factory import create_curriculum

    env = _env("letter_counting")
    curriculum = create_curriculum("letter_counting")
    for level in env.LEVELS:
        curriculum.set_global_level(level - 1)
        config = curriculum.generate_configuration()
        assert env.level_settings(level) == ((config.min_words, config.max_words),)
    # its attribute has 8 levels, and a range that keeps two distinct ends is at its widest at global level 6
    assert env.LEVELS == tuple(range(1, 8)) and env.level_settings(7) == ((5, 19),)


def test_a_level_with_fewer_questions_than_its_share_gives_fewer_tasks():
    (name,), _ = resolve_benchmarks(["rg:chain_sum"], {})
    splits = get_environment(name, 0).splits()  # level 1 (two one-digit terms) has 200 distinct questions
    train = Counter(t.level for t in splits["train"])
    assert train[1] < 250 and all(train[level] == 250 for level in range(2, 9))
    prompts = [t.prompt for tasks in splits.values() for t in tasks]
    assert len(prompts) == len(set(prompts))


def test_the_duplicate_cap_counts_each_question_as_its_own_template():
    (name,), _ = resolve_benchmarks(["rg:count_bits"], {})
    tasks = get_environment(name, 0, SIZES).splits()["train"]  # questions that differ only in their number
    env = get_environment(name, 0, SIZES)
    assert len({env.template_key(t.prompt) for t in tasks}) == len(tasks)
    from genenv_engine.training.simulator import near_duplicate_key

    assert len({near_duplicate_key(t.prompt) for t in tasks}) == 1  # numbers masked, all one template


def test_the_sampler_draws_tasks_at_a_level_outside_the_splits():
    env = _env("knights_knaves")
    taken: set[str] = set()
    task = env.task_at(3, random.Random(0), "gen/e1/x", taken, split="generated", origin="sampler")
    assert task.level == 3 and task.prompt in taken and env.check(task, task.answer).success
    assert task.prompt not in {t.prompt for tasks in env.splits().values() for t in tasks}


@pytest.mark.parametrize(
    "spelling, line",
    [
        ("rg:acre", "rg:acre: the reasoning-gym dataset has no curriculum"),
        (
            "rg:graph_color",
            "rg:graph_color: its gold answer does not score 1.0 with its own score_answer (level 1, seed 0: 0.0)",
        ),
        ("rg:no_such_set", "rg:no_such_set: unknown reasoning-gym dataset"),
        ("rg:codeio", "rg:codeio: not deterministic: its entries differ in a process with another PYTHONHASHSEED"),
        (
            "rg:caesar_cipher",
            "rg:caesar_cipher: its generator fails at level 3 (AssertionError: rotation must be in range [1,25])",
        ),
    ],
)
@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # codeio's own generator
def test_an_ineligible_dataset_stops_the_run_with_one_line(spelling, line, tmp_path, capsys):
    from genenv_engine.interfaces.cli import main

    assert (
        main(
            [
                "run",
                "--preset",
                "micro",
                "--session",
                str(tmp_path / "s"),
                "--epochs",
                "1",
                "--quiet",
                "--benchmarks",
                spelling,
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and line in err


def test_a_generator_that_sets_the_decimal_precision_sets_it_for_itself_only():
    import decimal

    before = decimal.getcontext().prec
    for dataset in ("decimal_arithmetic", "decimal_chain_sum"):  # the first sets the precision as it generates
        (name,), _ = resolve_benchmarks([f"rg:{dataset}"], {})
        assert get_environment(name, 0, SIZES).splits()["seed"]
    assert decimal.getcontext().prec == before


def test_a_micro_run_on_a_dataset_makes_valid_tasks_from_specifications(tmp_path, capsys, monkeypatch):
    from genenv_engine import environments
    from genenv_engine.config import load_config, replace_config
    from genenv_engine.interfaces.cli import main
    from genenv_engine.storage.session import Session

    monkeypatch.setattr(environments, "_FOUND", {})  # the benchmarks this test finds stay its own
    session = tmp_path / "s"
    assert (
        main(
            [
                "run",
                "--preset",
                "micro",
                "--session",
                str(session),
                "--epochs",
                "1",
                "--quiet",
                "--benchmarks",
                "rg:basic_arithmetic",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert (
        f'rg_basic_arithmetic = "adapter rg:basic_arithmetic from reasoning-gym {VERSION}"'
        in (session / "config.toml").read_text()
    )
    opened = Session.open(session)
    tasks = [opened.store.get_task(i) for i in sorted(opened.store.task_ids())]
    opened.store.close()
    env = get_environment("rg_basic_arithmetic", 0)
    generated = [t for t in tasks if t.split == "generated"]
    valid = [t for t in generated if t.valid]
    assert generated and valid
    for task in valid:  # a specification materialized: its question and gold the generator's
        assert env.check(task, task.answer).success
        spec = env.simulator_text(task)
        again = env.validate(*env.parse_generation(spec), task_id="again")
        assert again.ok and (again.task.prompt, again.task.answer) == (task.prompt, task.answer)
    for task in generated:
        if not task.valid:
            assert task.reason  # every refusal says why
    # the session recorded another reasoning-gym release than the one installed: resume refuses in one line and
    # changes nothing; with the recorded release back it resumes
    config = session / "config.toml"
    recorded = config.read_text()
    config.write_text(recorded.replace(f"from reasoning-gym {VERSION}", "from reasoning-gym 0.0.1"))
    before = config.read_text()
    assert main(["resume", str(session), "--epochs", "2", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert err[0] == (
        f"genenv: config error in 'environments.rg_basic_arithmetic': benchmark 'rg_basic_arithmetic' "
        f"was recorded from reasoning-gym 0.0.1, but reasoning-gym {VERSION} is installed here, whose "
        "tasks may differ from the ones the session stored; install reasoning-gym==0.0.1 to go on "
        "with it, or start a new session"
    ), err[0]
    assert config.read_text() == before
    reopened = Session.open(session)
    assert [e["epoch"] for e in reopened.store.epoch_metrics()] == [0, 1]
    reopened.store.close()
    config.write_text(recorded)
    assert main(["resume", str(session), "--epochs", "2", "--quiet"]) == 0
    # a new session records the installed release, whatever release the config it came from records
    copied = load_config(None, config.parent / "config.toml")
    older = replace_config(copied, environments={"rg_basic_arithmetic": recorded_source("0.0.1")})
    fresh = Session.create(older, tmp_path / "fresh")
    fresh.store.close()
    assert f'rg_basic_arithmetic = "{recorded_source(VERSION)}"' in (tmp_path / "fresh" / "config.toml").read_text()


def recorded_source(version: str) -> str:
    return f"adapter rg:basic_arithmetic from reasoning-gym {version}"


def test_a_dataset_with_long_golds_scores_them_its_reply_bound_following_its_longest_gold():
    env = _env("binary_matrix")  # a 10 x 10 .. matrix as text: golds past the default reply bound at high levels
    golds = [t.answer for tasks in env.splits().values() for t in tasks]
    assert env.max_response >= adapter.GOLD_ROOM * 100 and env.max_response >= adapter.MAX_RESPONSE_CHARS
    longest = max(golds, key=len)
    assert len(longest) > adapter.MAX_RESPONSE_CHARS  # past the bound every dataset had before
    task = next(t for tasks in env.splits().values() for t in tasks if t.answer == longest)
    assert env.check(task, task.answer).success
    bound = max(env.max_response, adapter.GOLD_ROOM * len(task.answer))
    assert env.check(task, "0" * bound).error_type == "wrong_answer"
    assert env.check(task, "0" * (bound + 1)).error_type == "too_long"


def test_a_gold_longer_than_any_probed_one_still_scores_its_bound_following_the_task():
    env = _env("tower_of_hanoi")  # its moves double with each disk: split golds outgrow the probed ones
    tasks = [t for tasks in env.splits().values() for t in tasks]
    task = max(tasks, key=lambda t: len(t.answer))
    assert len(task.answer) > env.max_response  # past the dataset's bound from its probe
    assert env.check(task, task.answer).success
    assert env.check(task, "x" * (adapter.GOLD_ROOM * len(task.answer) + 1)).error_type == "too_long"
