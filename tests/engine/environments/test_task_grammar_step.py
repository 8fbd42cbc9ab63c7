"""Task grammars of BFCL-mini, API-Bank-mini and chain: every built-in task is a string of its benchmark's grammar,
hand-written faults are not, and strings drawn at random from a grammar read back as tasks that the validator
rejects only for what a context-free grammar leaves to it.

A random string is drawn by a uniform choice among the tokens the grammar allows at each step (what a model with
random weights writes under the constraint), so it almost never agrees with its own prompt; the share of them
whose prompt the validator reads (rejected only as ``answer_mismatch``, if at all) measures how tight the
prompt's grammar is, and is printed with the rejection reasons.
"""

from __future__ import annotations

import llguidance
import pytest

from genenv_engine.backends.grammar import compile_grammar, ll_tokenizer, matches, task_grammar
from genenv_engine.environments import get_environment
from genenv_engine.environments.apibank.task_grammar import TIME, date_forms
from genenv_engine.environments.base import SplitSizes
from genenv_engine.testing import grammar_verdicts, verdict_shares
from genenv_engine.training.tokenizer import build_byte_tokenizer

BENCHES = ("bfcl", "apibank", "chain")
SIZES = {"chain": SplitSizes(seed=200, train=300, heldout=200)}
"""Split sizes the fast test builds (chain's default train split of 32,000 tasks, env seed 0's, is the slow
test's)."""
LEFT_TO_VALIDATOR = {
    "bfcl": {"answer_mismatch", "duplicate_function", "verb_not_listed", "too_long"},
    "apibank": {
        "answer_mismatch",
        "duplicate_api",
        "api_not_listed",
        "context_mismatch",
        "too_long",
        "context_exec_error",
        "gold_exec_error",
    },
    "chain": {"answer_mismatch", "duplicate_function", "unknown_function", "value_out_of_range", "bad_hint"},
}
"""The rejections a random string of each grammar may get: what the grammar cannot carry (a name listed once or
listed at all, a value copied from elsewhere, arithmetic, a length cap, the answer agreeing with the prompt)."""
PROMPT_FLOOR = {"bfcl": 0.2, "apibank": 0.35, "chain": 0.0}
"""Least share of 100 random strings whose prompt the validator reads (measured: bfcl 0.28, apibank 0.39,
chain 0.0: a random chain applies a name it does not define, or defines one twice)."""
ACCEPTED_FLOOR = 0.0
"""Least share of them the validator accepts (measured 0.0 for all three: a random answer is not the gold)."""
WRONG = {
    "bfcl": [
        "F: add(a:int,b:int) sq(x:int) | R: add 2 and 7 => add(a=2,b=7)",  # keyword
        "F: add(a:int,b:int) cube(x:int) | Q: add 2 and 7 => add(a=2,b=7)",  # unknown function
        "F: add(a:int,b:float) | Q: add 2 and 7 => add(a=2,b=7)",  # signature
        "F: add(a:int,b:int) sq(x:int) | Q: add 02 and 7 => add(a=2,b=7)",  # leading zero
        "F: add(a:int,b:int) sq(x:int) | Q: add 1000 and 7 => add(a=1000,b=7)",  # over 999
        "F: add(a:int,b:int) sq(x:int) Q: add 2 and 7 => add(a=2,b=7)",  # separator
        "F: sq(x:int) | Q: add 2 and 7 => add(a=2,b=7)",  # the first call's function not listed
        "F: add(a:int,b:int) | Q: add 2 and 7 => add(b=7,a=2)",  # answer not canonical
        "F: move(d:n|s|e|w,k:int=1) | Q: go x => move(d=x)",  # enum value
        "F: neg(x:int) | Q: neg 1 then neg 2 then neg 3 then neg 4 => neg(x=1)",  # four calls
    ],
    "apibank": [
        "APIs: AddAlarm(time) | U: add alarm on 03:10 => API-Request: [AddAlarm(time='03:10')]",  # cue
        "APIs: AddAlarm(time) | U: add alarm at 03:10 => API-Call: [AddAlarm(time='03:10')]",  # keyword
        "APIs: SetAlarm(time) | U: add alarm at 03:10 => API-Request: [AddAlarm(time='03:10')]",  # unknown API
        "APIs: AddAlarm(time) | U: add alarm at 25:10 => API-Request: [AddAlarm(time='25:10')]",  # bad time
        "APIs: AddAlarm(time) | U: add alarm at 7am => API-Request: [AddAlarm(time='07:00')]",  # alarm exists
        "APIs: DeleteAlarm(time) | U: delete alarm at 8am => API-Request: [DeleteAlarm(time='08:00')]",  # none
        "APIs: AddAlarm(time) U: add alarm at 03:10 => API-Request: [AddAlarm(time='03:10')]",  # separator
        "APIs: QueryAgenda(date) | U: query agenda on 02-30 => API-Request: [QueryAgenda(date='02-30')]",  # date
        "APIs: QueryStock(code,date) | U: query stock ZZZ on 03-22 => "  # stock code
        "API-Request: [QueryStock(code='ZZZ',date='03-22')]",
        "APIs: AddAgenda(what,date,place) | U: plan piano on 03-26 at library => "  # gold answer over its cap
        "API-Request: [AddAgenda(what='piano',date='03-26',place='library')]",
        "APIs: Calculator(formula) | U: calculate 5/0 => API-Request: [Calculator(formula='5/0')]",  # division by 0
        "APIs: ToolSearcher(keywords) AddAlarm(time) | U: wake me at 7pm => "  # ToolSearcher not alone
        "API-Request: [ToolSearcher(keywords='wake me')]",
    ],
    "chain": [
        "apply f g | begin 5 | f(x)=x+3 g(x)=x*2 => f(5)=8; g(8)=16",  # keyword
        "apply f x | start 5 | f(x)=x+3 x(x)=x*2 => f(5)=8; x(8)=16",  # the argument's name as a function
        "apply f g | start 05 | f(x)=x+3 g(x)=x*2 => f(5)=8; g(8)=16",  # leading zero
        "apply f g | start 100 | f(x)=x+3 g(x)=x*2 => f(100)=103; g(103)=206",  # over 99
        "apply f g | start 5 | f(x)=x+3 g(x)=x*1 => f(5)=8; g(8)=8",  # x*c needs c in 2-9
        "apply f g | start 5 | f(x)=x^3 g(x)=x*2 => f(5)=8; g(8)=16",  # rule shape
        "apply f g start 5 | f(x)=x+3 g(x)=x*2 => f(5)=8; g(8)=16",  # separator
        "apply f g | start 5 | f(x)=x+3 g(x)=x*2 => f(5)=8; g(9)=18",  # a call not taking the last result
        "apply f g | start 5 | f(x)=x+3 g(x)=x*2 | hint f(4)=7 => f(5)=8; g(8)=16",  # hint not from the start
        "apply f g | start 5 | f(x)=x+3 g(x)=x*2 | hint f(5)=8; g(8)=16 => f(5)=8; g(8)=16",  # hint of all calls
        "apply f f f f f f f f f | start 1 | f(x)=x+1 => f(1)=2",  # nine calls
    ],
}


@pytest.fixture(scope="module")
def tok():
    return build_byte_tokenizer()


def grammar_of(name: str) -> str:
    return task_grammar(get_environment(name, 0).task_grammar())


def matcher(tok, grammar: str):
    """``accepts(text)``: whether ``text`` is a string of ``grammar`` (one compiled matcher, copied per text)."""
    base = llguidance.LLMatcher(ll_tokenizer(tok), compile_grammar(grammar))

    def accepts(text: str) -> bool:
        m = base.deep_copy()
        return m.consume_tokens(tok.encode(text, add_special_tokens=False)) and m.is_accepting()

    return accepts


def split_texts(name: str, sizes: SplitSizes | None, seeds: tuple[int, ...] = (0, 1)) -> list[str]:
    """The simulator text of every seed and train task of the environments of ``seeds``."""
    texts = []
    for seed in seeds:
        env = get_environment(name, seed, sizes=sizes)
        texts += [env.simulator_text(t) for split in ("seed", "train") for t in env.splits()[split]]
    return texts


@pytest.mark.parametrize("name", BENCHES)
def test_every_builtin_task_is_in_the_grammar(tok, name):
    accepts = matcher(tok, grammar_of(name))
    missed = [text for text in split_texts(name, SIZES.get(name)) if not accepts(text)]
    assert not missed, missed[:5]


@pytest.mark.slow
def test_every_default_chain_task_is_in_the_grammar(tok):
    accepts = matcher(tok, grammar_of("chain"))
    missed = [text for text in split_texts("chain", None, seeds=(0,)) if not accepts(text)]
    assert not missed, missed[:5]


@pytest.mark.parametrize("name", BENCHES)
def test_faults_are_outside_the_grammar(tok, name):
    grammar = grammar_of(name)
    env = get_environment(name, 0, sizes=SIZES.get(name))
    right = env.simulator_text(env.splits()["seed"][0])
    assert matches(tok, grammar, right)
    for text in WRONG[name]:
        assert not matches(tok, grammar, text), text


def test_apibank_value_terminals_are_the_readers():
    """The date and time terminals take exactly what the reader reads (checked with Python's regex engine)."""
    from genenv_engine.environments.apibank.dialogue import _DATE, _MON_DAY
    from genenv_engine.environments.apibank.syntax import norm_date

    candidates = {f"{m:02d}-{d:02d}" for m in range(100) for d in range(100)}
    candidates |= {f"{m}/{d}" for m in range(1, 13) for d in range(1, 40)}
    candidates |= {
        f"{mon} {d}"
        for mon in ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
        for d in range(1, 40)
    }
    readable = {c for c in candidates if (_DATE.fullmatch(c) or _MON_DAY.fullmatch(c)) and norm_date(c)}
    assert set(date_forms()) == readable
    assert "\\d" not in TIME and "[0-9]" in TIME


@pytest.fixture(scope="module")
def verdicts(tok):
    """Per benchmark, the validator's reasons for 100 random strings of its grammar ("" when accepted)."""
    return {
        name: grammar_verdicts(get_environment(name, 0, sizes=SIZES.get(name)), grammar_of(name), tok)
        for name in BENCHES
    }


@pytest.mark.parametrize("name", BENCHES)
def test_random_strings_fail_only_what_the_grammar_leaves_out(verdicts, name):
    accepted, prompt_read, counts = verdict_shares(verdicts[name])
    print(f"{name}: accepted {accepted:.2f}, prompt read {prompt_read:.2f}, rejections {dict(counts)}")
    assert set(counts) <= LEFT_TO_VALIDATOR[name], counts
    assert accepted >= ACCEPTED_FLOOR
    assert prompt_read >= PROMPT_FLOOR[name]
