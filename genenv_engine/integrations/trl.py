"""GenEnv inside TRL's ``GRPOTrainer``: TRL trains the agent, genenv's simulator, validators, store and events run the
environment, on one process or many (``torchrun``, ``accelerate launch``)::

    with TrlCoEvolution("sessions/trl", config=load_config("tiny"), steps_per_epoch=8) as coevo:
        trainer = GRPOTrainer(
            model=coevo.model(),
            reward_funcs=[coevo.reward],
            args=coevo.grpo_config(output_dir="out", per_device_train_batch_size=8),
            train_dataset=coevo.dataset(),
            callbacks=[coevo.callback],
        )
        trainer.train()

- Rank 0 owns the session (`genenv_engine.method.coevolution.CoEvolution`: the simulator, the store, the events;
  one writer): it creates or continues the session (a new one's epoch 0 is the warm start) and opens each genenv
  epoch. Every other rank holds a replica: the session's config, its environments and the tasks it was sent.
- `TrlCoEvolution.dataset`: a ``datasets.IterableDataset``, the same stream on every rank (TRL's data loader reads
  all of it on each rank and keeps its share): the open epoch's tasks in order, fresh ones first, cycled; each row
  holds ``prompt`` (one user turn), ``task_id`` and ``genenv_epoch``.
- `TrlCoEvolution.reward`: scores each completion with its task's environment (R_agent, what genenv's own trainer
  uses; None for a task id no epoch issued, counted, and for a check a plugin's fault failed, counted as the native
  loop counts it), then gathers every rank's (task, epoch, reward, success, answer) to rank 0, which records them
  once (`CoEvolution.record`). Each task's attempts are TRL's ``num_generations``; a batch whose groups came in part
  (or not at all) gets its p-hat from what was scored, and the epoch records how many attempts each p-hat counts
  (``batch_attempts``) and the tasks no attempt reached (``unscored_tasks``, ``unscored_batches``). A row of a
  closed epoch that TRL read ahead of the boundary is recorded as late, by its tag.
- `TrlCoEvolution.model`: what TRL trains, the session's agent: its folder, or for a LoRA agent its base with the
  session's adapter loaded trainable (TRL trains the adapter alone; its adapter becomes the session's).
- `TrlCoEvolution.callback`: every ``steps_per_epoch`` optimizer steps rank 0 closes the genenv epoch (TRL's weights
  become the session's agent, then p-hat and R_env per batch, the simulator's RWR update, held-out evaluation,
  checkpoint; the epoch's ``agent_update`` holds TRL's ``trainer_step``) and opens the next; every rank receives its
  tasks. Training stops when the session's epochs are done.

A run killed at any point (SIGKILL included) loses nothing the session committed. Started again, it continues the
session from its last finished epoch (the partial epoch is dropped and redone, as ``genenv resume`` does) and TRL
from its checkpoint: ``trainer.train(resume_from_checkpoint=coevo.resume_checkpoint(output_dir))``. Give TRL
``save_strategy="steps"``: `TrlCoEvolution.grpo_config` saves at every genenv epoch boundary (``save_steps`` =
``steps_per_epoch``), and `TrlCoEvolution.resume_checkpoint` picks the checkpoint saved at the session's last finished
epoch, whose weights are that epoch's agent. The stream is not replayed: genenv draws each epoch's tasks when it opens
the epoch, so the batches TRL read before the kill belong to the dropped epoch, and ``grpo_config`` sets
``ignore_data_skip=True`` (TRL would otherwise read and throw away as many rows of the new epoch as it had trained
steps). The resumed stream starts at the session's next epoch, whose ``steps_per_epoch`` steps count from the step TRL
resumed at. A checkpoint from another step (saved inside an epoch, or none: a new trainer) still works: at the start
of training the model takes the session's agent weights, and the optimizer and scheduler states are the checkpoint's.

Importing this module does no work: trl, transformers, datasets, accelerate and torch load when used.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from genenv_engine.core.events import EventSink, RunControl, StopRequested, null_sink

if TYPE_CHECKING:
    from genenv_engine.config import RunConfig
    from genenv_engine.core.records import Task
    from genenv_engine.environments.base import Environment
    from genenv_engine.method.coevolution import CoEvolution
    from genenv_engine.storage.session import Session
    from genenv_engine.training.roles import BackendFactory

_STREAMS: dict[str, TaskStream] = {}
"""Stream key -> the live stream a dataset reads (the dataset's generator holds the key alone, so that ``datasets``
can hash it)."""


class TaskStream:
    """The tasks of the open genenv epoch as an endless sequence of TRL rows, restarted at each epoch."""

    def __init__(self) -> None:
        self.epoch = 0
        self.tasks: list[Task] = []

    def rows(self) -> Iterator[dict[str, Any]]:
        """The open epoch's tasks, cycled; a new epoch starts from its first task; ends when no epoch is open."""
        seen, i = -1, 0
        while self.tasks:
            if self.epoch != seen:
                seen, i = self.epoch, 0
            task = self.tasks[i % len(self.tasks)]
            i += 1
            yield {"prompt": [{"role": "user", "content": task.prompt}], "task_id": task.id, "genenv_epoch": seen}


def stream_rows(key: str) -> Iterator[dict[str, Any]]:
    """The rows of the stream registered under ``key`` (the dataset's generator)."""
    yield from _STREAMS[key].rows()


def completion_text(completion: str | Sequence[dict[str, Any]]) -> str:
    """The answer of a TRL completion: a string, or the last message's content of a conversational one.

    >>> completion_text("add(1, 2)"), completion_text([{"role": "assistant", "content": "add(1, 2)"}])
    ('add(1, 2)', 'add(1, 2)')
    """
    return completion if isinstance(completion, str) else str(completion[-1]["content"])


def grouped(rows: Sequence[Sequence[Any]]) -> list[tuple[str, int, list[Sequence[Any]]]]:
    """Consecutive rows of one (task id, epoch) as one group, in order.

    >>> [(t, e, len(g)) for t, e, g in grouped([("a", 1, 0.0), ("a", 1, 1.0), ("b", 1, 1.0), ("a", 2, 0.0)])]
    [('a', 1, 2), ('b', 1, 1), ('a', 2, 1)]
    """
    out: list[tuple[str, int, list[Sequence[Any]]]] = []
    for row in rows:
        if out and out[-1][:2] == (row[0], row[1]):
            out[-1][2].append(row)
        else:
            out.append((row[0], row[1], [row]))
    return out


def world() -> tuple[int, int]:
    """This process's rank and the number of processes (1 without a launcher); under ``torchrun`` or
    ``accelerate launch`` it starts accelerate's process group (gloo on CPU) that TRL then uses."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return 0, 1
    from accelerate import PartialState

    state = PartialState(cpu=not _cuda())  # accelerate starts no CPU process group unless told it runs on CPU
    return state.process_index, state.num_processes


class TrlCoEvolution:
    """A genenv session co-evolving with TRL's ``GRPOTrainer`` (the module docstring shows the use)."""

    def __init__(
        self,
        session: str | Path | Session,
        *,
        steps_per_epoch: int,
        config: RunConfig | None = None,
        epochs: int | None = None,
        sink: EventSink = null_sink,
        control: RunControl | None = None,
        backend_factory: BackendFactory | None = None,
    ) -> None:
        """``session``: the session folder, created from ``config`` when it holds none, else continued (as
        ``genenv resume`` does; ``epochs`` raises its target), or an open `Session` (its lease taken here unless
        the caller holds it). ``steps_per_epoch``: TRL optimizer steps per genenv
        epoch. ``sink``, ``control`` and ``backend_factory`` are rank 0's, as `genenv_engine.method.loop.run`
        takes them. Nothing happens until the ``with`` block is entered."""
        if steps_per_epoch < 1:
            raise ValueError(f"steps_per_epoch must be 1 or more, got {steps_per_epoch}")
        self._session = None if isinstance(session, str | Path) else session
        self.folder = Path(session) if isinstance(session, str | Path) else session.path
        self.steps_per_epoch = steps_per_epoch
        self._config, self._epochs = config, epochs
        self._sink, self._control, self._factory = sink, control, backend_factory
        self.rank, self.world = 0, 1
        self.core: CoEvolution | None = None
        """The co-evolution core (rank 0 only)."""
        self.config: RunConfig | None = None
        self.agent_path: Path | None = None
        """The session agent's Hugging Face folder TRL starts from (the last finished epoch's checkpoint)."""
        self.epochs_left = 0
        self.late = 0
        """Attempts recorded after their epoch closed (rank 0)."""
        self.unknown = 0
        """Attempts at task ids no epoch issued (rank 0)."""
        self.scored = 0
        """Completions this rank's reward function scored."""
        self.summary: dict[str, Any] = {}
        """What the run did (rank 0, once the ``with`` block is left): `CoEvolution.summary`."""
        self._tasks: dict[int, dict[str, Task]] = {}
        self._envs: dict[str, Environment] = {}
        self._lease: Any = None
        self._stream = TaskStream()
        self._key = f"{os.getpid()}-{id(self)}"
        self._opened_at = 0.0
        self._steps_at = 0
        self.trainer_step = 0
        """TRL's step at the end of the last finished epoch (0 when TRL trained none of the session's epochs)."""
        self._callback: Any = None

    # --- the session's lifetime on every rank --------------------------------------------------------------------

    def __enter__(self) -> TrlCoEvolution:
        self.rank, self.world = world()
        payload: dict[str, Any] = {}
        if self.rank == 0:
            try:
                payload = self._open_session()
            except BaseException as exc:
                self._broadcast({"error": f"{type(exc).__name__}: {exc}"})
                self._close_core(exc)
                raise
        payload = self._broadcast(payload)
        if "error" in payload:
            raise RuntimeError(f"rank 0 could not open the genenv session {self.folder}: {payload['error']}")
        from genenv_engine.config import config_from_dict

        self.config = config_from_dict(payload["config"], f"rank 0's config of {self.folder}")
        self.agent_path = Path(payload["agent"])
        self.epochs_left = payload["epochs_left"]
        self.trainer_step = payload["trainer_step"]
        if self.rank != 0:
            from genenv_engine.environments import environments_of
            from genenv_engine.environments.plugin_worker import time_limit_plugins

            self._envs = environments_of(self.config)
            time_limit_plugins(self._envs, self.config.simulator.plugin_timeout)
        _STREAMS[self._key] = self._stream
        self._receive(payload)
        return self

    def _open_session(self) -> dict[str, Any]:
        """Rank 0: create or continue the session, bring its roles in, open its next epoch."""
        from genenv_engine.integrations.outside import find_session, open_core

        session = find_session(self._session, self.folder, self._config, "pass config= to create one there")
        core, self._lease, self.trainer_step = open_core(
            session,
            "genenv trl",  # held until the with block is left: one engine per session
            epochs=self._epochs,
            sink=self._sink,
            control=self._control,
            backend_factory=self._factory,
        )
        self.core, cfg = core, session.config
        self._envs = core.envs
        agent = session.checkpoint_dir(core.epoch - 1) / "agent"
        epochs_left = cfg.epochs - core.epoch + 1
        return {
            "config": cfg.to_dict(),
            "agent": str(agent),
            "epochs_left": epochs_left,
            "trainer_step": self.trainer_step,
            **self._next_epoch(),
        }

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        _STREAMS.pop(self._key, None)
        if self.rank != 0:
            from genenv_engine.environments.plugin_worker import release_plugins

            release_plugins(self._envs)
            return isinstance(exc, StopRequested)
        return self._close_core(exc)

    def _close_core(self, exc: BaseException | None) -> bool:
        from genenv_engine.integrations.outside import close_core

        core, self.core, lease, self._lease = self.core, None, self._lease, None
        handled, summary = close_core(core, lease, exc)
        if core is not None:
            self.summary = summary
        return handled

    # --- what TRL is given ---------------------------------------------------------------------------------------

    def model(self) -> Any:
        """What to give TRL's trainer as its model: the session agent's folder (a fully fine-tuned agent), or for a
        LoRA agent (``model.agent_tuning = "lora"``) its base with the session's adapter loaded trainable, a
        ``peft.PeftModel`` whose LoRA settings (rank, alpha, dropout, target modules) are the session's: TRL then
        trains the adapter alone (give it no ``peft_config``)."""
        from genenv_engine.training.adapters import is_adapter_folder

        if self.agent_path is None:
            raise RuntimeError("enter the with block first: rank 0 opens the session there")
        if not is_adapter_folder(self.agent_path):
            return str(self.agent_path)
        from peft import PeftModel
        from transformers import AutoModelForCausalLM

        from genenv_engine.training.models import role_source

        base = AutoModelForCausalLM.from_pretrained(str(role_source(self._require_config().model, "agent")))
        return PeftModel.from_pretrained(base, str(self.agent_path), is_trainable=True)

    def dataset(self) -> Any:
        """The task stream as a ``datasets.IterableDataset`` (give TRL ``shuffle_dataset=False``)."""
        import datasets

        return datasets.IterableDataset.from_generator(stream_rows, gen_kwargs={"key": self._key})

    def grpo_config(self, **options: Any) -> Any:
        """A ``trl.GRPOConfig`` with the session's agent settings (group size ``agent.rollouts``, temperature,
        completion length, learning rate, clip, KL coefficient), the stream's needs (no shuffling, no data skipped on
        resume), ``max_steps`` for the epochs left after TRL's step at the last finished epoch, and checkpoints at
        epoch boundaries when saving by steps; ``options`` override any field but ``shuffle_dataset`` and
        ``ignore_data_skip``."""
        from trl import GRPOConfig

        cfg = self._require_config()
        a = cfg.agent
        fields: dict[str, Any] = {
            "num_generations": a.rollouts,
            "temperature": a.temperature,
            "max_completion_length": a.max_new_tokens,
            "learning_rate": a.lr,
            "epsilon": a.clip,
            "beta": a.kl_coef,
            "loss_type": "grpo",
            "max_steps": self.trainer_step + self.steps_per_epoch * self.epochs_left,
            "seed": cfg.seed,
            "report_to": [],
            "save_strategy": "no",
            "save_steps": self.steps_per_epoch,
            "use_cpu": cfg.runtime.device == "cpu" or not _cuda(),
            **options,
        }
        if fields.pop("shuffle_dataset", False):
            raise ValueError("shuffle_dataset=True would read the live task stream far ahead: leave it False")
        if not fields.pop("ignore_data_skip", True):
            raise ValueError("ignore_data_skip=False would skip the new epoch's tasks on resume: leave it True")
        return GRPOConfig(**fields, shuffle_dataset=False, ignore_data_skip=True)

    def resume_checkpoint(self, output_dir: str | Path) -> str | None:
        """The TRL checkpoint in ``output_dir`` to resume from (``trainer.train(resume_from_checkpoint=...)``): the
        one saved at the session's last finished epoch, else the newest complete one, else None (a new trainer)."""
        found: dict[int, Path] = {}
        for folder in Path(output_dir).glob("checkpoint-*"):
            step = folder.name.removeprefix("checkpoint-")
            if step.isdigit() and (folder / "trainer_state.json").is_file():  # written last: a complete checkpoint
                found[int(step)] = folder
        if not found:
            return None
        return str(found.get(self.trainer_step) or found[max(found)])

    @property
    def callback(self) -> Any:
        """The ``transformers.TrainerCallback`` that closes and opens genenv epochs."""
        if self._callback is None:
            self._callback = _epoch_callback(self)
        return self._callback

    def reward(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        task_id: Sequence[str],
        genenv_epoch: Sequence[int],
        **_: Any,
    ) -> list[float | None]:
        """TRL's reward function: R_agent of each completion by its task's environment; every rank's scores are
        gathered to rank 0 and recorded there once. None (TRL gives the completion no advantage) for a task id no
        epoch issued (counted in the epoch's ``unknown_rollouts``) and for a completion whose check a plugin's fault
        failed: raised, or ran past ``simulator.plugin_timeout`` (stored with its fault and counted in the epoch's
        ``plugin_faults``, kept out of every p-hat, as the native loop keeps it out of its update)."""
        from genenv_engine.core.curriculum import is_success
        from genenv_engine.core.limits import check_response, fault_kind

        threshold = self._require_config().agent.success_threshold
        out: list[float | None] = []
        rows: list[tuple[str, int, float | None, bool, str, str | None]] = []
        for completion, tid, tag in zip(completions, task_id, genenv_epoch, strict=True):
            text, task = completion_text(completion), self._tasks.get(int(tag), {}).get(tid)
            if task is None:
                out.append(None)
                rows.append((tid, int(tag), None, False, text, None))
                continue
            env = self._envs[task.benchmark]
            result = check_response(env, task, text)
            value = float(env.reward(result))
            out.append(None if fault_kind(result.error_type) else value)
            rows.append((tid, int(tag), value, is_success(value, threshold), text, result.error_type))
        self.scored += len(rows)
        gathered = self._gather(rows)
        if self.rank == 0:
            self._record([row for part in gathered for row in part])
        return out

    # --- rank 0's records and epochs -----------------------------------------------------------------------------

    def _record(self, rows: list[tuple[str, int, float | None, bool, str, str | None]]) -> None:
        core = self._require_core()
        for tid, tag, group in grouped(rows):
            scored = [r for r in group if r[2] is not None]
            if len(scored) < len(group):
                core.count_unknown(tid, len(group) - len(scored), tag)
                self.unknown += len(group) - len(scored)
            if scored:
                where = core.record(
                    tid,
                    [float(r[2] or 0.0) for r in scored],  # every r[2] is a number here
                    epoch=tag,
                    successes=[r[3] for r in scored],
                    responses=[r[4] for r in scored],
                    errors=[r[5] for r in scored],
                )
                self.late += len(scored) if where == "late" else 0
                self.unknown += len(scored) if where == "unknown" else 0

    def _next_epoch(self) -> dict[str, Any]:
        """Rank 0: open the session's next epoch that has tasks to train on (an epoch without any is closed at
        once); the payload every rank receives."""
        core = self._require_core()
        while not core.finished:
            tasks = core.begin_epoch()
            if tasks:
                self._opened_at = time.monotonic()
                return {"epoch": core.epoch, "tasks": tasks, "done": False}
            core.end_epoch(_adopt(None, 0, self.trainer_step))
        return {"epoch": core.epoch, "tasks": [], "done": True}

    def step_end(self, state: Any, control: Any, model: Any) -> None:
        """At TRL's step end (every rank): at an epoch boundary, rank 0 closes the genenv epoch and opens the next,
        and every rank takes its tasks; training stops when the session's epochs are done."""
        steps = state.global_step - self._steps_at
        if steps < self.steps_per_epoch:
            return
        self._steps_at = self.trainer_step = state.global_step
        payload: dict[str, Any] = {}
        if self.rank == 0:
            core = self._require_core()
            try:
                learn = _adopt(model, steps, self.trainer_step)
                core.end_epoch(learn, {"trainer": time.monotonic() - self._opened_at})
                payload = self._next_epoch()
            except StopRequested:
                self._broadcast({"stop": True})
                raise
            except BaseException as exc:
                self._broadcast({"error": f"{type(exc).__name__}: {exc}"})
                raise
        payload = self._broadcast(payload)
        if payload.get("stop"):
            raise StopRequested()
        if "error" in payload:
            raise RuntimeError(f"rank 0 failed closing a genenv epoch: {payload['error']}")
        self._receive(payload)
        if payload["done"]:
            control.should_training_stop = True

    def train_begin(self, state: Any, model: Any) -> None:
        """At TRL's train begin (every rank): epochs count their steps from here; a trainer resumed from a checkpoint
        of another step than the session's last finished epoch takes that epoch's agent weights; training stops
        after the epochs left."""
        self._steps_at = state.global_step
        if state.global_step not in (0, self.trainer_step) and model is not None:
            _copy_weights(self.model(), getattr(model, "module", model))
        state.max_steps = state.global_step + self.steps_per_epoch * self.epochs_left

    def _receive(self, payload: dict[str, Any]) -> None:
        """Every rank: the open epoch's tasks, for the stream and the reward."""
        tasks: list[Task] = payload["tasks"]
        self._tasks[payload["epoch"]] = {t.id: t for t in tasks}
        self._stream.epoch, self._stream.tasks = payload["epoch"], tasks

    # --- collectives ---------------------------------------------------------------------------------------------

    def _broadcast(self, payload: dict[str, Any]) -> dict[str, Any]:
        if self.world == 1:
            return payload
        import torch.distributed as dist

        box = [payload]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def _gather(self, rows: list[Any]) -> list[list[Any]]:
        if self.world == 1:
            return [rows]
        import torch.distributed as dist

        parts: list[Any] | None = [None] * self.world if self.rank == 0 else None
        dist.gather_object(rows, parts, dst=0)
        return [list(p) for p in parts or []]

    def _require_core(self) -> CoEvolution:
        if self.core is None:
            raise RuntimeError("only rank 0 holds the session, inside the with block")
        return self.core

    def _require_config(self) -> RunConfig:
        if self.config is None:
            raise RuntimeError("enter the with block first: rank 0 opens the session there")
        return self.config


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _adopt(model: Any, steps: int, trainer_step: int | None = None) -> Any:
    """The agent's update of an epoch TRL trained: TRL's weights become the session's agent (``model`` None: an
    epoch without training, the agent unchanged); its figures are the epoch's TRL optimizer steps and TRL's step at
    its end (``trainer_step``, what a resumed run continues from)."""

    def learn(ep: Any, roles: Any, trained: Any) -> dict[str, Any]:
        if model is not None:
            try:
                _copy_weights(getattr(model, "module", model), roles.agent.model, roles.agent.adapter)
            except (RuntimeError, KeyError, ValueError) as exc:
                raise ValueError(
                    "TRL's model does not match the session's agent: start the trainer from coevo.model() "
                    f"({str(exc).splitlines()[0][:200]})"
                ) from None
        return {"steps": float(steps), **({"trainer_step": trainer_step} if trainer_step is not None else {})}

    return learn


def _copy_weights(source: Any, target: Any, adapter: str | None = None) -> None:
    """Copy what a trainer trains from ``source`` into ``target``: a whole model's weights (``source`` may be a model
    folder), or, from a ``peft.PeftModel``, its active adapter's LoRA weights into ``target``'s adapter ``adapter``
    (default: ``target``'s active one)."""
    from peft import PeftModel, get_peft_model_state_dict, set_peft_model_state_dict

    if isinstance(source, str):
        from transformers import AutoModelForCausalLM

        source = AutoModelForCausalLM.from_pretrained(source)
    if not isinstance(source, PeftModel):
        target.load_state_dict(source.state_dict(), strict=True)
        return
    if not isinstance(target, PeftModel):
        raise ValueError("a LoRA adapter cannot become a fully fine-tuned agent")
    name = adapter or target.active_adapter
    state = get_peft_model_state_dict(source, adapter_name=source.active_adapter)
    loaded: Any = set_peft_model_state_dict(target, state, adapter_name=name)
    missing = [k for k in loaded.missing_keys if f".{name}." in k]  # the keys of target's other adapters stay
    if loaded.unexpected_keys or missing:
        raise ValueError(f"adapter keys differ: {(loaded.unexpected_keys or missing)[:3]}")


def _epoch_callback(coevo: TrlCoEvolution) -> Any:
    """A ``transformers.TrainerCallback`` calling `TrlCoEvolution.step_end` (and refusing a shuffled stream)."""
    from transformers import TrainerCallback

    class GenenvEpochs(TrainerCallback):
        def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
            if getattr(args, "shuffle_dataset", False):
                raise ValueError("GRPOConfig(shuffle_dataset=True) reads genenv's task stream far ahead: set False")
            if state.global_step and not getattr(args, "ignore_data_skip", False):
                raise ValueError("GRPOConfig(ignore_data_skip=False) skips the new epoch's tasks on resume: set True")
            coevo.train_begin(state, model)

        def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
            coevo.step_end(state, control, model)

    return GenenvEpochs()
