"""Tests for the chain benchmark: gold chains recomputed independently, the ``chain_exact`` checker, the
strict validator and its reasons, seeded splits over levels 1-8, the distractor and hint knobs, prompt
length, siblings, and the shared environment contract (imported from ``test_env_contract``; its level-quarter
split test is the 4-level ladder's, so its 8-level counterpart is here).
"""

from __future__ import annotations

import random
import re
import time
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from test_env_contract import (  # the shared contract, run on this environment
    test_describe_and_bucket,
    test_every_gold_passes_and_revalidates,
    test_sibling_pairs,
    test_sibling_pairs_need_a_source,
    test_splits_deterministic_and_seeded,
    test_splits_disjoint_by_prompt,
    test_validator_labels_generated_tasks,
    test_validator_rejects_copy_of_parent,
    test_validator_rejects_too_long,
    test_validator_through_simulator_text,
)
from test_fuzz_validators import EXAMPLES, simulator_outputs

from genenv_engine.core.errors import ConfigError
from genenv_engine.core.limits import MAX_RESPONSE_CHARS as LIMIT_CHARS
from genenv_engine.core.limits import check_response
from genenv_engine.environments import BENCHMARKS, base, get_environment
from genenv_engine.environments.base import SplitSizes
from genenv_engine.environments.chain import ChainEnv
from genenv_engine.environments.chain.grammar import MAX_FUNCTIONS, PromptError, Rule, read_prompt, render_prompt
from genenv_engine.environments.chain.mini import (
    CHECKER,
    ERROR_TYPES,
    MAX_ANSWER_CHARS,
    MAX_PROMPT_CHARS,
    generate_draft,
)
from genenv_engine.training.simulator import parse_and_validate

CONTRACT = (
    test_describe_and_bucket,
    test_every_gold_passes_and_revalidates,
    test_sibling_pairs,
    test_sibling_pairs_need_a_source,
    test_splits_deterministic_and_seeded,
    test_splits_disjoint_by_prompt,
    test_validator_labels_generated_tasks,
    test_validator_rejects_copy_of_parent,
    test_validator_rejects_too_long,
    test_validator_through_simulator_text,
)
SIZES = SplitSizes(seed=32, train=160, heldout=48)
LEVELS = tuple(range(1, 9))
K8_BOUND = 140
"""Longest prompt of a default split task at k = 8 (the grammar's worst case is under MAX_PROMPT_CHARS)."""


class Case:
    cls = ChainEnv
    sizes = SIZES
    checker = CHECKER
    n_siblings = 40

    @staticmethod
    def family(task):
        return task.prompt.split(" | ")[2]  # a sibling keeps the source's function table (the third section)


@pytest.fixture(scope="module")
def case() -> Case:
    return Case()


@pytest.fixture(scope="module")
def env() -> ChainEnv:
    return ChainEnv(seed=0, sizes=SIZES)


@pytest.fixture(scope="module")
def tasks(env):
    return [t for ts in env.splits().values() for t in ts]


# ---------------------------------------------------------------- an independent reading of a prompt

OPS = {"+": lambda x, c: x + c, "-": lambda x, c: x - c, "*": lambda x, c: x * c, "%": lambda x, c: x % c}


def recompute(prompt: str) -> list[tuple[str, int, int]]:
    """The gold chain of a prompt, read and run here without the benchmark's grammar."""
    parts = [p for p in prompt.split(" | ") if not p.startswith("hint ")]
    sections = {kind: next((p for p in parts if p.startswith(kind)), None) for kind in ("apply ", "start ")}
    defs = next((p for p in parts if not p.startswith(("apply", "start "))), None)
    assert sections["apply "] and sections["start "] and defs, prompt
    names, start = sections["apply "][len("apply ") :], sections["start "][len("start ") :]
    assert re.fullmatch(r"[a-z ]+", names) and re.fullmatch(r"\d+", start), prompt
    rules = {m[0]: (m[1], int(m[2])) for m in re.findall(r"([a-z])\(x\)=x([-+*%])(\d)", defs)}
    assert len(rules) == len(defs.split(" ")), prompt
    x, chain = int(start), []
    for name in names.split(" "):
        op, c = rules[name]
        y = OPS[op](x, c)
        chain.append((name, x, y))
        x = y
    return chain


def written(chain) -> str:
    return "; ".join(f"{n}({a})={r}" for n, a, r in chain)


def hand(prompt: str) -> str:
    """A hand-written prompt's gold answer, computed here."""
    return written(recompute(prompt))


# ---------------------------------------------------------------- gold


def test_every_gold_chain_is_right_by_independent_recomputation(tasks):
    for task in tasks:
        chain = recompute(task.prompt)
        assert task.answer == written(chain)
        assert [(c["name"], c["arg"], c["result"]) for c in task.expected["calls"]] == chain
        features = task.difficulty["features"]
        assert len(chain) == features["k"] == task.level + features["hint"]  # the level: calls left to compute
        values = [chain[0][1]] + [r for _, _, r in chain]
        assert all(0 <= v <= 99 for v in values)
        assert all(a != r for _, a, r in chain)  # the generator never writes an identity step
        names = set(re.findall(r"([a-z])\(x\)", task.prompt.split(" | ")[2]))
        assert task.difficulty["features"]["distractors"] == len(names - {n for n, _, _ in chain})


def test_gold_of_a_hand_written_prompt():
    verdict = ChainEnv().validate(
        "f(x)=x+3 g(x)=x*2 h(x)=x-4 m(x)=x%7 | start 5 | apply f g h m",
        "f(5)=8; g(8)=16; h(16)=12; m(12)=5",
        task_id="t",
    )
    assert verdict.ok, verdict.reason
    assert verdict.task.expected["calls"][-1] == {"name": "m", "arg": 12, "result": 5}
    assert verdict.task.difficulty == {
        "level": 4,
        "features": {"k": 4, "functions": 4, "distractors": 0, "hint": 0, "max_value": 16},
    }
    assert verdict.task.tools[0]["description"] == "f(x)=x+3"


# ---------------------------------------------------------------- checker


@pytest.fixture(scope="module")
def k4(env):
    return next(t for t in env.splits()["heldout"] if t.level == 4)  # hint-free: a chain of four calls


def calls_of(task) -> list[str]:
    """The gold's calls without their brackets (a bracket may be left out)."""
    return [call.split(" [")[0] for call in task.answer.split("; ")]


def test_checker_accepts_the_gold_and_tolerates_whitespace(env, k4):
    gold = env.check(k4, k4.answer)
    assert (gold.success, gold.score, gold.error_type, gold.sub_scores) == (
        True,
        1.0,
        None,
        {"prefix": 1.0, "final": 1.0},
    )
    spaced = " ; ".join(c.replace("(", " ( ").replace("=", " = ") for c in calls_of(k4)) + " ;\n"
    assert env.check(k4, spaced).success
    assert env.check(k4, "\n" + k4.answer.replace("; ", ";") + "  ").success


def wrong(env, task, response):
    result = env.check(task, response)
    assert not result.success and result.score < 1.0 and env.reward(result) == 0.0
    return result


def test_checker_refuses_wrong_chains(env, k4):
    calls = calls_of(k4)
    name, arg, res = re.fullmatch(r"([a-z])\((\d+)\)=(\d+)", calls[1]).groups()
    other_name = next(n for n in "abcdefghijklmnopqrstuvwyz" if n != name)
    cases = {
        "wrong intermediate value": (calls[:1] + [f"{name}({arg})={int(res) + 1}"] + calls[2:], "wrong_value"),
        "wrong argument": (calls[:1] + [f"{name}({int(arg) + 1})={res}"] + calls[2:], "wrong_arg"),
        "wrong name": (calls[:1] + [f"{other_name}({arg})={res}"] + calls[2:], "wrong_call"),
        "missing last call": (calls[:-1], "missing_calls"),
        "correct but truncated": (calls[:2], "missing_calls"),
        "extra call": (calls + [calls[-1]], "extra_calls"),
    }
    for label, (response, error) in cases.items():
        result = wrong(env, k4, "; ".join(response))
        assert result.error_type == error, label
    assert wrong(env, k4, "; ".join(calls[:2])).sub_scores["prefix"] == 0.5
    assert wrong(env, k4, "; ".join(calls[:2])).score == 0.5
    assert wrong(env, k4, "; ".join(calls + calls[-1:])).score == 4 / 5
    assert wrong(env, k4, "; ".join(calls[:1] + [f"{name}({arg})={int(res) + 1}"] + calls[2:])).score == 1 / 4


def test_checker_refuses_garbage_and_only_the_final_value(env, k4):
    final = calls_of(k4)[-1].split("=")[-1]
    for garbage in (
        "",
        "   ",
        final,
        f"={final}",
        "f(3)=6;;g(6)=12",
        "F(3)=6",
        "f(3)=6, g(6)=12",
        "f(x)=x+3",
        "__import__('os').system('echo hi')",
        "f(1e3)=5",
        "f(" + "9" * 40 + ")=1",
        "\x00",
        k4.prompt,
    ):
        assert wrong(env, k4, garbage).error_type == "parse_error", garbage
    assert wrong(env, k4, k4.answer + " " * 1000).error_type == "too_long"
    result = wrong(env, k4, calls_of(k4)[-1])  # only the last call, right by itself
    assert result.error_type in ("wrong_call", "wrong_arg") and result.sub_scores["final"] == 1.0
    assert set(ERROR_TYPES) == {
        "parse_error",
        "too_long",
        "wrong_call",
        "wrong_arg",
        "wrong_value",
        "wrong_rest",
        "missing_calls",
        "extra_calls",
    }


def test_the_engine_size_limit_applies_before_the_checker(env, k4):
    assert check_response(env, k4, k4.answer) == env.check(k4, k4.answer)
    result = check_response(env, k4, k4.answer + "(" * LIMIT_CHARS)
    assert (result.success, result.error_type) == (False, "too_long")


# ---------------------------------------------------------------- validator

GOOD = "f(x)=x+3 g(x)=x*2 h(x)=x-4 q(x)=x%5 | start 5 | apply f g h"


@pytest.mark.parametrize(
    "prompt, reason",
    [
        ("f(x)=x**2 | start 5 | apply f", "bad_rule"),
        ("f(x)=x^2 | start 5 | apply f", "bad_rule"),
        ("f(x)=__import__('os') | start 5 | apply f", "bad_rule"),
        ("__import__('os') | start 5 | apply f", "bad_definition"),
        ("f(x)=x+3  g(x)=x*2 | start 5 | apply f", "bad_definition"),
        ("x(x)=x+3 | start 5 | apply x", "bad_definition"),
        ("f(y)=y+3 | start 5 | apply f", "bad_definition"),
        ("f(x)=x+10 | start 5 | apply f", "bad_rule"),
        ("f(x)=x*1 | start 5 | apply f", "bad_constant"),
        ("f(x)=x%1 | start 5 | apply f", "bad_constant"),
        ("f(x)=x+3 f(x)=x*2 | start 5 | apply f", "duplicate_function"),
        (" ".join(f"{n}(x)=x+1" for n in "abcdefghijk") + " | start 5 | apply f", "too_many_functions"),
        ("f(x)=x+3 g(x)=x*2 | start 5 | apply f z", "unknown_function"),
        ("f(x)=x+3 | start 5 | apply", "bad_k"),
        ("f(x)=x+3 | start 5 | apply ", "bad_k"),
        ("f(x)=x+1 | start 5 | apply " + " ".join("f" * 9), "bad_k"),
        ("f(x)=x+3 | start 05 | apply f", "bad_start"),
        ("f(x)=x+3 | start 100 | apply f", "bad_start"),
        ("f(x)=x+3 | start -1 | apply f", "bad_start"),
        ("g(x)=x*3 | start 40 | apply g", "value_out_of_range"),
        ("h(x)=x-4 | start 2 | apply h", "value_out_of_range"),
        ("f(x)=x+3 | start 5 | apply f f | hint f(5)=9", "bad_hint"),
        ("f(x)=x+3 | start 5 | apply f f | hint f(5)=8; f(8)=11", "bad_hint"),
        ("f(x)=x+3 | start 5 | apply f f | hint f(5) = 8", "bad_hint"),
        ("f(x)=x+3 | start 5 | apply f f | tip f(5)=8", "bad_format"),
        ("f(x)=x+3 | x=5 | apply f", "bad_format"),
        ("f(x)=x+3 | start 5 | apply f | hint f(5)=8 | more", "bad_format"),
    ],
)
def test_validator_rejects_malformed_prompts_with_a_reason(prompt, reason):
    env = ChainEnv()
    try:
        answer = hand(prompt)
    except (AssertionError, KeyError, ValueError):
        answer = "f(5)=8"
    verdict = env.validate(prompt, answer, task_id="gen/x")
    assert not verdict.ok and verdict.task is None
    assert verdict.reason.split(":")[0] == reason, verdict.reason


def test_validator_accepts_and_recomputes(env):
    verdict = env.validate(GOOD, "f(5)=8; g(8)=16; h(16)=12", task_id="gen/1")
    assert verdict.ok and verdict.task.answer == hand(GOOD) == "f(5)=8; g(8)=16; h(16)=12"
    assert verdict.task.difficulty["features"]["distractors"] == 1
    # any spacing the checker tolerates is accepted, the stored gold is the canonical one
    loose = env.validate(GOOD, "f(5) = 8 ;g(8)=16;  h(16)=12", task_id="gen/2")
    assert loose.ok and loose.task.answer == "f(5)=8; g(8)=16; h(16)=12"
    # the brackets may be left out, but a written one must name the functions still to apply
    assert env.validate(GOOD, "f(5)=8 [g  h]; g(8)=16 [h] ;h(16)=12 []", task_id="gen/2b").ok
    for answer in (
        "f(5)=8 [h]; g(8)=16 [h]; h(16)=12 []",
        "f(5)=8 [g h]; g(8)=16 []; h(16)=12 []",
        "f(5)=8 [g h]; g(8)=16 [h]; h(16)=12 [g]",
    ):
        assert env.validate(GOOD, answer, task_id="gen/2c").reason == "answer_mismatch: wrong_rest", answer
    for answer, error in (
        ("f(5)=8; g(8)=16; h(16)=13", "wrong_value"),
        ("f(5)=8; g(8)=16", "missing_calls"),
        ("f(5)=8; q(8)=3; h(3)=-1", "wrong_call"),
        ("12", "parse_error"),
    ):
        verdict = env.validate(GOOD, answer, task_id="gen/3")
        assert (verdict.ok, verdict.reason) == (False, f"answer_mismatch: {error}")
    hinted = env.validate(GOOD + " | hint f(5)=8; g(8)=16", "f(5)=8; g(8)=16; h(16)=12", task_id="gen/4")
    assert hinted.ok and hinted.task.difficulty["features"]["hint"] == 2


def test_validator_rejects_oversize_text(env):
    assert env.validate(GOOD + " " * (MAX_PROMPT_CHARS - len(GOOD) + 1), hand(GOOD), task_id="g").reason == "too_long"
    assert env.validate(GOOD, hand(GOOD) + " " * MAX_ANSWER_CHARS, task_id="g").reason == "too_long"
    assert env.validate(GOOD + " " * (MAX_PROMPT_CHARS - len(GOOD)), hand(GOOD), task_id="g").reason != "too_long"


def test_validator_re_validates_a_generated_task(env, k4):
    verdict = env.validate(k4.prompt, k4.answer, task_id="gen/e1/0001", epoch=1, generator="sim@e1")
    assert verdict.ok and (verdict.task.answer, verdict.task.expected) == (k4.answer, k4.expected)
    assert verdict.task.answer == written(recompute(k4.prompt))


def test_the_grammars_largest_prompt_fits_the_caps():
    rules = [Rule(n, "%", 9) for n in "abcdefghij"]
    rules[0] = Rule("a", "+", 1)
    prompt = render_prompt(rules, 90, ["a"] * 8, hint=7)
    draft = read_prompt(prompt)
    assert (draft.level, draft.features["k"], len(rules)) == (1, 8, MAX_FUNCTIONS)  # 8 calls, 7 of them given
    assert len(prompt) <= MAX_PROMPT_CHARS and len(draft.answer) <= MAX_ANSWER_CHARS
    assert ChainEnv().validate(prompt, draft.answer, task_id="g").ok
    with pytest.raises(PromptError, match="value_out_of_range"):
        read_prompt(render_prompt(rules, 92, ["a"] * 8))  # 92 + 8 > 99


# ---------------------------------------------------------------- splits


def test_splits_sizes_levels_and_ids(env):
    splits = env.splits()
    assert {k: len(v) for k, v in splits.items()} == {"seed": 32, "train": 160, "heldout": 48}
    for name, tasks in splits.items():
        counts = Counter(t.level for t in tasks)
        assert counts == {lv: len(tasks) // 8 for lv in LEVELS}, name
        assert [t.id for t in tasks] == [f"chain/{name}/{i:05d}" for i in range(len(tasks))]
        assert all(
            (t.benchmark, t.split, t.origin, t.checker, t.granularity, env.bucket(t))
            == ("chain", name, "seed", CHECKER, "step", f"L{t.level}")
            for t in tasks
        )


def test_splits_are_seeded(monkeypatch):
    """The same seed makes the same splits in a fresh process (the per-process cache emptied between the two), another
    seed different ones."""
    sizes = SplitSizes(seed=40, train=800, heldout=80)
    monkeypatch.setattr(base, "_GENERATED_SPLITS", {})
    sa = ChainEnv(seed=0, sizes=sizes).splits()
    monkeypatch.setattr(base, "_GENERATED_SPLITS", {})
    sb, sc = ChainEnv(seed=0, sizes=sizes).splits(), ChainEnv(seed=1, sizes=sizes).splits()
    for name in sa:
        assert sa[name] is not sb[name] and len(sa[name]) == len(sb[name]) > 0
        assert [t.prompt for t in sa[name]] == [t.prompt for t in sb[name]]
        assert [t.answer for t in sa[name]] == [t.answer for t in sb[name]]
        same = sum(x.prompt == y.prompt for x, y in zip(sa[name], sc[name], strict=False))
        assert same <= len(sa[name]) // 20, (name, same)


def test_default_splits_cover_every_level_and_hint_the_train_chains():
    sa = ChainEnv(seed=0).splits()
    assert {k: len(v) for k, v in sa.items()} == {"heldout": 400, "train": 32000, "seed": 200}
    assert Counter(t.level for t in sa["heldout"]) == {lv: 50 for lv in LEVELS}
    prompts = [t.prompt for ts in sa.values() for t in ts]
    assert len(set(prompts)) == len(prompts)
    hint_free = [t for name in ("heldout",) for t in sa[name]]
    assert all(t.difficulty["features"]["hint"] == 0 and " | hint " not in t.prompt for t in hint_free)
    assert all(t.level == t.difficulty["features"]["k"] for t in hint_free)  # held-out: the level is the chain
    for name in ("train", "seed"):  # nine in ten hinted below level 8, continuing a chain of level + j calls
        below = [t for t in sa[name] if t.level < 8]
        hinted = [t for t in below if t.difficulty["features"]["hint"]]
        assert 0.85 < len(hinted) / len(below) < 0.95, name
        assert all(t.difficulty["features"]["k"] == t.level + t.difficulty["features"]["hint"] <= 8 for t in hinted)
    short = [t for t in sa["train"] if t.level <= 2]  # what the chain preset's warm start sees: chains of 1-8 calls
    assert {t.difficulty["features"]["k"] for t in short} == set(LEVELS)
    assert set(Counter(t.difficulty["features"]["distractors"] for t in sa["train"])) == {0, 1, 2}


def test_unseen_tasks_cover_levels_one_to_eight_and_are_new(env):
    unseen = env.unseen_tasks(16)
    assert Counter(t.level for t in unseen) == {lv: 2 for lv in LEVELS}
    assert not {t.prompt for t in unseen} & {t.prompt for ts in env.splits().values() for t in ts}
    assert [t.prompt for t in unseen] == [t.prompt for t in ChainEnv(seed=0, sizes=SIZES).unseen_tasks(16)]
    assert {t.level for t in env.unseen_tasks(6, (7, 8))} == {7, 8}


# ---------------------------------------------------------------- knobs and prompt length


def defs_of(prompt: str) -> list[str]:
    return prompt.split(" | ")[2].split(" ")


def test_distractor_knob_adds_unused_definitions():
    for level in (1, 4, 8):
        for d in (0, 1, 2):
            draft = generate_draft(level, random.Random(level * 10 + d), distractors=d)
            used = set(draft.order)
            names = [x[0] for x in defs_of(draft.prompt)]
            assert len(names) == len(used) + d and draft.features["distractors"] == d
            assert sum(n not in used for n in names) == d
    with pytest.raises(ValueError):
        generate_draft(3, random.Random(0), distractors=3)


def test_hint_knob_writes_the_first_j_calls_of_a_longer_chain():
    for level, j in ((1, 1), (2, 6), (5, 2), (1, 7)):
        plain = generate_draft(level + j, random.Random(7), hint=0)
        hinted = generate_draft(level, random.Random(7), hint=j)  # level + j calls, the first j given
        assert plain.prompt.count(" | ") == 2 and "hint" not in plain.prompt
        assert hinted.prompt == plain.prompt + " | hint " + "; ".join(calls_of(plain)[:j])  # same rng, same chain
        assert hinted.answer == plain.answer and hinted.features["hint"] == j
        assert (hinted.level, hinted.features["k"], plain.level) == (level, level + j, level + j)
    for level, j in ((8, 1), (4, 5), (4, -1)):
        with pytest.raises(ValueError):
            generate_draft(level, random.Random(0), hint=j)


def test_hint_rate_puts_hints_in_the_splits():
    class HalfHinted(ChainEnv):
        HINT_RATE = 0.5

    below = [
        t for t in HalfHinted(seed=0, sizes=SplitSizes(seed=8, train=800, heldout=8)).splits()["train"] if t.level < 8
    ]
    assert 0.4 < sum(t.difficulty["features"]["hint"] > 0 for t in below) / len(below) < 0.6

    class Hinted(ChainEnv):
        HINT_RATE = 1.0

    env = Hinted(seed=0, sizes=SIZES)
    for task in env.splits()["train"]:
        j = task.difficulty["features"]["hint"]
        assert (j == 0) if task.level == 8 else (1 <= j <= 8 - task.level)
        if j:
            assert task.prompt.endswith(" | hint " + "; ".join(calls_of(task)[:j]))
    hint_free = env.splits()["heldout"] + env.unseen_tasks(16)
    hint_free += [env.task_at(3, random.Random(i), f"gen/{i}", set()) for i in range(8)]
    assert all(t.difficulty["features"]["hint"] == 0 for t in hint_free)


def test_prompts_stay_short(tasks):
    k8 = [t for t in ChainEnv(seed=0).splits()["heldout"] if t.level == 8]
    assert max(len(t.prompt) for t in k8) <= K8_BOUND
    assert max(len(t.answer) for t in k8) <= MAX_ANSWER_CHARS
    assert all(len(t.prompt) <= MAX_PROMPT_CHARS for t in tasks)
    worst = generate_draft(1, random.Random(3), distractors=2, hint=7)
    assert len(worst.prompt) <= MAX_PROMPT_CHARS


# ---------------------------------------------------------------- siblings


def test_siblings_keep_the_table_and_move_one_call(env):
    pairs = env.sibling_pairs(env.splits()["seed"], random.Random(2), 200)
    moves = Counter()
    for source, sibling in pairs:
        a, b = read_prompt(source.prompt), read_prompt(sibling.prompt)
        assert a.rules == b.rules
        assert b.hint == min(a.hint, len(b.order) - 1)
        if len(b.order) == len(a.order) + 1:
            assert (b.start, b.order[:-1]) == (a.start, a.order)
            moves["up"] += 1
        elif len(b.order) == len(a.order) - 1:
            assert (b.start, b.order) == (a.start, a.order[:-1])
            moves["down"] += 1
        else:
            assert len(b.order) == len(a.order) and (b.start, b.order) != (a.start, a.order)
            moves["same"] += 1
        assert sibling.answer == written(recompute(sibling.prompt))
    assert set(moves) == {"up", "down", "same"}


# ---------------------------------------------------------------- registry and fuzzing


def test_registered_and_built_by_name():
    assert BENCHMARKS["chain"] == "genenv_engine.environments.chain:ChainEnv"
    env = get_environment("chain", 3, SIZES)
    assert isinstance(env, ChainEnv) and env.seed == 3 and len(env.splits()["heldout"]) == 48
    with pytest.raises(ConfigError, match="data_dirs.chain"):
        get_environment("chain", 0, data_dir="/tmp")


def test_simulator_outputs_never_crash_and_every_rejection_has_a_reason():
    env = get_environment("chain", 0)
    seed = env.splits()["seed"][0]
    counts = Counter()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(simulator_outputs("chain"))
    def fuzz(case):
        text, style = case
        t0 = time.process_time()
        task = parse_and_validate(env, text, task_id="fuzz/0", seed=seed, epoch=1, generator="fuzz", style=style)
        assert time.process_time() - t0 < 1.0
        if task.valid:
            counts["valid"] += 1
            assert env.check(task, task.answer).success
            assert task.answer == written(recompute(task.prompt))
        else:
            counts["invalid"] += 1
            assert task.reason.strip(), text
        result = env.check(seed, text)  # the raw text as an agent response
        assert result.error_type in (None, *ERROR_TYPES) and 0.0 <= result.score <= 1.0

    fuzz()
    assert counts["valid"] + counts["invalid"] >= min(EXAMPLES, 50)
    assert counts["valid"] > 0 and counts["invalid"] > 0, counts


def test_a_new_data_version_gives_a_new_warm_start_key(monkeypatch):
    """A warm start trained on an earlier generator's tasks is not reused: the key holds the data version."""
    from genenv_engine.config import load_config
    from genenv_engine.training.warmstart import cache_key

    config = load_config("chain")
    now = cache_key(config)
    monkeypatch.setattr(ChainEnv, "data_version", ChainEnv.data_version + 1)
    assert cache_key(config) != now
    monkeypatch.setattr(ChainEnv, "data_version", 1)  # version 1 joins no key: other benchmarks' keys stay as they were
    assert cache_key(config) == cache_key(load_config("chain")) != now


def test_each_function_of_a_generated_chain_is_applied_once(tasks):
    """The next name of a chain is the one after the last in its apply list, at any length."""
    for task in tasks:
        assert task.prompt.startswith("apply "), task.prompt  # the apply section first
        order = task.prompt.split(" | ")[0][len("apply ") :].split(" ")
        assert len(set(order)) == len(order) == task.difficulty["features"]["k"], task.prompt


def test_warm_start_prefixes_are_hint_free_long_chains_cut_after_one_or_two_calls(monkeypatch):
    monkeypatch.setattr(ChainEnv, "PREFIX_PAIRS", 60)
    fresh = ChainEnv(0, SIZES)
    pairs = fresh.warm_start_prefixes()
    assert len(pairs) == 60 and Counter(t.level for t, _ in pairs) == Counter({k: 10 for k in range(3, 9)})
    split_prompts = {t.prompt for tasks in fresh.splits().values() for t in tasks}
    calls = Counter()
    for task, cut in pairs:
        assert task.split == "prefix" and task.id.startswith("chain/prefix/") and task.prompt not in split_prompts
        assert task.difficulty["features"]["hint"] == 0 and " | hint " not in task.prompt
        assert task.answer.startswith(cut) and cut.endswith("; ") and len(cut) < len(task.answer)
        calls[cut.count("; ")] += 1
        assert fresh.check(task, task.answer).success and not fresh.check(task, cut).success
    assert set(calls) == {1, 2}
    assert ChainEnv(0, SIZES).warm_start_prefixes() == pairs  # seeded
    assert ChainEnv(1, SIZES).warm_start_prefixes() != pairs
    assert fresh.splits() == ChainEnv(0, SIZES).splits()  # the splits do not change with them


def test_agent_pairs_end_whole_answers_and_not_prefixes(monkeypatch):
    """The warm start trains the prefixes without an end of sequence and every whole train answer with one; a
    benchmark without prefixes (bfcl) gives exactly its train split."""
    import torch

    from genenv_engine.config import ModelConfig
    from genenv_engine.training.policy import Policy, build_tiny_model
    from genenv_engine.training.tokenizer import build_byte_tokenizer
    from genenv_engine.training.warmstart import agent_pairs

    monkeypatch.setattr(ChainEnv, "PREFIX_PAIRS", 12)
    tok = build_byte_tokenizer()
    cfg = ModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_length=512)
    agent = Policy(build_tiny_model(cfg, tok, seed=0), tok, torch.device("cpu"), max_length=512)
    chain = ChainEnv(0, SIZES)
    pairs = agent_pairs(agent, {"chain": chain}, (1, 2))
    train = chain.split_at_levels("train", (1, 2), "warm_start.agent_levels")
    assert len(pairs) == len(train) + 12
    eos = tok.eos_token_id
    for i, task in enumerate(train):
        assert pairs[i][1] == agent.encode(task.answer) + [eos]
    for (_, cut), (_, completion) in zip(chain.warm_start_prefixes(), pairs[len(train) :], strict=False):
        assert completion == agent.encode(cut) and eos not in completion
    bfcl = get_environment("bfcl", 0)
    assert len(agent_pairs(agent, {"bfcl": bfcl})) == len(bfcl.splits()["train"])
