"""Test doubles, named as such: scripted agent and simulator backends, and slow checkers for a Ray worker.

Seconds-old micro models cannot write valid tasks or solve any, so tests that need valid
generations or mixed rewards swap a role's backend (through ``run(..., backend_factory=...)``)
for one of these. Policies, trainers, environments and the store stay real. `SlowCheckerWorker`
is a Ray worker whose checks sleep on marked tasks (the call-timeout tests). Not used by the engine.
"""

from __future__ import annotations

import random
import re

from genenv_engine.backends.base import Completion, Sampling
from genenv_engine.executors.worker import RolloutWorker

USER_TURN = re.compile(r"<\|user\|>(.*)<\|assistant\|>", re.S)
"""The user turn of a prompt rendered with the byte tokenizer's chat template."""


class ScriptedSimulator:
    """Test double: writes a fresh valid BFCL-style task per simulator prompt, or cycles through fixed ``texts``."""

    def __init__(self, policy, texts: list[str] | None = None, seed: int = 0, style: str = "compact") -> None:
        self.policy, self.texts, self.rng = policy, texts, random.Random(seed)
        self.style = style
        """``compact`` writes ``<prompt> => <answer>``; ``instruct`` writes ``TASK:``/``ANSWER:`` lines."""
        self.tokens_generated = 0
        self.tick = None
        self.prompts: list[str] = []
        """Every prompt received, in order."""
        self.grammars: list[str | None] = []
        """The grammar of every call (`Sampling.grammar`; it is not applied to the scripted texts)."""

    def sync(self) -> None:
        """Nothing to sync: no weights are used."""

    def generate(self, prompts: list[str], sampling: Sampling) -> list[Completion]:
        """One scripted ``<prompt> => <answer>`` text per prompt."""
        from genenv_engine.environments.bfcl.mini import generate_task

        out = []
        self.prompts.extend(prompts)
        self.grammars.append(sampling.grammar)
        for i, _ in enumerate(prompts):
            if self.texts is not None:
                text = self.texts[i % len(self.texts)]
            else:
                prompt, answer, *_ = generate_task(self.rng.choice([1, 2, 3]), self.rng)
                text = f"{prompt} => {answer}" if self.style == "compact" else f"TASK: {prompt}\nANSWER: {answer}"
            self.tokens_generated += len(text)
            out.append(Completion(text, self.policy.encode(text)))
        return out


class ScriptedAgent:
    """Test double: answers a BFCL-mini task correctly with probability ``p`` (always when greedy).

    ``crash=True`` raises during sampled rollouts, to test how front ends handle engine errors.
    """

    def __init__(self, policy, p: float = 0.5, seed: int = 0, crash: bool = False) -> None:
        self.policy, self.p, self.rng, self.crash = policy, p, random.Random(seed), crash
        self.tokens_generated = 0
        self.tick = None
        self.prompts_seen: list[str] = []

    def sync(self) -> None:
        """Nothing to sync: no weights are used."""

    def generate(self, prompts: list[str], sampling: Sampling) -> list[Completion]:
        """The gold call (read back from the prompt by the environment's parser) or a wrong one."""
        from genenv_engine.environments.bfcl.catalog import read_prompt

        if self.crash and not sampling.greedy:
            raise RuntimeError("scripted crash during rollout")
        out = []
        for prompt in prompts:
            match = USER_TURN.search(prompt)
            task = match.group(1) if match else prompt
            self.prompts_seen.append(task)
            good = sampling.greedy or self.rng.random() < self.p
            text = read_prompt(task).answer if good else "nope(x=1)"
            self.tokens_generated += len(text)
            out.append(Completion(text, self.policy.encode(text)))
        return out


def scripted_backends(sim_texts: list[str] | None = None, p: float = 0.5, crash: bool = False, style: str = "compact"):
    """A ``backend_factory`` giving each role its scripted double; the built doubles are kept in ``.made``."""
    made: dict[str, object] = {}

    def factory(role: str, policy):
        made[role] = (
            ScriptedAgent(policy, p, crash=crash)
            if role == "agent"
            else ScriptedSimulator(policy, sim_texts, style=style)
        )
        return made[role]

    factory.made = made  # type: ignore[attr-defined]
    return factory


SLOW_SECONDS = 30.0
"""How long a slow test-double check sleeps: far past the short call timeouts the tests use, and bounded, so a
broken timeout makes a test fail late instead of hang."""


class SlowChecks:
    """Test double: an environment whose checker and validator sleep `SLOW_SECONDS` first on tasks whose id holds
    ``/slow`` (every time) or ``/slow-once-TOKEN`` (only the first time on the machine running the test: a marker
    file named after TOKEN in the temp folder records it, so a restarted worker process checks it quickly).
    Everything else is the wrapped environment's."""

    def __init__(self, env) -> None:
        self.env = env

    def __getattr__(self, name: str):
        return getattr(self.env, name)

    @staticmethod
    def _maybe_sleep(task_id: str) -> None:
        import tempfile
        import time
        from pathlib import Path

        if "/slow-once-" in task_id:
            marker = Path(tempfile.gettempdir()) / f"genenv-slow-once-{task_id.split('/slow-once-')[1].split('/')[0]}"
            if marker.exists():
                return
            marker.touch()
        elif "/slow" not in task_id:
            return
        time.sleep(SLOW_SECONDS)

    def check(self, task, response):
        """The wrapped checker, after the sleep its task id asks for."""
        self._maybe_sleep(task.id)
        return self.env.check(task, response)

    def validate(self, prompt, answer, **kwargs):
        """The wrapped validator, after the sleep its task id asks for."""
        self._maybe_sleep(kwargs.get("task_id", ""))
        return self.env.validate(prompt, answer, **kwargs)


class SlowCheckerWorker(RolloutWorker):
    """Test double: a Ray worker whose environments are wrapped in `SlowChecks` (pass it as the Ray executor's
    ``worker``)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.envs = {name: SlowChecks(env) for name, env in self.envs.items()}


def grammar_verdicts(env, grammar: str, tokenizer, n: int = 100, seed: int = 0) -> list[str]:
    """The validator's verdict on ``n`` random strings of ``grammar`` (`genenv_engine.backends.grammar.random_strings`,
    what a model with random weights writes under it), each parsed as a draft and validated against the first seed
    task as parent: the rejection reason's prefix, or "" when accepted. Raises GenerationParseError for a string
    whose shape the grammar should have made right."""
    from genenv_engine.backends.grammar import random_strings
    from genenv_engine.training.simulator import parse_output

    parent = env.splits()["seed"][0]
    out = []
    for text in random_strings(tokenizer, grammar, n, seed=seed):
        prompt, answer = parse_output(env, text)
        verdict = env.validate(prompt, answer, task_id="t", parent=parent)
        out.append("" if verdict.ok else verdict.reason.split(":")[0])
    return out


def verdict_shares(reasons: list[str]) -> tuple[float, float, dict[str, int]]:
    """From `grammar_verdicts`: the share accepted, the share whose prompt the validator read (accepted, or rejected
    only for the answer), and the rejections counted by reason.

    >>> verdict_shares(["", "answer_mismatch", "duplicate_name", "answer_mismatch"])
    (0.25, 0.75, {'answer_mismatch': 2, 'duplicate_name': 1})
    """
    from collections import Counter

    accepted = reasons.count("") / len(reasons)
    read = sum(r in ("", "answer_mismatch") for r in reasons) / len(reasons)
    return accepted, read, dict(Counter(r for r in reasons if r))
