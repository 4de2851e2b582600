#!/usr/bin/env bash
# Installs the test-time oracle packages (tests/oracle/package.json) with npm into a cache
# directory outside the tree and prints that directory's node_modules path. Exit 77 (the
# test suite's "skipped") with a message on stderr when node/npm are missing or the
# registry cannot be reached: the oracle tests are then skipped, never faked.
#
# Several tests call this at once under ctest -j: one installs under an exclusive lock
# (flock on $cache.lock) while the others wait, then find it done. "Done" is a stamp
# written after npm succeeded, so an install killed half-way is redone, never used. The
# lock wait and npm share $budget seconds, less than ctest gives a test (300 s).
set -u
here=$(cd "$(dirname "$0")" && pwd)
cache=${EXEC_ORACLE_DIR:-$HOME/.cache/exec-server-oracle}
budget=240
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "oracle: node/npm not found; skipping the oracle test" >&2; exit 77
fi
mkdir -p "$cache"
exec 9>"$cache.lock"
if ! flock -w "$budget" 9; then
  echo "oracle: another npm install held $cache.lock for ${budget} s; skipping the oracle test" >&2
  exit 77
fi
stamp="$cache/.installed-package.json"
if ! cmp -s "$here/package.json" "$stamp"; then
  left=$((budget - SECONDS)) # the lock wait counts against the same budget
  rm -f "$stamp"
  cp "$here/package.json" "$cache/package.json"
  if [ "$left" -lt 10 ] || ! (cd "$cache" && timeout -k 5 "$left" npm install --no-audit \
          --no-fund --silent --fetch-timeout=$((left * 1000)) >/dev/null 2>&1 9>&-); then
    echo "oracle: npm could not install $(tr -d '\n' < "$here/package.json" | grep -o '"@noble[^,}]*' | tr '\n' ' ')within ${budget} s; skipping the oracle test" >&2
    exit 77
  fi
  cp "$here/package.json" "$stamp"
fi
echo "$cache/node_modules"
