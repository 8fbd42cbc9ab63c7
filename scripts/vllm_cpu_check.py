"""Time genenv's ``vllm`` backend on a local model folder: engine start, then tokens/s at batch 1 and 32.

Run in the vLLM virtualenv (``scripts/install_vllm_cpu.sh``)::

    VLLM_CPU_KVCACHE_SPACE=2 .venv-vllm/bin/python scripts/vllm_cpu_check.py MODEL_DIR [--dtype bfloat16]

The model is loaded as a genenv `Policy` (transformers, for the tokenizer and the dtype) and served by
`VLLMBackend`; tokens/s counts the tokens actually sampled (a model may stop before ``--new``). The
``__main__`` guard is required: vLLM starts its engine in a spawned process that re-imports this file.
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="local model folder (save_pretrained layout with a tokenizer)")
    parser.add_argument("--new", type=int, default=64, help="new tokens per completion")
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--dtype", default=None, help="vLLM dtype (default: the checkpoint's weights dtype)")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs per batch size (after one warm-up)")
    args = parser.parse_args()

    import torch

    from genenv_engine.backends.base import Sampling
    from genenv_engine.backends.vllm import VLLMBackend
    from genenv_engine.training.policy import Policy

    policy = Policy.load(args.model, torch.device("cpu"), args.max_length)
    start = time.perf_counter()
    backend = VLLMBackend(policy, dtype=args.dtype)
    print(f"engine start: {time.perf_counter() - start:.1f} s", flush=True)
    sampling = Sampling(temperature=1.0, max_new_tokens=args.new, seed=0)
    for batch in (1, 32):
        prompts = [
            policy.chat([{"role": "user", "content": f"Tell me a story about the number {i}."}]) for i in range(batch)
        ]
        backend.generate(prompts, sampling)  # warm-up
        rates = []
        for _ in range(args.repeats):
            before, t0 = backend.tokens_generated, time.perf_counter()
            backend.generate(prompts, sampling)
            rates.append((backend.tokens_generated - before) / (time.perf_counter() - t0))
        print(
            f"batch {batch}: {max(rates):.0f} tok/s (best of {args.repeats}; runs: "
            f"{', '.join(f'{r:.0f}' for r in rates)})",
            flush=True,
        )


if __name__ == "__main__":
    main()
