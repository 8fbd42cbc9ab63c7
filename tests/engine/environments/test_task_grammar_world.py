"""Task grammars of ALFWorld-mini, Bamboogle-mini and TravelPlanner-mini: every built-in task is a string of its
benchmark's grammar, hand-written faults are not, and strings drawn at random from a grammar read back as tasks
that the validator rejects only for what the grammar leaves to it.

A random string is drawn by a uniform choice among the tokens the grammar allows at each step (what a model with
random weights writes under the constraint), so its answer almost never fits its own prompt; the share of them
whose prompt the validator reads (rejected only as ``answer_mismatch``, if at all) measures how tight the
prompt's grammar is, and is printed with the rejection reasons.
"""

from __future__ import annotations

from functools import cache, lru_cache

import llguidance
import pytest

from genenv_engine.backends.grammar import compile_grammar, ll_tokenizer, matches, task_grammar
from genenv_engine.environments import get_environment
from genenv_engine.testing import grammar_verdicts, verdict_shares
from genenv_engine.training.tokenizer import build_byte_tokenizer

BENCHES = ("alfworld", "bamboogle", "travelplanner")
LEFT_TO_VALIDATOR = {
    "alfworld": {
        "answer_mismatch",
        "too_long",
        "too_big",
        "duplicate_name",
        "unsolvable",
        "already_solved",
        "too_hard",
        "budget",
    },
    "bamboogle": {"answer_mismatch", "too_long", "duplicate_passage", "too_many_distractors"},
    "travelplanner": {"answer_mismatch", "too_long", "infeasible_prefix", "bad_prefix", "budget"},
}
"""The rejections a random string of each grammar may get: a length cap, a name or passage listed once, the
world's solvability and size, a comparison's distractors, the plan's budget and the constraints the grammar does
not carry (see each ``task_grammar`` module), and the answer agreeing with the prompt."""
PROMPT_FLOOR = {"alfworld": 0.0, "bamboogle": 0.85, "travelplanner": 0.75}
"""Least share of 100 random strings whose prompt the validator reads (measured: alfworld 0.0, every one over the
180-character cap or unsolvable; bamboogle 0.92; travelplanner 0.85)."""
ACCEPTED_FLOOR = {"alfworld": 0.0, "bamboogle": 0.0, "travelplanner": 0.02}
"""Least share of them the validator accepts (measured: alfworld 0.0 and bamboogle 0.0, a random answer is not
the optimal action; travelplanner 0.04)."""
WRONG = {
    "alfworld": [
        "G: place mug in desk | at: - | has: - | desk 1: mug 1; bed 1 => go to desk 1",  # keyword
        "G: put mug in spaceship | at: - | has: - | desk 1: mug 1; bed 1 => go to desk 1",  # unknown type
        "G: put mug in desk | at: - | has: - | desk 1: mug 1; bed 1 => fly to desk 1",  # unknown command
        "G: put mug in desk | at: - | has: - | desk 0: mug 1; bed 1 => go to desk 1",  # number 0
        "G: put mug in desk | at: - | has: - | desk 12: mug 1; bed 1 => go to desk 12",  # number over 7
        "G: put mug in desk | at: - has: - | desk 1: mug 1; bed 1 => go to desk 1",  # separator
        "G: put mug in desk | at: bed 2 | has: - | desk 1: mug 1; bed 1 => go to desk 1",  # at an unlisted place
        "G: put mug in desk | at: - | has: - | desk 1 open: mug 1; bed 1 => go to desk 1",  # desks do not open
        "G: put mug in desk | at: - | has: - | desk 1: mug 1; fridge 1 => go to desk 1",  # fridge open or closed
        "G: put hot book in desk | at: - | has: - | desk 1: book 1; bed 1 => go to desk 1",  # books are not heated
        "G: put mug in desk | at: - | has: hot book 1 | desk 1: mug 1; bed 1 => go to desk 1",  # a hot book
        "G: put mug in desk | at: - | has: desklamp 1 | desk 1: mug 1; bed 1 => go to desk 1",  # holding a lamp
        "G: put mug in desk | at: - | has: - | desk 1: mug 1; safe 1 closed: desklamp 1 => go to desk 1",  # lamp
        "G: put mug in desk | at: - | has: - | desk 1: hot clean mug 1; bed 1 => go to desk 1",  # adjective order
        "G: put mug in desk | at: - | has: - | desk 1: mug 1; bed 1 => heat mug 1 with fridge 1",  # appliance
        "G: put mug in desk | at: - | has: - | desk 1: mug 1; bed 1; sofa 1; cart 1; shelf 1; shelf 2; toilet 1; "
        "safe 1 open => go to desk 1",  # eight receptacles
    ],
    "bamboogle": [  # names of env seed 0's knowledge base
        "Q: who created Ziste? | E: Ziste was founded by Kal Rand. => answer[Kal Rand]",  # keyword
        "Q: who founded Acme? => search[Acme founded]",  # unknown entity
        "Q: who founded Ziste? | E: Ziste was founded by Val Salk. => answer[Val Salk]",  # contradicts the KB
        "Q: who founded Ziste? E: Ziste was founded by Kal Rand. => answer[Kal Rand]",  # separator
        "Q: where was the founder of Nondas born? | E: Val Salk was born in Lezi. => answer[Lezi]",  # hop 2 first
        "Q: where was Ziste born? => search[Ziste born]",  # type mismatch
        "Q: who is Kugi Rask married to? => search[Kugi Rask married]",  # unanswerable: not married
        "Q: which opened first, Ziste or Ziste? => answer[Ziste]",  # one company twice
        "Q: who founded Ziste? | E: Tak Rul is married to Kagi Fex. Mubol was founded by Izu Molk. "
        "Rosek opened in 1918. => search[Ziste founded]",  # three distractors
        "Q: who founded Ziste? => search[Ziste invented]",  # not a canonical query
        "Q: when did Ziste open? => answer[19x1]",  # malformed year
        "Q: who founded Ziste => search[Ziste founded]",  # no question mark
    ],
    "travelplanner": [
        "A>B 1d 1p 300 | dAB A2 ?sight => Aa",  # no $
        "A>B 1d 1p $300 | dAB A9 ?sight => Aa",  # no restaurant A9
        "A>B 1d 1p $300 | dAB ?lunch => A1",  # wrong field
        "A>B 1d 1p $300 | dAB C1 ?sight => Aa",  # a meal outside the day's cities
        "A>B 1d 1p $0300 | dAB A2 ?sight => Aa",  # leading zero
        "A>B 9d 1p $3000 | ?go => dAB",  # 9 days
        "A>B 1d 1p $300 dAB A2 ?sight => Aa",  # separator
        "A>B 1d 1p $300 | dCB A2 ?sight => Aa",  # a leg not from the origin
        "A>B 1d 1p $5 | dAB A2 ?sight => Aa",  # budget below the cheapest plan
        "A>B 2d 1p $900 | dAB A2 Aa A3 A4 Bh1 / FBA1 ?bfast => B1",  # self-driving then a flight
        "A>B 2d 1p $900 | dAB A2 Aa A3 A4 Bh1 ?go => FBA1",  # a day's fields run on
        "A>B 2d 1p $900 c:thai,thai | ?go => dAB",  # a cuisine twice
        "A>B 1d 1p $300 h:pets | ?go => dAB",  # a house rule without a stay
        "A>B 2d 1p $900 t:nodrive | dAB ?bfast => A1",  # a banned mode
        "A>B 1d 1p $300 | dAB A2 ?sight => ZZ9",  # not a code
    ],
}


@lru_cache(maxsize=1)
def tok():
    """The byte tokenizer, built by the first test that needs it (not at collection, in every worker)."""
    return build_byte_tokenizer()


def grammar_of(name: str, seed: int = 0) -> str:
    return task_grammar(get_environment(name, seed).task_grammar())


@cache
def matcher(name: str, seed: int = 0):
    """``accepts(text)``: whether ``text`` is a string of the benchmark's grammar, as `matches` says (one compiled
    matcher, copied per text, since a large grammar takes a while to compile)."""
    base = llguidance.LLMatcher(ll_tokenizer(tok()), compile_grammar(grammar_of(name, seed)))

    def accepts(text: str) -> bool:
        m = base.deep_copy()
        return m.consume_tokens(tok().encode(text, add_special_tokens=False)) and m.is_accepting()

    return accepts


@pytest.mark.parametrize("seed", (0, 1))
@pytest.mark.parametrize("name", BENCHES)
def test_every_builtin_task_is_in_the_grammar(name, seed):
    env = get_environment(name, seed)
    accepts = matcher(name, seed)
    texts = [env.simulator_text(t) for split in ("seed", "train") for t in env.splits()[split]]
    missed = [text for text in texts if not accepts(text)]
    assert not missed, missed[:5]


@pytest.mark.parametrize("name", BENCHES)
def test_faults_are_outside_the_grammar(name):
    env = get_environment(name, 0)
    right = env.simulator_text(env.splits()["seed"][0])
    if name == "alfworld":  # the small grammar: check the cached matcher against `matches` itself
        assert matches(tok(), grammar_of(name), right) and not matches(tok(), grammar_of(name), WRONG[name][0])
    accepts = matcher(name)
    assert accepts(right)
    assert not [text for text in WRONG[name] if accepts(text)]


def test_bamboogle_grammar_is_the_seeds_knowledge_base():
    """Each seed's grammar names its own knowledge base, so a task of one seed is outside the other's."""
    other = get_environment("bamboogle", 1)
    text = other.simulator_text(other.splits()["seed"][0])
    assert matcher("bamboogle", 1)(text)
    assert not matcher("bamboogle", 0)(text)


@pytest.fixture(scope="module")
def verdicts():
    """Per benchmark, the validator's reasons for 100 random strings of its grammar ("" when accepted)."""
    return {name: grammar_verdicts(get_environment(name, 0), grammar_of(name), tok()) for name in BENCHES}


@pytest.mark.parametrize("name", BENCHES)
def test_random_strings_fail_only_what_the_grammar_leaves_out(verdicts, name):
    accepted, prompt_read, counts = verdict_shares(verdicts[name])
    print(f"{name}: accepted {accepted:.2f}, prompt read {prompt_read:.2f}, rejections {dict(counts)}")
    assert set(counts) <= LEFT_TO_VALIDATOR[name], counts
    assert accepted >= ACCEPTED_FLOOR[name]
    assert prompt_read >= PROMPT_FLOOR[name]
