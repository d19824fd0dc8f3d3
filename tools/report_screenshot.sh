#!/usr/bin/env bash
# Renders a `hookscope report --html` page in headless Chromium, offline (every
# host name unresolvable, no proxy reachable), and saves a PNG of the top WIDTHxHEIGHT pixels.
# (Scripts stay enabled: headless Chromium needs them to take the screenshot; the page has none.)
#   tools/report_screenshot.sh REPORT.html OUT.png [WIDTHxHEIGHT]    (default 1400x4000)
# Exit 3 when no Chromium is installed (Debian: apt-get install chromium).
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 REPORT.html OUT.png [WIDTHxHEIGHT]" >&2
  exit 2
fi
html=$1 out=$2 size=${3:-1400x4000}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
  echo "report_screenshot: no Chromium on PATH (Debian: apt-get install chromium)" >&2
  exit 3
fi
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
out_abs=$(realpath -m "$out")
rm -f "$out_abs"
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run --user-data-dir="$profile" \
  --host-resolver-rules="MAP * ~NOTFOUND" --proxy-server="127.0.0.1:9" \
  --window-size="${size/x/,}" --screenshot="$out_abs" "file://$(realpath "$html")" >"$profile/log" 2>&1 || {
  cat "$profile/log" >&2
  exit 1
}
if [ ! -s "$out_abs" ]; then
  cat "$profile/log" >&2
  echo "report_screenshot: Chromium wrote no $out" >&2
  exit 1
fi
