"""How much the two roles trained on over a session: the sequences and steps each update recorded, and an estimate
of the agent's trained tokens re-tokenised from the stored rollouts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from genenv_engine.reports.session_data import EpochData
from genenv_engine.storage.store import Store


def training_volume(session_dir: Path, store: Store, epochs: list[EpochData], update_epochs: int) -> dict[str, Any]:
    """Sequences the two updates trained on (recorded), and an estimate of the agent's trained tokens."""
    done = [e for e in epochs if e.complete and e.epoch > 0]
    agent_seq = sum(int(e.agent_update.get("sequences", 0) or 0) for e in done)
    agent_steps = sum(int(e.agent_update.get("steps", 0) or 0) for e in done)
    sim_examples = sum(int(e.simulator_update.get("examples", 0) or 0) for e in done if e.simulator_update.get("steps"))
    sim_steps = sum(int(e.simulator_update.get("steps", 0) or 0) for e in done)
    warm = next((e.warm_start for e in epochs if e.warm_start), None) or {}
    recorded = [e.agent_update.get("tokens") for e in done]
    sim_recorded = [e.simulator_update.get("tokens") for e in done if e.simulator_update.get("steps")]
    return {
        "agent_tokens": sum(recorded) if done and all(t is not None for t in recorded) else None,
        "simulator_tokens": sum(sim_recorded) if all(t is not None for t in sim_recorded) else None,
        "agent_sequences": agent_seq,
        "agent_steps": agent_steps,
        "simulator_examples": sim_examples,
        "simulator_steps": sim_steps,
        "agent_tokens_estimate": _agent_tokens(session_dir, store, done, update_epochs),
        "warm_start": warm,
    }


def _agent_tokens(session_dir: Path, store: Store, done: list[EpochData], update_epochs: int) -> int | None:
    """Completion tokens in the agent's GRPO updates, re-tokenised from the stored rollouts of groups with
    differing rewards (the others are dropped by GRPO), times the update passes. None without a tokenizer."""
    files = sorted(session_dir.glob("checkpoints/epoch_*/agent/tokenizer.json"))
    if not files or not done:
        return None
    try:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(files[0]))
    except Exception:
        return None
    total = 0
    for e in done:
        groups: dict[str, list[tuple[float, str]]] = {}
        for r in store.train_rollouts(e.epoch):
            groups.setdefault(r["task_id"], []).append((r["reward"] or 0.0, r["response"] or ""))
        texts = [t for g in groups.values() if len({x[0] for x in g}) > 1 for _, t in g]
        if texts:
            total += sum(len(enc.ids) for enc in tok.encode_batch(texts, add_special_tokens=False))
    return total * max(1, update_epochs)
