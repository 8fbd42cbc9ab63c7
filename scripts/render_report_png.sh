#!/usr/bin/env bash
# Render a genenv HTML report to a PNG with headless Chromium, to check it as a browser shows it.
#   scripts/render_report_png.sh REPORT.html OUT.png [WIDTHxHEIGHT]   (default 1280x4000)
# The page is opened from the local file with networking features off; the report itself loads nothing.
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
  echo "usage: $0 REPORT.html OUT.png [WIDTHxHEIGHT]" >&2
  exit 2
fi
report=$1
out=$2
size=${3:-1280x4000}
chromium=/usr/bin/chromium
if [[ ! -x $chromium ]]; then
  echo "$0: $chromium not found; install it with: apt-get update && apt-get install -y chromium" >&2
  exit 3
fi
if [[ ! -f $report ]]; then
  echo "$0: no such file: $report" >&2
  exit 2
fi
report_abs=$(cd "$(dirname "$report")" && pwd)/$(basename "$report")
out_abs=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
"$chromium" --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
  --disable-sync --no-first-run --user-data-dir="$profile" --hide-scrollbars \
  --screenshot="$out_abs" --window-size="${size/x/,}" "file://$report_abs" >/dev/null 2>"$profile/chromium.log" || {
  cat "$profile/chromium.log" >&2
  exit 1
}
if [[ ! -s $out_abs ]]; then
  echo "$0: chromium wrote no screenshot" >&2
  cat "$profile/chromium.log" >&2
  exit 1
fi
echo "$out_abs"
