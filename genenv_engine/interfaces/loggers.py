"""Runs logged where researchers already look: TensorBoard, Weights & Biases and Trackio
(``--log tensorboard|wandb|trackio``).

`logging_sink` wraps the run's event sink: at each ``EpochFinished`` it reads that epoch back from the store and
hands every logger the same numbers ``genenv status --json`` prints (flattened to ``heldout/bfcl``,
``phase_seconds/rollout`` ...), the epoch's p̂ and R_env histograms, and a table of sample tasks with a rollout each.
The store is the source, so a logger shows exactly what the session holds. Loggers are imported lazily (each
in the ``log`` extra); W&B runs offline unless ``WANDB_MODE`` says otherwise, Trackio only ever writes its local
SQLite database, and all three write under ``SESSION/logs/``. A resumed session continues the same run:
TensorBoard appends to the same folder, and W&B and Trackio resume the run id / run name kept in the session's
store.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from genenv_engine.storage.store import funnel_validity, with_admitted

LOGGERS = ("tensorboard", "wandb", "trackio")
STATUS_KEYS = (
    "generated_success",
    "calibration_error",
    "valid_fraction",
    "unique_fraction",
    "difficulty_mix",
    "heldout",
    "phase_seconds",
    "tasks_trained",
    "in_band_fraction",
    "generated_success_by_benchmark",
    "heldout_by_level",
    "tokens_per_second",
    "rollout_workers",
    "plugin_faults",
)
"""The per-epoch keys of ``genenv status --json``, and of every logger."""
SAMPLES = 8
"""Sample tasks (each with one rollout) logged per epoch."""


def flatten(metrics: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Numeric leaves of nested metrics as ``a/b`` keys (booleans and non-numbers left out).

    >>> flatten({"heldout": {"bfcl": 0.5}, "valid_fraction": 0.25, "mix": {"L1": 2}, "note": "x", "ok": True})
    {'heldout/bfcl': 0.5, 'valid_fraction': 0.25, 'mix/L1': 2.0}
    """
    out: dict[str, float] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}/"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = float(value)
    return out


def epoch_record(store, epoch: int) -> dict[str, Any]:
    """What every logger gets for ``epoch``: the status metrics (with the simulator's validity per benchmark), the
    batches' p̂ and R_env, and sample rollouts."""
    row = next((m for m in store.epoch_metrics() if m["epoch"] == epoch), {})
    metrics = {k: row.get(k) for k in STATUS_KEYS if row.get(k) is not None}
    validity = funnel_validity(store.funnel(epoch)).get(epoch, {})
    metrics["validity"] = with_admitted(validity, row.get("admitted") or {})
    batches = store.batch_scores(epoch)
    return {
        "epoch": epoch,
        "metrics": metrics,
        "p_hat": [b["p_hat"] for b in batches],
        "r_env": [b["r_env"] for b in batches if b["r_env"] is not None],
        "samples": store.sample_rollouts(epoch, SAMPLES),
    }


SAMPLE_COLUMNS = ["benchmark", "level", "origin", "prompt", "response", "reward"]
"""The columns of the per-epoch samples table."""


def run_payload(record: dict[str, Any], lib: Any) -> dict[str, Any]:
    """One epoch's record as the dict a W&B-style ``run.log`` takes (W&B and Trackio share the shape): the flattened
    metrics, ``p_hat`` / ``r_env`` as ``lib.Histogram`` and the samples as a ``lib.Table``."""
    data: dict[str, Any] = dict(flatten(record["metrics"]))
    for name in ("p_hat", "r_env"):
        if record[name]:
            data[name] = lib.Histogram(record[name])
    if record["samples"]:
        data["samples"] = lib.Table(
            columns=SAMPLE_COLUMNS, data=[[s[c] for c in SAMPLE_COLUMNS] for s in record["samples"]]
        )
    return data


class TensorBoardLogger:
    """Scalars, histograms and a markdown table of samples in ``SESSION/logs/tensorboard``."""

    def __init__(self, session) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise ValueError("--log tensorboard needs tensorboard: pip install 'genenv-console[log]'") from None
        self.folder = Path(session.path) / "logs" / "tensorboard"
        self.writer = SummaryWriter(log_dir=str(self.folder))

    def log(self, record: dict[str, Any]) -> None:
        step = record["epoch"]
        for key, value in flatten(record["metrics"]).items():
            self.writer.add_scalar(key, value, step)
        for name in ("p_hat", "r_env"):
            if record[name]:
                import numpy as np

                self.writer.add_histogram(name, np.asarray(record[name], dtype=float), step)
        if record["samples"]:
            lines = ["| " + " | ".join(SAMPLE_COLUMNS) + " |", "|" + "---|" * len(SAMPLE_COLUMNS)]
            for s in record["samples"]:
                cells = [str(s[k]).replace("|", "\\|").replace("\n", " ")[:200] for k in SAMPLE_COLUMNS]
                lines.append("| " + " | ".join(cells) + " |")
            self.writer.add_text("samples", "\n".join(lines), step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbLogger:
    """A W&B run (offline by default) whose id the session keeps, so a resume continues it."""

    def __init__(self, session) -> None:
        try:
            import wandb
        except ImportError:
            raise ValueError("--log wandb needs wandb: pip install 'genenv-console[log]'") from None
        self.wandb = wandb
        run_id = session.store.get_meta("wandb_run_id")
        if not run_id:
            import secrets

            run_id = secrets.token_hex(4)  # W&B run ids are short lowercase alphanumerics
            session.store.set_meta("wandb_run_id", run_id)
        folder = Path(session.path) / "logs"
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "genenv"),
            id=run_id,
            resume="allow",
            name=Path(session.path).name,
            dir=str(folder),
            config=session.config.to_dict(),
            mode=os.environ.get("WANDB_MODE", "offline"),
        )

    def log(self, record: dict[str, Any]) -> None:
        self.run.log(run_payload(record, self.wandb), step=record["epoch"])

    def close(self) -> None:
        self.run.finish()


class TrackioLogger:
    """A local Trackio run in ``SESSION/logs/trackio`` (project: the session folder's name) whose name the session
    keeps, so a resume continues it; ``trackio show --project NAME`` with ``TRACKIO_DIR`` set to that folder views it.

    Each epoch logs the flattened status numbers at step = epoch, ``p_hat`` / ``r_env`` as ``trackio.Histogram``
    and ``samples`` as a ``trackio.Table``. Trackio is local-only here: no ``space_id``, ``server_url`` or
    ``dataset_id`` is passed, the ``TRACKIO_SPACE_ID`` / ``TRACKIO_SERVER_URL`` / ``TRACKIO_BUCKET_ID`` /
    ``TRACKIO_DATASET_ID`` / ``TRACKIO_WEBHOOK_URL`` variables are hidden while the run is made, the Hugging Face
    Hub is held offline then (Trackio would otherwise ask the Hub for the user name when a token is set), and
    CPU/GPU auto-logging and the dashboard are off; Trackio's own progress prints are silenced. Trackio reads its
    storage folder (``TRACKIO_DIR``) once, at import, into module constants; rather than set that variable for the
    whole process (and every child process), the logger rebinds those constants to the session's folder while its
    run is open and restores them at `close`. So one Trackio logger
    is open per process at a time, as ``genenv run`` / ``genenv resume`` make it.
    """

    META_KEY = "trackio_run_name"
    HIDDEN_ENV = (
        "TRACKIO_SPACE_ID",
        "TRACKIO_SERVER_URL",
        "TRACKIO_BUCKET_ID",
        "TRACKIO_DATASET_ID",
        "TRACKIO_WEBHOOK_URL",
    )

    def __init__(self, session) -> None:
        try:
            import trackio
        except ImportError:
            raise ValueError("--log trackio needs trackio: pip install 'genenv-console[log]'") from None
        self.trackio = trackio
        self.folder = Path(session.path) / "logs" / "trackio"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.project = Path(session.path).name
        name = session.store.get_meta(self.META_KEY)
        if not name:
            import secrets

            name = f"genenv-{secrets.token_hex(4)}"
            session.store.set_meta(self.META_KEY, name)
        self.previous = _trackio_paths(trackio, self.folder)
        try:
            with _local_only(self.HIDDEN_ENV), contextlib.redirect_stdout(io.StringIO()):
                self.run = trackio.init(
                    project=self.project,
                    name=name,
                    resume="allow",
                    config=session.config.to_dict(),
                    embed=False,
                    auto_log_cpu=False,
                    auto_log_gpu=False,
                )
        except BaseException:
            _rebind_trackio(self.previous)
            raise

    def log(self, record: dict[str, Any]) -> None:
        self.run.log(run_payload(record, self.trackio), step=record["epoch"])

    def close(self) -> None:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                self.run.finish()  # joins the sender thread: everything logged is in the database
            from trackio import context_vars

            if context_vars.current_run.get() is self.run:
                context_vars.current_run.set(None)  # nothing left for trackio's exit hook to finish
        finally:
            _rebind_trackio(self.previous)


def _trackio_paths(trackio, folder: Path) -> dict[str, Path]:
    """Point every loaded trackio module's storage constants at ``folder``; return the ones they had."""
    previous = {name: getattr(trackio.utils, name) for name in ("TRACKIO_DIR", "MEDIA_DIR", "ARTIFACTS_DIR")}
    _rebind_trackio({"TRACKIO_DIR": folder, "MEDIA_DIR": folder / "media", "ARTIFACTS_DIR": folder / "artifacts"})
    return previous


def _rebind_trackio(paths: dict[str, Path]) -> None:
    # trackio modules copy the constants with `from trackio.utils import TRACKIO_DIR`: rebind each copy, and
    # trackio.utils itself so that modules trackio imports later copy the new ones
    for name, module in list(sys.modules.items()):
        if module is not None and (name == "trackio" or name.startswith("trackio.")):
            for attr, value in paths.items():
                if isinstance(getattr(module, attr, None), Path):
                    setattr(module, attr, value)


@contextlib.contextmanager
def _local_only(hidden: tuple[str, ...]) -> Iterator[None]:
    """No remote target from the environment, and the Hugging Face Hub offline, for the duration."""
    import huggingface_hub.constants

    saved = {k: os.environ.pop(k) for k in hidden if k in os.environ}
    offline = huggingface_hub.constants.HF_HUB_OFFLINE
    huggingface_hub.constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        huggingface_hub.constants.HF_HUB_OFFLINE = offline
        os.environ.update(saved)


MAKERS: dict[str, Callable[[Any], Any]] = {
    "tensorboard": TensorBoardLogger,
    "wandb": WandbLogger,
    "trackio": TrackioLogger,
}


def make_loggers(session, names: list[str]) -> list[Any]:
    """The loggers named (each once, in order); ValueError for an unknown or uninstalled one."""
    made = []
    for name in dict.fromkeys(names):
        if name not in LOGGERS:
            raise ValueError(f"--log must be one of {', '.join(LOGGERS)}, got {name!r}")
        made.append(MAKERS[name](session))
    return made


def logging_sink(session, loggers: list[Any], sink: Callable[[Any], None]) -> Callable[[Any], None]:
    """``sink`` plus, at each finished epoch (the warm start's epoch 0 too), one record to every logger."""

    def both(event: Any) -> None:
        sink(event)
        if event.kind == "EpochFinished":
            record = epoch_record(session.store, event.epoch)
            for logger in loggers:
                logger.log(record)

    return both
