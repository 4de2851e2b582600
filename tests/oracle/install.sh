#!/usr/bin/env bash
# Installs the test-time oracle packages (tests/oracle/package.json) with npm into a cache
# directory outside the tree and prints that directory's node_modules path. Exit 77 (the
# test suite's "skipped") with a message on stderr when node/npm are missing or the
# registry cannot be reached: the oracle tests are then skipped, never faked.
set -u
here=$(cd "$(dirname "$0")" && pwd)
cache=${EXEC_ORACLE_DIR:-$HOME/.cache/exec-server-oracle}
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "oracle: node/npm not found; skipping the oracle test" >&2; exit 77
fi
mkdir -p "$cache"
if ! cmp -s "$here/package.json" "$cache/package.json" || [ ! -d "$cache/node_modules/@noble/post-quantum" ]; then
  cp "$here/package.json" "$cache/package.json"
  if ! (cd "$cache" && npm install --no-audit --no-fund --silent >/dev/null 2>&1); then
    rm -f "$cache/package.json"
    echo "oracle: npm could not install $(tr -d '\n' < "$here/package.json" | grep -o '"@noble[^,}]*' | tr '\n' ' '); skipping the oracle test" >&2
    exit 77
  fi
fi
echo "$cache/node_modules"
