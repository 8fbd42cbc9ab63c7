"""The two roles in memory: agent and simulator policies, their frozen references, trainers and backends.

`load_roles` rebuilds everything for a given epoch from a session's checkpoints (the warm start
for epoch 0), and `save_roles` writes a checkpoint folder: ``agent/`` and ``simulator/`` as plain
``save_pretrained`` folders (full roles) or standard PEFT adapter folders (LoRA roles, whose base
is the run's base checkpoint) plus the optimizer states, so resuming continues the same optimisation.

Loading verifies the checkpoint first (`genenv_engine.storage.session.verify_checkpoint`: ``COMPLETE``
marker, manifest sizes and hashes) and reads optimizer states with ``torch.load(weights_only=True)``,
so a session folder from elsewhere cannot run code; a damaged checkpoint raises `CheckpointError`
naming the folder instead of loading half a model or a fresh optimizer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from genenv_engine.backends import get_backend
from genenv_engine.backends.base import GenerationBackend
from genenv_engine.storage.session import SessionError, verify_checkpoint
from genenv_engine.training.policy import Policy
from genenv_engine.training.trainer import GRPOTrainer, RWRTrainer


@dataclass
class Roles:
    """Agent, simulator, their references (warm-start copies), trainers and generation backends."""

    agent: Policy
    agent_ref: Policy
    simulator: Policy
    simulator_init: Policy
    grpo: GRPOTrainer
    rwr: RWRTrainer
    agent_backend: GenerationBackend
    simulator_backend: GenerationBackend

    def tokens_generated(self) -> int:
        """Tokens sampled so far by both backends (for throughput)."""
        return sum(b.tokens_generated for b in (self.agent_backend, self.simulator_backend))


class CheckpointError(SessionError):
    """A checkpoint folder that cannot be loaded; the message names it and what to do."""


def _load_optimizer(trainer: GRPOTrainer | RWRTrainer, path: Path) -> None:
    """Restore what the trainer's ``save_state`` wrote, without unpickling arbitrary objects."""
    import torch

    try:
        state = torch.load(path, weights_only=True)
        trainer.optimizer.load_state_dict(state["optimizer"])
        trainer.steps = int(state["steps"])
    except Exception as exc:  # unpickling refused, truncated file, wrong shapes: all mean a bad checkpoint
        raise CheckpointError(
            f"{path} cannot be loaded ({type(exc).__name__}: {str(exc)[:200]}): "
            f"resume falls back to the previous checkpoint if you move {path.parent} aside"
        ) from None


BackendFactory = Callable[[str, Policy], GenerationBackend]
"""Builds the generation backend of a role (``"agent"`` or ``"simulator"``) for its policy."""


def load_roles(
    session, epoch: int, warm_start_dir: Path | None = None, backend_factory: BackendFactory | None = None
) -> Roles:
    """Load both roles as of the end of ``epoch`` (epoch 0 may come straight from the warm-start cache).

    ``backend_factory`` replaces the configured backend (tests use scripted doubles through it).
    """
    from genenv_engine.training.models import load_role_policies

    cfg = session.config
    init = warm_start_dir if warm_start_dir is not None else session.checkpoint_dir(0)
    here = init if epoch == 0 else session.checkpoint_dir(epoch)
    from_session = warm_start_dir is None or epoch > 0  # else a fresh warm start: no marker, no optimizer state
    session_folders = {init, here} if warm_start_dir is None else ({here} if epoch > 0 else set())
    for folder in sorted(session_folders):
        problem = verify_checkpoint(folder)
        if problem is not None:
            raise CheckpointError(
                f"checkpoint {folder} is damaged ({problem}): run 'genenv resume {session.path}' "
                "to fall back to the previous complete checkpoint"
            )
    try:
        p = load_role_policies(cfg.model, cfg.runtime, here, init)
    except (OSError, ValueError, RuntimeError) as exc:
        raise CheckpointError(
            f"checkpoint {here} cannot be loaded ({type(exc).__name__}: {str(exc)[:200]}): "
            "move it aside and resume from the previous one"
        ) from None
    agent, agent_ref, simulator, simulator_init = p["agent"], p["agent_ref"], p["simulator"], p["simulator_ref"]
    a, s = cfg.agent, cfg.simulator
    micro = cfg.runtime.micro_batch
    grpo = GRPOTrainer(
        agent,
        agent_ref,
        a.lr,
        a.clip,
        a.kl_coef,
        a.minibatch,
        a.update_epochs,
        a.drop_zero_variance,
        micro_batch=micro,
        steps=a.steps_per_epoch,
    )
    rwr = RWRTrainer(simulator, simulator_init, s.lr, s.kl_coef, s.max_kl, s.passes, s.batch_size, micro_batch=micro)
    for trainer, name in ((grpo, "agent_optimizer.pt"), (rwr, "simulator_optimizer.pt")):
        if (here / name).exists():
            _load_optimizer(trainer, here / name)
        elif from_session:  # only a fresh warm start has no optimizer state
            raise CheckpointError(
                f"checkpoint {here} has no {name}: resuming would silently restart the optimizer; "
                "move the folder aside to fall back to the previous checkpoint"
            )
    options = asdict(cfg.vllm) if cfg.runtime.backend == "vllm" else {}
    make = backend_factory or (lambda role, policy: get_backend(cfg.runtime.backend, policy=policy, **options))
    return Roles(
        agent, agent_ref, simulator, simulator_init, grpo, rwr, make("agent", agent), make("simulator", simulator)
    )


def save_roles(roles: Roles, folder: Path) -> None:
    """Write both policies and both optimizer states into ``folder``."""
    roles.agent.save(folder / "agent")
    roles.simulator.save(folder / "simulator")
    roles.grpo.save_state(folder / "agent_optimizer.pt")
    roles.rwr.save_state(folder / "simulator_optimizer.pt")
