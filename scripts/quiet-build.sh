#!/usr/bin/env bash
# quiet-build.sh BUILD_DIR: `cmake --build BUILD_DIR` for `make run`, so that the URL the
# server prints is the one thing a newcomer sees. The build's own output (hundreds of
# "[N/M] Building C object" lines) goes to BUILD_DIR/build.log; on a terminal, one
# progress line is rewritten in place and erased at the end; on failure the log from
# the first error on (or its last lines) goes to standard error and the status is the
# build's.
set -uo pipefail
dir=$1
log="$dir/build.log"
if [ -t 2 ]; then
  cmake --build "$dir" 2>&1 | tee "$log" |
    awk '/^\[[0-9]+\/[0-9]+\]/ { printf "\rbuilding exec-server %s ", $1 > "/dev/stderr"; fflush("/dev/stderr") }
         END { printf "\r\033[K" > "/dev/stderr" }'
  rc=${PIPESTATUS[0]}
else
  cmake --build "$dir" >"$log" 2>&1
  rc=$?
fi
if [ "$rc" -ne 0 ]; then
  if grep -q '^FAILED: ' "$log"; then
    sed -n '/^FAILED: /,$p' "$log" >&2
  else
    tail -n 40 "$log" >&2
  fi
  echo "make run: the build failed (all of its output is in $log)" >&2
fi
exit "$rc"
