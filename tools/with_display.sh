#!/usr/bin/env bash
# Runs a command with an X display for the viewer tests: the session's own when DISPLAY is set,
# otherwise a private Xvfb (Mesa llvmpipe) that picks a free display number itself
# (-displayfd), so parallel tests never race for one. -noreset: the tests open and close a
# window after another, and a server resetting after its last client left refuses the next one.
set -u
if [ -n "${DISPLAY:-}" ]; then exec "$@"; fi
if ! command -v Xvfb >/dev/null; then
  echo "with_display.sh: no DISPLAY and no Xvfb (apt-get install xvfb)" >&2
  exit 1
fi
tmp="$(mktemp -d)"
Xvfb -displayfd 3 -screen 0 1920x1080x24 -nolisten tcp -noreset 3>"$tmp/display" 2>"$tmp/log" &
xvfb=$!
for _ in $(seq 200); do
  [ -s "$tmp/display" ] && break
  kill -0 "$xvfb" 2>/dev/null || break
  sleep 0.05
done
if [ ! -s "$tmp/display" ]; then
  echo "with_display.sh: Xvfb did not start: $(cat "$tmp/log")" >&2
  kill "$xvfb" 2>/dev/null
  rm -rf "$tmp"
  exit 1
fi
export DISPLAY=":$(head -n1 "$tmp/display")"
"$@"
rc=$?
kill "$xvfb" 2>/dev/null
wait "$xvfb" 2>/dev/null
rm -rf "$tmp"
exit $rc
