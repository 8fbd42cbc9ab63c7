"""The simulator role's pure parts: duplicate capping, held-out copies, near-duplicate keys."""

from __future__ import annotations

from collections import Counter

from genenv_engine.core.records import Task
from genenv_engine.training.simulator import Generation, cap_duplicates, near_duplicate_key


def gen(prompt: str, valid: bool = True) -> Generation:
    seed = Task(id="s", benchmark="bfcl", prompt="seed", answer="x")
    task = Task(id=f"g/{prompt}", benchmark="bfcl", prompt=prompt, answer="a", valid=valid)
    return Generation(seed, "b", "ctx", f"{prompt} => a", [1], task)


def test_cap_rejects_repeats_templates_over_cap_and_heldout_copies():
    gens = [
        gen("Q: add 1 and 2"),
        gen("Q: add 1 and 2"),
        gen("Q: add 3 and 4"),
        gen("Q: add 5 and 6"),
        gen("Q: neg 1"),
        gen("Q: held"),
        gen("Q: old"),
        gen("broken", valid=False),
    ]
    keys = Counter({near_duplicate_key("Q: neg 9"): 1})
    gens, info = cap_duplicates(gens, {"Q: old"}, keys, cap=2, heldout_prompts=frozenset({"Q: held"}))
    verdicts = [(g.task.prompt, g.task.valid, g.task.reason.split(":")[0]) for g in gens]
    assert verdicts == [
        ("Q: add 1 and 2", True, ""),
        ("Q: add 1 and 2", False, "duplicate"),
        ("Q: add 3 and 4", True, ""),
        ("Q: add 5 and 6", False, "duplicate_cap"),
        ("Q: neg 1", True, ""),
        ("Q: held", False, "heldout_copy"),
        ("Q: old", False, "duplicate"),
        ("broken", False, ""),
    ]
    assert info == {"unique_fraction": 6 / 7, "duplicates_rejected": 4.0}
    assert keys[near_duplicate_key("Q: add 9 and 9")] == 2 and keys[near_duplicate_key("Q: neg 0")] == 2
