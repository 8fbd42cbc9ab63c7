"""The instruct-style simulator prompt (chat template, example, success statistics) and its strict parser."""

from __future__ import annotations

import pytest
import torch

from genenv_engine.config import ModelConfig
from genenv_engine.environments import get_environment
from genenv_engine.environments.base import GenerationParseError
from genenv_engine.training.policy import Policy, build_tiny_model
from genenv_engine.training.simulator import (
    INSTRUCT_SYSTEM,
    parse_and_validate,
    parse_instruct,
    parse_output,
    simulator_prompt,
    simulator_target,
    success_note,
)
from genenv_engine.training.tokenizer import build_byte_tokenizer

CHATML = (  # the template family of SmolLM2 / Qwen2.5 (ChatML), written here: no hub download
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def env():
    return get_environment("bfcl", 0)


@pytest.fixture(scope="module")
def chatml_policy():
    tok = build_byte_tokenizer()
    tok.chat_template = CHATML
    model = build_tiny_model(ModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64), tok, 0)
    return Policy(model, tok, torch.device("cpu"), 256)


def test_instruct_prompt_renders_through_the_chat_template_with_example_and_statistics(env, chatml_policy):
    seed = env.splits()["seed"][0]
    note = success_note("bfcl", 0.8125, 0.5)
    text = simulator_prompt(chatml_policy, env, seed, "instruct", note)
    assert text == (
        f"<|im_start|>system\n{INSTRUCT_SYSTEM}<|im_end|>\n<|im_start|>user\nBenchmark: bfcl\n"
        f"Example task: {seed.prompt}\nExample answer: {seed.answer}\n"
        "Agent success on recent bfcl tasks: 81% (target 50%).<|im_end|>\n<|im_start|>assistant\n"
    )
    # the compact style is unchanged: the seed as `<prompt> => <answer>` under the `gen` system turn
    compact = simulator_prompt(chatml_policy, env, seed)
    assert f"<|im_start|>user\n{seed.prompt} => {seed.answer}<|im_end|>" in compact
    assert "Agent success" not in compact


def test_target_and_parser_round_trip_every_seed(env):
    for task in env.splits()["seed"][:50]:
        text = simulator_target(env, task, "instruct")
        assert text == f"TASK: {task.prompt}\nANSWER: {task.answer}"
        assert parse_output(env, text, "instruct") == (task.prompt, task.answer)


@pytest.mark.parametrize(
    "text, reason",
    [
        ("Sure! Here is a task.\nTASK: sq 3\nANSWER: sq(x=3)", "exactly two lines"),
        ("TASK: sq 3\nANSWER: sq(x=3)\nThis task is easy.", "exactly two lines"),
        ("TASK: sq 3\n\nANSWER: sq(x=3)", "exactly two lines"),
        ("TASK: sq 3", "exactly two lines"),
        ("ANSWER: sq(x=3)\nTASK: sq 3", "first line must start with 'TASK:'"),
        ("Task: sq 3\nAnswer: sq(x=3)", "first line must start with 'TASK:'"),
        ("TASK: sq 3\nRESULT: sq(x=3)", "second line must start with 'ANSWER:'"),
        ("TASK:\nANSWER: sq(x=3)", "empty task or answer"),
        ("TASK: sq 3\nANSWER:   ", "empty task or answer"),
    ],
)
def test_parser_rejects_anything_but_the_two_lines(text, reason):
    with pytest.raises(GenerationParseError, match=reason):
        parse_instruct(text)


def test_parser_keeps_the_environments_own_checks(env):
    with pytest.raises(GenerationParseError):  # a second `=>` inside the task breaks the environment's format
        parse_output(env, "TASK: sq 3 => sq(x=3)\nANSWER: sq(x=3)", "instruct")
    seed = env.splits()["seed"][0]
    bad = parse_and_validate(
        env, "TASK: sq 3\nANSWER: sq(x=4)", task_id="g1", seed=seed, epoch=1, generator="t", style="instruct"
    )
    assert not bad.valid and bad.prompt == "sq 3" and not bad.reason.startswith("parse_error")
    broken = parse_and_validate(
        env, "Here you go: sq 3", task_id="g2", seed=seed, epoch=1, generator="t", style="instruct"
    )
    assert not broken.valid and broken.reason.startswith("parse_error: expected exactly two lines")
    # compact text is a parse error in the instruct style, and the other way round
    good = simulator_target(env, seed, "compact")
    assert parse_and_validate(
        env, good, task_id="g3", seed=seed, epoch=1, generator="t", style="instruct"
    ).reason.startswith("parse_error")
    assert parse_and_validate(
        env, simulator_target(env, seed, "instruct"), task_id="g4", seed=seed, epoch=1, generator="t"
    ).reason.startswith("parse_error")
