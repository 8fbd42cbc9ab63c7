"""GPU smoke run: genenv for a few epochs on CUDA, hf backend, bf16, on a random-init Qwen2-style model.

No downloads: the model (about 100M parameters by default) is built from a config with the byte
tokenizer and saved to a local folder, then used as ``--base-model``. It learns little in two
epochs; the point is that every phase runs on the GPU, and the figures it prints (tokens/s, time per
phase, peak GPU memory). Usage:

    python scripts/gpu_smoke.py                      # CUDA, ~100M, 2 epochs
    python scripts/gpu_smoke.py --device cpu --size small --epochs 1   # a quick check without a GPU
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

SIZES = {  # hidden, layers, heads, kv heads, mlp
    "100m": (768, 12, 12, 2, 3072),
    "small": (128, 2, 2, 1, 256),
}


def build_base(folder: Path, size: str) -> int:
    """Save a random Qwen2-style model and the byte tokenizer into ``folder``; returns the parameter count."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from genenv_engine.training.tokenizer import build_byte_tokenizer

    hidden, layers, heads, kv, mlp = SIZES[size]
    tok = build_byte_tokenizer()
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=len(tok),
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=kv,
            intermediate_size=mlp,
            max_position_embeddings=1024,
            tie_word_embeddings=True,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
            bos_token_id=None,
        )
    )
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return sum(p.numel() for p in model.parameters())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--size", default="100m", choices=tuple(SIZES))
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--warm-steps", type=int, default=100, help="SFT steps per role in the warm start")
    ap.add_argument("--out", type=Path, help="work folder (default: a new temp folder)")
    args = ap.parse_args(argv)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device visible; use --device cpu for a check without a GPU", file=sys.stderr)
        return 2
    out = args.out or Path(tempfile.mkdtemp(prefix="genenv-gpu-smoke-"))
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("GENENV_CACHE", str(out / "cache"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from genenv_engine.config import load_config
    from genenv_engine.method.loop import run
    from genenv_engine.storage.session import Session

    started = time.perf_counter()
    params = build_base(out / "base", args.size)
    config = load_config(
        "tiny",
        overrides={
            "model.kind": "hf",
            "model.path": str(out / "base"),
            "runtime.device": args.device,
            "model.dtype": "auto",
            "model.max_length": 384,
            "runtime.threads": max(1, min(16, os.cpu_count() or 1)),
            "epochs": args.epochs,
            "warm_start.agent_steps": args.warm_steps,
            "warm_start.simulator_steps": args.warm_steps,
            "warm_start.agent_lr": 3e-4,
            "warm_start.simulator_lr": 3e-4,
            "agent.lr": 1e-5,
            "simulator.lr": 1e-5,
        },
    )
    session = Session.create(config, out / "session")
    print(
        f"model: Qwen2-style, {params / 1e6:.1f}M parameters, device {args.device}, "
        f"dtype {'bfloat16' if args.device == 'cuda' else 'float32'}; session {session.path}",
        flush=True,
    )
    if args.device == "cuda":
        print(f"gpu: {torch.cuda.get_device_name(0)}", flush=True)
    run(session)
    rows = []
    for m in session.store.epoch_metrics():
        row = {
            "epoch": m["epoch"],
            "phase_seconds": m.get("phase_seconds"),
            "tokens_generated": m.get("tokens_generated"),
            "tokens_per_second": m.get("tokens_per_second"),
            "heldout": m.get("heldout"),
            "valid_fraction": m.get("valid_fraction"),
        }
        if m["epoch"] == 0:
            row["warm_start"] = {
                k: m["warm_start"].get(k)
                for k in ("agent_seconds", "simulator_seconds", "agent_final_loss", "simulator_final_loss")
            }
        rows.append(row)
        print(json.dumps(row), flush=True)
    peak = torch.cuda.max_memory_allocated() / 2**30 if args.device == "cuda" else None
    summary = {
        "parameters": params,
        "total_seconds": round(time.perf_counter() - started, 1),
        "peak_gpu_memory_gib": round(peak, 2) if peak is not None else None,
    }
    print(json.dumps(summary), flush=True)
    (out / "smoke.json").write_text(json.dumps({"epochs": rows, **summary}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
