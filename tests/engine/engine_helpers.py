"""Builders the engine's tests share (imported by name: ``tests/engine`` is on the path as the folder of its
conftest)."""

from __future__ import annotations


def grouped_query_llama(tok, seed: int = 3):
    """A random 2-layer ``LlamaForCausalLM`` over ``tok``'s vocabulary with 6 query heads over 2 key/value heads
    (SmolLM2's grouping at toy size)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=48,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=6,
        num_key_value_heads=2,
        max_position_embeddings=128,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        bos_token_id=None,
    )
    return LlamaForCausalLM(cfg)
