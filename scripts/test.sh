#!/usr/bin/env bash
# Checks the formatting (scripts/format.sh) and the house's limits
# (scripts/house.py), then builds ipcpipe and runs
# its test suite: every test of the normal build,
# its multi-process tests again with IPCPIPE_MAILBOX=off and with every
# rank bound to one CPU (IPCP_LAUNCH_PIN=1), then the
# multi-process tests (label mp, without the > 256 MiB ones) under
# AddressSanitizer+UBSan and under ThreadSanitizer, then a short run of
# every fuzz harness (clang, ASan+UBSan).  GPU tests skip (77)
# where there is no GPU and are counted as skipped, never as passed.
#
#   scripts/test.sh              everything
#   IPCPIPE_TEST_SANITIZERS=0    only the normal build
#   IPCPIPE_TEST_FUZZ=0          without the fuzz stage (scripts/fuzz.sh, 45 s
#                                a harness; IPCPIPE_TEST_FUZZ_SECONDS=n)
#   IPCPIPE_BUILD_ROOT=dir       where the build trees go (default ./build)
#   IPCPIPE_TEST_ONLY=list       only these of the normal build's stages
#                                (all, mailbox-off, pinned: comma-separated;
#                                the build runs with any), for a machine
#                                that gives a run less time than the whole
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${IPCPIPE_BUILD_ROOT:-$root/build}
jobs=$(nproc 2>/dev/null || echo 2)
sanitizers=${IPCPIPE_TEST_SANITIZERS:-1}
fuzz=${IPCPIPE_TEST_FUZZ:-1}
chosen=${IPCPIPE_TEST_ONLY:-all,mailbox-off,pinned}
IFS=, read -ra names <<<"$chosen"
[ ${#names[@]} -gt 0 ] ||
    { echo "IPCPIPE_TEST_ONLY: '$chosen' names no stage (all, mailbox-off, pinned)" >&2; exit 2; }
for s in "${names[@]}"; do
    case $s in
    all | mailbox-off | pinned) ;;
    *) echo "IPCPIPE_TEST_ONLY: '$s' is no stage (all, mailbox-off, pinned; comma-separated)" >&2
       exit 2 ;;
    esac
done
# Runs a stage's command in the normal tree where IPCPIPE_TEST_ONLY names it.
stage() { # name, command...
    local name=$1
    shift
    if [[ ,$chosen, == *,$name,* ]]; then
        (cd "$out/normal" && "$@")
    else
        echo "(not run: IPCPIPE_TEST_ONLY=$chosen)"
    fi
}

build() { # dir, cmake args...
    local dir=$1
    shift
    cmake -S "$root" -B "$dir" -DIPCPIPE_WERROR=ON "$@" >"$dir.configure.log" 2>&1 ||
        { cat "$dir.configure.log"; return 1; }
    cmake --build "$dir" -j"$jobs"
}

# Tests at once: one for every two CPUs, each multi-process test on two of
# its own (IPCPIPE_TEST_CPU_SETS); one at a time on a machine of 2-3.
par=$((jobs / 2))
[ "$par" -ge 1 ] || par=1
cpusets=$([ "$par" -gt 1 ] && echo ON || echo OFF)

mkdir -p "$out"
# The tree as .clang-format says (scripts/format.sh).  CI installs
# clang-format; elsewhere a machine without it skips this check, saying so.
echo "== format"
if command -v clang-format >/dev/null 2>&1 || [ "${CI:-}" = true ]; then
    "$root/scripts/format.sh"
else
    echo "clang-format is not installed: formatting not checked"
fi
# The house's limits: files of at most 800 lines, functions of at most 80,
# tools on the public headers only (scripts/house.py).
echo "== house limits"
python3 "$root/scripts/house.py" "$root"
echo "== normal build: all tests"
build "$out/normal" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIPCPIPE_TEST_CPU_SETS=$cpusets
stage all ctest -j"$par" --output-on-failure --timeout 900
# The same multi-process tests with control messages through the socket
# only (IPCPIPE_MAILBOX=off; the shared-memory mailbox is the default).
echo "== normal build: multi-process tests up to 256 MiB, IPCPIPE_MAILBOX=off"
stage mailbox-off env IPCPIPE_MAILBOX=off ctest -j"$par" --output-on-failure -L mp -LE large \
    --timeout 900

# Launchers bind each rank to one CPU by default (mpirun, srun): the same
# tests with every rank bound to one CPU (IPCP_LAUNCH_PIN=1).
echo "== normal build: multi-process tests up to 256 MiB, each rank bound to one CPU"
stage pinned env IPCP_LAUNCH_PIN=1 ctest -j"$par" --output-on-failure -L mp -LE large \
    --timeout 900

if [ "$sanitizers" = 1 ]; then
    echo "== ASan+UBSan: multi-process tests up to 256 MiB"
    build "$out/asan" -DCMAKE_BUILD_TYPE=Debug -DIPCPIPE_SANITIZE=address \
        -DIPCPIPE_TEST_CPU_SETS=$cpusets
    (cd "$out/asan" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        ctest -j"$par" --output-on-failure -L mp -LE large --timeout 900)

    echo "== TSan: multi-process tests up to 256 MiB"
    build "$out/tsan" -DCMAKE_BUILD_TYPE=Debug -DIPCPIPE_SANITIZE=thread \
        -DIPCPIPE_TEST_CPU_SETS=$cpusets
    (cd "$out/tsan" && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
        ctest -j"$par" --output-on-failure -L mp -LE large --timeout 900)
fi
if [ "$fuzz" = 1 ]; then
    # A bounded run with a fixed seed: a crash, leak or UBSan report fails
    # this stage (scripts/fuzz.sh exits 1 and names the input).
    echo "== fuzz harnesses, ${IPCPIPE_TEST_FUZZ_SECONDS:-45} s each"
    IPCPIPE_BUILD_ROOT=$out IPCPIPE_FUZZ_SECONDS=${IPCPIPE_TEST_FUZZ_SECONDS:-45} \
        "$root/scripts/fuzz.sh"
fi
if [ -n "${IPCPIPE_TEST_ONLY:-}" ]; then
    echo "== the chosen test runs passed (IPCPIPE_TEST_ONLY=$chosen)"
else
    echo "== all test runs passed"
fi
