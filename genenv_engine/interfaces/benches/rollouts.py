"""``genenv bench rollouts``: the engine's batched generation against a naive per-prompt ``model.generate`` loop.

Same model, prompts (bfcl agent prompts), sampling (the tiny preset's agent: temperature 1, 64 new
tokens) and token accounting (sampled tokens plus the end-of-sequence token). Three ways are timed:
``naive`` (one ``generate`` call per prompt), ``generate batched`` (one ``generate`` call per chunk
with per-step scores, what the engine did before its own decode loop) and ``engine``
(`genenv_engine.backends.hf.HFBackend`). The model is the cached tiny warm-start agent when the
cache has one, else a short SFT of a fresh tiny agent (so completions end as a trained agent's
do), or ``--model smollm2`` / a local checkpoint. Goal on tiny: engine ≥ 8× naive tokens/s.
Each way first runs once untimed, as in a training run's later epochs: the engine on all the
prompts (it keeps its KV storage between calls, and the first call pays for faulting it in),
the others on `WARM_PROMPTS` of them.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from genenv_engine.interfaces.benches.common import goal, median, rich_table

GOAL_RATIO = 8.0
WARM_PROMPTS = 8
"""Prompts of the untimed first run of ``naive`` and ``generate batched`` (the engine's runs on all of them)."""


def tiny_agent(warm_steps: int):
    """The cached tiny warm-start agent (seed 0) if present, else a fresh one after ``warm_steps`` SFT steps."""
    import random

    import torch

    from genenv_engine.config import load_config
    from genenv_engine.environments import get_environment
    from genenv_engine.training.agent import agent_prompt
    from genenv_engine.training.models import warmstart_agent
    from genenv_engine.training.policy import Policy
    from genenv_engine.training.trainer import sft
    from genenv_engine.training.warmstart import cached_agent

    cfg = load_config("tiny")
    folder = cached_agent(cfg)
    if folder is not None:
        return Policy.load(
            folder / "agent", torch.device("cpu"), cfg.model.max_length
        ), f"cached warm start {folder.name}"
    agent = warmstart_agent(cfg.model, cfg.runtime, 0)
    env = get_environment("bfcl", 0)
    pairs = [(agent.encode(agent_prompt(agent, t)), agent.completion_ids(t.answer)) for t in env.splits()["train"]]
    sft(agent, pairs, warm_steps, cfg.warm_start.agent_lr, cfg.warm_start.batch_size, random.Random(0))
    return agent, f"fresh tiny agent after {warm_steps} SFT steps (no cached warm start)"


def load_policy(model: str, warm_steps: int):
    """The policy to generate with and a description of where it came from."""
    import torch

    from genenv_engine.config import ModelConfig, RuntimeConfig
    from genenv_engine.training.models import warmstart_agent
    from genenv_engine.training.policy import Policy

    if model == "tiny":
        return tiny_agent(warm_steps)
    if model == "smollm2":
        return warmstart_agent(
            ModelConfig(kind="smollm2", agent_tuning="lora", max_length=320), RuntimeConfig(), 0
        ), "SmolLM2-135M-Instruct (LoRA agent)"
    return Policy.load(model, torch.device("cpu"), 384), f"checkpoint {model}"


def _count(row: list[int], eos: int, pad: int) -> int:
    """Tokens of one generated row as the engine counts them: up to end-of-sequence (included) or padding."""
    for i, t in enumerate(row):
        if t == eos:
            return i + 1
        if t == pad:
            return i
    return len(row)


def naive(policy, prompts: list[str], temperature: float, max_new: int) -> int:
    """One ``generate`` call per prompt; returns the tokens generated."""
    import torch

    tok, model = policy.tokenizer, policy.model
    total = 0
    with torch.no_grad():
        for p in prompts:
            ids = torch.tensor([policy.encode(p)], device=policy.device)
            out = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                do_sample=True,
                temperature=temperature,
                top_k=0,
                top_p=1.0,
                max_new_tokens=max_new,
                eos_token_id=tok.eos_token_id,
                pad_token_id=tok.pad_token_id,
            )
            total += _count(out[0, ids.shape[1] :].tolist(), tok.eos_token_id, tok.pad_token_id)
    return total


def batched_generate(policy, prompts: list[str], temperature: float, max_new: int, chunk: int) -> int:
    """``generate`` on left-padded chunks with per-step scores (the engine before its decode loop)."""
    import torch

    tok, model = policy.tokenizer, policy.model
    total = 0
    with torch.no_grad():
        for start in range(0, len(prompts), chunk):
            enc = [policy.encode(p) for p in prompts[start : start + chunk]]
            width = max(map(len, enc))
            ids = torch.full((len(enc), width), tok.pad_token_id, dtype=torch.long)
            attn = torch.zeros_like(ids)
            for i, e in enumerate(enc):
                ids[i, width - len(e) :] = torch.tensor(e)
                attn[i, width - len(e) :] = 1
            res = model.generate(
                input_ids=ids.to(policy.device),
                attention_mask=attn.to(policy.device),
                do_sample=True,
                temperature=temperature,
                top_k=0,
                top_p=1.0,
                max_new_tokens=max_new,
                eos_token_id=tok.eos_token_id,
                pad_token_id=tok.pad_token_id,
                return_dict_in_generate=True,
                output_scores=True,
            )
            new = res.sequences[:, width:]
            _ = [s.float().log_softmax(-1).gather(1, new[:, t : t + 1]) for t, s in enumerate(res.scores)]
            total += sum(_count(row, tok.eos_token_id, tok.pad_token_id) for row in new.tolist())
    return total


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``genenv bench rollouts``."""
    parser.add_argument("--model", default="tiny", help="tiny (default), smollm2 or a local checkpoint folder")
    parser.add_argument("--prompts", type=int, default=128, help="bfcl agent prompts (held-out split)")
    parser.add_argument(
        "--rollouts",
        type=int,
        default=1,
        help="samples per prompt, sent as adjacent repeats the way an epoch's rollouts are (k)",
    )
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=1, help="timed runs of each way (median)")
    parser.add_argument(
        "--warm-steps", type=int, default=150, help="SFT steps for a fresh tiny agent when no warm start is cached"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=2,
        help="torch threads of the process (the presets' runtime.threads); the engine decodes small "
        "models on one thread whatever this says",
    )
    parser.add_argument("--skip-batched-generate", action="store_true")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Entry point."""
    import torch

    from genenv_engine.backends.base import Sampling
    from genenv_engine.backends.hf import HFBackend, chunk_for
    from genenv_engine.environments import get_environment
    from genenv_engine.training.agent import agent_prompt
    from genenv_engine.training.policy import quiet_transformers

    quiet_transformers()
    torch.set_num_threads(args.threads)
    policy, source = load_policy(args.model, args.warm_steps)
    policy.model.eval()
    env = get_environment("bfcl", 0)
    heldout = env.splits()["heldout"]
    if args.rollouts < 1:
        raise SystemExit("--rollouts must be >= 1")
    prompts = [
        agent_prompt(policy, heldout[i % len(heldout)]) for i in range(args.prompts) for _ in range(args.rollouts)
    ]
    sampling = Sampling(temperature=args.temperature, max_new_tokens=args.max_new_tokens, seed=0)
    backend = HFBackend(policy)
    chunk = chunk_for(len(policy.tokenizer), args.max_new_tokens, backend.chunk_size)

    def engine() -> int:
        before = backend.tokens_generated
        backend.generate(prompts, sampling)
        return backend.tokens_generated - before

    ways = {
        "naive": lambda: naive(policy, prompts, args.temperature, args.max_new_tokens),
        "generate batched": lambda: batched_generate(policy, prompts, args.temperature, args.max_new_tokens, chunk),
        "engine": engine,
    }
    warm = {
        "naive": lambda: naive(policy, prompts[:WARM_PROMPTS], args.temperature, args.max_new_tokens),
        "generate batched": lambda: batched_generate(
            policy, prompts[:WARM_PROMPTS], args.temperature, args.max_new_tokens, chunk
        ),
        "engine": engine,
    }
    if args.skip_batched_generate:
        del ways["generate batched"]
    rows = []
    for name, fn in ways.items():
        torch.manual_seed(0)
        warm[name]()
        walls, cpus, tokens = [], [], 0
        for _ in range(args.repeats):
            torch.manual_seed(0)  # every repeat of every way samples from the same seed (the engine seeds itself)
            w0, c0 = time.perf_counter(), time.process_time()
            tokens = fn()
            walls.append(time.perf_counter() - w0)
            cpus.append(time.process_time() - c0)
        wall, cpu = median(walls), median(cpus)
        rows.append(
            {
                "way": name,
                "tokens": tokens,
                "seconds": wall,
                "cpu_seconds": cpu,
                "tokens_per_second": round(tokens / wall, 1),
                "tokens_per_cpu_second": round(tokens / cpu, 1),
            }
        )
    by = {r["way"]: r for r in rows}
    ratio = round(by["engine"]["tokens_per_second"] / by["naive"]["tokens_per_second"], 2)
    ratio_cpu = round(by["engine"]["tokens_per_cpu_second"] / by["naive"]["tokens_per_cpu_second"], 2)
    from genenv_engine.backends.hf import SMALL_MODEL
    from genenv_engine.backends.static_llama import fits

    small = policy.num_parameters() < SMALL_MODEL and policy.device.type == "cpu"
    engine_threads = 1 if small else args.threads
    forward = "static_llama" if small and fits(policy.model) else "transformers"
    out = {
        "model": source,
        "threads": args.threads,
        "engine_threads": engine_threads,
        "engine_forward": forward,
        "prompts": args.prompts,
        "rollouts": args.rollouts,
        "max_new_tokens": args.max_new_tokens,
        "temperature": args.temperature,
        "chunk": chunk,
        "repeats": args.repeats,
        "mean_completion_tokens": round(by["engine"]["tokens"] / len(prompts), 1),
        "ways": rows,
        "ratio": ratio,
        "ratio_cpu": ratio_cpu,
    }
    if "generate batched" in by:
        out["ratio_generate_batched"] = round(
            by["generate batched"]["tokens_per_second"] / by["naive"]["tokens_per_second"], 2
        )
    if args.model == "tiny":
        out["goals"] = [goal("ratio (engine / naive tokens/s)", ratio, GOAL_RATIO, at_most=False)]
    return out


def table(result: dict[str, Any]):
    """Rich table: one row per way of generating."""
    t = rich_table(
        f"rollouts: {result['prompts']} bfcl prompts × {result.get('rollouts', 1)} samples, "
        f"{result['max_new_tokens']} new tokens max, "
        f"T={result['temperature']}, mean completion {result['mean_completion_tokens']} tokens, "
        f"{result['threads']} torch threads (engine decode: {result['engine_threads']}, "
        f"{result.get('engine_forward', 'transformers')} forward)\n"
        f"{result['model']}",
        ("way", "tokens", "wall s", "CPU s", "tokens/s", "tokens/CPU s", "× naive"),
        left=("way",),
    )
    naive_tps = result["ways"][0]["tokens_per_second"]
    for r in result["ways"]:
        t.add_row(
            r["way"],
            str(r["tokens"]),
            f"{r['seconds']:.2f}",
            f"{r['cpu_seconds']:.2f}",
            f"{r['tokens_per_second']:.0f}",
            f"{r['tokens_per_cpu_second']:.0f}",
            f"{r['tokens_per_second'] / naive_tps:.2f}",
        )
    return t
