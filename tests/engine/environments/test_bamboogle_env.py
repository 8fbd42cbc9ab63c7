"""Tests for the Bamboogle-mini environment: KB and BM25, EM/F1 checker, validator, ladder, search, loader;
the splits/siblings contract shared by all five minis is in test_env_contract.py."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from pathlib import Path

import pytest

from genenv_engine.environments.bamboogle.kb import BM25, RELATIONS, build_kb, kb_for, tokenize
from genenv_engine.environments.bamboogle.mini import (
    ERROR_TYPES,
    REJECT_REASONS,
    BamboogleMini,
    UpstreamError,
    exact_match,
    load_upstream,
    normalize_answer,
    parse_action,
    token_f1,
)
from genenv_engine.environments.bamboogle.prompt import PromptError, parse_question, read_prompt
from genenv_engine.environments.base import SplitSizes

SMALL = SplitSizes(seed=30, train=120, heldout=40)
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "bamboogle"


@pytest.fixture(scope="module")
def env() -> BamboogleMini:
    return BamboogleMini(seed=0, sizes=SMALL)


@pytest.fixture(scope="module")
def kb():
    return kb_for(0)


@pytest.fixture(scope="module")
def w(kb):
    """Names from the seed-0 world used to write prompts by hand."""
    company = kb.entities("company")[0]
    other = kb.entities("company")[1]
    founder = kb.facts[("founder", company)]
    city = kb.facts[("born", founder)]
    married = next(p for p in kb.entities("person") if ("spouse", p) in kb.facts)
    single = next(p for p in kb.entities("person") if ("spouse", p) not in kb.facts)
    return {
        "co": company,
        "co2": other,
        "founder": founder,
        "city": city,
        "country": kb.facts[("country", city)],
        "married": married,
        "single": single,
        "P_founder": kb.passage_of[("founder", company)],
        "P_born": kb.passage_of[("born", founder)],
        "P_country": kb.passage_of[("country", city)],
        "P_ceo": kb.passage_of[("ceo", company)],
        "P_open": kb.passage_of[("opened", company)],
        "P_open2": kb.passage_of[("opened", other)],
    }


def make(env, prompt, answer=None):
    """A task built by the validator from a hand-written prompt (its own gold answer when none given)."""
    verdict = env.validate(prompt, answer or read_prompt(prompt, env.kb).answer, task_id="t/0")
    assert verdict.ok, verdict.reason
    return verdict.task


# ---------------------------------------------------------------- knowledge base and BM25


def test_kb_is_deterministic_and_seeded():
    a, b, c = build_kb(0), build_kb(0), build_kb(1)
    assert a.passages == b.passages and a.facts == b.facts
    assert a.passages != c.passages
    assert len(a.passages) == 60 * 4 + 80 + 24 + 30 + 10


def test_kb_is_consistent(kb):
    assert {t: len(kb.entities(t)) for t in ("company", "person", "city", "country")} == {
        "company": 60,
        "person": 80,
        "city": 30,
        "country": 10,
    }
    tokens = [tok for name in kb.types for tok in name.lower().split()]
    assert len(tokens) == len(set(tokens))  # no name token is shared, so a name pins its passages
    for country in kb.entities("country"):
        assert kb.facts[("country", kb.facts[("capital", country)])] == country
    for person in kb.entities("person"):
        if ("spouse", person) in kb.facts:
            partner = kb.facts[("spouse", person)]
            assert kb.facts[("spouse", partner)] == person
            assert kb.passage_of[("spouse", person)] == kb.passage_of[("spouse", partner)]
    years = [kb.facts[("opened", c)] for c in kb.entities("company")]
    assert len(set(years)) == len(years)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_canonical_query_retrieves_its_passage(seed):
    kb = kb_for(seed)
    for (rel, subject), passage in kb.passage_of.items():
        assert kb.search(RELATIONS[rel].query(subject)) == [passage]
        assert kb.retrieves(RELATIONS[rel].query(subject), [passage])


def test_bm25_scores_by_the_okapi_formula():
    index = BM25(["red apple pie", "green apple", "blue sky"])
    idf_apple = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    idf_red = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    avgdl = 7 / 3
    expected = sum(idf * 1 * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 3 / avgdl)) for idf in (idf_apple, idf_red))
    assert index.scores("red apple")[0] == pytest.approx(expected)
    assert [i for i, _ in index.ranked("red apple")] == [0, 1]
    assert index.top1("red apple") == 0
    assert index.top1("apple") == 1  # the shorter document wins on length normalisation
    assert index.top1("purple") is None and index.ranked("purple") == []
    assert BM25(["apple pie", "apple tart"]).top1("apple") is None  # a tie is not a top-1 hit


def test_tokenize_drops_stopwords_and_maps_aliases():
    assert tokenize("Where was the founder of Zorvex born?") == ["founded", "zorvex", "born"]
    assert tokenize("the spouse's birthplace") == ["married", "s", "born"]


# ---------------------------------------------------------------- answer scoring


def test_squad_normalisation():
    assert normalize_answer("The  Ola-Vik, an Ola!") == "olavik ola"
    assert normalize_answer("A Theme") == "theme"
    assert exact_match("the Danube.", ["Danube"]) == 1.0
    assert exact_match("Danube river", ["Danube"]) == 0.0
    assert exact_match("x", ["y", "X"]) == 1.0


def test_token_f1():
    assert token_f1("Ola Vik", ["Ola Vik"]) == 1.0
    assert token_f1("Ola", ["Ola Vik"]) == pytest.approx(2 / 3)
    assert token_f1("Ola Vik Moss", ["Ola Vik"]) == pytest.approx(0.8)
    assert token_f1("Ida", ["Ola Vik"]) == 0.0
    assert token_f1("the", ["a"]) == 1.0  # both normalise to nothing
    assert token_f1("Vik", ["Ola", "Vik Ola"]) == pytest.approx(2 / 3)


def test_parse_action():
    assert parse_action("answer[ Ola Vik ]") == ("answer", "Ola Vik")
    for bad in (
        "",
        "Ola Vik",
        "answer[]",
        "answer[ ]",
        "search[a",
        "answer[a] extra",
        "answer[a[b]]",
        "find[x]",
        "answer[a]\nanswer[b]",
        "answer[" + "x" * 400 + "]",
    ):
        with pytest.raises(ValueError):
            parse_action(bad)


# ---------------------------------------------------------------- checker


def test_correct_answer_and_search_pass(env, w):
    answer = make(env, f"Q: who founded {w['co']}? | E: {w['P_founder']}")
    assert answer.answer == f"answer[{w['founder']}]"
    result = env.check(answer, f"answer[{w['founder']}]")
    assert (result.success, result.score, result.error_type) == (True, 1.0, None)
    assert result.sub_scores == {"action": 1.0, "em": 1.0, "f1": 1.0}
    assert env.check(answer, f"answer[the {w['founder'].lower()}.]").success
    search = make(env, f"Q: where was the founder of {w['co']} born? | E: {w['P_founder']}")
    assert search.answer == f"search[{w['founder']} born]"
    result = env.check(search, search.answer)
    assert (result.success, result.score, result.error_type) == (True, 1.0, None)
    assert result.sub_scores == {"action": 1.0, "hit": 1.0, "rr": 1.0}
    for query in (f"where was {w['founder']} born", f"birthplace of {w['founder']}", f"{w['founder']} born"):
        assert env.check(search, f"search[{query}]").success, query


def test_each_error_type(env, w):
    answer = make(env, f"Q: who founded {w['co']}? | E: {w['P_founder']}")
    search = make(env, f"Q: where was the founder of {w['co']} born? | E: {w['P_founder']}")
    first, last = w["founder"].split()
    cases = [
        (answer, w["founder"], "parse_error", 0.0),
        (answer, f"answer[{w['founder']}", "parse_error", 0.0),
        (answer, f"search[{w['co']} founded]", "wrong_action", 0.0),
        (search, f"answer[{w['city']}]", "wrong_action", 0.0),
        (answer, f"answer[{w['city']}]", "wrong_answer", 0.0),
        (answer, f"answer[{first}]", "wrong_answer", pytest.approx(2 / 3)),
        (search, f"search[{w['co']} founded]", "bad_search", 0.0),  # re-retrieves hop 1
        (search, f"search[{first} {last}]", "bad_search", 0.0),  # name only: several passages tie
        (search, "search[nothing matches this]", "bad_search", 0.0),
    ]
    for task, response, error, score in cases:
        result = env.check(task, response)
        assert (result.success, result.error_type, result.score) == (False, error, score), response
    assert {c[2] for c in cases} == set(ERROR_TYPES)


def test_partial_answer_is_rewarded_by_f1(env, w):
    task = make(env, f"Q: who founded {w['co']}? | E: {w['P_founder']}")
    result = env.check(task, f"answer[{w['founder'].split()[0]}]")
    assert result.sub_scores == {"action": 1.0, "em": 0.0, "f1": pytest.approx(2 / 3)}
    assert env.structured is False and env.reward(result) == pytest.approx(2 / 3)
    assert env.reward(env.check(task, task.answer)) == 1.0


def test_bad_search_reports_reciprocal_rank(env, w):
    search = make(env, f"Q: where was the founder of {w['co']} born? | E: {w['P_founder']}")
    result = env.check(search, f"search[{w['founder']}]")
    assert result.error_type == "bad_search" and result.sub_scores["hit"] == 0.0
    assert 0.0 < result.sub_scores["rr"] <= 1.0


def test_comparison_search_accepts_either_missing_side(env, w, kb):
    task = make(env, f"Q: which opened first, {w['co']} or {w['co2']}?")
    assert task.answer == f"search[{w['co']} opened]"
    assert task.expected["targets"] == [w["P_open"], w["P_open2"]]
    assert env.check(task, f"search[{w['co2']} opened]").success
    half = make(env, f"Q: which opened first, {w['co']} or {w['co2']}? | E: {w['P_open2']}")
    assert half.answer == f"search[{w['co']} opened]"
    assert env.check(half, f"search[{w['co2']} opened]").error_type == "bad_search"
    done = make(env, f"Q: which opened first, {w['co']} or {w['co2']}? | E: {w['P_open']} {w['P_open2']}")
    first = min((w["co"], w["co2"]), key=lambda c: int(kb.facts[("opened", c)]))
    assert done.answer == f"answer[{first}]" and done.level == 4


def test_hostile_responses_are_plain_text(env, w, tmp_path):
    task = make(env, f"Q: who founded {w['co']}? | E: {w['P_founder']}")
    marker = tmp_path / "pwned"
    result = env.check(task, f"answer[__import__('os').system('touch {marker}')]")
    assert result.error_type == "wrong_answer" and not marker.exists()


# ---------------------------------------------------------------- validator


def test_validator_accepts_and_recomputes(env, w):
    parent = env.splits()["seed"][0]
    prompt = f"Q: what is the birthplace of the founder of {w['co']}? | E: {w['P_founder']} {w['P_ceo']}"
    verdict = env.validate(
        prompt,
        f"search[where was {w['founder']} born]",
        task_id="gen/e1/0001",
        parent=parent,
        epoch=1,
        generator="sim@e1",
    )
    assert verdict.ok and verdict.reason == ""
    task = verdict.task
    assert task.answer == f"search[{w['founder']} born]"
    assert task.expected == {"action": "search", "targets": [w["P_born"]], "kb": 0}
    assert (task.split, task.origin, task.parent_id, task.epoch, task.generator, task.checker, task.granularity) == (
        "generated",
        "generated",
        parent.id,
        1,
        "sim@e1",
        "qa_em_f1",
        "step",
    )
    assert task.id == "gen/e1/0001" and task.benchmark == "bamboogle"
    assert task.difficulty == {
        "level": 3,
        "features": {
            "hops": 2,
            "kind": "chain",
            "form": "np",
            "relations": "founder>born",
            "answer_type": "city",
            "action": "search",
            "step": 1,
            "n_evidence": 2,
            "n_distractors": 1,
        },
    }
    assert [t["name"] for t in task.tools] == ["search", "answer"]


def test_validator_levels(env, w):
    levels = {
        f"Q: who founded {w['co']}? | E: {w['P_founder']}": 1,
        f"Q: who founded {w['co']}? | E: {w['P_ceo']} {w['P_founder']}": 2,
        f"Q: where was the founder of {w['co']} born?": 2,
        f"Q: where was the founder of {w['co']} born? | E: {w['P_ceo']}": 3,
        f"Q: which country is the birthplace of the founder of {w['co']} in?": 4,
        f"Q: which opened first, {w['co']} or {w['co2']}?": 4,
    }
    for prompt, level in levels.items():
        assert make(env, prompt).level == level, prompt


def test_validator_final_answer_via_answer_text(env, w):
    prompt = (
        f"Q: which country is the birthplace of the founder of {w['co']} in? | E: {w['P_founder']} "
        f"{w['P_born']} {w['P_country']}"
    )
    assert env.validate(prompt, f"answer[the {w['country']}]", task_id="g").task.answer == f"answer[{w['country']}]"


def _reject_cases(w, kb):
    co, _co2, f, city = w["co"], w["co2"], w["founder"], w["city"]
    false_fact = f"{co} was founded by {w['married'] if w['married'] != f else w['single']}."
    partner = kb.facts[("spouse", w["married"])]
    reversed_couple = (
        kb.passage_of[("spouse", w["married"])]
        .replace(w["married"], "#")
        .replace(partner, w["married"])
        .replace("#", partner)
    )
    return [
        (f"Q: who founded {co}? | E: {w['P_founder']}", f"answer[{city}]", "answer_mismatch: wrong_answer"),
        (f"Q: who founded {co}? | E: {w['P_founder']}", f"search[{co} founded]", "answer_mismatch: wrong_action"),
        (f"Q: where was the founder of {co} born?", f"search[{f} born]", "answer_mismatch: bad_search"),
        (f"Q: who founded {co}?", f"{co} founded", "answer_mismatch: parse_error"),
        (f"who founded {co}?", f"search[{co} founded]", "bad_format"),
        (f"Q: who founded {co}", f"search[{co} founded]", "bad_format"),
        (f"Q: who painted {co}?", f"search[{co} founded]", "bad_question"),
        (f"Q: who is {f}?", "answer[x]", "bad_question"),
        (f"Q: who is the mayor of {city}?", "answer[x]", "unknown_relation: mayor"),
        ("Q: who founded Acme?", "search[Acme founded]", "unknown_entity: Acme"),
        (f"Q: who founded {co}? | E: Acme was founded by {f}.", "search[x]", "unknown_entity: Acme"),
        (f"Q: who founded {f}?", "search[x]", "type_mismatch: founder of a person"),
        (f"Q: what is the founder of {co}?", "search[x]", "type_mismatch"),
        (f"Q: which opened first, {co} or {f}?", "search[x]", "type_mismatch"),
        (
            f"Q: which country is the birthplace of the spouse of the founder of {co} in?",
            "search[x]",
            "too_many_hops: 4",
        ),
        (f"Q: who is {w['single']} married to?", "search[x]", "unanswerable"),
        (f"Q: who is the spouse of the spouse of {w['married']}?", "search[x]", "degenerate"),
        (f"Q: which opened first, {co} or {co}?", "search[x]", "degenerate"),
        (f"Q: who founded {co}? | E: Nothing to see here.", "search[x]", "bad_evidence"),
        (f"Q: who founded {co}? | E: {w['P_founder'][:-1]}", "answer[x]", "bad_evidence"),
        (f"Q: who is {partner} married to? | E: {reversed_couple}", "answer[x]", "bad_evidence: not a KB passage"),
        (f"Q: who founded {co}? | E: {false_fact}", "search[x]", "inconsistent_evidence: contradicts"),
        (
            f"Q: where was the founder of {co} born? | E: {w['P_born']}",
            "answer[x]",
            "inconsistent_evidence: hop 2 before hop 1",
        ),
        (f"Q: who founded {co}? | E: {w['P_ceo']} {w['P_ceo']}", "search[x]", "duplicate_passage"),
        (
            f"Q: who founded {co}? | E: {w['P_ceo']} {w['P_open']} {kb.passage_of[('base', co)]}",
            "search[x]",
            "too_many_distractors: 3",
        ),
        (
            f"Q: who founded {co}? | E: "
            + " ".join([w["P_ceo"], w["P_open"], w["P_born"], w["P_country"], w["P_open2"], w["P_founder"]]),
            "answer[x]",
            "too_long",
        ),
    ]


def test_validator_rejects_each_reason(env, w, kb, assert_rejected):
    seen = set()
    for prompt, answer, reason in _reject_cases(w, kb):
        seen.add(assert_rejected(env, prompt, answer, reason).reason.split(":")[0])
    parent = env.splits()["seed"][3]
    copy = env.validate(parent.prompt, parent.answer, task_id="gen/x", parent=parent)
    assert (copy.ok, copy.reason) == (False, "copy_of_parent")
    seen.add("copy_of_parent")
    assert env.validate("Q: who founded x?", "answer[" + "x" * 60 + "]", task_id="g").reason == "too_long"
    seen.discard("unanswerable")
    tie = _same_year_world(kb, w)
    with pytest.raises(PromptError, match="unanswerable: same year"):
        parse_question(f"which opened first, {w['co']} or {w['co2']}?", tie)
    with pytest.raises(PromptError, match="unanswerable: no spouse"):
        parse_question(f"who is {w['single']} married to?", kb)
    seen.add("unanswerable")
    assert seen == set(REJECT_REASONS)


def _same_year_world(kb, w):
    facts = dict(kb.facts)
    facts[("opened", w["co2"])] = facts[("opened", w["co"])]
    return dataclasses.replace(kb, facts=facts)


# ---------------------------------------------------------------- splits


@pytest.fixture(scope="module")
def full() -> BamboogleMini:
    return BamboogleMini(seed=7)


def test_default_sizes_and_lengths(full):
    splits = full.splits()
    assert {k: len(v) for k, v in splits.items()} == {"seed": 200, "train": 2000, "heldout": 400}
    tasks = [t for ts in splits.values() for t in ts]
    assert len({t.prompt for t in tasks}) == len(tasks)
    assert max(len(t.prompt) for t in tasks) <= 180
    assert max(len(t.answer) for t in tasks) <= 60
    assert all(" => " not in t.prompt for t in tasks)
    actions = {t.difficulty["features"]["action"] for t in tasks}
    assert actions == {"search", "answer"}


def test_every_gold_passes_and_revalidates_at_default_size(full, golds_revalidate):
    golds_revalidate(full, (t for ts in full.splits().values() for t in ts))


def test_level_features_follow_the_ladder(full):
    for task in (t for ts in full.splits().values() for t in ts):
        f, level = task.difficulty["features"], task.level
        if level == 1:
            assert (f["kind"], f["hops"], f["n_distractors"]) == ("chain", 1, 0)
        elif level == 2:
            assert (f["hops"], f["n_distractors"]) in ((2, 0), (1, 1))
        elif level == 3:
            assert f["hops"] == 2 and 1 <= f["n_distractors"] <= 2
        else:
            assert f["kind"] == "compare" or f["hops"] == 3
        assert f["action"] == ("answer" if f["step"] == f["hops"] else "search")
        assert f["n_evidence"] == f["step"] + f["n_distractors"]
        assert task.answer.startswith(f"{f['action']}[")


# ---------------------------------------------------------------- search tool


def test_search_tool(env, w):
    assert env.search(f"who founded {w['co']}") == [w["P_founder"]]
    assert len(env.search(w["co"], k=3)) == 3


# ---------------------------------------------------------------- upstream loader


def test_loader_reads_csv_and_jsonl_folder():
    tasks = load_upstream(FIXTURES / "upstream")
    assert len(tasks) == 8  # 4 CSV + 5 JSONL rows, one repeated question dropped
    assert [t.id for t in tasks[:2]] == ["bamboogle/heldout/00000", "bamboogle/heldout/00001"]
    first = tasks[0]
    assert first.prompt == "Q: What is the capital of the country where the Eiffel Tower stands?"
    assert (first.answer, first.expected) == ("answer[Paris]", {"action": "answer", "answers": ["Paris"]})
    assert (first.origin, first.split, first.checker, first.granularity, first.level) == (
        "official",
        "heldout",
        "qa_em_f1",
        "step",
        2,
    )
    assert tasks[1].prompt == "Q: In which city, the capital of its country, is the Brandenburg Gate?"
    assert tasks[3].answer == "answer[Michael Crichton]" and '"Jurassic Park"' in tasks[3].prompt
    assert [t.answer for t in tasks[4:]] == ["answer[Po]", "answer[Euro]", "answer[four]", "answer[1889]"]
    assert tasks[7].expected["answers"] == ["1889", "in 1889"]
    assert tasks[6].prompt == "Q: How many legs does the animal on the flag of Wales have?"


def test_loaded_tasks_are_checked_by_em_f1(env):
    tasks = load_upstream(FIXTURES / "upstream" / "bamboogle.csv")
    assert len(tasks) == 4
    danube = tasks[2]
    assert env.check(danube, danube.answer).success
    assert env.check(danube, "answer[danube]").success  # articles are dropped
    wrong = env.check(danube, "answer[the Danube river]")
    assert (wrong.success, wrong.error_type, wrong.score) == (False, "wrong_answer", pytest.approx(2 / 3))
    assert env.check(danube, "search[Hungary capital]").error_type == "wrong_action"


def test_environment_with_data_dir_uses_upstream_heldout(env):
    loaded = BamboogleMini(seed=0, sizes=SMALL, data_dir=str(FIXTURES / "upstream"))
    splits = loaded.splits()
    assert len(splits["heldout"]) == 8 and all(t.origin == "official" for t in splits["heldout"])
    assert [t.prompt for t in splits["train"]] == [t.prompt for t in env.splits()["train"]]
    assert [t.prompt for t in splits["seed"]] == [t.prompt for t in env.splits()["seed"]]
    assert loaded.describe()["source"] == "upstream folder"
    assert loaded.describe()["sizes"] == {"heldout": 8, "train": 120, "seed": 30}


def test_loader_errors_name_the_file_and_line(tmp_path):
    with pytest.raises(UpstreamError, match=r"bad_json/test\.jsonl:2: invalid JSON"):
        load_upstream(FIXTURES / "bad_json")
    with pytest.raises(UpstreamError, match=r"bamboogle\.csv: missing column 'Answer'"):
        BamboogleMini(data_dir=str(FIXTURES / "bad_csv"))
    with pytest.raises(UpstreamError, match="no such file or folder"):
        load_upstream(tmp_path / "absent")
    with pytest.raises(UpstreamError, match="no Bamboogle file"):
        load_upstream(tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(UpstreamError, match="unsupported file type"):
        load_upstream(tmp_path / "notes.txt")
    cases = {
        "empty.csv": ("Question,Answer\nWho?,x\nWhy?,\n", r"empty\.csv:3: empty Question or Answer"),
        "list.jsonl": ('["q", "a"]\n', r"list\.jsonl:1: expected a JSON object"),
        "noans.jsonl": ('{"question": "q?"}\n', r"noans\.jsonl:1: no 'answer'"),
        "noq.jsonl": ('{"answer": "a"}\n', r"noq\.jsonl:1: no 'question'"),
        "blank.jsonl": ('{"question": "q?", "answer": ""}\n', r"blank\.jsonl:1: the answer must be"),
        "arr.json": (
            '[{"question": "q?", "answer": "a"}, {"question": 3, "answer": "a"}]',
            r"arr\.json: item 2: the question must be",
        ),
        "nothing.jsonl": ("\n\n", r"no question/answer rows"),
    }
    for name, (text, pattern) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(UpstreamError, match=pattern):
            load_upstream(path)


def test_loader_json_array_and_numbers(tmp_path):
    path = tmp_path / "items.json"
    path.write_text('[{"Question": "In which year? => now", "Answer": 1889}]')
    (task,) = load_upstream(path)
    assert (task.prompt, task.answer) == ("Q: In which year? -> now", "answer[1889]")
    assert task.expected["answers"] == ["1889"]


def test_loader_parquet_needs_pyarrow(tmp_path):
    path = tmp_path / "test.parquet"
    if importlib.util.find_spec("pyarrow") is None:
        path.write_bytes(b"PAR1")
        with pytest.raises(UpstreamError, match=r"test\.parquet: reading parquet needs pyarrow"):
            load_upstream(path)
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"Question": ["Who?"], "Answer": ["Me"]}), path)
    assert [t.answer for t in load_upstream(path)] == ["answer[Me]"]
