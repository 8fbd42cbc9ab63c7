"""Tests for the BFCL-mini environment: AST checker rules, validator verdicts, split lengths and ladder;
the splits/siblings contract shared by all five minis is in test_env_contract.py."""

from __future__ import annotations

import pytest

from genenv_engine.environments.base import SplitSizes
from genenv_engine.environments.bfcl.catalog import CATALOG, VERBS, read_prompt
from genenv_engine.environments.bfcl.mini import ERROR_TYPES, BfclMini, parse_calls

SMALL = SplitSizes(seed=30, train=120, heldout=40)


@pytest.fixture(scope="module")
def env() -> BfclMini:
    return BfclMini(seed=0, sizes=SMALL)


def make(env: BfclMini, prompt: str, answer: str | None = None):
    """A task built by the validator from a hand-written prompt (its own gold answer when none given)."""
    draft = read_prompt(prompt)
    verdict = env.validate(prompt, answer or draft.answer, task_id="t/0")
    assert verdict.ok, verdict.reason
    return verdict.task


ADD = "F: add(a:int,b:int) neg(x:int) | Q: add 3 and 5"
PAR = "F: add(a:int,b:int) neg(x:int) sq(x:int) mul(a:int,b:int) | Q: sum 3 and 5 then negate 4"
TEMP = "F: set_temp(t:int,u:c|f) move(d:n|s|e|w,k:int=1) add(a:int,b:int) | Q: heat 20 f"
MOVE = "F: set_temp(t:int,u:c|f) move(d:n|s|e|w,k:int=1) add(a:int,b:int) | Q: go w"


# ---------------------------------------------------------------- checker


def test_correct_answer_passes(env):
    task = make(env, ADD)
    assert task.answer == "add(a=3,b=5)"
    result = env.check(task, "add(a=3,b=5)")
    assert (result.success, result.score, result.error_type) == (True, 1.0, None)
    assert result.sub_scores == {"name": 1.0, "calls": 1.0}


@pytest.mark.parametrize(
    "prompt, response, error",
    [
        (ADD, "add(a=3,b=5", "parse_error"),
        (ADD, "add(3,5)", "parse_error"),
        (ADD, "add(a=3,b=5);neg(x=1)", "wrong_count"),
        (PAR, "add(a=3,b=5)", "wrong_count"),
        (ADD, "mul(a=3,b=5)", "wrong_name"),
        (ADD, "add(a=3)", "missing_arg"),
        (ADD, "add(a=3,b=5,c=1)", "unexpected_arg"),
        (ADD, "add(a=3,b=5.5)", "type_error"),
        (ADD, "add(a=3,b=6)", "value_error"),
        (TEMP, "set_temp(t=20,u=c)", "value_error"),
        (TEMP, "set_temp(t=20,u=1)", "type_error"),
        (MOVE, "move(d=w,k=2)", "value_error"),
    ],
)
def test_each_error_type(env, assert_check_fails, prompt, response, error):
    assert_check_fails(env, make(env, prompt), response, error)


def test_all_error_types_are_covered():
    assert set(ERROR_TYPES) == {
        "parse_error",
        "wrong_count",
        "wrong_name",
        "missing_arg",
        "unexpected_arg",
        "type_error",
        "value_error",
    }


def test_parallel_calls_match_in_any_order(env):
    task = make(env, PAR)
    assert task.answer == "add(a=3,b=5);neg(x=4)"
    assert env.check(task, "neg(x=4); add(b=5,a=3)").success
    half = env.check(task, "neg(x=4);add(a=3,b=9)")
    assert (half.success, half.score, half.error_type) == (False, 0.5, "value_error")
    assert half.sub_scores["name"] == 1.0


def test_optional_arg_and_enum_rules(env):
    task = make(env, MOVE)
    assert task.answer == "move(d=w)"
    assert task.expected["calls"][0]["args"]["k"] == [1, ""]
    assert env.check(task, "move(d=w)").success
    assert env.check(task, "move(d=w,k=1)").success
    assert env.check(task, "move(d='W')").success
    assert env.check(task, 'move(d="w")').success
    assert env.check(task, "move(d=e)").error_type == "value_error"
    temp = make(env, TEMP)
    assert env.check(temp, "set_temp(t=20)").error_type == "missing_arg"
    assert env.check(temp, "set_temp(u=f,t=20)").success


def test_mentioned_optional_arg_is_required(env):
    task = make(env, "F: move(d:n|s|e|w,k:int=1) add(a:int,b:int) sq(x:int) | Q: go w by 4")
    assert task.answer == "move(d=w,k=4)"
    assert env.check(task, "move(d=w)").error_type == "missing_arg"


def test_string_for_int_is_type_error(env):
    task = make(env, ADD)
    assert env.check(task, 'add(a="3",b=5)').error_type == "type_error"
    assert env.check(task, "add(a=True,b=5)").error_type == "type_error"
    assert env.check(task, "add(a=3.0,b=5)").error_type == "type_error"


@pytest.mark.parametrize(
    "response",
    [
        "__import__('os').system('x')",
        "add(a=1+2,b=3)",
        "add(a=__import__('os').system('touch /tmp/bfcl_pwned'),b=3)",
        "add(**{'a': 3, 'b': 5})",
        "add(a=3,a=5)",
        "import os",
        "",
        "add(a=3,b=5);",
        "(" * 500 + ")" * 500,
    ],
)
def test_hostile_or_malformed_is_parse_error(env, response):
    result = env.check(make(env, ADD), response)
    assert (result.success, result.score, result.error_type) == (False, 0.0, "parse_error")


def test_parse_never_executes(tmp_path):
    marker = tmp_path / "pwned"
    with pytest.raises(ValueError):
        parse_calls(f"add(a=open('{marker}','w').write('x'),b=1)")
    assert not marker.exists()
    assert parse_calls(f"os.system(cmd='touch {marker}')") == [("os.system", {"cmd": f"touch {marker}"})]
    assert not marker.exists()


def test_negative_number_and_bare_names_parse():
    assert parse_calls("neg(x=-4)") == [("neg", {"x": -4})]
    assert parse_calls("move(d=n,k=2)") == [("move", {"d": "n", "k": 2})]


# ---------------------------------------------------------------- validator


def test_validator_accepts_and_recomputes(env):
    parent = env.splits()["seed"][0]
    prompt = "F: mul(a:int,b:int) add(a:int,b:int) play(s:pop|jazz|rock,v:int=5) | Q: stream jazz"
    verdict = env.validate(
        prompt, "play(v=5, s='jazz')", task_id="gen/e1/0001", parent=parent, epoch=1, generator="sim@e1"
    )
    assert verdict.ok and verdict.reason == ""
    task = verdict.task
    assert task.answer == "play(s=jazz)"
    assert task.expected == {"calls": [{"name": "play", "args": {"s": ["jazz"], "v": [5, ""]}}]}
    assert (task.split, task.origin, task.parent_id, task.epoch, task.generator, task.checker) == (
        "generated",
        "generated",
        parent.id,
        1,
        "sim@e1",
        "bfcl_ast",
    )
    assert task.id == "gen/e1/0001" and task.benchmark == "bfcl"
    assert task.difficulty == {
        "level": 3,
        "features": {
            "n_functions": 3,
            "n_args": 1,
            "n_calls": 1,
            "n_distractors": 2,
            "synonym": True,
            "rich": True,
            "max_value": 0,
        },
    }
    assert [t["name"] for t in task.tools] == ["mul", "add", "play"]


@pytest.mark.parametrize(
    "prompt, answer, reason",
    [
        (ADD, "add(a=3,b=6)", "answer_mismatch: value_error"),
        (ADD, "add(a=3", "answer_mismatch: parse_error"),
        ("F: add(a:int,b:int) foo(x:int) | Q: add 3 and 5", "add(a=3,b=5)", "unknown_function: foo"),
        ("F: add(a:int,b:int) add(a:int,b:int) | Q: add 3 and 5", "add(a=3,b=5)", "duplicate_function: add"),
        ("F: add(a:int,b:int) neg(x:int) | Q: mul 3 and 5", "mul(a=3,b=5)", "verb_not_listed: mul"),
        ("F: add(a:int) | Q: add 3", "add(a=3)", "bad_signature: add"),
        ("F: add(a:int,b:int) | Q: fly 3 and 5", "add(a=3,b=5)", "unknown_verb: fly"),
        ("F: add(a:int,b:int) | Q: add 3 and", "add(a=3)", "unparseable_query"),
        ("F: add(a:int,b:int) | Q: add 3 and 5 please", "add(a=3,b=5)", "unparseable_query"),
        ("F: add(a:int,b:int) | Q: add 3 and 5000", "add(a=3,b=5000)", "unparseable_query"),
        ("F: move(d:n|s|e|w,k:int=1) | Q: go up", "move(d=up)", "unparseable_query"),
        ("lorem ipsum add add )(", "add(a=3,b=5)", "bad_format"),
        ("F: add(a:int,b:int)  | Q: add 1 and 2", "add(a=1,b=2)", "bad_function_list"),
        (
            "F: "
            + " ".join(CATALOG[n].signature for n in ["add", "sub", "mul", "div", "mod", "pow", "neg"])
            + " | Q: add 1 and 2",
            "add(a=1,b=2)",
            "too_many_functions",
        ),
        ("F: add(a:int,b:int) | Q: " + " then ".join(["add 1 and 2"] * 4), "add(a=1,b=2)", "too_many_calls"),
        ("F: add(a:int,b:int) | Q: add 1 and 2" + " then add 1 and 2" * 9, "add(a=1,b=2)", "too_long"),
    ],
)
def test_validator_rejects(env, assert_rejected, prompt, answer, reason):
    assert_rejected(env, prompt, answer, reason)


# ---------------------------------------------------------------- splits


def test_default_sizes_and_lengths():
    splits = BfclMini(seed=7).splits()
    assert {k: len(v) for k, v in splits.items()} == {"seed": 200, "train": 2000, "heldout": 400}
    tasks = [t for ts in splits.values() for t in ts]
    assert len({t.prompt for t in tasks}) == len(tasks)
    assert max(len(t.prompt) for t in tasks if t.level < 4) <= 120
    assert max(len(t.answer) for t in tasks) <= 70


def test_level_features_follow_the_ladder(env):
    for task in (t for ts in env.splits().values() for t in ts):
        f, level = task.difficulty["features"], task.level
        assert f["n_calls"] == (2 if level == 4 else 1)
        assert f["synonym"] == (level >= 3)
        assert f["n_functions"] in {1: (1, 2), 2: (3, 4), 3: (3, 4), 4: (4, 5)}[level]
        assert f["max_value"] <= {1: 9, 2: 99, 3: 99, 4: 999}[level]
        assert f["n_distractors"] == f["n_functions"] - len({c["name"] for c in task.expected["calls"]})


def test_catalog_verbs_unique_and_signatures_short():
    verbs = [v for f in CATALOG.values() for v in f.verbs]
    assert len(verbs) == len(set(verbs)) == len(VERBS)
    assert len(CATALOG) == 16
    assert all(len(f.signature) <= 30 for f in CATALOG.values())
