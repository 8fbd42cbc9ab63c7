"""One typed, read-only reader of a session: its saved config, epochs, variation batches and held-out results.

The report (`genenv_engine.reports.data`), the ablation tables' reader (`genenv_engine.ablation.runs`) and the
console's reopen path (`genenv_console.state`) each used to read the store on their own and recompute some of what
the engine had already decided: R_env with the alpha reward whatever ``curriculum.reward`` said, a partial epoch's
calibration against the global alpha whatever ``curriculum.alpha_by_benchmark`` gave its benchmark. A
`SessionView` reads each batch's **stored** values (p-hat, R_env, the alpha it was scored against, the band flag
and the prompt note its simulator prompt carried) so every reader shows what the engine used. Only where an older
database lacks a value is it computed, from the session's own config through the curriculum functions
(`curriculum.env_reward` with ``curriculum.reward``, the benchmark's alpha from `CurriculumConfig.alpha_for`,
``beta`` and the band filter); each `BatchView` says which of its values were stored.

Everything is a frozen dataclass of tuples and read-only mappings: a view is a snapshot taken when it is opened,
not a live connection (`SessionView.open` closes the store it opened).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from genenv_engine.config import RunConfig, config_from_file, saved_config
from genenv_engine.core.curriculum import calibration_error, env_reward
from genenv_engine.storage.store import Store, read_only_rows

if TYPE_CHECKING:
    from genenv_engine.storage.session import Session

REWARD_KINDS = {
    "alpha": "exp(-beta (p̂ - alpha)²)",
    "agent0": "max(0, 1 - 2 |p̂ - alpha|)",
    "uniform": "1",
    "grounded": "success after − before the agent's update on siblings of the batch's tasks",
    "shrunk": "exp(-beta (p̃ - alpha)²), p̃ the batch's p̂ shrunk toward the success at its tasks' levels",
    "predicted": "exp(-beta (p̃ - alpha)²), p̃ the batch's p̂ blended with a difficulty predictor's",
}
"""Each ``curriculum.reward`` kind (`curriculum.env_reward`) with its R_env formula."""

_EMPTY: Mapping[str, Any] = MappingProxyType({})


_NESTED = (dict, list, tuple)
_FROZEN = (MappingProxyType, dict, tuple)
"""What `_thawed` copies: concrete types, as an abstract ``Mapping`` check costs far more per value."""


def _frozen(value: Any) -> Any:
    """A deep, read-only copy of decoded JSON: dicts become mappings, lists tuples.

    >>> v = _frozen({"a": [1, {"b": 2}]})
    >>> v["a"][1]["b"], type(v["a"]).__name__
    (2, 'tuple')
    """
    if isinstance(value, dict):
        return MappingProxyType({k: _frozen(v) if isinstance(v, _NESTED) else v for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        if set(map(type, value)).isdisjoint(_NESTED):  # a list of scalars in one step: a metric may hold 1,000 p-hats
            return tuple(value)
        return tuple(_frozen(v) if isinstance(v, _NESTED) else v for v in value)
    return value


def _thawed(value: Any) -> Any:
    """A plain dict/list copy of a `_frozen` value (what JSON-shaped readers expect).

    >>> _thawed(_frozen({"a": [1, {"b": 2}]}))
    {'a': [1, {'b': 2}]}
    """
    if isinstance(value, (MappingProxyType, dict)):
        return {k: _thawed(v) if isinstance(v, _FROZEN) else v for k, v in value.items()}
    if isinstance(value, tuple):
        if set(map(type, value)).isdisjoint(_FROZEN):
            return list(value)
        return [_thawed(v) if isinstance(v, _FROZEN) else v for v in value]
    return value


@dataclass(frozen=True)
class PromptNote:
    """The note a variation batch's simulator prompt carried: the compact style's steer word, or the instruct
    style's recent-success line (`genenv_engine.method.strategies.epoch_note`)."""

    steer: str | None = None
    success_line: str | None = None

    @property
    def text(self) -> str | None:
        """The note as the prompt showed it.

        >>> PromptNote(steer="harder").text, PromptNote(success_line="Agent success: 25%").text
        ('harder', 'Agent success: 25%')
        """
        return self.steer or self.success_line

    @classmethod
    def from_stored(cls, value: Any) -> PromptNote | None:
        """The note from a ``batches.prompt_note`` value (decoded dict or JSON text); None when none is stored.

        >>> PromptNote.from_stored({"steer": "same", "success_line": None}), PromptNote.from_stored(None)
        (PromptNote(steer='same', success_line=None), None)
        >>> PromptNote.from_stored('{"steer": null, "success_line": "x"}').text
        'x'
        """
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return None
        if not isinstance(value, Mapping):
            return None
        steer, line = value.get("steer"), value.get("success_line")
        return cls(steer=None if steer is None else str(steer), success_line=None if line is None else str(line))


@dataclass(frozen=True)
class BatchView:
    """One variation batch as the engine scored it: p-hat, R_env, the alpha it was scored against, whether the
    band kept it, and its prompt note. ``r_env_stored``/``alpha_stored``/``in_band_stored`` say whether a value was
    read from the database (False: computed from the session's config, for a batch of an older database)."""

    id: str
    epoch: int
    benchmark: str
    seed_task_id: str | None
    n_generated: int | None
    n_valid: int | None
    p_hat: float | None
    r_env: float | None
    """The stored R_env (None for a batch without a p-hat, unless one was stored)."""
    alpha: float
    in_band: bool | None
    prompt_note: PromptNote | None
    """None when the prompt carried no note, or the batch was stored before notes were."""
    r_env_stored: bool = True
    alpha_stored: bool = True
    in_band_stored: bool = True

    @property
    def scored(self) -> bool:
        """Whether the agent's rollouts gave the batch a p-hat."""
        return self.p_hat is not None

    @classmethod
    def from_row(cls, row: Mapping[str, Any], config: RunConfig) -> BatchView:
        """A `Store.batches` row, its missing values computed from ``config`` (never a fixed reward or alpha)."""
        cur = config.curriculum
        benchmark = str(row.get("benchmark") or "")
        p_hat = row.get("p_hat")
        alpha, r_env, band = row.get("alpha"), row.get("r_env"), row.get("in_band")
        alpha_stored, r_env_stored, band_stored = alpha is not None, r_env is not None, band is not None
        if alpha is None:
            alpha = cur.alpha_for(benchmark)
        if r_env is None and p_hat is not None:
            r_env = env_reward(float(p_hat), cur.reward, float(alpha), cur.beta)
        if band is None and p_hat is not None:
            band = cur.keeps(float(p_hat), benchmark)
        return cls(
            id=str(row["id"]),
            epoch=int(row["epoch"]),
            benchmark=benchmark,
            seed_task_id=row.get("seed_task_id"),
            n_generated=row.get("n_generated"),
            n_valid=row.get("n_valid"),
            p_hat=None if p_hat is None else float(p_hat),
            r_env=None if r_env is None else float(r_env),
            alpha=float(alpha),
            in_band=None if band is None else bool(band),
            prompt_note=PromptNote.from_stored(row.get("prompt_note")),
            r_env_stored=r_env_stored,
            alpha_stored=alpha_stored,
            in_band_stored=band_stored,
        )


@dataclass(frozen=True)
class EpochView:
    """One epoch's row: status, times and the metrics the loop recorded when it finished (empty otherwise)."""

    epoch: int
    status: str
    """``done``, ``partial`` or ``running`` (no end recorded)."""
    started_at: str | None = None
    finished_at: str | None = None
    metrics: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    @property
    def done(self) -> bool:
        """Whether the epoch finished (its metrics are recorded)."""
        return self.status == "done"

    @property
    def heldout(self) -> Mapping[str, float]:
        """Held-out success per benchmark (empty for an epoch that did not finish)."""
        return self.metrics.get("heldout") or _EMPTY

    @property
    def heldout_by_level(self) -> Mapping[str, Mapping[str, float]]:
        """Held-out success per benchmark and difficulty bucket."""
        return self.metrics.get("heldout_by_level") or _EMPTY

    @property
    def heldout_correct(self) -> Mapping[str, str]:
        """Per benchmark, one ``0``/``1`` character per held-out task, in held-out order."""
        return self.metrics.get("heldout_correct") or _EMPTY

    def row(self) -> dict[str, Any]:
        """The epoch as `Store.epoch_metrics` gives it: a fresh plain dict (epoch, status, times and metrics)."""
        return {
            **_thawed(self.metrics),
            "epoch": self.epoch,
            "status": self.status,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> EpochView:
        """A `Store.epoch_metrics` row."""
        own = ("epoch", "status", "started_at", "finished_at")
        return cls(
            epoch=int(row["epoch"]),
            status=str(row.get("status") or "running"),
            started_at=row.get("started_at"),
            finished_at=row.get("finished_at"),
            metrics=_frozen({k: v for k, v in row.items() if k not in own}),
        )


@dataclass(frozen=True)
class SessionView:
    """A snapshot of one session: its config, its epochs and its variation batches (see the module docstring)."""

    config: RunConfig
    epochs: tuple[EpochView, ...]
    batches: tuple[BatchView, ...]
    path: Path | None = None
    unknown_settings: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    """Settings of the saved config this genenv version does not know (dotted key -> value; `open` only)."""

    # -- opening --------------------------------------------------------------------------------

    @classmethod
    def open(
        cls, folder: str | Path, *, strict: bool = False, read_only: bool = False, batches: bool = True
    ) -> SessionView:
        """Read a session folder (``config.toml`` and ``genenv.db``) and close the store again.

        The config is read as a report reads it (`config.saved_config`: paths unchecked, unknown settings set
        aside), or with ``strict`` as a run resumes it (`config.config_from_file`: an unknown setting is an
        error). With ``read_only`` the database is read through a read-only connection (`store.read_only_rows`:
        never migrated or written, whoever runs the session); ``batches=False`` leaves the variation batches
        unread there (a view for the epoch curves only: a long session holds tens of thousands of batches).
        FileNotFoundError when the folder holds no session.
        """
        folder = Path(folder)
        if not (folder / "config.toml").exists() or not (folder / "genenv.db").exists():
            raise FileNotFoundError(f"{folder} is not a genenv session (needs config.toml and genenv.db)")
        unknown: dict[str, Any] = {}
        if strict:
            config = config_from_file(folder / "config.toml")
        else:
            config, unknown = saved_config(folder / "config.toml")
        if read_only:
            epoch_rows, batch_rows = read_only_rows(folder / "genenv.db", batches=batches)
            view = cls.from_rows(config, epoch_rows, batch_rows, folder)
            return cls(view.config, view.epochs, view.batches, folder, MappingProxyType(dict(unknown)))
        store = Store(folder / "genenv.db")
        try:
            view = cls.from_store(store, config, folder)
        finally:
            store.close()
        return cls(view.config, view.epochs, view.batches, folder, MappingProxyType(dict(unknown)))

    @classmethod
    def from_store(cls, store: Store, config: RunConfig, path: str | Path | None = None) -> SessionView:
        """Read an open store, whose session's config is ``config`` (the store stays open)."""
        return cls.from_rows(config, store.epoch_metrics(), store.batches(), path)

    @classmethod
    def of(cls, session: Session) -> SessionView:
        """Read an open `Session` (its store stays open)."""
        return cls.from_store(session.store, session.config, session.path)

    @classmethod
    def from_rows(
        cls,
        config: RunConfig,
        epoch_rows: Iterable[Mapping[str, Any]],
        batch_rows: Iterable[Mapping[str, Any]] = (),
        path: str | Path | None = None,
    ) -> SessionView:
        """A view of `Store.epoch_metrics` and `Store.batches` rows already read."""
        return cls(
            config=config,
            epochs=tuple(EpochView.from_row(r) for r in epoch_rows),
            batches=tuple(BatchView.from_row(r, config) for r in batch_rows),
            path=None if path is None else Path(path),
        )

    # -- the config -----------------------------------------------------------------------------

    @property
    def reward(self) -> str:
        """The curriculum reward kind: ``alpha``, ``agent0`` or ``uniform``."""
        return self.config.curriculum.reward

    @property
    def reward_formula(self) -> str:
        """R_env's formula under the configured reward kind.

        >>> from genenv_engine.config import load_config
        >>> SessionView(load_config("micro", overrides={"curriculum.reward": "agent0"}), (), ()).reward_formula
        'max(0, 1 - 2 |p̂ - alpha|)'
        """
        return REWARD_KINDS.get(self.reward, f"the {self.reward} reward")

    def alpha_for(self, benchmark: str) -> float:
        """The target success rate of one benchmark (``curriculum.alpha_by_benchmark`` or the global alpha)."""
        return self.config.curriculum.alpha_for(benchmark)

    # -- epochs ---------------------------------------------------------------------------------

    def epoch(self, epoch: int) -> EpochView | None:
        """The row of one epoch, or None."""
        return next((e for e in self.epochs if e.epoch == epoch), None)

    @property
    def done_epochs(self) -> tuple[EpochView, ...]:
        """The finished epochs, in order."""
        return tuple(e for e in self.epochs if e.done)

    @property
    def incomplete_epochs(self) -> tuple[EpochView, ...]:
        """The epochs that stopped, crashed or are still running."""
        return tuple(e for e in self.epochs if not e.done)

    def heldout(self, epoch: int) -> Mapping[str, float]:
        """Held-out success per benchmark at ``epoch`` (empty when it did not finish)."""
        e = self.epoch(epoch)
        return e.heldout if e is not None else _EMPTY

    def heldout_correct(self, epoch: int) -> Mapping[str, str]:
        """Per benchmark, the ``0``/``1`` string of the held-out tasks at ``epoch``."""
        e = self.epoch(epoch)
        return e.heldout_correct if e is not None else _EMPTY

    # -- batches --------------------------------------------------------------------------------

    def batches_of(self, epoch: int) -> tuple[BatchView, ...]:
        """The variation batches scored in ``epoch``, ordered by id."""
        return self._by_epoch.get(epoch, ())

    @cached_property
    def _by_epoch(self) -> dict[int, tuple[BatchView, ...]]:
        """The batches grouped by epoch, each group in id order (built once per view)."""
        groups: dict[int, list[BatchView]] = {}
        for b in self.batches:
            groups.setdefault(b.epoch, []).append(b)
        return {epoch: tuple(group) for epoch, group in groups.items()}

    def scored_batches(self, epoch: int) -> tuple[BatchView, ...]:
        """The batches of ``epoch`` that have a p-hat."""
        return tuple(b for b in self.batches_of(epoch) if b.scored)

    def p_hats(self, epoch: int) -> list[float]:
        """The p-hats of ``epoch``'s scored batches."""
        return [b.p_hat for b in self.scored_batches(epoch) if b.p_hat is not None]

    def r_envs(self, epoch: int) -> list[float]:
        """The R_env of ``epoch``'s scored batches (stored, or computed from the config for an old database)."""
        return [b.r_env for b in self.scored_batches(epoch) if b.r_env is not None]

    def in_band_fraction(self, epoch: int) -> float | None:
        """Share of ``epoch``'s scored batches the band kept (None without any)."""
        scored = self.scored_batches(epoch)
        return sum(1 for b in scored if b.in_band) / len(scored) if scored else None

    def calibration_error(self, epoch: int) -> float | None:
        """Mean |p-hat - alpha| over ``epoch``'s scored batches, each against the alpha it was scored against."""
        scored = self.scored_batches(epoch)
        return calibration_error([float(b.p_hat or 0.0) for b in scored], [b.alpha for b in scored])

    def prompt_notes(self, epoch: int) -> dict[str, PromptNote | None]:
        """Per benchmark, the prompt note of ``epoch``'s batches (one note per benchmark and epoch; None: none
        stored)."""
        out: dict[str, PromptNote | None] = {}
        for b in self.batches_of(epoch):
            if out.get(b.benchmark) is None:
                out[b.benchmark] = b.prompt_note
        return out
