"""``genenv run --agent-trainer trl`` and ``genenv resume``'s TRL path: TRL's ``GRPOTrainer`` trains the agent of a
session in this process (`genenv_engine.integrations.trl`), for a user who writes no script.

`run_session` runs a session with the trainer it was run with (``genenv resume`` and the console call it), genenv's
own or TRL's. `run_trl` builds the trainer from the session's agent and settings (`TrlCoEvolution.grpo_config`),
saves a TRL checkpoint in ``SESSION/trl`` at every genenv epoch boundary (the last two kept) and resumes from the
one at the session's last finished epoch, so a run that was stopped, crashed or killed continues with ``genenv
resume``. The trainer's settings, ``steps_per_epoch`` and ``batch`` (completions per step), are kept in the
session's meta (`TRAINER_KEY`): ``genenv resume`` reads them back and trains with TRL again. The session is an
ordinary one: ``genenv status``, ``genenv report`` and the console read it as a native run's.

Importing this module does no work: trl, transformers and torch load when `run_trl` runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from genenv_engine.core.events import EventSink, RunControl, null_sink

if TYPE_CHECKING:
    from genenv_engine.config import RunConfig
    from genenv_engine.storage.session import Session
    from genenv_engine.training.roles import BackendFactory

TRAINER_KEY = "agent_trainer"
"""The session meta key holding the agent's trainer and its settings, as JSON (absent: the native trainer)."""

KEEP_CHECKPOINTS = 2
"""TRL checkpoints kept in ``SESSION/trl`` (TRL's ``save_total_limit``): the newest at an epoch boundary and one
before it."""


def trainer_settings(session: Session) -> dict[str, Any]:
    """The agent trainer a session was run with: ``{"trainer": "native"}``, or TRL's with its settings."""
    stored = session.store.get_meta(TRAINER_KEY)
    return json.loads(stored) if stored else {"trainer": "native"}


def check_trl(config: RunConfig, batch: int | None) -> None:
    """Raise ValueError, before a session is created or changed, when TRL cannot train this config's agent: TRL
    not installed, or a ``batch`` that splits a group of ``agent.rollouts``."""
    import importlib.util

    if importlib.util.find_spec("trl") is None:
        raise ValueError("--agent-trainer trl needs TRL: pip install -e '.[trl]'")
    rollouts = config.agent.rollouts
    if batch is not None and (batch < 1 or batch % rollouts):
        raise ValueError(
            f"the TRL batch ({batch} completions a step) must be a multiple of agent.rollouts "
            f"({rollouts}, TRL's num_generations)"
        )


def default_batch(session: Session) -> int:
    """TRL's completions per step when none is given: two tasks' groups of ``agent.rollouts``."""
    return 2 * session.config.agent.rollouts


def run_session(
    session: Session,
    sink: EventSink = null_sink,
    control: RunControl | None = None,
    backend_factory: BackendFactory | None = None,
    *,
    trainer: str | None = None,
    steps_per_epoch: int | None = None,
    batch: int | None = None,
) -> dict[str, Any]:
    """Run ``session`` to its target epoch (or a stop) with ``trainer``, ``native`` or ``trl`` (None: the one the
    session was run with, `trainer_settings`): what ``genenv run``, ``genenv resume`` and the console call; returns
    what the run did."""
    if (trainer or trainer_settings(session)["trainer"]) == "trl":
        return run_trl(
            session,
            steps_per_epoch=steps_per_epoch,
            batch=batch,
            sink=sink,
            control=control,
            backend_factory=backend_factory,
        )
    from genenv_engine.method.loop import run

    return run(session, sink, control, backend_factory)


def run_trl(
    session: Session,
    *,
    steps_per_epoch: int | None = None,
    batch: int | None = None,
    sink: EventSink = null_sink,
    control: RunControl | None = None,
    backend_factory: BackendFactory | None = None,
) -> dict[str, Any]:
    """Train the session's agent with TRL until its epochs are done (or a stop request); returns what the run did
    (`TrlCoEvolution.summary`). ``steps_per_epoch`` and ``batch`` default to those the session was run with, else 8
    steps of `default_batch` completions; they are stored for ``genenv resume``."""
    from genenv_engine.integrations.trl import TrlCoEvolution

    before = trainer_settings(session)
    steps = steps_per_epoch or int(before.get("steps_per_epoch") or 8)
    size = batch or int(before.get("batch") or default_batch(session))
    check_trl(session.config, size)
    settings = {"trainer": "trl", "steps_per_epoch": steps, "batch": size}
    out = Path(session.path) / "trl"
    with TrlCoEvolution(
        session, steps_per_epoch=steps, sink=sink, control=control, backend_factory=backend_factory
    ) as coevo:
        session.store.set_meta(TRAINER_KEY, json.dumps(settings))
        from transformers import AutoTokenizer
        from trl import GRPOTrainer

        trainer = GRPOTrainer(
            model=coevo.model(),  # the agent's folder, or its base with the session's LoRA adapter
            reward_funcs=[coevo.reward],
            args=coevo.grpo_config(
                output_dir=str(out),
                per_device_train_batch_size=size,
                save_strategy="steps",
                save_total_limit=KEEP_CHECKPOINTS,
                disable_tqdm=True,
                logging_strategy="no",
            ),
            train_dataset=coevo.dataset(),
            processing_class=AutoTokenizer.from_pretrained(coevo.agent_path),
            callbacks=[coevo.callback],
        )
        trainer.train(resume_from_checkpoint=coevo.resume_checkpoint(out))
    return coevo.summary
