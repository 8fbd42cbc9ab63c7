"""``genenv bench grammar``: what constrained decoding costs and what it buys, per benchmark.

The preset's simulator (its cached warm start; random weights when none is cached, said in the result) writes
``--variations`` tasks for each of ``--seeds`` seed tasks of every benchmark from the same sampling seed: as free
text, then under the benchmark's grammar (`genenv_engine.backends.grammar`) twice. The first constrained call
builds the grammar's lexer states, once per process (a run pays it in its first epoch); the second is what every
later call costs. Per benchmark and way: seconds, tokens, the seconds the decoding thread spent on the grammar
(masks computed ahead on a worker thread while the model runs cost it nothing), the valid fraction and the
rejection reasons (each draft parsed and validated as an epoch's are; the duplicate cap is not applied). Goal: the
grammar takes at most 20 % of the constrained generation's time on every benchmark, after the first call.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from typing import Any

from genenv_engine.interfaces.benches.common import goal, rich_table

GOAL_SHARE = 0.20
"""Most of the generate time the grammar masks may take."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``genenv bench grammar``."""
    parser.add_argument("--preset", default="five")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    parser.add_argument("--seeds", type=int, default=16, help="seed tasks per benchmark")
    parser.add_argument("--variations", type=int, default=4, help="drafts per seed task")


def simulator_policy(config) -> tuple[Any, str]:
    """The preset's warm-started simulator from the cache, or an untrained model of its shape (and which)."""
    import torch

    from genenv_engine.training.models import warmstart_agent
    from genenv_engine.training.policy import Policy
    from genenv_engine.training.warmstart import cache_key, cached_agent

    folder = cached_agent(config)
    if folder is not None and (folder / "simulator").exists():
        return Policy.load(folder / "simulator", torch.device("cpu"), config.model.max_length), cache_key(config)
    return warmstart_agent(config.model, config.runtime, config.seed), "random weights (no cached warm start)"


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Entry point."""
    from genenv_engine.backends.base import Sampling
    from genenv_engine.backends.hf import HFBackend
    from genenv_engine.config import load_config, parse_sets
    from genenv_engine.environments import environments_of
    from genenv_engine.training.policy import quiet_transformers
    from genenv_engine.training.simulator import job_grammar, parse_and_validate, simulator_prompt

    quiet_transformers()
    config = load_config(args.preset, None, {"seed": args.seed, **parse_sets(args.set), "simulator.constrained": True})
    policy, source = simulator_policy(config)
    policy.model.eval()
    style = config.simulator.prompt
    rows = []
    for name, env in environments_of(config).items():
        seeds = env.splits()["seed"][: args.seeds]
        drafted = [s for s in seeds for _ in range(args.variations)]
        prompts = [simulator_prompt(policy, env, s, style) for s in drafted]
        grammar = job_grammar(config, env)
        for way, g in (("free", None), ("grammar, first call", grammar), ("grammar", grammar)):
            backend = HFBackend(policy)
            start = time.perf_counter()
            outs = backend.generate(
                prompts,
                Sampling(
                    temperature=config.simulator.temperature,
                    max_new_tokens=config.simulator.max_new_tokens,
                    seed=0,
                    grammar=g,
                ),
            )
            seconds = time.perf_counter() - start
            tasks = [
                parse_and_validate(env, o.text, task_id=f"bench/{i}", seed=s, epoch=1, generator="bench", style=style)
                for i, (o, s) in enumerate(zip(outs, drafted, strict=False))
            ]
            reasons = Counter(t.reason.split(":", 1)[0] for t in tasks if not t.valid)
            rows.append(
                {
                    "benchmark": name,
                    "way": way,
                    "drafts": len(tasks),
                    "seconds": round(seconds, 3),
                    "tokens": backend.tokens_generated,
                    "grammar_seconds": round(backend.grammar_seconds, 3),
                    "grammar_share": round(backend.grammar_seconds / seconds, 3) if seconds else None,
                    "grammar_us_per_token": (
                        round(1e6 * backend.grammar_seconds / backend.tokens_generated, 1)
                        if backend.tokens_generated and g
                        else None
                    ),
                    "valid_fraction": round(sum(t.valid for t in tasks) / len(tasks), 3),
                    "rejected": dict(reasons.most_common()),
                }
            )
    shares = [r["grammar_share"] for r in rows if r["way"] == "grammar" and r["grammar_share"] is not None]  # warm
    return {
        "preset": args.preset,
        "seed": args.seed,
        "overrides": args.set,
        "simulator": source,
        "seeds": args.seeds,
        "variations": args.variations,
        "rows": rows,
        "goals": [goal("grammar_share", max(shares, default=None), GOAL_SHARE, at_most=True)],
    }


def table(result: dict[str, Any]):
    """Per benchmark and way: time, tokens, mask share, valid fraction and the main rejections."""
    t = rich_table(
        f"grammar-constrained drafts ({result['simulator']})",
        ["benchmark", "way", "drafts", "s", "tokens", "mask s", "mask share", "µs/token", "valid", "top rejections"],
        left={"benchmark", "way", "top rejections"},
    )
    for r in result["rows"]:
        top = ", ".join(f"{k} {v}" for k, v in list(r["rejected"].items())[:3])
        t.add_row(
            r["benchmark"],
            r["way"],
            str(r["drafts"]),
            f"{r['seconds']:.2f}",
            str(r["tokens"]),
            f"{r['grammar_seconds']:.2f}",
            "-" if r["way"] == "free" else f"{r['grammar_share']:.0%}",
            "-" if r["grammar_us_per_token"] is None else f"{r['grammar_us_per_token']:.0f}",
            f"{r['valid_fraction']:.2f}",
            top,
        )
    return t
