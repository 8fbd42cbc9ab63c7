"""``simulator.answer_check = false``: a draft whose prompt is sound but whose answer is wrong is admitted with the
gold answer the validator recomputes, and the RWR update learns that answer, not the one the simulator wrote; with
the default (``true``) the same drafts are rejected. A real micro run with the scripted simulator and agent."""

from __future__ import annotations

import random
import re

import pytest

from genenv_engine.config import load_config
from genenv_engine.environments.bfcl.mini import generate_task
from genenv_engine.method.loop import run
from genenv_engine.storage.session import Session
from genenv_engine.testing import scripted_backends
from genenv_engine.training.trainer import RWRTrainer


def _drafts() -> list[tuple[str, str, str]]:
    """(prompt, wrong answer, gold answer) of four sound tasks, each answer with one digit changed."""
    rng = random.Random(11)
    out = []
    for level in (1, 2, 3, 2):
        prompt, gold = generate_task(level, rng)[:2]
        wrong = re.sub(r"\d", lambda m: str((int(m.group()) + 1) % 10), gold, count=1)
        out.append((prompt, wrong, gold))
    return out


def _run(tmp_path, monkeypatch, answer_check: bool) -> tuple[Session, list[str]]:
    targets: list[str] = []
    real = RWRTrainer.update

    def spy(self, examples, rng, tick=lambda: None):
        targets.extend(self.policy.tokenizer.decode(t, skip_special_tokens=True) for _, t, _ in examples)
        return real(self, examples, rng, tick)

    monkeypatch.setattr(RWRTrainer, "update", spy)
    texts = [f"{p} => {w}" for p, w, _ in _drafts()]
    cfg = load_config(
        "micro",
        overrides={
            "epochs": 1,
            "simulator.answer_check": answer_check,
            "simulator.repairs": False,
            "curriculum.k_min": 0.5,
        },
    )
    session = Session.create(cfg, tmp_path / f"s-{answer_check}")
    run(session, backend_factory=scripted_backends(texts))
    return session, targets


@pytest.mark.parametrize("answer_check", [True, False])
def test_a_sound_draft_with_a_wrong_answer_is_admitted_on_the_gold_only_without_the_answer_check(
    tmp_path, monkeypatch, answer_check
):
    session, targets = _run(tmp_path, monkeypatch, answer_check)
    store = session.store
    gold = {p: g for p, _, g in _drafts()}
    wrong = {p: w for p, w, _ in _drafts()}
    rows = store.query_tasks(origin="generated", limit=100)
    assert rows and all(r["prompt"] in gold for r in rows)
    metrics = store.epoch_metrics()[1]
    if answer_check:
        assert not any(r["valid"] for r in rows)
        assert all(r["reason"].startswith("answer_mismatch") for r in rows)
        assert metrics["valid"] == 0
    else:
        kept = [r for r in rows if r["valid"]]
        rejected = [r for r in rows if not r["valid"]]  # the near-duplicate cap may still drop repeats
        assert kept and all(r["answer"] == gold[r["prompt"]] for r in kept)
        assert all(not r["reason"].startswith("answer_mismatch") for r in rejected)
        assert metrics["valid"] == len(kept)
        learned = [t for t in targets if any(p in t for p in gold)]
        assert learned, "the admitted tasks reached the RWR update"
        for t in learned:
            prompt = next(p for p in gold if p in t)
            assert gold[prompt] in t and wrong[prompt] not in t
    store.close()
