#!/usr/bin/env bash
# Builds and runs the libFuzzer targets (docs/fuzzing.md).
#
#   host/fuzz/run.sh [-t SECONDS] [-b BUILD_ROOT] [-v "x86_64 i386"] [-T "parse run et_glue et_glue_heap et_pte"] [-- LIBFUZZER_ARGS...]
#
# For every variant (64-bit, and 32-bit when clang's i386 runtimes are
# there; a missing one is skipped with the reason) and every target:
#   1. regression: every file of host/fuzz/corpus/<target>/ (and of
#      host/fuzz/regressions/<target>/, reproducers of fixed findings) is run
#      once; any sanitizer report or invariant failure fails the script;
#   2. fuzzing for SECONDS (default 60; 0 = regression only), starting from
#      that corpus; new inputs go to a scratch directory, never into the
#      checked-in corpus. A crash leaves its input in BUILD_ROOT/artifacts/.
#      The three ExecuTorch targets (et_glue, et_glue_heap, et_pte) share the
#      time of two: 2/3 of SECONDS each, so adding et_pte (whole .pte files)
#      left CI's fuzzing time as it was.
# Prints one summary line per run with the execution count. Exit status 0
# only if every run finished without a finding.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
seconds=60
root=""
variants="x86_64 i386"
targets="parse run et_glue et_glue_heap et_pte"
while [ $# -gt 0 ]; do
  case "$1" in
    -t) seconds=$2; shift 2 ;;
    -b) root=$2; shift 2 ;;
    -v) variants=$2; shift 2 ;;
    -T) targets=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: run.sh [-t SECONDS] [-b BUILD_ROOT] [-v VARIANTS] [-T TARGETS] [-- LIBFUZZER_ARGS...]" >&2; exit 2 ;;
  esac
done
[ -n "$root" ] || root=$(mktemp -d /tmp/espnn-fuzz.XXXXXX)
# shellcheck disable=SC2086
"$here/build.sh" "$root" $variants

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
mkdir -p "$root/artifacts"
status=0
for v in $variants; do
  bin="$root/$v/fuzz"
  if [ ! -x "$bin/fuzz_parse" ]; then
    echo "fuzz $v: skipped ($(grep -h "fuzz $v" "$root/skipped" || echo 'not built'))"
    continue
  fi
  for t in $targets; do
    if [ ! -x "$bin/fuzz_$t" ]; then  # fuzz_et_*: 64-bit with the executorch wheel only
      echo "fuzz $v $t: skipped ($(grep -h "fuzz $v .*$t" "$root/skipped" | head -1 || echo 'not built'))"
      continue
    fi
    seeds=("$here/corpus/${t%_heap}")  # et_glue_heap shares et_glue's seeds
    [ -d "$here/regressions/${t%_heap}" ] && seeds+=("$here/regressions/${t%_heap}")  # and its reproducers
    files=()
    for d in "${seeds[@]}"; do
      for f in "$d"/*; do [ -f "$f" ] && files+=("$f"); done
    done
    log="$root/$v-$t-regression.log"
    if "$bin/fuzz_$t" -timeout=10 "${files[@]}" >"$log" 2>&1; then
      echo "fuzz $v $t: regression OK (${#files[@]} files)"
    else
      echo "fuzz $v $t: regression FAILED on the checked-in corpus; log: $log"
      tail -40 "$log"
      status=1
      continue
    fi
    [ "$seconds" -gt 0 ] || continue
    budget=$seconds
    case "$t" in et_*) budget=$(( (2 * seconds + 2) / 3 )) ;; esac
    work="$root/work/$v/$t"
    mkdir -p "$work"
    log="$root/$v-$t-fuzz.log"
    start=$(date +%s)
    if "$bin/fuzz_$t" -max_total_time="$budget" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
         -print_final_stats=1 -artifact_prefix="$root/artifacts/$v-$t-" "$@" "$work" "${seeds[@]}" >"$log" 2>&1; then
      verdict=OK
    else
      verdict=FAILED
      status=1
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    echo "fuzz $v $t: $verdict, ${runs:-?} executions in $(( $(date +%s) - start )) s (${eps:-?}/s); log: $log"
    if [ "$verdict" != OK ]; then
      grep -E "ERROR|SUMMARY|invariant|runtime error|Test unit written" "$log" | head -20 || true
    fi
  done
done
exit $status
