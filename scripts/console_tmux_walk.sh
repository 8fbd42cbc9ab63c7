#!/usr/bin/env bash
# Real-terminal walk of genenv-console's drill-down, driven through tmux (new-session -d, send-keys, capture-pane):
# on a finished two-epoch micro session (written first with the scripted test backends, about 10 s), the console
# opens it without starting the engine, enter on the focused calibration plot lists the last epoch's variation
# batches, enter on the first batch its seed and variations, enter on a variation its GRPO group (rollouts with
# their advantages), and escape walks back. Each step asserts on the captured pane text against ids read from the
# session's database. Prints SKIP and exits 0 without tmux.
#
#   scripts/console_tmux_walk.sh            # uses .venv/bin/python; PYTHON=... to override
set -u
cd "$(dirname "$0")/.."

if ! command -v tmux >/dev/null 2>&1; then
    echo "SKIP: tmux is not installed (apt-get install -y tmux); the console tmux walk did not run"
    exit 0
fi

PY=${PYTHON:-.venv/bin/python}
WORK=$(mktemp -d)
NAME="genenv-console-walk-$$"
export GENENV_CACHE=${GENENV_CACHE:-$WORK/cache}
export HF_HUB_OFFLINE=1

cleanup() {
    tmux kill-session -t "$NAME" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

screen() { tmux capture-pane -p -t "$NAME"; }

wait_for() {  # wait_for PATTERN SECONDS: poll the pane every 0.1 s until PATTERN shows, fail on timeout
    local pattern=$1 tries=$(( $2 * 10 ))
    for (( i = 0; i < tries; i++ )); do
        screen | grep -Eq -- "$pattern" && return 0
        sleep 0.1
    done
    return 1
}

step() {  # step WHAT PATTERN SECONDS: wait for PATTERN or fail with the pane
    if ! wait_for "$2" "$3"; then
        echo "FAIL: $1: no /$2/ within $3 s; the screen was:"
        screen
        exit 1
    fi
    echo "ok: $1"
}

SESSION=$WORK/sessions/walk
if ! facts=$("$PY" - "$SESSION" <<'EOF'
import re
import statistics
import sys

from genenv_engine.config import load_config
from genenv_engine.method.loop import run
from genenv_engine.storage.session import Session
from genenv_engine.testing import scripted_backends

session = Session.create(load_config("micro", overrides={"epochs": 2}), sys.argv[1])
run(session, backend_factory=scripted_backends(p=0.5))
store = session.store
batch = store.batches(2)[0]
rows = store.batch_tasks(batch["id"])
trained = [r["id"] for r in rows if r["role"] == "variation" and r["train_rollouts"]]
first = [r["id"] for r in rows].index(trained[0])  # rows below the seed to reach a trained variation
k = session.config.agent.rollouts
group = [r for r in store.rollouts_for(trained[0]) if r["purpose"] == "train"][:k]  # its first group, row by row
rewards = [r["reward"] for r in group]
advantage = (rewards[0] - statistics.mean(rewards)) / (statistics.stdev(rewards) + 1e-6)
reward, advantage = (re.escape(f"{v:{spec}}") for v, spec in ((rewards[0], ".2f"), (advantage, "+.2f")))
row = rf"e{group[0]['epoch']} +1 +(✔|✘) +{reward} +{advantage}"  # a grep -E pattern of the table's first row
print(batch["id"], batch["seed_task_id"], trained[0], first, row)
EOF
); then
    echo "FAIL: could not write the micro session"
    exit 1
fi
read -r BATCH SEED TASK DOWN FIRST_ROLLOUT <<<"$(echo "$facts" | tail -n 1)"
echo "session: $SESSION (epoch 2's first batch $BATCH, seed $SEED, trained variation $TASK)"

tmux new-session -d -s "$NAME" -x 160 -y 48 \
    "TERM=xterm-256color $PY -m genenv_console $SESSION --no-start --sessions-root $WORK/sessions; sleep 30"
step "the dashboard shows the session's held-out plot" "held-out success" 60

tmux send-keys -t "$NAME" Right Enter
step "enter on the calibration plot lists epoch 2's batches" "epoch 2: [0-9]+ variation batches" 10
step "the first batch is on the list" "$BATCH" 5

tmux send-keys -t "$NAME" Enter
step "enter on the batch opens its seed and variations" "batch $BATCH: its seed and [0-9]+ variations" 10
step "the seed is the first row" "seed +$SEED" 5

for (( i = 0; i < DOWN; i++ )); do tmux send-keys -t "$NAME" Down; done
tmux send-keys -t "$NAME" Enter
step "enter on a variation opens its GRPO groups" "$TASK .*GRPO groups? of [0-9]+" 10
step "the first rollout shows its reward and group-normalised advantage" "$FIRST_ROLLOUT" 5
echo "----- the GRPO group view -----"
screen

tmux send-keys -t "$NAME" Escape
step "escape goes back to the batch's tasks" "its seed and [0-9]+ variations" 5
tmux send-keys -t "$NAME" Escape  # one key a step: an escape followed at once by a key reads as alt+key
step "escape goes back to the epoch's batches" "epoch 2: [0-9]+ variation batches" 5
tmux send-keys -t "$NAME" Escape
sleep 0.5
tmux send-keys -t "$NAME" q
step "q closes the console" "resume with: genenv-console" 20
echo "PASS"
