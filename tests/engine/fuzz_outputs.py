"""The hypothesis strategy the fuzz tests share: a simulator output made from a real task of an environment and
mutated (characters inserted, deleted, replaced or repeated, fragments spliced in, numbers changed), or random text."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

ALL_MUTATIONS = ("insert", "delete", "replace", "dup", "splice", "digit")


@st.composite
def mutated_outputs(draw, env, fragments: Sequence[str], mutations: Sequence[str] = ALL_MUTATIONS) -> tuple[str, str]:
    """(text, style): a mutated real task of ``env`` in one of the two output styles, or random text."""
    pool = env.splits()["seed"] + env.splits()["train"][:200]
    task = pool[draw(st.integers(0, len(pool) - 1))]
    style = draw(st.sampled_from(["compact", "instruct"]))
    text = env.simulator_text(task) if style == "compact" else f"TASK: {task.prompt}\nANSWER: {task.answer}"
    if draw(st.integers(0, 9)) == 0:
        return draw(st.text(max_size=300)), style
    for _ in range(draw(st.integers(0, 6))):
        op = draw(st.sampled_from(list(mutations)))
        i = draw(st.integers(0, len(text)))
        j = min(len(text), i + draw(st.integers(1, 12)))
        if op == "insert":
            text = text[:i] + draw(st.text(min_size=1, max_size=4)) + text[i:]
        elif op == "delete":
            text = text[:i] + text[j:]
        elif op == "replace":
            text = text[:i] + draw(st.text(min_size=1, max_size=3)) + text[j:]
        elif op == "dup":
            text = text[:j] + text[i:j] + text[i:]
        elif op == "splice":
            text = text[:i] + draw(st.sampled_from(list(fragments))) + text[i:]
        else:  # change numbers, the commonest real variation
            text = text[:i] + str(draw(st.integers(-(10**6), 10**6))) + text[j:]
    return text, style
