"""Test doubles for the generation backends, named as such: scripted agent and simulator.

Seconds-old micro models cannot write valid tasks or solve any, so tests that need valid
generations or mixed rewards swap a role's backend (through ``run(..., backend_factory=...)``)
for one of these. Policies, trainers, environments and the store stay real. Not used by the engine.
"""

from __future__ import annotations

import random
import re

from genenv_engine.backends.base import Completion, Sampling

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

    def sync(self) -> None:
        """Nothing to sync: no weights are used."""

    def generate(self, prompts: list[str], sampling: Sampling) -> list[Completion]:
        """One scripted ``<prompt> => <answer>`` text per prompt."""
        from genenv_engine.environments.bfcl.mini import generate_task

        out = []
        self.prompts.extend(prompts)
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


def scripted_backends(sim_texts: list[str] | None = None, p: float = 0.5, crash: bool = False,
                      style: str = "compact"):
    """A ``backend_factory`` giving each role its scripted double; the built doubles are kept in ``.made``."""
    made: dict[str, object] = {}

    def factory(role: str, policy):
        made[role] = (ScriptedAgent(policy, p, crash=crash) if role == "agent"
                      else ScriptedSimulator(policy, sim_texts, style=style))
        return made[role]
    factory.made = made  # type: ignore[attr-defined]
    return factory
