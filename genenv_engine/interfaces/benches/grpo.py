"""``genenv bench grpo``: one agent GRPO step (generate a group per prompt, score, update) against TRL's GRPOTrainer.

Both sides get the same randomly initialised tiny-preset model, the same bfcl agent prompts, group
size, completion length, sampling temperature, learning rate, clip ε and KL coefficient β (to a
frozen copy of the starting model), and the same reward: a plain function of the completion text
(the share of its characters that are digits or commas, so every group has reward variance and
neither side skips work). Ours is `genenv_engine.backends.hf.HFBackend` + `GRPOTrainer.update`;
TRL's is ``GRPOTrainer.train`` with one optimizer step per generation batch, timed per step by a
callback. TRL is optional (``pip install -e ".[bench]"``); without it only our step is timed and
``ratio`` is null. ``ratio`` = TRL seconds per step / ours (above 1: ours is faster). Goal: ≥ 1.
Each side also reports its generation seconds and the completion tokens it generated (the ending token
included), and ``update_ratio`` compares the rest of the step (score + update: step − generation).

The same work per step: TRL's config defaults differ from ours in three ways that the bench undoes.
(1) ``bf16=True``: TRL runs the forward passes under bfloat16 autocast on the CPU too, while our
tiny preset computes in float32. A bfloat16 matrix product is fast only on a CPU with native
bfloat16 instructions (AVX512-BF16 or AMX); elsewhere PyTorch falls back to a slow kernel (one
128×512 linear on 12,800 rows, one thread, on an AVX512-BF16 CPU with oneDNN capped by
``ONEDNN_MAX_CPU_ISA``: 9 ms uncapped, 51 ms at ``AVX512_CORE``, 167 ms at ``AVX2``; 26 ms in float32 at
all three). This accounts for TRL's step taking 4.3 s on one CPU and 45.6 s on another with the same
versions, the slow step's time in the linear layers: capped at ``AVX2``, one 1-thread TRL step of the
default bench goes from 3.8 s to 23 s with that profile. The bench sets ``bf16=False``: both sides compute in float32,
as the engine does on a CPU.
(2) ``gradient_checkpointing=True``: TRL recomputes every layer's forward in the backward pass; ours
follows the preset's ``runtime.gradient_checkpointing`` (off for the tiny model), and so does TRL here.
`torch.utils.checkpoint` calls each layer through a ``torch._dynamo``-disabled wrapper, so a profile
files the checkpointed layers (and their recomputation) under ``torch/_dynamo/eval_frame.py``:
nothing is compiled (TRL generates with ``disable_compile=True`` and calls no ``torch.compile``),
that time was the bfloat16 layers. (3) Stopping: our decoder ends a row at the end-of-sequence or the
padding token, ``model.generate`` only at the former; TRL gets both as its end tokens, and each side
trains on the token that ended a row. TRL also takes its prompts in order (``shuffle_dataset=False``),
so each step sees the same prompts as ours.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import tempfile
import time
from typing import Any

from genenv_engine.interfaces.benches.common import goal, rich_table


def reward(text: str) -> float:
    """Share of the completion's characters that are digits or commas (0 for an empty completion).

    >>> reward("f(1,2)")
    0.5
    >>> reward("")
    0.0
    """
    return sum(c.isdigit() or c == "," for c in text) / len(text) if text else 0.0


def _setup(prompts_n: int, seed: int):
    import torch

    from genenv_engine.config import load_config
    from genenv_engine.environments import get_environment
    from genenv_engine.training.agent import agent_prompt
    from genenv_engine.training.models import warmstart_agent

    cfg = load_config("tiny")
    torch.manual_seed(seed)
    policy = warmstart_agent(cfg.model, cfg.runtime, seed)
    env = get_environment("bfcl", 0)
    prompts = [agent_prompt(policy, t) for t in env.splits()["train"][:prompts_n]]
    return cfg, policy, prompts


def _with_end(completion, max_new: int, eos: int, pad: int) -> list[int]:
    """A completion's ids with the token that ended it, as TRL trains them: the end-of-sequence when the model
    stopped by itself, the padding token when it sampled that before its budget (our decoder ends a row there
    too and strips it; without it such a completion can be empty), nothing when the budget cut it."""
    if completion.finished:
        return completion.token_ids + [eos]
    return completion.token_ids + ([pad] if len(completion.token_ids) < max_new else [])


def ours(prompts_n: int, group: int, max_new: int, steps: int, lr: float, beta: float, seed: int) -> dict[str, Any]:
    """Seconds of each of ``steps`` GRPO steps of the engine (and of their generation), and the completion tokens
    each generated (the ending token included) and trained."""
    import random

    from genenv_engine.backends.base import Sampling
    from genenv_engine.backends.hf import HFBackend
    from genenv_engine.training.trainer import Group, GRPOTrainer

    cfg, policy, prompts = _setup(prompts_n, seed)
    reference = policy.frozen_copy()
    trainer = GRPOTrainer(
        policy,
        reference,
        lr=lr,
        clip=cfg.agent.clip,
        kl_coef=beta,
        minibatch=prompts_n * group,
        drop_zero_variance=False,
    )
    backend = HFBackend(policy)
    rng = random.Random(seed)
    eos, pad = policy.tokenizer.eos_token_id, policy.tokenizer.pad_token_id
    seconds, generate_s, generated, trained = [], [], [], []
    for step in range(steps):
        start = time.perf_counter()
        outs = backend.generate(
            [p for p in prompts for _ in range(group)],
            Sampling(temperature=1.0, max_new_tokens=max_new, seed=seed + step),
        )
        generate_s.append(time.perf_counter() - start)
        groups = []
        for i, p in enumerate(prompts):
            comps = outs[i * group : (i + 1) * group]
            groups.append(
                Group(
                    policy.encode(p), [_with_end(c, max_new, eos, pad) for c in comps], [reward(c.text) for c in comps]
                )
            )
        info = trainer.update(groups, rng)
        seconds.append(time.perf_counter() - start)
        generated.append(sum(len(c) for g in groups for c in g.completions))
        trained.append(int(info.get("tokens", 0)))
    return {
        "seconds": seconds,
        "generate_seconds": generate_s,
        "tokens_generated": generated,
        "tokens_trained": trained,
    }


def trl(prompts_n: int, group: int, max_new: int, steps: int, lr: float, beta: float, seed: int) -> dict[str, Any]:
    """The same steps with TRL's GRPOTrainer, set to do our work (see the module docstring); ImportError without
    TRL."""
    import trl as trl_module
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig
    from trl import GRPOTrainer as TRLGRPOTrainer

    cfg, policy, prompts = _setup(prompts_n, seed)
    tok = policy.tokenizer
    times: list[float] = []
    generate_s: list[float] = []
    generated: list[int] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            times.append(time.perf_counter() - self.start)

    def reward_fn(completions, **kwargs):
        return [reward(c) for c in completions]

    with tempfile.TemporaryDirectory() as tmp:
        # our decoder ends a row at the end-of-sequence or the padding token: TRL stops (and masks) at both too
        policy.model.generation_config.eos_token_id = [tok.eos_token_id, tok.pad_token_id]
        policy.save(f"{tmp}/model")  # TRL loads the policy and its KL reference from a folder
        args = GRPOConfig(
            output_dir=tmp,
            model_init_kwargs={"dtype": "float32"},
            per_device_train_batch_size=prompts_n * group,
            num_generations=group,
            max_completion_length=max_new,
            max_steps=steps,
            learning_rate=lr,
            beta=beta,
            epsilon=cfg.agent.clip,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            use_cpu=True,
            report_to="none",
            save_strategy="no",
            logging_steps=10**6,
            disable_tqdm=True,
            seed=seed,
            dataloader_num_workers=0,
            gradient_accumulation_steps=1,
            num_iterations=1,
            weight_decay=0.0,
            lr_scheduler_type="constant",
            warmup_steps=0,
            max_grad_norm=1.0,
            # float32 like ours (TRL's default is bfloat16 autocast, slow on CPUs without native
            # bfloat16), checkpointing as the preset has it (TRL's default: on), prompts in order
            bf16=False,
            fp16=False,
            gradient_checkpointing=cfg.runtime.gradient_checkpointing,
            shuffle_dataset=False,
        )
        trainer = TRLGRPOTrainer(
            model=f"{tmp}/model",
            reward_funcs=reward_fn,
            args=args,
            train_dataset=Dataset.from_dict({"prompt": prompts * steps}),
            processing_class=tok,
            callbacks=[StepTimer()],
        )
        generate = getattr(trainer, "_generate_single_turn", None)  # TRL's sampling step (a private method)

        def timed_generate(*a, **kw):  # timed, and its completion tokens counted (the ending token included)
            start = time.perf_counter()
            out = generate(*a, **kw)
            generate_s.append(time.perf_counter() - start)
            generated.append(sum(len(ids) for ids in out[0]))
            return out

        if generate is not None:  # else the JSON has no generation seconds and no update_ratio
            trainer._generate_single_turn = timed_generate
        with contextlib.redirect_stdout(io.StringIO()):  # the Trainer prints its summary dict
            trainer.train()
    return {
        "seconds": times,
        "generate_seconds": generate_s,
        "tokens_generated": generated,
        "version": trl_module.__version__,
        "settings": {
            "bf16": args.bf16,
            "gradient_checkpointing": args.gradient_checkpointing,
            "end_tokens": getattr(trainer, "eos_token_ids", None),
        },
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``genenv bench grpo``."""
    parser.add_argument("--prompts", type=int, default=8, help="prompts per step")
    parser.add_argument("--group", type=int, default=8, help="completions per prompt (the preset's rollouts k)")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument(
        "--steps", type=int, default=3, help="steps timed on each side (median; the first is a warm-up)"
    )
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--beta", type=float, default=0.01, help="KL coefficient (the tiny preset's agent.kl_coef)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (the presets' runtime.threads)")


def _median_after_first(values: list[float]) -> float | None:
    rest = values[1:] or values
    return round(statistics.median(rest), 4) if rest else None


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Entry point."""
    import torch

    from genenv_engine.training.policy import quiet_transformers

    quiet_transformers()
    torch.set_num_threads(args.threads)
    same = (args.prompts, args.group, args.max_new_tokens, args.steps, args.lr, args.beta, 0)
    out: dict[str, Any] = {
        "prompts": args.prompts,
        "group": args.group,
        "max_new_tokens": args.max_new_tokens,
        "steps": args.steps,
        "lr": args.lr,
        "beta": args.beta,
        "threads": args.threads,
        "ours": _medians(ours(*same)),
    }
    try:
        theirs = trl(*same)
    except ImportError as exc:
        out["trl"] = {
            "missing": True,
            "error": str(exc),
            "install": "pip install -c constraints-cpu.txt -e '.[bench]' (pin transformers to this venv's)",
        }
        out["ratio"] = out["update_ratio"] = None
        out["goals"] = [goal("ratio (TRL s / ours s per step)", None, 1.0, at_most=False)]
        return out
    out["trl"] = _medians(theirs)
    ours_s, trl_s = out["ours"]["median_seconds"], out["trl"]["median_seconds"]
    out["ratio"] = round(trl_s / ours_s, 2) if ours_s and trl_s else None
    ours_u, trl_u = out["ours"]["median_update_seconds"], out["trl"]["median_update_seconds"]
    out["update_ratio"] = round(trl_u / ours_u, 2) if ours_u and trl_u else None
    out["goals"] = [goal("ratio (TRL s / ours s per step)", out["ratio"], 1.0, at_most=False)]
    return out


def _medians(side: dict[str, Any]) -> dict[str, Any]:
    """A side's steps with the median (after the first) of its step, generation and rest-of-step seconds."""
    rest = [s - g for s, g in zip(side["seconds"], side["generate_seconds"], strict=False)]
    return {
        **side,
        "median_seconds": _median_after_first(side["seconds"]),
        "median_generate_seconds": _median_after_first(side["generate_seconds"]),
        "median_update_seconds": _median_after_first(rest),
    }


def table(result: dict[str, Any]):
    """Rich table: seconds per step of each side."""
    t = rich_table(
        f"grpo: one step = {result['prompts']} prompts × {result['group']} completions "
        f"(≤{result['max_new_tokens']} tokens), generate + score + update, {result['threads']} threads",
        ("trainer", "median s/step", "generate / update s", "steps (s)", "note"),
    )
    o = result["ours"]

    def split(side: dict[str, Any]) -> str:
        return f"{side.get('median_generate_seconds')} / {side.get('median_update_seconds')}"

    t.add_row(
        "genenv",
        str(o["median_seconds"]),
        split(o),
        ", ".join(f"{s:.2f}" for s in o["seconds"]),
        f"generated {o['tokens_generated']}, trained {o['tokens_trained']} tokens",
    )
    r = result["trl"]
    if r.get("missing"):
        t.add_row("TRL", "-", "-", "-", f"not installed: {r['install']}")
    else:
        t.add_row(
            f"TRL {r['version']}",
            str(r["median_seconds"]),
            split(r),
            ", ".join(f"{s:.2f}" for s in r["seconds"]),
            f"generated {r['tokens_generated']} tokens; ratio {result['ratio']} "
            f"(rest of the step: {result['update_ratio']})",
        )
    return t
