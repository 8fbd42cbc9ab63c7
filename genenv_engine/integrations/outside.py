"""A session driven by a trainer outside genenv (TRL, veRL): opening it the way ``genenv resume`` does and leaving it.

`open_core` finds or creates the session, takes its lease (one engine per session) unless the caller holds it,
checks its paths and plugins, raises its epoch target, marks a partial epoch for redoing, and enters and starts the
co-evolution core (`genenv_engine.method.coevolution.CoEvolution`) at the session's next epoch; it returns the core,
the lease it took and the trainer's step count at the end of the last finished epoch (``agent_update.trainer_step``,
0 when the outside trainer trained none). `close_core` leaves the core (an open epoch is marked partial, a stop
request is handled) and releases the lease. Importing this module does no work.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from genenv_engine.core.events import EventSink, RunControl

if TYPE_CHECKING:
    from genenv_engine.config import RunConfig
    from genenv_engine.method.coevolution import CoEvolution
    from genenv_engine.storage.session import Session
    from genenv_engine.training.roles import BackendFactory


def find_session(session: Session | None, folder: Path, config: RunConfig | None, how_to_create: str) -> Session:
    """``session`` itself, else the session in ``folder`` (continued), else a new one there from ``config``; without
    any, `FileNotFoundError` naming ``how_to_create``."""
    from genenv_engine.storage.session import Session

    if session is not None:
        return session
    if (folder / "config.toml").exists():
        return Session.open(folder, check=True)
    if config is not None:
        return Session.create(config, folder)
    raise FileNotFoundError(f"{folder} holds no genenv session: {how_to_create}")


def open_core(
    session: Session,
    holder: str,
    *,
    epochs: int | None = None,
    sink: EventSink,
    control: RunControl | None,
    backend_factory: BackendFactory | None,
) -> tuple[CoEvolution, Any, int]:
    """Continue ``session`` as ``genenv resume`` does, its lease taken as ``holder`` unless the caller holds it, and
    start the co-evolution core at its next epoch; returns (core, the lease taken here or None, the trainer's step at
    the end of the last finished epoch). A failure leaves nothing held."""
    from genenv_engine.method.coevolution import CoEvolution

    lease = session.lease(holder) if session.held is None else None
    core: CoEvolution | None = None
    try:
        session.config.check_paths()
        session.check_releases()
        if epochs is not None:
            session.set_epochs(epochs)
        session.prepare_resume()
        cfg = session.config
        if session.store.last_finished_epoch() >= cfg.epochs or cfg.epochs < 1:  # nothing left to train
            raise ValueError(f"{session.path} asks for {cfg.epochs} epochs and has done them: ask for more epochs")
        core = CoEvolution(session, sink, control, backend_factory)
        core.__enter__()
        core.start()
    except BaseException as exc:
        close_core(core, lease, exc)
        raise
    last = {m["epoch"]: m for m in session.store.epoch_metrics()}.get(core.epoch - 1, {})
    return core, lease, int((last.get("agent_update") or {}).get("trainer_step", 0))


def close_core(core: CoEvolution | None, lease: Any, exc: BaseException | None) -> tuple[bool, dict[str, Any]]:
    """Leave ``core`` (an epoch still open is marked partial, redone on resume) and release ``lease``; returns whether
    ``exc`` (a stop request) was handled and what the run did (`CoEvolution.summary`; empty without a core)."""
    try:
        if core is None:
            return False, {}
        handled = core.__exit__(type(exc) if exc else None, exc, exc.__traceback__ if exc else None)
        return bool(handled), dict(core.summary)
    finally:
        if lease is not None:
            lease.release()
