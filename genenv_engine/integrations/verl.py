"""GenEnv inside veRL's legacy PPO trainer (``trainer.use_v1=false``, veRL 0.9.x): veRL trains the agent on the
admitted tasks of the open genenv epoch; genenv's simulator, validators, store and events run the environment.

veRL loads the pieces from its own Hydra config (``docs/examples/verl/`` holds the overlay)::

    data.custom_cls.path=pkg://genenv_engine.integrations.verl  data.custom_cls.name=GenenvDataset
    data.train_files=genenv:train  data.val_files=genenv:heldout  data.dataloader_num_workers=0
    +data.genenv.session=sessions/verl  +data.genenv.steps_per_epoch=4  +data.genenv.preset=tiny
    reward.custom_reward_function.path=pkg://genenv_engine.integrations.verl
    reward.custom_reward_function.name=compute_score

- `GenenvDataset` (a torch ``Dataset``; veRL builds it for ``data.train_files`` and ``data.val_files``). For
  ``genenv:train`` it opens the session (`VerlCoEvolution`: created from ``preset`` and ``overrides`` when the folder
  holds none, else continued as ``genenv resume`` does; a new one's epoch 0 is the warm start) and serves the open
  epoch's tasks, fresh ones first, cycled to fill a fixed number of slots: ``steps_per_epoch`` x the trainer's batch
  size, so one pass of veRL's data loader is one genenv epoch. Each row is in veRL's layout (``prompt`` as chat
  messages, ``data_source`` ``genenv/<benchmark>``, ``reward_model.ground_truth``, ``extra_info`` with what the
  checker needs, the task ``id`` and ``genenv_epoch``, the epoch that issued it), plus what veRL's ``RLHFDataset``
  adds (``raw_prompt``, ``index``, ``tools_kwargs``, ``interaction_kwargs``, ``dummy_tensor``). For
  ``genenv:heldout`` it serves the session's held-out tasks (veRL's validation then scores genenv's held-out set);
  any other path is read by veRL's ``RLHFDataset``.
- ``GenenvDataset.on_batch_end(batch)``, which the legacy trainer calls after every step but its last: each row's
  sequence score (the sum of its ``token_level_scores``) is recorded for its task (`CoEvolution.record`, grouped by
  task id and issuing epoch, so veRL's reordering of the batch does not matter; the decoded responses are stored).
  Every ``steps_per_epoch`` steps the genenv epoch closes (p-hat per batch from those scores, R_env, the simulator's
  RWR update, held-out evaluation, checkpoint) and the next epoch's tasks replace the old ones in the same slots. The
  slots are replaced, never appended to: veRL fixes its step count from the data loader's length when it starts.
- `compute_score`: veRL's reward function (``reward.custom_reward_function``): genenv's R_agent of the response,
  scored by the task's environment from the row alone (`genenv_engine.interfaces.interop.rewards`), so it runs in
  veRL's reward workers, wherever they are.

Limits: veRL's weights stay in veRL (its FSDP or Megatron workers). The session's agent is not replaced; each epoch's
``agent_update`` holds veRL's step count, and genenv's held-out evaluation measures the session's own agent, so read
the trained agent's held-out success from veRL's validation on ``genenv:heldout``. The legacy trainer skips
``on_batch_end`` after its last step, so give it one step past the session (``trainer.total_training_steps`` =
``steps_per_epoch`` x epochs + 1, ``trainer.total_epochs`` = epochs + 1): that step trains on the last epoch's
tasks and is not recorded. ``data.dataloader_num_workers`` must be 0 (worker processes would hold old rows). The
session opens in the process that builds the dataset (veRL's ``TaskRunner``), where genenv's simulator and held-out
evaluation run, on ``runtime.device``.

Importing this module does no work: veRL, torch and the session load when used.
"""

from __future__ import annotations

import atexit
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from genenv_engine.core.events import EventSink, RunControl, null_sink

if TYPE_CHECKING:
    from genenv_engine.config import RunConfig
    from genenv_engine.core.records import Task
    from genenv_engine.method.coevolution import CoEvolution
    from genenv_engine.storage.session import Session
    from genenv_engine.training.roles import BackendFactory

TRAIN_FILES = "genenv:train"
"""``data.train_files``: the open genenv epoch's tasks."""
HELDOUT_FILES = "genenv:heldout"
"""``data.val_files``: the session's held-out tasks."""

_LIVE: dict[Path, VerlCoEvolution] = {}
"""Session folder -> the co-evolution open on it in this process (a dataset built for that folder uses it)."""


def task_row(task: Task, epoch: int, index: int, source: str = "", structured: bool | None = None) -> dict[str, Any]:
    """``task`` as a row of veRL's layout (`genenv_engine.interfaces.interop.verl_row`, what ``genenv tasks export``
    writes), issued by genenv epoch ``epoch``, at slot ``index``: ``extra_info`` also holds ``genenv_epoch`` and
    ``index``."""
    from genenv_engine.interfaces.interop import verl_row

    row = verl_row({**task.to_row(), "level": task.level}, source, structured)
    row["extra_info"].update({"genenv_epoch": epoch, "index": index})
    return row


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: Mapping[str, Any] | None = None,
    **_: Any,
) -> float:
    """veRL's reward function: the task's environment's reward (R_agent) for ``solution_str``, the task rebuilt from
    the row's ``extra_info`` (`genenv_engine.interfaces.interop.rewards.compute_score`); veRL's other keywords (a
    reward router's address, its tokenizer) are ignored. A row that is not genenv's raises ValueError."""
    from genenv_engine.interfaces.interop.rewards import compute_score as score

    return score(data_source, solution_str, ground_truth, extra_info)


def batch_rewards(batch: Any, tokenizer: Any = None) -> list[tuple[str | None, int, list[float], list[str]]]:
    """A veRL ``DataProto`` after its reward step as (task id, issuing epoch, sequence scores, responses) per task, in
    first-row order: each row's score is the sum of its ``token_level_scores``; the responses are decoded when a
    tokenizer is given (else empty). A row without a genenv task id has id None."""
    scores = batch.batch["token_level_scores"].sum(dim=-1).tolist()
    infos = batch.non_tensor_batch["extra_info"]
    texts = _responses(batch, tokenizer) if tokenizer is not None else [""] * len(scores)
    groups: dict[tuple[str | None, int], tuple[list[float], list[str]]] = {}
    for info, score, text in zip(infos, scores, texts, strict=True):
        info = info if isinstance(info, Mapping) else {}
        tid = info.get("id") or None
        key = (None if tid is None else str(tid), int(info.get("genenv_epoch", -1) if tid else -1))
        rewards, replies = groups.setdefault(key, ([], []))
        rewards.append(float(score))
        replies.append(text)
    return [(tid, tag, rewards, replies) for (tid, tag), (rewards, replies) in groups.items()]


def _responses(batch: Any, tokenizer: Any) -> list[str]:
    """Each row's response text (its ``responses`` tokens under the attention mask), or empty strings when the batch
    holds no responses."""
    if "responses" not in batch.batch.keys():
        return [""] * len(batch)
    responses = batch.batch["responses"]
    mask = batch.batch["attention_mask"][:, -responses.shape[-1] :].bool()
    return [tokenizer.decode(ids[m].tolist(), skip_special_tokens=True) for ids, m in zip(responses, mask, strict=True)]


class VerlCoEvolution:
    """A genenv session co-evolving with veRL's legacy trainer: the session's core, the rows veRL reads, the records
    of each step (the module docstring gives the protocol). `GenenvDataset` opens one from veRL's config; a caller may
    open one first (``with VerlCoEvolution(...)``, for a scripted backend or an event sink), and a dataset built for
    the same folder in this process uses it."""

    def __init__(
        self,
        session: str | Path | Session,
        *,
        steps_per_epoch: int,
        batch_size: int,
        config: RunConfig | None = None,
        epochs: int | None = None,
        sink: EventSink = null_sink,
        control: RunControl | None = None,
        backend_factory: BackendFactory | None = None,
    ) -> None:
        """``session``: the session folder, created from ``config`` when it holds none, else continued (``epochs``
        raises its target), or an open `Session`. ``steps_per_epoch``: veRL trainer steps per genenv epoch;
        ``batch_size``: prompts per step (veRL's ``data.train_batch_size``, or ``gen_batch_size`` when set). Nothing
        happens until `open` (or the ``with`` block)."""
        if steps_per_epoch < 1 or batch_size < 1:
            raise ValueError(f"steps_per_epoch and batch_size must be 1 or more, got {steps_per_epoch}, {batch_size}")
        self._session = None if isinstance(session, str | Path) else session
        self.folder = (Path(session) if isinstance(session, str | Path) else session.path).resolve()
        self.steps_per_epoch, self.batch_size = steps_per_epoch, batch_size
        self._config, self._epochs = config, epochs
        self._sink, self._control, self._factory = sink, control, backend_factory
        self.core: CoEvolution | None = None
        """The co-evolution core, between `open` and `close`."""
        self.slots: list[dict[str, Any]] = []
        """The rows veRL reads: ``steps_per_epoch`` x ``batch_size`` of them, the open epoch's tasks cycled."""
        self.epoch = 0
        """The genenv epoch the slots hold (the open one)."""
        self.done = False
        """Whether the session's epochs are all done (the slots keep the last epoch's rows)."""
        self.steps = 0
        """veRL steps whose batch was recorded (`on_batch_end` calls)."""
        self.trainer_step = 0
        """veRL's step count at the end of the last finished epoch (0 when veRL trained none of the session's)."""
        self.recorded = self.late = self.unknown = self.after_end = 0
        """Attempts recorded: for the open epoch, a closed one, an id no epoch issued, after the session ended."""
        self.summary: dict[str, Any] = {}
        """What the run did, once closed: `CoEvolution.summary`."""
        self._lease: Any = None
        self._steps_at = 0
        self._opened_at = 0.0

    # --- the session's lifetime ----------------------------------------------------------------------------------

    def open(self) -> VerlCoEvolution:
        """Create or continue the session, bring its roles in (a new one's warm start), open its next epoch and fill
        the slots; registered for this process's datasets, and closed when the process exits."""
        from genenv_engine.integrations.outside import find_session, open_core

        if self.core is not None:
            return self
        if self.folder in _LIVE:
            raise RuntimeError(f"{self.folder} is already open in this process")
        session = find_session(self._session, self.folder, self._config, "set data.genenv.preset to create one")
        self.core, self._lease, self.trainer_step = open_core(
            session,
            "genenv verl",  # one engine per session, until close()
            epochs=self._epochs,
            sink=self._sink,
            control=self._control,
            backend_factory=self._factory,
        )
        try:
            self._steps_at = 0
            self._next_epoch()
        except BaseException as exc:
            self.close(exc)
            raise
        _LIVE[self.folder] = self
        atexit.register(self.close)
        return self

    def close(self, exc: BaseException | None = None) -> bool:
        """Leave the session: an epoch still open is marked partial (redone on resume); returns whether ``exc`` (a
        stop request) was handled."""
        from genenv_engine.integrations.outside import close_core

        core, self.core, lease, self._lease = self.core, None, self._lease, None
        if _LIVE.get(self.folder) is self:
            del _LIVE[self.folder]
        atexit.unregister(self.close)
        handled, summary = close_core(core, lease, exc)
        if core is not None:
            self.summary = summary
        return handled

    def __enter__(self) -> VerlCoEvolution:
        return self.open()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        return self.close(exc)

    # --- rows and records ----------------------------------------------------------------------------------------

    def heldout_rows(self) -> list[dict[str, Any]]:
        """The session's held-out tasks (``heldout_size`` of each benchmark, as genenv evaluates them) as rows."""
        from genenv_engine.training.agent import heldout_tasks

        core = self._require_core()
        tasks = heldout_tasks(core.envs, core.session.config.heldout_size)
        return [self._row(task, -1, i) for i, task in enumerate(tasks)]

    def on_batch_end(self, batch: Any, tokenizer: Any = None) -> None:
        """Record one veRL step's batch (a ``DataProto`` with ``token_level_scores``), then, every ``steps_per_epoch``
        steps, close the genenv epoch and put the next epoch's tasks in the slots."""
        core = self._require_core()
        for tid, tag, rewards, replies in batch_rewards(batch, tokenizer):
            if self.done:
                self.after_end += len(rewards)
            elif tid is None:
                core.count_unknown("<no genenv task id>", len(rewards))
                self.unknown += len(rewards)
            else:
                where = core.record(tid, rewards, epoch=tag, responses=replies)
                if where == "recorded":
                    self.recorded += len(rewards)
                elif where == "late":
                    self.late += len(rewards)
                else:
                    self.unknown += len(rewards)
        self.steps += 1
        if not self.done and self.steps - self._steps_at >= self.steps_per_epoch:
            self.end_epoch()

    def end_epoch(self) -> dict[str, Any]:
        """Close the open genenv epoch (p-hat and R_env from what was recorded, the simulator's update, held-out,
        checkpoint; ``agent_update`` holds veRL's steps) and open the next; returns the closed epoch's metrics."""
        core = self._require_core()
        steps, self._steps_at = self.steps - self._steps_at, self.steps
        self.trainer_step += steps
        metrics = core.end_epoch(_verl_steps(steps, self.trainer_step), {"trainer": time.monotonic() - self._opened_at})
        self._next_epoch()
        return metrics

    def _next_epoch(self) -> None:
        """Open the session's next epoch that has tasks (one without any closes at once) and fill the slots; when the
        session's epochs are done, keep the slots and mark the run done."""
        core = self._require_core()
        while not core.finished:
            tasks = core.begin_epoch()
            if tasks:
                self._opened_at = time.monotonic()
                self.epoch = core.epoch
                size = self.steps_per_epoch * self.batch_size
                self.slots = [self._row(tasks[i % len(tasks)], core.epoch, i) for i in range(size)]
                return
            core.end_epoch(_verl_steps(0, self.trainer_step))
        self.done = True

    def _row(self, task: Task, epoch: int, index: int) -> dict[str, Any]:
        core = self._require_core()
        env = core.envs.get(task.benchmark)
        source = core.session.config.environments.get(task.benchmark, "")
        return task_row(task, epoch, index, source, None if env is None else bool(env.structured))

    def _require_core(self) -> CoEvolution:
        if self.core is None:
            raise RuntimeError("the genenv session is not open: call open() (or enter the with block) first")
        return self.core


def _verl_steps(steps: int, trainer_step: int) -> Any:
    """The agent's update of an epoch veRL trained: the session's agent is left as it is (veRL's weights stay in its
    workers); its figures are the epoch's veRL steps and veRL's step count at its end."""

    def learn(ep: Any, roles: Any, trained: Any) -> dict[str, Any]:
        return {"steps": float(steps), "trainer_step": trainer_step}

    return learn


def settings(data_config: Mapping[str, Any]) -> dict[str, Any]:
    """The genenv settings in veRL's ``data`` config (``data.genenv``: ``session``, ``steps_per_epoch``, and
    optionally ``preset``, ``overrides`` and ``epochs``) with the batch size; ValueError for what the dataset cannot
    serve (no session, a data loader with worker processes).

    >>> s = settings({"train_batch_size": 8, "dataloader_num_workers": 0,
    ...               "genenv": {"session": "s", "steps_per_epoch": 2}})
    >>> s["batch_size"], s["steps_per_epoch"], s["preset"], s["overrides"]
    (8, 2, None, {})
    """
    genenv = data_config.get("genenv") or {}
    if not genenv.get("session") or not genenv.get("steps_per_epoch"):
        raise ValueError("set +data.genenv.session=FOLDER and +data.genenv.steps_per_epoch=N for genenv's dataset")
    workers = int(data_config.get("dataloader_num_workers") or 0)
    if workers:
        raise ValueError(
            f"data.dataloader_num_workers={workers}: set 0, worker processes keep the rows of the epoch they started in"
        )
    batch = data_config.get("gen_batch_size") or data_config.get("train_batch_size")
    return {
        "session": str(genenv["session"]),
        "steps_per_epoch": int(genenv["steps_per_epoch"]),
        "batch_size": int(batch or 0),
        "preset": genenv.get("preset"),
        "overrides": dict(_plain(genenv.get("overrides")) or {}),
        "epochs": None if genenv.get("epochs") is None else int(genenv["epochs"]),
    }


def _plain(value: Any) -> Any:
    """A Hydra (OmegaConf) value as plain dicts and lists; any other value as it is."""
    if type(value).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        return OmegaConf.to_container(value, resolve=True)
    return value


def _open_for(data_config: Mapping[str, Any]) -> VerlCoEvolution:
    """The co-evolution the settings name: the one open on that folder in this process, else one opened here."""
    s = settings(data_config)
    folder = Path(s["session"]).resolve()
    live = _LIVE.get(folder)
    if live is not None:
        if (live.steps_per_epoch, live.batch_size) != (s["steps_per_epoch"], s["batch_size"]):
            raise ValueError(
                f"{folder} is open with {live.steps_per_epoch} steps of {live.batch_size} prompts an epoch; veRL's "
                f"config asks for {s['steps_per_epoch']} of {s['batch_size']}"
            )
        return live
    config = None
    if s["preset"] is not None or s["overrides"]:
        from genenv_engine.config import load_config

        config = load_config(s["preset"], overrides=s["overrides"])
    coevo = VerlCoEvolution(
        folder, steps_per_epoch=s["steps_per_epoch"], batch_size=s["batch_size"], config=config, epochs=s["epochs"]
    )
    return coevo.open()


class _Rows:
    """`GenenvDataset`'s behaviour, without torch: the train rows of a `VerlCoEvolution`, the held-out rows, or
    veRL's ``RLHFDataset`` for any other files."""

    def __init__(
        self,
        data_files: str | Sequence[str],
        tokenizer: Any,
        config: Mapping[str, Any],
        processor: Any = None,
        max_samples: int = -1,
    ) -> None:
        files = [data_files] if isinstance(data_files, str) else list(data_files)
        self.tokenizer = tokenizer
        self.coevo: VerlCoEvolution | None = None
        self._rows: list[dict[str, Any]] | None = None
        self._files: Any = None
        if files == [TRAIN_FILES]:
            self.coevo = _open_for(config)
        elif files == [HELDOUT_FILES]:
            self._rows = _open_for(config).heldout_rows()
        elif TRAIN_FILES in files or HELDOUT_FILES in files:
            raise ValueError(f"{TRAIN_FILES} and {HELDOUT_FILES} stand alone as data files, got {files}")
        else:
            from verl.utils.dataset.rl_dataset import RLHFDataset

            # veRL hands its data config as an OmegaConf DictConfig, which this class reads as a Mapping
            self._files = RLHFDataset(files, tokenizer, cast(Any, config), processor, max_samples)

    def __len__(self) -> int:
        if self._files is not None:
            return len(self._files)
        return len(self._rows if self._rows is not None else self._require().slots)

    def __getitem__(self, item: int) -> dict[str, Any]:
        if self._files is not None:
            return dict(self._files[item])
        import torch

        row = (self._rows if self._rows is not None else self._require().slots)[item]
        messages = [dict(m) for m in row["prompt"]]
        return {
            **row,
            "prompt": messages,
            "reward_model": dict(row["reward_model"]),
            "extra_info": dict(row["extra_info"]),  # veRL's reward step adds keys to it
            "raw_prompt": [dict(m) for m in messages],
            "dummy_tensor": torch.tensor([0], dtype=torch.uint8),
            "index": row["extra_info"]["index"],
            "tools_kwargs": {},
            "interaction_kwargs": {},
        }

    def on_batch_end(self, batch: Any) -> None:
        """veRL's legacy trainer's hook after a step: `VerlCoEvolution.on_batch_end` for the train rows."""
        if self.coevo is not None:
            self.coevo.on_batch_end(batch, self.tokenizer)

    def _require(self) -> VerlCoEvolution:
        assert self.coevo is not None  # set for the train rows, the only ones without _rows or _files
        return self.coevo


_DATASET: type | None = None


def dataset_class() -> type:
    """`GenenvDataset`: `_Rows` as a torch ``Dataset`` (veRL's ``data.custom_cls`` must subclass it), made on first
    use so that importing this module does not import torch."""
    global _DATASET
    if _DATASET is None:
        from torch.utils.data import Dataset

        _DATASET = type("GenenvDataset", (_Rows, Dataset), {"__module__": __name__, "__doc__": _Rows.__doc__})
    return _DATASET


def __getattr__(name: str) -> Any:
    if name == "GenenvDataset":
        return dataset_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
