#!/usr/bin/env bash
# Real-terminal check of genenv-console, driven through tmux (new-session -d, send-keys, capture-pane):
# the console starts a new session on the micro preset, shows data in its plots within 60 s, and
# pauses when space is pressed (the status bar says PAUSED). It prints how many seconds after launch the first
# held-out point and the first calibration point (mean p-hat of epoch 1's generated tasks) were on screen. Prints
# SKIP and exits 0 without tmux.
#
#   scripts/console_tmux_check.sh            # uses .venv/bin/python; PYTHON=... to override
#   PRESET=tiny CALIBRATION_TIMEOUT=180 scripts/console_tmux_check.sh   # what `make run` opens, from an empty cache
set -u
cd "$(dirname "$0")/.."

if ! command -v tmux >/dev/null 2>&1; then
    echo "SKIP: tmux is not installed (apt-get install -y tmux); the console tmux check did not run"
    exit 0
fi

PY=${PYTHON:-.venv/bin/python}
PRESET=${PRESET:-micro}
PLOT_TIMEOUT=${PLOT_TIMEOUT:-60}
CALIBRATION_TIMEOUT=${CALIBRATION_TIMEOUT:-0}   # > 0: also wait that long for the first calibration point
WORK=$(mktemp -d)
NAME="genenv-console-check-$$"
export GENENV_CACHE=${GENENV_CACHE:-$WORK/cache}   # a fresh warm start unless the caller shares a cache
export HF_HUB_OFFLINE=1

cleanup() {
    tmux kill-session -t "$NAME" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

screen() { tmux capture-pane -p -t "$NAME"; }

now_ms() { local t=${EPOCHREALTIME/./}; echo $(( ${t:0:-3} )); }

seconds_since() { local took=$(( $(now_ms) - $1 )); printf '%d.%02d' $(( took / 1000 )) $(( took % 1000 / 10 )); }

wait_for() {  # wait_for PATTERN SECONDS -> prints the seconds it took (0.1 s polling), fails on timeout
    local pattern=$1 limit=$(( $2 * 1000 )) start
    start=$(now_ms)
    while (( $(now_ms) - start < limit )); do
        if screen | grep -Eq -- "$pattern"; then
            seconds_since "$start"; echo
            return 0
        fi
        sleep 0.1
    done
    return 1
}

launched=$(now_ms)
tmux new-session -d -s "$NAME" -x 140 -y 44 \
    "TERM=xterm-256color $PY -m genenv_console --preset $PRESET --epochs 50 --sessions-root $WORK/sessions; sleep 30"
echo "launched: genenv-console --preset $PRESET --epochs 50 (tmux session $NAME, 140x44)"

if ! took=$(wait_for "held-out success: [a-z_]+ [0-9]" "$PLOT_TIMEOUT"); then
    echo "FAIL: no plot data within ${PLOT_TIMEOUT}s; the screen was:"
    screen
    exit 1
fi
echo "plots: held-out data on screen after ${took}s ($(seconds_since "$launched")s after launch)"
if (( CALIBRATION_TIMEOUT == 0 )); then
    :  # the default check pauses at once (a micro run of 50 epochs can end before a longer wait is over)
elif wait_for "calibration p̂ vs α±[0-9.]+: [a-z_]+ [0-9]" "$CALIBRATION_TIMEOUT" >/dev/null; then
    echo "calibration: the first point (epoch 1's mean p-hat) on screen $(seconds_since "$launched")s after launch"
else  # a preset whose simulator writes no valid task in epoch 1 (micro often) has no point to show
    echo "calibration: no point on screen within ${CALIBRATION_TIMEOUT}s of the held-out data"
fi
tmux send-keys -t "$NAME" Space
if ack=$(wait_for "pausing|PAUSED" 5); then
    echo "pause: the status bar acknowledged space after ${ack}s"
fi
if ! paused=$(wait_for "PAUSED" 20); then
    echo "FAIL: the status bar did not say PAUSED within 20s of space; the screen was:"
    screen
    exit 1
fi
echo "pause: the engine paused (status bar says PAUSED) ${paused}s after that"
echo "----- screen while paused -----"
screen
tmux send-keys -t "$NAME" q
if stopped=$(wait_for "resume with: genenv-console" 30); then
    echo "quit: the app stopped the engine and exited after ${stopped}s (session left resumable)"
fi
echo "PASS"
