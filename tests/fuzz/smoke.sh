#!/bin/sh
# Fuzz smoke test (a ctest entry per target, see CMakeLists.txt): runs one libFuzzer
# target for a few seconds over its committed seeds, which also replays every seed
# (including the regression inputs of fixed crashes). New inputs go to WORKDIR, never
# into the committed corpus. Exits non-zero on any crash, leak or sanitizer report.
#   smoke.sh FUZZER SEED_DIR WORKDIR [SECONDS]
set -eu
fuzzer=$1 seeds=$2 work=$3 secs=${4:-8}
rm -rf "$work"
mkdir -p "$work/new" "$work/artifacts"
[ -d "$seeds" ] || seeds=""
exec "$fuzzer" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" "$work/new" ${seeds:+"$seeds"}
