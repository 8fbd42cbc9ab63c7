"""Tasks as a report shows them (`TaskView`): text cut to `TEXT_LIMIT`, verdicts, scores, the checker's word on
the gold answer, the agent's attempts and lineage; a sample of generated tasks per difficulty bucket, a few
rejected ones, every hand edit, pin and ban.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from genenv_engine.core.records import Task
from genenv_engine.reports.session_data import Edit, TaskView
from genenv_engine.storage.store import Store

SAMPLES_PER_BUCKET = 3
"""Generated tasks shown per difficulty bucket."""
REJECTED_SAMPLES = 5
"""Rejected generations shown with their reason."""
TEXT_LIMIT = 4000
"""Task text longer than this many characters is cut in reports (the cut is said)."""


def _cut(text: str | None) -> str:
    text = text or ""
    if len(text) <= TEXT_LIMIT:
        return text
    return text[:TEXT_LIMIT] + f"\n… ({len(text) - TEXT_LIMIT} more characters not shown)"


class TaskReader:
    """Turns task rows into TaskViews, loading each benchmark's environment once for buckets and checks, built as
    the session built it: a plugin from the source its config recorded (``sources``, name -> source text), with
    its data folder and constructor options."""

    def __init__(
        self,
        store: Store,
        seed: int,
        data_dirs: dict[str, str],
        sources: dict[str, str] | None = None,
        options: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.store, self.seed, self.data_dirs = store, seed, data_dirs
        self.sources, self.options = dict(sources or {}), dict(options or {})
        self._envs: dict[str, Any] = {}

    def env(self, name: str) -> Any:
        if name not in self._envs:
            from genenv_engine.environments import get_environment, resolve_benchmarks

            try:
                if name in self.sources:
                    resolve_benchmarks([name], {name: self.sources[name]})
                self._envs[name] = get_environment(
                    name, self.seed, data_dir=self.data_dirs.get(name), options=self.options.get(name)
                )
            except Exception:  # an unknown or broken benchmark must not stop the report
                self._envs[name] = None
        return self._envs[name]

    def bucket(self, task: Task) -> str:
        env = self.env(task.benchmark)
        try:
            return str(env.bucket(task)) if env is not None else f"L{task.level}"
        except Exception:
            return f"L{task.level}"

    def view(self, task_id: str, full: bool = True) -> TaskView | None:
        task = self.store.get_task(task_id)
        if task is None:
            return None
        stats = self.store.task_stats(task_id) or {}
        created = self.store.created_at(task_id)
        v = TaskView(
            id=task.id,
            benchmark=task.benchmark,
            origin=task.origin,
            split=task.split,
            status=task.status,
            epoch=task.epoch,
            valid=task.valid,
            reason=task.reason,
            prompt=_cut(task.prompt),
            answer=_cut(task.answer),
            bucket=self.bucket(task),
            generator=task.generator,
            p_hat=stats.get("p_hat"),
            r_env=stats.get("r_env"),
            n_rollouts=stats.get("n_rollouts") or 0,
            batch_id=stats.get("batch_id"),
            superseded_by=stats.get("superseded_by"),
            parent_id=task.parent_id,
            created_at=created,
        )
        if not full:
            return v
        v.check = self.check(task)
        v.attempts = self.attempts(task_id)
        chain = self.store.lineage(task_id)
        v.lineage = [(t.id, t.origin, t.epoch) for t in chain]
        if len(chain) > 1:
            v.root_prompt, v.root_answer = _cut(chain[-1].prompt), _cut(chain[-1].answer)
        return v

    def check(self, task: Task) -> str:
        if not task.valid:
            return f"rejected by the validator: {task.reason or 'no reason recorded'}"
        env = self.env(task.benchmark)
        if env is None:
            return f"not checked (benchmark {task.benchmark!r} is not available here)"
        try:
            result = env.check(task, task.answer)
        except Exception as exc:  # a checker error is reported, not raised
            return f"checker error on the gold answer: {type(exc).__name__}: {exc}"
        verdict = "accepts" if result.success else "REJECTS"
        extra = f", error {result.error_type}" if result.error_type else ""
        return f"checker {verdict} the gold answer (score {result.score:.3f}{extra})"

    def attempts(self, task_id: str) -> str:
        rows = self.store.rollouts_for(task_id)
        if not rows:
            return "no agent rollouts recorded"
        epochs = sorted({r["epoch"] for r in rows if r["epoch"] is not None})
        wins = sum(1 for r in rows if r["success"])
        mean = sum(r["reward"] or 0.0 for r in rows) / len(rows)
        errors = Counter(r["error_type"] for r in rows if r["error_type"])
        text = f"{wins}/{len(rows)} rollouts succeeded (mean reward {mean:.3f}; epochs {', '.join(map(str, epochs))})"
        if errors:
            text += "; errors: " + ", ".join(f"{k} x{n}" for k, n in errors.most_common())
        return text


def sample_tasks(store: Store, reader: TaskReader) -> tuple[dict[str, list[TaskView]], list[TaskView]]:
    """Up to SAMPLES_PER_BUCKET valid generated tasks per difficulty bucket (spread over epochs, newest
    first), and a few rejected generations."""
    by_bucket: dict[str, dict[int, list[str]]] = {}
    for row in store.generated_summaries():
        difficulty = row["difficulty"] or {}
        stub = Task(id=row["id"], benchmark=row["benchmark"], prompt="", answer="", difficulty=difficulty)
        by_bucket.setdefault(reader.bucket(stub), {}).setdefault(row["epoch"], []).append(row["id"])
    samples: dict[str, list[TaskView]] = {}
    for bucket in sorted(by_bucket):
        queues = [list(ids) for _, ids in sorted(by_bucket[bucket].items(), reverse=True)]
        chosen: list[str] = []
        while len(chosen) < SAMPLES_PER_BUCKET and any(queues):
            for q in queues:
                if q and len(chosen) < SAMPLES_PER_BUCKET:
                    chosen.append(q.pop(0))
        samples[bucket] = [v for v in (reader.view(i) for i in chosen) if v is not None]
    rejected = [reader.view(i) for i in store.rejected_ids(REJECTED_SAMPLES)]
    return samples, [v for v in rejected if v is not None]


def hand_edits(store: Store, reader: TaskReader) -> list[Edit]:
    """Every hand edit (an ``edited`` task and the task it revised), oldest first."""
    out = []
    for edited_id, parent_id in store.edits():
        after = reader.view(edited_id)
        before = reader.view(parent_id, full=False) if parent_id else None
        if after is None:
            continue
        if before is None:
            before = TaskView(
                id=parent_id or "?",
                benchmark=after.benchmark,
                origin="?",
                split=None,
                status="?",
                epoch=None,
                valid=False,
                reason="the edited task is no longer stored",
                prompt="",
                answer="",
            )
        out.append(Edit(before, after))
    return out


def tasks_with_status(store: Store, reader: TaskReader, status: str) -> list[TaskView]:
    """Every task with ``status`` (``pinned``, ``banned``), without checks or lineage."""
    return [v for v in (reader.view(i, full=False) for i in store.ids_with_status(status)) if v is not None]
