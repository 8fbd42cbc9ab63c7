#!/usr/bin/env bash
# The chain study for one or more seeds, as docs/results/chain/PLAN.md fixes it: per seed, the gate before RL
# (`genenv bench passk`: pass@8 above 0 at k = 3 and exactly 0 at k >= 6 on held-out), then, only if it passes, the
# seven arms one at a time (each writes its run record as it finishes; arms already finished are not rerun).
#
#   scripts/chain_seed.sh OUT SEED [SEED ...]      # e.g. scripts/chain_seed.sh sessions/chain 1 2
#
# THREADS (default 1) sets runtime.threads; GENENV (default .venv/bin/genenv) the command.
set -euo pipefail
OUT=$1; shift
G=${GENENV:-.venv/bin/genenv}
PY=${PYTHON:-.venv/bin/python}
THREADS=${THREADS:-1}
ARMS="target uniform-levels schedule learnability controller trained frozen"
export HF_HUB_OFFLINE=1
for SEED in "$@"; do
    mkdir -p "$OUT/gate-s$SEED"
    echo "$(date -u +%FT%TZ) seed $SEED: gate"
    "$G" bench passk --preset chain --seed "$SEED" --n 8 --set simulator.mode=sampler --set runtime.threads="$THREADS" \
        --out "$OUT/gate-s$SEED" --json > /dev/null
    if ! "$PY" - "$OUT/gate-s$SEED/bench-passk.json" <<'PY'
import json, sys
levels = json.load(open(sys.argv[1]))["benchmarks"]["chain"]["levels"]
passes = levels["L3"]["pass_at_n"] > 0 and all(levels[f"L{k}"]["pass_at_n"] == 0 for k in (6, 7, 8))
print("pass@8 by level:", {k: v["pass_at_n"] for k, v in sorted(levels.items())}, "->", "passes" if passes else "fails")
sys.exit(0 if passes else 1)
PY
    then
        echo "seed $SEED: the gate fails, no arm runs"
        continue
    fi
    for ARM in $ARMS; do
        echo "$(date -u +%FT%TZ) seed $SEED: $ARM"
        "$G" bench ablation --preset chain --set runtime.threads="$THREADS" --arms "$ARM" --seeds "$SEED" \
            --out "$OUT" --records "$OUT/records" --quiet
    done
done
