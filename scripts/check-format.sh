#!/usr/bin/env bash
# Checks that every C file a change touches is formatted as the committed .clang-format
# says (the whole tree was formatted once; each change keeps its files so).
#
#   scripts/check-format.sh [BASE]
#
# The change is BASE..the working tree. Without BASE: the merge base with origin/main (or
# main, in a worktree): a branch's commits; HEAD~1 when that is HEAD itself or there is no
# main (a commit on main, a clone without it); every tracked C file when there is no HEAD~1
# either (a shallow or a one-commit clone). Exit 1 listing the files that differ, with the
# diff clang-format would make.
set -euo pipefail
cd "$(dirname "$0")/.."
cf=${CLANG_FORMAT:-clang-format}
if ! command -v "$cf" >/dev/null; then
  echo "check-format: $cf not found (Debian: clang-format)" >&2
  exit 1
fi
base=${1:-}
for main in origin/main main; do
  [ -z "$base" ] && git rev-parse -q --verify "$main^{commit}" >/dev/null || continue
  base=$(git merge-base HEAD "$main" 2>/dev/null || true)
  [ "$base" = "$(git rev-parse HEAD)" ] && base=""
  break
done
if [ -z "$base" ] && git rev-parse -q --verify HEAD~1 >/dev/null; then
  base=HEAD~1
fi
if [ -n "$base" ]; then
  mapfile -t files < <(git diff --name-only --diff-filter=ACMR "$base" -- '*.c' '*.h')
  what="changed since $(git rev-parse --short "$base")"
else
  mapfile -t files < <(git ls-files -- '*.c' '*.h')
  what="tracked (no base to compare with)"
fi
bad=()
for f in "${files[@]}"; do
  "$cf" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
echo "check-format: ${#files[@]} C files $what, ${#bad[@]} not formatted ($("$cf" --version | grep -o 'version [0-9.]*'))"
for f in "${bad[@]}"; do
  "$cf" "$f" | diff -u --label "$f" --label "$f (clang-format)" "$f" - || true
done
[ ${#bad[@]} -eq 0 ]
