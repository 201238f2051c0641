#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz (clang, ASan+UBSan) and runs
# each one, seeded with a scratch copy of its committed corpus, with a
# fixed seed.  Any crash, leak, UBSan report, timeout or out-of-memory
# fails the run (exit 1) and names the input that did it.  Ends with a
# table: executions, coverage (cov: edges, ft: features) and corpus size
# per harness.
#
#   scripts/fuzz.sh                   every harness, 60 s each
#   scripts/fuzz.sh --seconds 30      30 s each (or IPCPIPE_FUZZ_SECONDS)
#   scripts/fuzz.sh --long 3600       a long run: 3600 s each
#   scripts/fuzz.sh --runs 2000000    2 million executions each
#   scripts/fuzz.sh --only ctrl,desc  some harnesses only
#   IPCPIPE_FUZZ_SEED=n               libFuzzer's -seed (default 1)
#   IPCPIPE_FUZZ_WORK=dir             scratch corpora, logs and crash inputs
#                                     (default: a new directory in /tmp)
#   IPCPIPE_BUILD_ROOT=dir            where the build tree goes (./build)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${IPCPIPE_BUILD_ROOT:-$root/build}
seconds=${IPCPIPE_FUZZ_SECONDS:-60}
runs=-1
seed=${IPCPIPE_FUZZ_SEED:-1}
harnesses="desc hello ctrl stripe config remote"

while [ $# -gt 0 ]; do
    case $1 in
    --seconds | --long) seconds=$2; shift 2 ;;
    --runs) runs=$2; seconds=0; shift 2 ;;
    --only) harnesses=${2//,/ }; shift 2 ;;
    -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

cc=${CC:-clang}
if ! command -v "$cc" >/dev/null 2>&1 || ! "$cc" --version | grep -q clang; then
    echo "fuzz.sh: the harnesses need clang with libFuzzer ('$cc' is not" \
         "clang; .ci/run installs it)" >&2
    exit 1
fi

dir=$out/fuzz
mkdir -p "$out"
echo "== fuzz build ($dir)"
CC=$cc cmake -S "$root" -B "$dir" -DIPCPIPE_FUZZ=ON -DIPCPIPE_WERROR=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; exit 1; }
cmake --build "$dir" -j"$(nproc 2>/dev/null || echo 2)" -- --no-print-directory \
    >"$dir.build.log" 2>&1 || { cat "$dir.build.log"; exit 1; }

work=${IPCPIPE_FUZZ_WORK:-$(mktemp -d /tmp/ipcpipe-fuzz.XXXXXX)}
mkdir -p "$work"
echo "== scratch corpora, logs and crash inputs in $work"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export IPCPIPE_LOG_LEVEL=${IPCPIPE_LOG_LEVEL:-none}

failed=0
summary=()
for h in $harnesses; do
    bin=$dir/tests/fuzz/fuzz_$h
    [ -x "$bin" ] || { echo "fuzz.sh: no harness '$h' ($bin)" >&2; exit 2; }
    corpus=$work/corpus/$h
    mkdir -p "$corpus" "$work/crash/$h"
    cp -n "$root/tests/fuzz/corpus/$h"/* "$corpus"/ 2>/dev/null || true
    args=(-seed="$seed" -timeout=30 -rss_limit_mb=4096 -print_final_stats=1
          -artifact_prefix="$work/crash/$h/")
    # Scripts of control messages carry whole messages (an RTS with its
    # export is ~500 bytes, and a scenario holds several).
    if [ "$h" = ctrl ]; then args+=(-max_len=8192); else args+=(-max_len=4096); fi
    [ -f "$root/tests/fuzz/$h.dict" ] && args+=(-dict="$root/tests/fuzz/$h.dict")
    if [ "$runs" -ge 0 ]; then
        args+=(-runs="$runs")
        what="$runs runs"
    else
        args+=(-max_total_time="$seconds")
        what="$seconds s"
    fi
    log=$work/$h.log
    echo "== fuzz_$h: $what"
    rc=0
    "$bin" "${args[@]}" "$corpus" >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    stats=$(grep -E '^#[0-9]+' "$log" | grep -E 'cov: ' | tail -1 || true)
    cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$stats")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$stats")
    ncorp=$(find "$corpus" -type f | wc -l)
    if [ $rc -ne 0 ] || grep -qE '^==[0-9]+==ERROR|runtime error:|^SUMMARY: ' "$log"; then
        failed=1
        echo "fuzz_$h FAILED (exit $rc); the end of $log:"
        tail -n 60 "$log"
        echo "inputs that failed: $(ls "$work/crash/$h" | sed "s|^|$work/crash/$h/|" | tr '\n' ' ')"
        summary+=("$(printf '%-8s %12s %7s %7s %7s  FAILED' "$h" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$ncorp")")
    else
        summary+=("$(printf '%-8s %12s %7s %7s %7s  ok' "$h" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$ncorp")")
    fi
done

echo "== fuzz summary (seed $seed)"
printf '%-8s %12s %7s %7s %7s\n' harness executions cov ft corpus
printf '%s\n' "${summary[@]}"
if [ $failed -ne 0 ]; then
    echo "== fuzzing found a failure (inputs under $work/crash)"
    exit 1
fi
[ -n "${IPCPIPE_FUZZ_WORK:-}" ] || rm -rf "$work"
echo "== no findings"
