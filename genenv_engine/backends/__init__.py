"""Generation backends chosen by name and imported only when used (the engine's one registry).

``hf`` (a batched decode loop on the transformers model with a KV cache) is the default and runs on CPU or CUDA. Heavy
or optional libraries (vllm) are imported inside their backend module, never here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from genenv_engine.backends.base import GenerationBackend

BACKENDS: dict[str, str] = {
    "hf": "genenv_engine.backends.hf:HFBackend",
    "vllm": "genenv_engine.backends.vllm:VLLMBackend",
}
"""Backend names and the dotted path of the class implementing each."""


def get_backend(name: str, **kwargs: Any) -> GenerationBackend:
    """Import the backend registered under ``name`` and build it with ``kwargs``."""
    if name not in BACKENDS:
        raise KeyError(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}")
    module, _, cls = BACKENDS[name].partition(":")
    return getattr(importlib.import_module(module), cls)(**kwargs)
