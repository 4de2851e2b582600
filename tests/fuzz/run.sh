#!/bin/sh
# `make fuzz`: runs every libFuzzer target of a fuzz build for SECONDS each, in turn,
# over a growing corpus kept in the build dir (seeded from tests/fuzz/corpus/<target>),
# then prints each target's executions and final coverage line. A crash stops the
# run; the reproducer is left in BUILD/fuzz-artifacts/. TARGETs (e.g. "ws uri") limit
# the run to those; the default is every fuzz_* in BUILD_DIR.
#   run.sh BUILD_DIR SECONDS [TARGET...]
set -eu
build=$1 secs=$2
shift 2
only=" $* "
src=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$build/fuzz-corpus" "$build/fuzz-logs" "$build/fuzz-artifacts"
summary=""
for f in "$build"/fuzz_*; do
    [ -x "$f" ] || continue
    t=${f##*/fuzz_}
    [ "$only" = "  " ] || case "$only" in *" $t "*) ;; *) continue ;; esac
    mkdir -p "$build/fuzz-corpus/$t"
    log="$build/fuzz-logs/$t.log"
    seeds="$src/corpus/$t"
    [ -d "$seeds" ] || seeds=""
    echo "fuzz: $t for ${secs}s (log: $log)"
    if ! "$f" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$build/fuzz-artifacts/$t-" "$build/fuzz-corpus/$t" ${seeds:+"$seeds"} \
        >"$log" 2>&1; then
        tail -n 40 "$log"
        echo "fuzz: $t FAILED (see $log and $build/fuzz-artifacts/)"
        exit 1
    fi
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    cov=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
    line="$t: $execs execs; $cov"
    echo "  $line"
    summary="$summary$line
"
done
printf '\nfuzz summary (%ss each):\n%s' "$secs" "$summary"
