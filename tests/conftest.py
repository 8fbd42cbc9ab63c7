"""Shared test setup: offline Hugging Face, a per-run warm-start cache, two torch threads."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest


@pytest.fixture(scope="session", autouse=True)
def _genenv_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep warm-start caches of the test run out of the user's ~/.cache."""
    os.environ["GENENV_CACHE"] = str(tmp_path_factory.mktemp("genenv-cache"))
    import torch

    torch.set_num_threads(2)
