"""The sections of one session in a report, as blocks: the run (summary, runs, versions and machine, time by phase,
volume trained, configuration), plugin faults, difficulty calibration, the agent's progress and policy updates, the
funnel, and the tasks (counts, samples per difficulty bucket, rejected drafts, hand edits, pins and bans).

`session_blocks` adds them all, under headings of a given level and with anchor and image-key prefixes, so that a
comparison report holds each session's sections under its own heading
(`genenv_engine.reports.document.build_document`).
"""

from __future__ import annotations

from genenv_engine.reports.blocks import (
    DASH,
    Builder,
    Code,
    Heading,
    Image,
    Note,
    Para,
    Table,
    counts_text,
    duration,
    epoch_mark,
    num,
    status_text,
)
from genenv_engine.reports.data import SessionData, TaskView, slug
from genenv_engine.reports.funnel import FUNNEL_HEADERS, funnel_rows
from genenv_engine.storage.progress import fault_text


def _run_section(b: Builder, s: SessionData, lvl: int, pre: str, img: str) -> None:
    cfg = s.config
    b.add(Heading(lvl, "Run", f"{pre}run"))
    model, runtime = cfg["model"], cfg.get("runtime") or {}
    if model.get("kind") == "hf":
        model_text = f"local checkpoint {model.get('path')} (both roles start from it)"
    else:
        model_text = (
            f"tiny Llama: hidden {model['hidden_size']}, {model['num_layers']} layers, "
            f"{model['num_heads']} heads, MLP {model['intermediate_size']}, max length "
            f"{model['max_length']} (both roles start from it)"
        )
    warm = s.trained.get("warm_start") or {}
    if warm.get("parameters"):
        model_text += f"; {warm['parameters']:,} parameters"
    done = [e.epoch for e in s.done_epochs if e.epoch > 0]
    last = s.runs[-1] if s.runs else None
    if s.incomplete_epochs:
        state = "has a partial epoch (stopped, crashed or still running)"
    elif last is not None and last.end == "finished":
        state = "finished"
    elif last is not None and last.end:
        state = last.end
    else:
        state = "no end recorded"
    rows = [
        ["session", s.name],
        ["simulator mode", s.label],
        ["curriculum", f"{s.reward} (alpha {s.alpha}, beta {s.beta}, k_min {s.k_min})"],
        ["preset", str(cfg.get("preset"))],
        ["seed", str(cfg.get("seed"))],
        ["benchmarks", ", ".join(s.benchmarks)],
        ["models", model_text],
        ["generation backend / device", f"{runtime.get('backend')} / {runtime.get('device')}"],
        ["co-evolution epochs done / target", f"{len(done)} / {cfg.get('epochs')}"],
        ["state", state],
        ["created", s.created_at or DASH],
        ["started", s.started_at or DASH],
        ["ended", s.ended_at or DASH],
        ["wall time (runs with a recorded end)", duration(s.wall_seconds)],
        ["tokens generated (both roles, done epochs)", num(s.tokens_generated)],
    ]
    b.add(Table(["item", "value"], rows, f"{pre}summary"))
    for e in s.incomplete_epochs:
        how = "stopped or crashed mid-epoch" if e.status == "partial" else f"{e.status}, no end recorded"
        b.add(
            Note(
                f"Epoch {e.epoch} is PARTIAL ({how}): it started {e.started_at or '?'} and did not finish; "
                "its numbers below are rebuilt from what it left in the database, not recorded metrics.",
                "warn",
            )
        )
    for d in s.discarded:
        b.add(
            Note(
                f"A partial attempt at epoch {d['epoch']} was discarded at {d['at']} and the epoch was redone "
                f"({d['reason']}).",
                "warn",
            )
        )
    b.add(Heading(lvl + 1, "Runs", f"{pre}runs"))
    run_rows = [
        [
            str(i + 1),
            r.started_at,
            str(r.start_epoch),
            r.ended_at or DASH,
            r.end or "no end recorded",
            DASH if r.end_epoch is None else str(r.end_epoch),
            duration(r.seconds),
            r.detail or DASH,
        ]
        for i, r in enumerate(s.runs)
    ]
    b.add(
        Table(
            ["run", "started", "from epoch", "ended", "end", "at epoch", "duration", "detail"],
            run_rows,
            f"{pre}runs-table",
            ["" if r.end == "finished" else "partial" for r in s.runs],
        )
    )

    b.add(Heading(lvl + 1, "Versions and machine", f"{pre}versions"))
    if not s.versions_recorded or not s.machine_recorded:
        b.add(
            Note(
                "The session did not record the software versions or machine it ran with, so these are the "
                "versions and machine that built this report.",
                "info",
            )
        )
    b.add(Table(["software", "version"], [[k, v] for k, v in s.versions.items()], f"{pre}versions-table"))
    b.add(Table(["machine", "value"], [[k, v] for k, v in s.machine.items()], f"{pre}machine-table"))

    b.add(Heading(lvl + 1, "Time by phase", f"{pre}time"))
    total = sum(s.phase_totals.values())
    rows = []
    for phase in sorted(set(s.phase_totals) | set(s.phase_totals_all), key=lambda p: -s.phase_totals_all.get(p, 0)):
        sec = s.phase_totals.get(phase, 0.0)
        rows.append(
            [
                phase,
                num(sec, 1),
                num(100 * sec / total, 1) + " %" if total else DASH,
                num(s.phase_totals_all.get(phase, 0.0), 1),
            ]
        )
    rows.append(["total", num(total, 1), "100.0 %" if total else DASH, num(sum(s.phase_totals_all.values()), 1)])
    b.add(
        Para(
            [
                "Seconds per phase summed over done epochs, and over every attempt including partial and "
                "discarded ones (from the phase events)."
            ]
        )
    )
    b.add(Table(["phase", "seconds (done epochs)", "share", "seconds (all attempts)"], rows, f"{pre}time-table"))
    b.add(Image(f"{img}time", "Seconds per phase for each epoch (partial epochs hatched)"))

    b.add(Heading(lvl + 1, "Generated and trained", f"{pre}volume"))
    t = s.trained
    tps = [e.tokens_per_second for e in s.done_epochs if e.tokens_per_second]
    rows = [
        ["tokens generated (agent and simulator sampling, done epochs)", num(s.tokens_generated)],
        ["generation throughput (mean tokens/s over epochs)", num(sum(tps) / len(tps), 1) if tps else DASH],
        ["agent GRPO sequences trained", num(t["agent_sequences"])],
        ["agent GRPO optimizer steps", num(t["agent_steps"])],
        ["agent completion tokens trained (recorded by the GRPO update)", num(t["agent_tokens"])]
        if t["agent_tokens"] is not None
        else [
            "agent completion tokens trained (estimate: stored rollouts re-tokenised)",
            num(t["agent_tokens_estimate"]),
        ],
        ["simulator tokens trained (recorded by the RWR update)", num(t["simulator_tokens"])],
        ["simulator RWR examples trained", num(t["simulator_examples"])],
        ["simulator RWR optimizer steps", num(t["simulator_steps"])],
        ["warm start: agent SFT steps / pairs", f"{num(warm.get('agent_steps'))} / {num(warm.get('agent_pairs'))}"],
        [
            "warm start: simulator SFT steps / pairs",
            f"{num(warm.get('simulator_steps'))} / {num(warm.get('simulator_pairs'))}",
        ],
        ["warm start: trained on (agent)", warm.get("built_on") or DASH],
    ]
    b.add(Table(["quantity", "value"], rows, f"{pre}volume-table"))

    b.add(Heading(lvl + 1, "Configuration", f"{pre}config"))
    b.add(Para(["Every setting of the run, as saved in ", ("code", "config.toml"), "."]))
    b.add(Table(["setting", "value", "meaning"], [list(r) for r in s.config_rows], f"{pre}config-table"))


def _formula(s: SessionData) -> str:
    """The session's R_env formula with its beta and alpha filled in."""
    return s.reward_formula.replace("beta", str(s.beta)).replace("alpha", str(s.alpha))


def _calibration_section(b: Builder, s: SessionData, lvl: int, pre: str, img: str) -> None:
    b.add(Heading(lvl, "Difficulty calibration", f"{pre}calibration"))
    lo, hi = s.alpha - s.k_min, s.alpha + s.k_min
    b.add(
        Para(
            [
                f"Success rate p̂ of the agent on the simulator's tasks against the target alpha = {s.alpha} and "
                f"the band [{lo:.2f}, {hi:.2f}] (alpha ± k_min); R_env = {_formula(s)} per variation batch "
                f"({s.reward} reward, as the engine stored it). Compare the paper's Fig. 7."
            ]
        )
    )
    b.add(Image(f"{img}calibration", "Mean p̂ of generated tasks per epoch and benchmark, with alpha and the band"))
    epochs = [e for e in s.epochs if e.epoch > 0]
    benches = s.benchmarks
    headers = (
        ["epoch", "status", "mean p̂"]
        + [f"p̂ {x}" for x in benches]
        + [
            "batches",
            "batch p̂ mean",
            "in band",
            "calibration error",
            "R_env mean",
            "R_env min",
            "R_env max",
            "valid fraction",
            "unique fraction",
        ]
    )
    rows, marks = [], []
    for e in epochs:
        rows.append(
            [str(e.epoch), status_text(e), num(e.generated_success)]
            + [num(e.generated_success_by_benchmark.get(x)) for x in benches]
            + [
                str(len(e.batch_p_hats)),
                num(e.batch_p_hat_mean),
                num(e.in_band_fraction),
                num(e.calibration_error),
                num(e.r_env_mean),
                num(min(e.r_envs) if e.r_envs else None),
                num(max(e.r_envs) if e.r_envs else None),
                num(e.valid_fraction),
                num(e.unique_fraction),
            ]
        )
        marks.append(epoch_mark(e))
    if rows:
        b.add(Table(headers, rows, f"{pre}calibration-table", marks))
    else:
        b.add(Para(["No co-evolution epoch has started yet."]))
    b.add(Image(f"{img}phat_hist", "Histogram of task p̂ in the first and last scored epoch"))
    b.add(Image(f"{img}generation", "Valid, unique and in-band fractions per epoch"))
    rows = [
        [
            str(e.epoch),
            status_text(e),
            num(e.generated),
            num(e.valid),
            counts_text(e.invalid_reasons),
            counts_text(e.difficulty_mix),
        ]
        for e in epochs
    ]
    if rows:
        b.add(
            Table(
                ["epoch", "status", "generated", "valid", "invalid reasons", "difficulty mix (valid)"],
                rows,
                f"{pre}generation-table",
                [epoch_mark(e) for e in epochs],
            )
        )


def _progress_section(b: Builder, s: SessionData, lvl: int, pre: str, img: str) -> None:
    b.add(Heading(lvl, "Agent progress", f"{pre}progress"))
    b.add(Para(["Greedy success on each benchmark's held-out split after every epoch (epoch 0 is the warm start)."]))
    b.add(Image(f"{img}heldout", "Held-out success per benchmark per epoch"))
    benches = s.benchmarks
    rows = [[str(e.epoch), status_text(e)] + [num(e.heldout.get(x)) for x in benches] for e in s.epochs]
    b.add(Table(["epoch", "status"] + benches, rows, f"{pre}heldout-table", [epoch_mark(e) for e in s.epochs]))
    rows = []
    for x in benches:
        start = next((r for ep, r in s.heldout_series(x) if ep == 0), None)
        best, final = s.heldout_best(x), s.heldout_final(x)
        rows.append(
            [
                x,
                num(start),
                f"{num(best[1])} (epoch {best[0]})" if best else DASH,
                f"{num(final[1])} (epoch {final[0]})" if final else DASH,
                (f"{final[1] - start:+.3f}" if final and start is not None else DASH),
            ]
        )
    b.add(Table(["benchmark", "epoch 0", "best", "final", "final - epoch 0"], rows, f"{pre}best-table"))
    last = s.done_epochs[-1] if s.done_epochs else None
    if last is not None and last.heldout_by_level:
        rows = [
            [x, lvl_name, num(rate)]
            for x, levels in sorted(last.heldout_by_level.items())
            for lvl_name, rate in levels.items()
        ]
        b.add(Para([f"Held-out success by difficulty bucket at epoch {last.epoch}:"]))
        b.add(Table(["benchmark", "bucket", "success"], rows, f"{pre}level-table"))
    epochs = [e for e in s.epochs if e.epoch > 0]
    if epochs:
        b.add(Heading(lvl + 1, "Policy updates", f"{pre}updates"))
        rows = []
        for e in epochs:
            a, m = e.agent_update, e.simulator_update
            sim = (
                (
                    m.get("skipped")
                    if m.get("skipped")
                    else f"{num(m.get('steps'), 0)} steps, {num(m.get('examples'), 0)} examples, "
                    f"nll {num(m.get('nll'))}, "
                    f"kl {num(m.get('kl'))}" + (", stopped by KL cap" if m.get("stopped_by_kl") else "")
                )
                if m
                else DASH
            )
            rows.append(
                [
                    str(e.epoch),
                    status_text(e),
                    num(e.tasks_trained),
                    counts_text(e.tasks_trained_by_origin),
                    num(a.get("sequences"), 0),
                    num(a.get("steps"), 0),
                    num(a.get("loss"), 4),
                    num(a.get("kl"), 4),
                    num(a.get("clip_fraction")),
                    sim,
                ]
            )
        b.add(
            Table(
                [
                    "epoch",
                    "status",
                    "tasks trained",
                    "by origin",
                    "GRPO sequences",
                    "GRPO steps",
                    "GRPO loss",
                    "GRPO kl",
                    "clip fraction",
                    "simulator update",
                ],
                rows,
                f"{pre}updates-table",
                [epoch_mark(e) for e in epochs],
            )
        )


def _task_blocks(b: Builder, v: TaskView, lvl: int, pre: str, index: str) -> None:
    b.add(Heading(lvl, f"Task {v.id}", f"{pre}task-{index}", toc=False))
    rows = [
        ["benchmark / bucket", f"{v.benchmark} / {v.bucket}"],
        ["origin / status / epoch", f"{v.origin} / {v.status} / {DASH if v.epoch is None else v.epoch}"],
        ["valid", "yes" if v.valid else f"no: {v.reason}"],
        ["written by", v.generator or DASH],
        ["p̂ (task) / R_env (its batch) / rollouts", f"{num(v.p_hat)} / {num(v.r_env)} / {v.n_rollouts}"],
        ["checker result", v.check or DASH],
        ["agent attempts", v.attempts or DASH],
        ["lineage (to the seed)", " ← ".join(f"{i} ({o}, epoch {e})" for i, o, e in v.lineage) or v.id],
    ]
    if v.superseded_by:
        rows.append(["superseded by", v.superseded_by])
    b.add(Table(["field", "value"], rows))
    b.add(Code("prompt", v.prompt), Code("answer", v.answer))
    if v.root_prompt is not None:
        b.add(
            Code(f"root seed {v.lineage[-1][0]}: prompt", v.root_prompt),
            Code(f"root seed {v.lineage[-1][0]}: answer", v.root_answer or ""),
        )


def _tasks_section(b: Builder, s: SessionData, lvl: int, pre: str) -> None:
    b.add(Heading(lvl, "Tasks", f"{pre}tasks"))
    b.add(
        Para(
            [
                "Tasks in the store per epoch, by origin (built-in tasks by split) and status. Superseded tasks "
                "were replaced by a hand edit."
            ]
        )
    )
    agg: dict[tuple[int, str], dict[str, int]] = {}
    for r in s.task_counts:
        origin = r["origin"] if r["origin"] != "seed" else f"seed ({r['split']} split)"
        cell = agg.setdefault((r["epoch"], origin), {})
        key = "invalid" if not r["valid"] else r["status"]
        cell[key] = cell.get(key, 0) + r["n"]
        if r["superseded"]:
            cell["superseded"] = cell.get("superseded", 0) + r["n"]
        cell["total"] = cell.get("total", 0) + r["n"]
    status_of = {e.epoch: e for e in s.epochs}
    rows, marks = [], []
    for (epoch, origin), c in sorted(agg.items(), key=lambda kv: (kv[0][0] if kv[0][0] is not None else -1, kv[0][1])):
        e = status_of.get(epoch)
        rows.append(
            [
                DASH if epoch is None else str(epoch),
                status_text(e) if e else DASH,
                origin,
                str(c.get("active", 0)),
                str(c.get("pinned", 0)),
                str(c.get("banned", 0)),
                str(c.get("invalid", 0)),
                str(c.get("superseded", 0)),
                str(c.get("total", 0)),
            ]
        )
        marks.append(epoch_mark(e) if e else "")
    b.add(
        Table(
            ["epoch", "epoch status", "origin", "active", "pinned", "banned", "invalid", "superseded", "total"],
            rows,
            f"{pre}counts-table",
            marks,
        )
    )

    b.add(Heading(lvl + 1, "Sample of generated tasks by difficulty bucket", f"{pre}samples"))
    if not s.samples:
        b.add(Para(["No valid generated task is stored."]))
    for bucket, views in s.samples.items():
        b.add(Heading(lvl + 2, f"Bucket {bucket}", f"{pre}bucket-{bucket}", toc=False))
        for i, v in enumerate(views):
            _task_blocks(b, v, lvl + 3, pre, f"{bucket}-{i}")
    if s.rejected:
        b.add(Heading(lvl + 1, "Rejected generations (sample)", f"{pre}rejected"))
        for i, v in enumerate(s.rejected):
            _task_blocks(b, v, lvl + 2, pre, f"rejected-{i}")

    b.add(Heading(lvl + 1, "Hand edits", f"{pre}edits"))
    if not s.edits:
        b.add(Para(["No task was edited by hand."]))
    for i, ed in enumerate(s.edits):
        a, o = ed.after, ed.before
        b.add(Heading(lvl + 2, f"Edit {i + 1}: {o.id} -> {a.id}", f"{pre}edit-{i}", toc=False))
        b.add(
            Table(
                ["field", "before", "after"],
                [
                    ["id", o.id, a.id],
                    ["origin", o.origin, a.origin],
                    ["status", o.status, a.status],
                    ["valid", "yes" if o.valid else "no", "yes" if a.valid else f"no: {a.reason}"],
                    ["p̂", num(o.p_hat), num(a.p_hat)],
                    ["edited at", DASH, a.created_at or DASH],
                    ["checker result", DASH, a.check or DASH],
                    ["agent attempts", DASH, a.attempts or DASH],
                ],
            )
        )
        b.add(
            Code("prompt before", o.prompt),
            Code("prompt after", a.prompt),
            Code("answer before", o.answer),
            Code("answer after", a.answer),
        )

    for title, anchor, views in (("Pinned tasks", "pins", s.pinned), ("Banned tasks", "bans", s.banned)):
        b.add(Heading(lvl + 1, title, f"{pre}{anchor}"))
        if not views:
            b.add(Para([f"No {title.split()[0].lower()} task."]))
            continue
        b.add(
            Table(
                ["id", "benchmark", "origin", "epoch", "valid", "superseded by"],
                [
                    [
                        v.id,
                        v.benchmark,
                        v.origin,
                        DASH if v.epoch is None else str(v.epoch),
                        "yes" if v.valid else "no",
                        v.superseded_by or DASH,
                    ]
                    for v in views
                ],
                f"{pre}{anchor}-table",
            )
        )
        for v in views:
            b.add(Code(f"{v.id}: prompt", v.prompt))


def _funnel_section(b: Builder, s: SessionData, lvl: int, pre: str) -> None:
    b.add(Heading(lvl, "Funnel", f"{pre}funnel"))
    b.add(
        Para(
            [
                "Per epoch: the tasks the simulator wrote (drafts), those the validator admitted, those the "
                "duplicate cap kept (stored valid), and the distinct tasks the agent trained on by source (fresh: "
                "written that epoch; replayed: the earlier generated pool; pinned; edited; base data), with each "
                "stage's difficulty level mix. Rejections are counted by reason (duplicate, duplicate_cap and "
                "heldout_copy are the cap's)."
            ]
        )
    )
    tables = funnel_rows(s.funnel)
    if not tables:
        b.add(Para(["No epoch wrote or trained on a task yet."]))
    status_of = {e.epoch: e for e in s.epochs}
    for bench, rows in tables.items():
        b.add(Heading(lvl + 1, f"Funnel: {bench}", f"{pre}funnel-{slug(bench)}"))
        marks = [epoch_mark(status_of[int(r[0])]) if int(r[0]) in status_of else "" for r in rows]
        b.add(Table(FUNNEL_HEADERS, rows, f"{pre}funnel-{slug(bench)}-table", marks))


def _faults_section(b: Builder, s: SessionData, lvl: int, pre: str) -> None:
    """Items a plugin's fault failed, per epoch and benchmark, and each re-scoring of the held-out answers (only
    when the session has any)."""
    rows = [
        [str(e.epoch), status_text(e), bench, fault_text({bench: places}).partition(": ")[2]]
        for e in s.epochs
        for bench, places in sorted(e.plugin_faults.items())
        if fault_text({bench: places})
    ]
    rescored = [
        [
            str(e.epoch),
            r.get("at", DASH),
            num(r.get("changed"), 0),
            counts_text(r.get("heldout_before") or {}),
            counts_text(e.heldout),
        ]
        for e in s.epochs
        for r in e.heldout_rescored
    ]
    if not rows and not rescored:
        return
    b.add(Heading(lvl, "Plugin faults", f"{pre}plugin-faults"))
    b.add(
        Para(
            [
                "Items that a plugin environment's code failed by raising (plugin_error) or by running past "
                "simulator.plugin_timeout (plugin_timeout): they count as failures in the held-out figures, are left "
                "out of the agent's update and the batches' p̂, and say nothing about the agent. genenv resume "
                "SESSION --rescore-heldout checks the stored held-out answers again once the plugin is fixed."
            ]
        )
    )
    if rows:
        b.add(Table(["epoch", "status", "benchmark", "faults"], rows, f"{pre}plugin-faults-table"))
    if rescored:
        b.add(
            Table(
                ["epoch", "held-out re-scored at", "answers changed", "held-out before", "held-out now"],
                rescored,
                f"{pre}rescored-table",
            )
        )


def session_blocks(b: Builder, s: SessionData, lvl: int, pre: str, img: str) -> None:
    """Add every section of session ``s`` to ``b``: headings from level ``lvl``, anchors prefixed ``pre``, image
    keys ``img``."""
    _run_section(b, s, lvl, pre, img)
    _faults_section(b, s, lvl, pre)
    _calibration_section(b, s, lvl, pre, img)
    _progress_section(b, s, lvl, pre, img)
    _funnel_section(b, s, lvl, pre)
    _tasks_section(b, s, lvl, pre)
