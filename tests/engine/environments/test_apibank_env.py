"""Tests for the API-Bank-mini environment: mock APIs, execution checker, validator, ladder, siblings, loader;
the splits/siblings contract shared by all five minis is in test_env_contract.py."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from genenv_engine.environments.apibank.db import APIS, SEARCHABLE, execute, initial_db, tool_search
from genenv_engine.environments.apibank.dialogue import GRAMMAR, VERBS, read_prompt
from genenv_engine.environments.apibank.mini import (
    ERROR_TYPES,
    MAX_ANSWER_CHARS,
    MAX_PROMPT_CHARS,
    ApiBankMini,
    allowed_levels,
    check_response,
    generate_draft,
    parse_response,
)
from genenv_engine.environments.apibank.syntax import CallSyntaxError, norm_date, norm_time
from genenv_engine.environments.apibank.upstream import UpstreamFormatError, load_upstream
from genenv_engine.environments.base import SplitSizes

SMALL = SplitSizes(seed=30, train=120, heldout=40)
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "apibank"


@pytest.fixture(scope="module")
def env() -> ApiBankMini:
    return ApiBankMini(seed=0, sizes=SMALL)


def make(env: ApiBankMini, prompt: str):
    """A task built by the validator from a hand-written prompt and its own gold."""
    verdict = env.validate(prompt, read_prompt(prompt).answer, task_id="t/0")
    assert verdict.ok, verdict.reason
    return verdict.task


ALARM = "APIs: AddAlarm(time) DeleteAlarm(time) QueryAlarm() | U: wake me at 7:30pm"
CALC = "APIs: Calculator(formula) | U: calculate (5+6)*3"
AGENDA = "APIs: AddAgenda(what,date,place) QueryAgenda(date) | U: plan gym on mar 26 at park"
MEETING = "APIs: AddMeeting(topic,time) QueryMeeting(date) | U: book meeting demo on 3/26 at 3:30pm"
HEALTH = "APIs: RecordHealthData(kind,value) | U: record health bp | AI: what value? | U: 120"
SEARCH = "APIs: ToolSearcher(keywords) | U: wake me at 7pm"
RESULT = "APIs: ToolSearcher(keywords) | U: price of ACME on mar 22 | R: QueryStock(code,date)"
FOLLOW = "APIs: AddAlarm(time) DeleteAlarm(time) | U: wake me at 5pm | [AddAlarm(time='17:00')] | U: cancel alarm then"
CALC_REF = "APIs: Calculator(formula) | U: calculate (5+6)*3 | [Calculator(formula='(5+6)*3')] | U: compute that*2"


# ---------------------------------------------------------------- mock APIs


def test_mock_apis_execute_on_the_database():
    db = initial_db()
    assert execute(db, "AddAlarm", {"time": "05:15"}) == ("success", None)
    assert "05:15" in execute(db, "QueryAlarm", {})[0]
    assert execute(db, "AddAlarm", {"time": "05:15"}) == (None, "alarm at 05:15 exists")
    assert execute(db, "DeleteAlarm", {"time": "05:15"}) == ("success", None)
    assert execute(db, "QueryAgenda", {"date": "03-24"}) == ([["gym", "park"], ["lunch", "cafe"]], None)
    assert execute(db, "QueryMeeting", {"date": "03-27"}) == ([["review", "03-27 14:00"]], None)
    assert execute(db, "AddMeeting", {"topic": "x", "time": "03-27 14:00"})[1] == "slot 03-27 14:00 is taken"
    assert execute(db, "QueryHealthData", {"kind": "bp"}) == ([118, 125], None)
    assert execute(db, "QueryStock", {"code": "ACME", "date": "03-22"}) == (41.0, None)
    assert execute(db, "QueryStock", {"code": "ZZZ", "date": "03-22"})[1] == "unknown stock ZZZ"
    assert execute(db, "Calculator", {"formula": "1/0"}) == (None, "division by zero")
    assert execute(db, "Calculator", {"formula": "__import__('os')"}) == (None, "invalid formula")
    assert initial_db()["alarms"] == ["06:30", "07:00", "07:45", "12:00", "18:30", "21:15"]


def test_every_verb_retrieves_its_api_with_bm25():
    for verb, (api, _) in VERBS.items():
        assert tool_search(verb) == APIS[api].signature, verb
    assert set(GRAMMAR) == set(SEARCHABLE) and len(SEARCHABLE) == 11


def test_value_normalisers():
    assert [norm_time(t) for t in ("7:30 PM", "19:30:00", "noon", "13pm")] == ["19:30", "19:30", "12:00", None]
    assert [norm_date(t) for t in ("March 26, 2023", "26th mar", "3/26/23", "13-01")] == ["03-26"] * 3 + [None]


# ---------------------------------------------------------------- checker


def test_correct_answer_passes(env):
    task = make(env, ALARM)
    assert task.answer == "API-Request: [AddAlarm(time='19:30')]"
    result = env.check(task, task.answer)
    assert (result.success, result.score, result.error_type) == (True, 1.0, None)
    assert result.sub_scores == {"name": 1.0, "args": 1.0, "result": 1.0}
    for variant in ("[AddAlarm(time='7:30 pm')]", 'AddAlarm(time="19:30:00")', "API-Request:[AddAlarm(time='7:30PM')]"):
        assert env.check(task, variant).success, variant


@pytest.mark.parametrize(
    "prompt, response, error",
    [
        (ALARM, "API-Request: [AddAlarm(time='07:30')", "parse_error"),
        (ALARM, "API-Request: [AddAlarm('19:30')]", "parse_error"),
        (ALARM, "set the alarm please", "parse_error"),
        (ALARM, "API-Request: [QueryStock(code='ACME',date='03-22')]", "unknown_api"),
        (ALARM, "API-Request: [Teleport(to='mars')]", "unknown_api"),
        (SEARCH, "API-Request: [AddAlarm(time='19:00')]", "unknown_api"),
        (ALARM, "API-Request: [DeleteAlarm(time='19:30')]", "wrong_api"),
        (ALARM, "API-Request: [AddAlarm()]", "missing_arg"),
        (AGENDA, "API-Request: [AddAgenda(what='gym',date='03-26')]", "missing_arg"),
        (ALARM, "API-Request: [AddAlarm(time='19:30',tz='utc')]", "unexpected_arg"),
        (ALARM, "API-Request: [AddAlarm(time=1930)]", "bad_arg_type"),
        (ALARM, "API-Request: [AddAlarm(time='soon')]", "bad_arg_type"),
        (HEALTH, "API-Request: [RecordHealthData(kind='bp',value='120')]", "bad_arg_type"),
        (MEETING, "API-Request: [AddMeeting(topic='demo',time='03-26')]", "bad_arg_type"),
        (ALARM, "API-Request: [AddAlarm(time='07:00')]", "exec_error"),
        (FOLLOW, "API-Request: [DeleteAlarm(time='05:00')]", "exec_error"),
        (CALC, "API-Request: [Calculator(formula='33/0')]", "exec_error"),
        (CALC, "API-Request: [Calculator(formula='x*3')]", "exec_error"),
        (ALARM, "API-Request: [AddAlarm(time='19:35')]", "wrong_result"),
        (CALC, "API-Request: [Calculator(formula='(5+6)*4')]", "wrong_result"),
        (AGENDA, "API-Request: [AddAgenda(what='gym class',date='03-26',place='park')]", "wrong_result"),
        (AGENDA, "API-Request: [AddAgenda(what='gym',date='03-27',place='park')]", "wrong_result"),
        (FOLLOW, "API-Request: [DeleteAlarm(time='07:00')]", "wrong_result"),
        (SEARCH, "API-Request: [ToolSearcher(keywords='delete alarm')]", "wrong_result"),
        (RESULT, "API-Request: [QueryStock(code='ACME',date='03-23')]", "wrong_result"),
    ],
)
def test_each_error_type(env, assert_check_fails, prompt, response, error):
    assert_check_fails(env, make(env, prompt), response, error)


def test_all_error_types_are_covered():
    assert set(ERROR_TYPES) == {
        "parse_error",
        "unknown_api",
        "wrong_api",
        "missing_arg",
        "unexpected_arg",
        "bad_arg_type",
        "exec_error",
        "wrong_result",
    }


def test_partial_scores():
    task = make(ApiBankMini(sizes=SMALL), AGENDA)
    missing = check_response(task.expected, "[AddAgenda(what='gym',date='03-26')]")
    assert missing.sub_scores == {"name": 1.0, "args": 2 / 3, "result": 0.0}
    assert missing.score == pytest.approx((1 + 2 / 3) / 3)
    assert check_response(task.expected, "[QueryAgenda(date='03-26')]").score == 0.0
    wrong = check_response(task.expected, "[AddAgenda(what='gym',date='03-27',place='park')]")
    assert wrong.score == pytest.approx(2 / 3)


def test_fuzzy_per_api_rules(env):
    calc = make(env, CALC)
    assert calc.expected["output"] == 33.0
    assert env.check(calc, "[Calculator(formula='33')]").success
    assert env.check(calc, "[Calculator(formula='3*(6+5)')]").success
    agenda = make(env, AGENDA)
    assert agenda.answer == "API-Request: [AddAgenda(what='gym',date='03-26',place='park')]"
    assert env.check(agenda, "[AddAgenda(what='the Gym',date='2023-03-26',place='Park')]").success
    search = make(env, SEARCH)
    assert search.answer == "API-Request: [ToolSearcher(keywords='wake me')]"
    assert env.check(search, "[ToolSearcher(keywords='add a new alarm')]").success
    meeting = make(env, MEETING)
    assert meeting.answer == "API-Request: [AddMeeting(topic='demo',time='03-26 15:30')]"
    assert env.check(meeting, "[AddMeeting(topic='Demo',time='2023-03-26 15:30:00')]").success
    assert env.check(meeting, "[AddMeeting(topic='demos',time='03-26 15:30')]").error_type == "wrong_result"


def test_follow_up_replays_the_context(env):
    task = make(env, FOLLOW)
    assert task.answer == "API-Request: [DeleteAlarm(time='17:00')]"
    assert task.expected["context"] == [{"api": "AddAlarm", "args": {"time": "17:00"}}]
    assert env.check(task, "[DeleteAlarm(time='5pm')]").success
    ref = make(env, CALC_REF)
    assert ref.answer == "API-Request: [Calculator(formula='((5+6)*3)*2')]"
    assert env.check(ref, "[Calculator(formula='66')]").success


@pytest.mark.parametrize(
    "response",
    [
        "__import__('os').system('x')",
        "[AddAlarm(time=__import__('os').system('touch /tmp/apibank_pwned'))]",
        "[AddAlarm(**{'time': '19:30'})]",
        "[AddAlarm(time='19:30',time='19:30')]",
        "[os.system(cmd='ls')]",
        "[AddAlarm(time='19:30')];[AddAlarm(time='19:30')]",
        "",
        "(" * 500 + ")" * 500,
        "x" * 1200,
    ],
)
def test_hostile_or_malformed_is_parse_error(env, response):
    result = env.check(make(env, ALARM), response)
    assert (result.success, result.score, result.error_type) == (False, 0.0, "parse_error")


def test_parse_never_executes(tmp_path):
    marker = tmp_path / "pwned"
    with pytest.raises(CallSyntaxError):
        parse_response(f"[AddAlarm(time=open('{marker}','w').write('x'))]")
    assert execute(initial_db(), "Calculator", {"formula": "open('p','w')"})[1] == "invalid formula"
    assert not marker.exists()
    assert parse_response("[X(a=-1,b=[1,'2'],c={'k':None})]") == ("X", {"a": -1, "b": [1, "2"], "c": {"k": None}})


# ---------------------------------------------------------------- validator


def test_validator_accepts_and_recomputes(env):
    parent = env.splits()["seed"][0]
    verdict = env.validate(
        MEETING,
        "API-Request: [AddMeeting(time='2023-03-26 15:30:00', topic='demo')]",
        task_id="gen/e1/0001",
        parent=parent,
        epoch=1,
        generator="sim@e1",
    )
    assert verdict.ok and verdict.reason == ""
    task = verdict.task
    assert task.answer == "API-Request: [AddMeeting(topic='demo',time='03-26 15:30')]"
    assert task.expected == {
        "mode": "exec",
        "api": "AddMeeting",
        "args": {"topic": "demo", "time": "03-26 15:30"},
        "context": [],
        "available": ["AddMeeting", "QueryMeeting"],
        "output": "success",
    }
    assert (task.split, task.origin, task.parent_id, task.epoch, task.generator, task.checker) == (
        "generated",
        "generated",
        parent.id,
        1,
        "sim@e1",
        "apibank_exec",
    )
    assert task.id == "gen/e1/0001" and task.benchmark == "apibank" and task.granularity == "step"
    assert task.difficulty == {
        "level": 3,
        "features": {
            "api": "AddMeeting",
            "target": "AddMeeting",
            "n_apis": 2,
            "n_args": 2,
            "synonym": True,
            "nl_value": True,
            "retrieval": "none",
            "multi_turn": "none",
            "n_turns": 1,
        },
    }
    assert [t["name"] for t in task.tools] == ["AddMeeting", "QueryMeeting"]


@pytest.mark.parametrize(
    "prompt, level, features",
    [
        ("APIs: AddAlarm(time) | U: add alarm at 07:30", 1, {}),
        ("APIs: AddAlarm(time) | U: add alarm at 7:30", 2, {"nl_value": True}),
        ("APIs: AddAlarm(time) QueryAlarm() | U: add alarm at 07:30", 2, {"n_apis": 2}),
        (AGENDA, 3, {"n_args": 3}),
        (SEARCH, 3, {"retrieval": "search", "api": "ToolSearcher", "target": "AddAlarm"}),
        (RESULT, 3, {"retrieval": "result", "n_turns": 2}),
        (FOLLOW, 4, {"multi_turn": "ref", "n_turns": 3}),
        (HEALTH, 4, {"multi_turn": "fill"}),
    ],
)
def test_levels(env, prompt, level, features):
    task = make(env, prompt)
    assert task.level == level
    assert features.items() <= task.difficulty["features"].items()


@pytest.mark.parametrize(
    "prompt, answer, reason",
    [
        (ALARM, "API-Request: [AddAlarm(time='19:00')]", "answer_mismatch: wrong_result"),
        (ALARM, "API-Request: [AddAlarm(", "answer_mismatch: parse_error"),
        ("APIs: AddAlarm(time) | U: add alarm at 07:30 => x", "x", "bad_format"),
        ("lorem ipsum", "x", "bad_format"),
        ("APIs: AddAlarm(time) | ", "x", "bad_dialogue"),
        ("APIs: AddAlarm(time)  | U: add alarm at 07:30", "x", "bad_api_list"),
        ("APIs: AddAlarm(time) Fly(to) | U: add alarm at 07:30", "x", "unknown_api: Fly"),
        ("APIs: AddAlarm(when) | U: add alarm at 07:30", "x", "bad_signature: AddAlarm"),
        ("APIs: AddAlarm(time) AddAlarm(time) | U: add alarm at 07:30", "x", "duplicate_api: AddAlarm"),
        (
            "APIs: AddAlarm(time) QueryAlarm() DeleteAlarm(time) Calculator(formula) QueryAgenda(date) "
            "QueryMeeting(date)"
            " | U: add alarm at 07:30",
            "x",
            "too_many_apis: 6",
        ),
        ("APIs: AddAlarm(time) ToolSearcher(keywords) | U: add alarm at 07:30", "x", "bad_api_list: ToolSearcher"),
        ("APIs: AddAlarm(time) | U: add alarm at 07:30 | U: again", "x", "bad_dialogue: turn pattern UU"),
        ("APIs: AddAlarm(time) | U: add alarm at 07:30 | R: AddAlarm(time)", "x", "bad_dialogue: turn pattern UR"),
        ("APIs: AddAlarm(time) | Q: add alarm at 07:30", "x", "bad_dialogue: unknown turn"),
        ("APIs: ToolSearcher(keywords) | U: wake me at 7pm | R: Fly(to)", "x", "bad_dialogue: R:"),
        ("APIs: AddAlarm(time) | U: add alarm | AI: which day? | U: 03-26", "x", "bad_dialogue: AddAlarm has no date"),
        ("APIs: AddAlarm(time) | U: add alarm | AI: how? | U: 07:30", "x", "bad_dialogue: unknown question"),
        ("APIs: AddAlarm(time) | U: fly to mars", "x", "unknown_verb: fly"),
        ("APIs: AddAlarm(time) | U: cancel alarm at 07:00", "x", "api_not_listed: DeleteAlarm"),
        ("APIs: AddAlarm(time) | U: add alarm 07:30", "x", "unparseable_query: AddAlarm needs"),
        ("APIs: AddAlarm(time) | U: add alarm at 07:30 please", "x", "unparseable_query: trailing"),
        ("APIs: AddAlarm(time) | U: add alarm | AI: what time? | U: 7:30 sharp", "x", "unparseable_query: answer"),
        ("APIs: AddAlarm(time) | U: add alarm at 25:00", "x", "bad_value: not a valid time"),
        ("APIs: QueryAgenda(date) | U: query agenda on 02-30", "x", "bad_value: not a valid date"),
        ("APIs: RecordHealthData(kind,value) | U: record health mood 3", "x", "bad_value: kind"),
        ("APIs: Calculator(formula) | U: calculate os.system", "x", "bad_value: formula"),
        ("APIs: AddAlarm(time) | U: add alarm then", "x", "unresolved_ref: time"),
        ("APIs: Calculator(formula) | U: calculate that*2", "x", "unresolved_ref: formula"),
        (
            "APIs: AddAlarm(time) DeleteAlarm(time) | U: wake me at 5pm | [AddAlarm(time='5pm')] "
            "| U: cancel alarm then",
            "x",
            "context_mismatch",
        ),
        (
            "APIs: AddAlarm(time) DeleteAlarm(time) | U: wake me at 5pm | [AddAlarm(time='17:00')]"
            " | U: cancel alarm at 07:00",
            "x",
            "no_ref",
        ),
        (
            "APIs: AddAlarm(time) DeleteAlarm(time) | U: cancel alarm at 05:00 | [DeleteAlarm(time='05:00')]"
            " | U: add alarm then",
            "x",
            "context_exec_error: no alarm at 05:00",
        ),
        ("APIs: DeleteAlarm(time) | U: delete alarm at 05:00", "x", "gold_exec_error: no alarm at 05:00"),
        ("APIs: ToolSearcher(keywords) | U: wake me at 7pm | R: DeleteAlarm(time)", "x", "retrieval_mismatch"),
        ("APIs: AddAgenda(what,date,place) | U: add agenda dinners on 03-26 at downtown", "x", "too_long: gold"),
        ("APIs: AddAlarm(time) | U: add alarm at 07:30" + " " * 200, "x", "too_long: prompt"),
    ],
)
def test_validator_rejects(env, assert_rejected, prompt, answer, reason):
    assert_rejected(env, prompt, answer, reason)


# ---------------------------------------------------------------- splits


def test_default_splits_lengths_and_every_gold(golds_revalidate):
    default = ApiBankMini(seed=7)
    splits = default.splits()
    assert {k: len(v) for k, v in splits.items()} == {"seed": 200, "train": 2000, "heldout": 400}
    tasks = [t for ts in splits.values() for t in ts]
    assert len({t.prompt for t in tasks}) == len(tasks)
    assert max(len(t.prompt) for t in tasks) <= MAX_PROMPT_CHARS
    assert max(len(t.answer) for t in tasks) <= MAX_ANSWER_CHARS
    assert sum(len(t.prompt) for t in tasks if t.level == 1) / sum(t.level == 1 for t in tasks) < 60
    assert all(" => " not in t.prompt for t in tasks)
    golds_revalidate(default, tasks)


def test_level_features_follow_the_ladder(env):
    for task in (t for ts in env.splits().values() for t in ts):
        f, level = task.difficulty["features"], task.level
        assert (f["multi_turn"] != "none") == (level == 4)
        if level == 1:
            assert f["n_apis"] == 1 and not f["synonym"] and not f["nl_value"] and f["n_args"] <= 1
        if level == 2:
            assert 2 <= f["n_apis"] <= 4 and f["n_args"] <= 1 and f["retrieval"] == "none"
        if level == 3:
            assert f["retrieval"] != "none" or f["n_args"] >= 2
        if f["retrieval"] != "none":
            assert task.prompt.startswith("APIs: ToolSearcher(keywords) | ")


def test_generate_draft_respects_target():
    rng = random.Random(3)
    for target in SEARCHABLE:
        for level in allowed_levels(target):
            assert generate_draft(level, rng, target).features["target"] == target
    with pytest.raises(ValueError):
        generate_draft(1, rng, "AddAgenda")


# ---------------------------------------------------------------- siblings


def test_sibling_of_a_one_prompt_level_moves_level(env):
    only = make(env, "APIs: QueryAlarm() | U: query alarms")
    pairs = env.sibling_pairs([only], random.Random(0), 6)
    assert all(b.level == 2 and b.difficulty["features"]["target"] == "QueryAlarm" for _, b in pairs)


# ---------------------------------------------------------------- upstream loader


def test_loader_decomposes_dialogues_into_steps():
    tasks = load_upstream(FIXTURES / "good")
    assert [t.expected["api"] for t in tasks] == [
        "GetUserToken",
        "AddAlarm",
        "Calculator",
        "ToolSearcher",
        "QueryStock",
    ]
    assert [t.level for t in tasks] == [3, 4, 1, 3, 3]
    assert all(t.origin == "official" and t.split == "heldout" and t.checker == "apibank_exec" for t in tasks)
    assert [t.id for t in tasks] == [f"apibank/heldout/{i:05d}" for i in range(5)]
    alarm = tasks[1]
    assert alarm.prompt.startswith("APIs: GetUserToken(username,password) AddAlarm(token,time) | U: Please set")
    assert "[GetUserToken(username='mira_k',password='sunflower9')] | R: {\"token\":\"t0k3n-mira\"}" in alarm.prompt
    assert alarm.answer == "API-Request: [AddAlarm(token='t0k3n-mira',time='2023-03-21 06:45:00')]"
    assert alarm.expected["line"] == 8 and alarm.difficulty["features"]["file"].endswith("AddAlarm-level-1-1.jsonl")
    assert tasks[3].prompt == "APIs: ToolSearcher(keywords) | U: How much was ACME stock worth on March 22, 2023?"
    assert tasks[4].expected["available"] == ["QueryStock", "ToolSearcher"]


def test_upstream_checker_modes():
    tasks = {t.expected["api"]: t for t in load_upstream(FIXTURES / "good")}
    alarm, calc, search = tasks["AddAlarm"], tasks["Calculator"], tasks["ToolSearcher"]
    for task in tasks.values():
        assert check_response(task.expected, task.answer).success
    assert check_response(alarm.expected, "[AddAlarm(token='t0k3n-mira',time='2023-03-21 6:45')]").success
    assert check_response(calc.expected, "[Calculator(formula='80/5')]").success
    assert check_response(search.expected, "[ToolSearcher(keywords='price stock')]").success
    cases = [
        (alarm, "[AddAlarm(token='t0k3n-mira'", "parse_error"),
        (alarm, "[DeleteAlarm(token='t0k3n-mira')]", "unknown_api"),
        (alarm, "[GetUserToken(username='mira_k',password='sunflower9')]", "wrong_api"),
        (alarm, "[AddAlarm(time='2023-03-21 06:45:00')]", "missing_arg"),
        (alarm, "[AddAlarm(token='t0k3n-mira',time='2023-03-21 06:45:00',x=1)]", "unexpected_arg"),
        (alarm, "[AddAlarm(token='t0k3n-mira',time=645)]", "bad_arg_type"),
        (calc, "[Calculator(formula='(12+8)*4/0')]", "exec_error"),
        (calc, "[Calculator(formula='(12+8)*4')]", "wrong_result"),
        (alarm, "[AddAlarm(token='other',time='2023-03-21 06:45:00')]", "wrong_result"),
        (search, "[ToolSearcher(keywords='weather')]", "wrong_result"),
    ]
    for task, response, error in cases:
        assert check_response(task.expected, response).error_type == error, response


def test_env_with_data_dir_uses_official_heldout():
    env = ApiBankMini(seed=0, sizes=SMALL, data_dir=str(FIXTURES / "good"))
    splits = env.splits()
    assert len(splits["heldout"]) == 5 and all(t.origin == "official" for t in splits["heldout"])
    plain = ApiBankMini(seed=0, sizes=SMALL).splits()
    assert [t.prompt for t in splits["train"]] == [t.prompt for t in plain["train"]]
    assert [t.prompt for t in splits["seed"]] == [t.prompt for t in plain["seed"]]
    assert env.describe() == {
        "name": "apibank",
        "granularity": "step",
        "source": "upstream folder",
        "sizes": {"heldout": 5, "train": 120, "seed": 30},
    }
    assert all(env.check(t, t.answer).success for t in splits["heldout"])


@pytest.mark.parametrize(
    "folder, message",
    [
        ("bad_json", "broken.jsonl:2: invalid JSON"),
        ("bad_turn", "no_params.jsonl:3: an API turn needs a 'param_dict'"),
        ("missing", "not a folder"),
    ],
)
def test_loader_errors_name_file_and_line(folder, message):
    with pytest.raises(UpstreamFormatError, match=message.replace("(", r"\(")):
        load_upstream(FIXTURES / folder)


def test_loader_rejects_empty_and_callless_folders(tmp_path):
    with pytest.raises(UpstreamFormatError, match="no \\*.jsonl"):
        load_upstream(tmp_path)
    (tmp_path / "chat.jsonl").write_text('{"role": "User", "text": "hi"}\n')
    with pytest.raises(UpstreamFormatError, match="hold no API calls"):
        load_upstream(tmp_path)
    (tmp_path / "chat.jsonl").write_text('{"role": "Bot", "text": "hi"}\n')
    with pytest.raises(UpstreamFormatError, match="chat.jsonl:1: expected an object with role"):
        load_upstream(tmp_path)
