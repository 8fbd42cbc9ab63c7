"""The generation backend interface: batched sampling that returns text, token ids and log-probs.

The loop only calls `generate` and `sync`; a backend may run in-process (``hf``) or hold its own
engine (``vllm``) that needs the trained weights pushed to it after every update.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class Sampling:
    """How to sample: temperature (ignored when greedy), token budget, greedy or not, and an optional grammar."""

    temperature: float = 1.0
    max_new_tokens: int = 64
    greedy: bool = False
    seed: int | None = None
    grammar: str | None = None
    """A Lark grammar every completion must be a string of (`genenv_engine.backends.grammar`); None: free text."""


@dataclass
class Completion:
    """One sampled continuation."""

    text: str
    token_ids: list[int]
    logprobs: list[float] = field(default_factory=list)
    """Log-probability of each sampled token under the sampling distribution."""
    finished: bool = True
    """Whether the model stopped by itself (end of sequence) rather than by the token budget."""
    end_token: int | None = None
    """The token that ended the completion, which ``token_ids`` leaves out: the end-of-sequence, or the padding token
    when the model sampled that (the decoder ends a row there too); None when the budget cut it, or unknown (then
    a finished completion ended with the end-of-sequence)."""


class GenerationBackend(Protocol):
    """What the loop needs from a generation engine."""

    tokens_generated: int
    """Completion tokens generated so far (end-of-sequence included), read for throughput."""
    tick: Callable[[], None] | None
    """Called between decoding steps, so a pause or stop lands mid-generation; None: never."""

    def generate(self, prompts: list[str], sampling: Sampling) -> list[Completion]:
        """Sample one completion per already-templated prompt, in order."""
        ...

    def sync(self) -> None:
        """Make the backend use the policy's current weights (after an update)."""
        ...
