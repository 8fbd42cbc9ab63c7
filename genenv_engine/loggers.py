"""Runs logged where researchers already look: TensorBoard and Weights & Biases (``--log tensorboard|wandb``).

`logging_sink` wraps the run's event sink: at each ``EpochFinished`` it reads that epoch back from the store and
hands every logger the same numbers ``genenv status --json`` prints (flattened to ``heldout/bfcl``,
``phase_seconds/rollout`` ...), the epoch's p̂ and R_env histograms, and a table of sample tasks with a rollout each.
The store is the source, so a logger shows exactly what the session holds. Loggers are imported lazily (each
in the ``log`` extra); W&B runs offline unless ``WANDB_MODE`` says otherwise, and both write under
``SESSION/logs/``. A resumed session continues the same run: TensorBoard appends to the same folder, and W&B
resumes the run id kept in the session's store.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

LOGGERS = ("tensorboard", "wandb")
STATUS_KEYS = ("generated_success", "calibration_error", "valid_fraction", "unique_fraction", "difficulty_mix",
               "heldout", "phase_seconds", "tasks_trained", "in_band_fraction", "generated_success_by_benchmark",
               "heldout_by_level", "tokens_per_second", "rollout_workers")
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
    """What every logger gets for ``epoch``: the status metrics, the batches' p̂ and R_env, and sample rollouts."""
    row = next((m for m in store.epoch_metrics() if m["epoch"] == epoch), {})
    metrics = {k: row.get(k) for k in STATUS_KEYS if row.get(k) is not None}
    batches = store.db.execute("SELECT p_hat, r_env FROM batches WHERE epoch = ? AND p_hat IS NOT NULL",
                               [epoch]).fetchall()
    samples = store.db.execute(
        "SELECT t.benchmark, t.level, t.origin, t.prompt, r.response, r.reward, r.success FROM rollouts r "
        "JOIN tasks t ON t.id = r.task_id WHERE r.epoch = ? AND r.purpose != 'heldout' ORDER BY r.id LIMIT ?",
        [epoch, SAMPLES]).fetchall()
    return {"epoch": epoch, "metrics": metrics, "p_hat": [b[0] for b in batches],
            "r_env": [b[1] for b in batches if b[1] is not None],
            "samples": [dict(zip(("benchmark", "level", "origin", "prompt", "response", "reward", "success"), s))
                        for s in samples]}


class TensorBoardLogger:
    """Scalars, histograms and a markdown table of samples in ``SESSION/logs/tensorboard``."""

    def __init__(self, session) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise ValueError("--log tensorboard needs tensorboard: pip install 'genenv[log]'") from None
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
            lines = ["| benchmark | level | origin | prompt | response | reward |", "|---|---|---|---|---|---|"]
            for s in record["samples"]:
                cells = [str(s[k]).replace("|", "\\|").replace("\n", " ")[:200]
                         for k in ("benchmark", "level", "origin", "prompt", "response", "reward")]
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
            raise ValueError("--log wandb needs wandb: pip install 'genenv[log]'") from None
        self.wandb = wandb
        run_id = session.store.get_meta("wandb_run_id")
        if not run_id:
            import secrets

            run_id = secrets.token_hex(4)  # W&B run ids are short lowercase alphanumerics
            session.store.set_meta("wandb_run_id", run_id)
        folder = Path(session.path) / "logs"
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "genenv"), id=run_id, resume="allow",
                              name=Path(session.path).name, dir=str(folder), config=session.config.to_dict(),
                              mode=os.environ.get("WANDB_MODE", "offline"))

    def log(self, record: dict[str, Any]) -> None:
        data: dict[str, Any] = dict(flatten(record["metrics"]))
        for name in ("p_hat", "r_env"):
            if record[name]:
                data[name] = self.wandb.Histogram(record[name])
        if record["samples"]:
            cols = ["benchmark", "level", "origin", "prompt", "response", "reward"]
            data["samples"] = self.wandb.Table(columns=cols, data=[[s[c] for c in cols] for s in record["samples"]])
        self.run.log(data, step=record["epoch"])

    def close(self) -> None:
        self.run.finish()


def make_loggers(session, names: list[str]) -> list[Any]:
    """The loggers named (each once, in order); ValueError for an unknown or uninstalled one."""
    made = []
    for name in dict.fromkeys(names):
        if name not in LOGGERS:
            raise ValueError(f"--log must be one of {', '.join(LOGGERS)}, got {name!r}")
        made.append(TensorBoardLogger(session) if name == "tensorboard" else WandbLogger(session))
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
