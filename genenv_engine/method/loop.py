"""The co-evolution controller of `genenv run`: every epoch reads like the paper's Algorithm 1.

`run` opens or continues a session through the co-evolution core (`genenv_engine.method.coevolution.CoEvolution`:
epoch 0 is the warm start and a held-out evaluation) and runs every later epoch with the native trainer,
`run_epoch`: the core's `begin_epoch` (generate -> validate: the fresh tasks and a replay sample), the executor's
rollouts of them (`genenv_engine.method.phases.rollout`), and the core's `end_epoch` with genenv's GRPO as the agent's
update (p-hat and R_env -> agent update -> simulator update -> held-out eval -> checkpoint). A trainer outside genenv
(`genenv_engine.integrations`) drives the same core with its own rollouts and update. Where the fresh tasks come
from, how seeds are drawn, what the replay draws from, the note a simulator prompt carries and the simulator's reward
(with its hooks before and after the agent's update) are the strategies the run resolved once from its config
(`genenv_engine.method.strategies`), called without branching on settings. The loop emits typed events, checks the
`RunControl` between phases and batches (pause/stop), and stores everything in the session's SQLite store, so a
crash or a stop leaves a resumable session. A plugin's fault fails its item and is counted
(`genenv_engine.method.faults`: ``plugin_faults`` in each epoch's metrics and line); any other exception raised in a
plugin's code stops the run with one line naming it (`genenv_engine.core.limits.plugin_failure`).
"""

from __future__ import annotations

from typing import Any

from genenv_engine.core.events import EventSink, RunControl, null_sink
from genenv_engine.method.coevolution import CoEvolution
from genenv_engine.method.phases import grpo, rollout
from genenv_engine.storage.session import Session
from genenv_engine.training.roles import BackendFactory


def run(
    session: Session,
    sink: EventSink = null_sink,
    control: RunControl | None = None,
    backend_factory: BackendFactory | None = None,
) -> dict[str, Any]:
    """Run (or continue) the session up to ``config.epochs``; returns a short summary (``epochs_done``, and
    ``stopped_at`` after a stop request).

    Holds the session's lease throughout (taken here unless the caller holds it): a second engine on the same
    session raises `genenv_engine.core.errors.SessionBusy` before it changes anything."""
    with CoEvolution(session, sink, control, backend_factory) as coevo:
        coevo.start()
        while coevo.epoch <= session.config.epochs:
            run_epoch(coevo)
    return coevo.summary


def run_epoch(coevo: CoEvolution) -> dict[str, Any]:
    """One epoch of Algorithm 1 with the native trainer; returns the epoch's metrics.

    1-2. the simulator writes and the environment validates the drafts (the core's `CoEvolution.begin_epoch`);
    3. k rollouts of every fresh and replayed task by the executor, stored; then the core's `CoEvolution.end_epoch`:
    p-hat per batch and R_env, 4. GRPO (`grpo` as the agent's update), 5. RWR, 6. held-out eval, 7. checkpoint."""
    tasks = coevo.begin_epoch()
    coevo.record_attempts(rollout(coevo.step, tasks))
    return coevo.end_epoch(grpo)
