"""The allowed values of the settings that take one of a fixed set of names, and the numbers several settings share.

The section dataclasses (`genenv_engine.config.sections`) take their defaults from here and the checks
(`genenv_engine.config.checks`) refuse any other value, naming the field.
"""

from __future__ import annotations

SIMULATOR_MODES = ("trained", "frozen", "static", "off", "sampler")
NO_SIMULATOR_MODES = ("off", "sampler")
"""The simulator modes whose runs never use the simulator model (no simulator warm start, no simulator fingerprint)."""
CURRICULUM_REWARDS = ("alpha", "uniform", "agent0", "grounded", "shrunk", "predicted")
CURRICULUM_FILTERS = ("band", "none")
LEVEL_SAMPLERS = ("uniform", "target", "schedule", "learnability", "controller")
"""The difficulty samplers of ``simulator.mode = "sampler"`` (`genenv_engine.method.samplers`)."""
SIMULATOR_PROMPTS = ("compact", "instruct")
SEED_SAMPLINGS = ("uniform", "alpha")
DEFAULT_RAY_BATCH = 16
"""Tasks per rollout batch on Ray when ``runtime.rollout_batch`` is 0 (16 tasks x k = 8 rollouts fill one 128-prompt
decoding chunk of the hf backend)."""

MODEL_KINDS = ("tiny", "hf", "smollm2")
TUNINGS = ("full", "lora")
DTYPES = ("auto", "float32", "bfloat16", "float16")
DEVICES = ("auto", "cpu", "cuda")
TRAIN_FORWARDS = ("transformers", "fused")
INFERENCE_DTYPES = ("weights", "bfloat16")
LLAMA_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

BASE_SOURCES = ("train", "unseen")
"""Where the agent's base replay is drawn from (`AgentConfig.base_source`)."""
