"""FLOP accounting for the benches: each phase's model FLOPs, the machine's measured matmul peak, and the ratio.

A model's matrix products cost 2 FLOPs per weight per token forward (`Shape.linears`: the decoder's projections,
and the output head only where a log-probability or a next token is taken); backward costs 2 per weight for the
input gradients everywhere and 2 more for the weight gradients of what is trained (a full fine-tune: 4 per weight;
a LoRA role: 2 per frozen weight and 4 per adapter weight, `role_flops`). Attention scores, norms and the softmax
are left out, so a phase's bound is what its matrix products alone would take at `matmul_peak`, the FLOP/s of a
large ``torch.mm`` measured in the same process (float32, and bfloat16 where the CPU has bfloat16 units). A
phase's time divided by its bound is a multiple that holds across machines: 1 would be every core's matrix unit
busy the whole phase.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

PEAK_SIZE = 1024
"""Side of the square matrices of the peak measurement."""
PEAK_SECONDS = 0.5
"""How long each dtype's peak is measured (after one warm-up product)."""


@dataclass(frozen=True)
class Shape:
    """The sizes that set a Llama-architecture model's matrix-product FLOPs."""

    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int

    def linears(self) -> dict[str, tuple[int, int]]:
        """(in, out) of each projection of one decoder layer.

        >>> Shape(32, 48, 2, 4, 2, 8, 261).linears()["k_proj"]
        (32, 16)
        """
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return {
            "q_proj": (self.hidden, q),
            "k_proj": (self.hidden, kv),
            "v_proj": (self.hidden, kv),
            "o_proj": (q, self.hidden),
            "gate_proj": (self.hidden, self.intermediate),
            "up_proj": (self.hidden, self.intermediate),
            "down_proj": (self.intermediate, self.hidden),
        }

    def body(self) -> int:
        """Weights of the decoder's matrix products (all layers), the FLOPs per token of a forward over 2.

        >>> Shape(32, 48, 2, 4, 4, 8, 261).body()  # 2 x (4 x 32 x 32 + 3 x 32 x 48)
        17408
        """
        return self.layers * sum(i * o for i, o in self.linears().values())

    def head(self) -> int:
        """Weights of the output head (vocabulary x hidden; counted even when tied to the embeddings)."""
        return self.vocab * self.hidden

    def adapter(self, rank: int, targets: tuple[str, ...]) -> int:
        """Weights of a rank-``rank`` LoRA adapter on ``targets`` (A: rank x in, B: out x rank, per layer).

        >>> Shape(32, 48, 2, 4, 4, 8, 261).adapter(8, ("q_proj", "v_proj"))  # 2 layers x 2 x 8 x (32 + 32)
        2048
        """
        return self.layers * sum(rank * (i + o) for name, (i, o) in self.linears().items() if name in targets)


@dataclass(frozen=True)
class RoleFlops:
    """Per-token FLOPs of one role: its base's body and head, its adapter (0 for a full model) and whether the
    base itself is trained."""

    body: int
    head: int
    adapter: int
    full: bool

    def forward(self, tokens: int, head_tokens: int) -> int:
        """FLOPs of a forward over ``tokens``, the head taken at ``head_tokens`` of them.

        >>> RoleFlops(100, 10, 5, False).forward(3, 1)
        650
        """
        return 2 * (self.body + self.adapter) * tokens + 2 * self.head * head_tokens

    def backward(self, tokens: int, head_tokens: int) -> int:
        """FLOPs of the backward of that forward: input gradients (2 per weight) everywhere, weight gradients (2 per
        weight) of what is trained.

        >>> RoleFlops(100, 10, 5, False).backward(3, 1)  # 2 x 100 x 3 + 4 x 5 x 3 + 2 x 10 x 1
        680
        >>> RoleFlops(100, 10, 0, True).backward(3, 1)
        1240
        """
        per_weight = 4 if self.full else 2
        return per_weight * (self.body * tokens + self.head * head_tokens) + 4 * self.adapter * tokens

    def decode(self, prompt_tokens: int, generated: int) -> int:
        """FLOPs of decoding ``generated`` tokens after ``prompt_tokens`` (every token through the body, the head once
        per generated token)."""
        return self.forward(prompt_tokens + generated, generated)

    def update(self, passes: dict[str, int]) -> int:
        """FLOPs of log-prob passes counted as `genenv_engine.training.policy.PASS_TOKENS` counts them (the differences
        over a phase): forwards without gradients, forwards and backwards with them."""
        grad = self.forward(passes["grad_forward"], passes["grad_head"])
        return (
            self.forward(passes["forward"], passes["head"])
            + grad
            + self.backward(passes["grad_forward"], passes["grad_head"])
        )


def role_flops(shape: Shape, tuning: str, rank: int, targets: tuple[str, ...]) -> RoleFlops:
    """A role's `RoleFlops`: ``tuning`` is ``full`` or ``lora`` (rank ``rank`` on ``targets``)."""
    lora = tuning == "lora"
    return RoleFlops(shape.body(), shape.head(), shape.adapter(rank, targets) if lora else 0, not lora)


def model_shape(config) -> Shape:
    """The `Shape` of a run's base model: the tiny model from ``[model]`` (byte vocabulary), else its checkpoint's
    ``config.json``."""
    import json

    from genenv_engine.training.models import base_folder

    cfg = config.model
    folder = base_folder(cfg)
    if folder is None:
        from genenv_engine.training.tokenizer import build_byte_tokenizer

        return Shape(
            cfg.hidden_size,
            cfg.intermediate_size,
            cfg.num_layers,
            cfg.num_heads,
            cfg.num_heads,
            cfg.hidden_size // cfg.num_heads,
            len(build_byte_tokenizer()),
        )
    c = json.loads((folder / "config.json").read_text())
    heads = c["num_attention_heads"]
    return Shape(
        c["hidden_size"],
        c["intermediate_size"],
        c["num_hidden_layers"],
        heads,
        c.get("num_key_value_heads") or heads,
        c.get("head_dim") or c["hidden_size"] // heads,
        c["vocab_size"],
    )


def roles(config) -> dict[str, RoleFlops]:
    """The agent's and the simulator's `RoleFlops` for a run's config."""
    shape = model_shape(config)
    cfg = config.model
    return {
        role: role_flops(shape, cfg.tuning(role), cfg.lora_r, tuple(cfg.lora_targets))
        for role in ("agent", "simulator")
    }


def matmul_peak(dtype_name: str = "float32", size: int = PEAK_SIZE, seconds: float = PEAK_SECONDS) -> float | None:
    """FLOP/s of ``size`` x ``size`` matrix products in ``dtype_name`` on the CPU with torch's current threads
    (None for bfloat16 where the CPU has no bfloat16 units: emulated, it says nothing of the hardware)."""
    import torch

    from genenv_engine.backends.cpu_load import cpu_bfloat16

    if dtype_name == "bfloat16" and not cpu_bfloat16():
        return None
    dtype = getattr(torch, dtype_name)
    a, b = torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype)
    out = torch.empty(size, size, dtype=dtype)
    torch.mm(a, b, out=out)
    count, started = 0, time.perf_counter()
    while True:
        torch.mm(a, b, out=out)
        count += 1
        elapsed = time.perf_counter() - started
        if elapsed >= seconds:
            return 2 * size**3 * count / elapsed


def peaks() -> dict[str, float | None]:
    """The measured float32 and bfloat16 matmul peaks (FLOP/s)."""
    return {"float32": matmul_peak("float32"), "bfloat16": matmul_peak("bfloat16")}


def bound(seconds: float, flops: int, peak: dict[str, float | None]) -> dict[str, float | None]:
    """A phase's FLOPs, its compute bound in seconds at the float32 peak, and its time as a multiple of that bound
    (and of the bfloat16 bound where measured).

    >>> bound(2.0, 10 ** 9, {"float32": 1e9, "bfloat16": 4e9})
    {'flops': 1000000000, 'bound_seconds': 1.0, 'multiple': 2.0, 'multiple_bf16': 8.0}
    """
    out: dict[str, float | None] = {"flops": flops}
    f32, bf16 = peak.get("float32"), peak.get("bfloat16")
    out["bound_seconds"] = round(flops / f32, 4) if f32 else None
    out["multiple"] = round(seconds / (flops / f32), 2) if f32 and flops else None
    if bf16:
        out["multiple_bf16"] = round(seconds / (flops / bf16), 2) if flops else None
    return out
