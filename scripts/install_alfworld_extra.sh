#!/usr/bin/env bash
# Install the optional ALFWorld extra (benchmark `alfworld_textworld`): the real TextWorld engine with PDDL
# support and the Fast-Downward planner, plus the `alfworld` wheel (PDDL domain and grammar; no games).
#   scripts/install_alfworld_extra.sh            # into .venv (created if missing)
#   VENV=/path/to/venv scripts/install_alfworld_extra.sh
# Idempotent: a second run finds everything installed and only re-runs the smoke check.
#
# The packages are the `alfworld` extra of pyproject.toml (alfworld==0.4.2, textworld[pddl]==1.7.0). pip
# cannot do it alone because textworld[pddl] needs fast-downward-textworld, an sdist-only package that
# compiles Fast-Downward's C++ search code (cmake from PyPI, plus g++ and make from the system): this
# script checks for the compilers first (installing them with apt-get when run as root) and then lets pip
# build it. Measured on 2 cores: about 3 minutes and 410 MB (jericho pulls in spacy; neither torch nor
# ai2thor is needed). The constraints file keeps torch on the CPU wheel should anything ask for it.
set -euo pipefail

cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY=$VENV/bin/python

missing=()
for tool in g++ make; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if (( ${#missing[@]} )); then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "installing build tools for Fast-Downward: ${missing[*]}"
    apt-get update -qq
    apt-get install -y -qq g++ make
  else
    echo "$0: Fast-Downward needs ${missing[*]}; install them first (e.g. apt-get install -y g++ make)" >&2
    exit 3
  fi
fi

test -x "$PY" || python3 -m venv "$VENV"

smoke() {
  "$PY" - <<'PY'
import importlib.metadata as md
import fast_downward
from textworld.envs.pddl import PddlEnv  # noqa: F401  (fails when the pddl extra is incomplete)
fast_downward.load_lib()
print("alfworld extra OK: textworld", md.version("textworld"), "| alfworld", md.version("alfworld"),
      "| fast-downward-textworld", md.version("fast-downward-textworld"))
PY
}

if smoke 2>/dev/null; then
  exit 0
fi
"$PY" -m pip install --quiet -c constraints-cpu.txt -e ".[alfworld]"
smoke
