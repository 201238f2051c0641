#!/usr/bin/env bash
# One command on a GPU machine: builds ipcpipe, runs the GPU tests without
# and under compute-sanitizer memcheck, runs the GPU benchmark (with the
# ceilings it measures beside every figure), and writes every log under the
# directory it is given.  Exit status: 0 when every step passed.
#
#   scripts/gpu-check.sh OUTDIR [STEPS]
#
# STEPS is a comma list of build,tests,memcheck,bench,lane,proto,trace,
# seed,compare,stripes,load,sweep,host,wakes,bound,lat,torch,allocs,python,
# pybench,nodes,ranks,readme (default: all of them; remote-tune, the settings of
# transfers with other nodes in turns, and threads, where a bound rank's CPU
# goes, only when named), so that a time-limited session can
# run them in several calls; the build tree is reused when it is there.
# machine.txt records the GPUs, the commit (-dirty with changes) and the
# doctor's report; at the end, MODEL[xN]-DATE.txt gathers it and the
# summary as one results file (copy it into results/).
# GPU_TEST_TIMEOUT: seconds per GPU test (default 600); GPU_TEST_REGEX: run
# only the GPU tests whose names match it; IPCPIPE_COMMIT: the commit the
# results name (else the tree's git HEAD).
set -uo pipefail

out=${1:?usage: scripts/gpu-check.sh OUTDIR [build,tests,memcheck,bench,lane,proto,trace,seed,compare,stripes,load,sweep,host,wakes,bound,lat,torch,allocs,python,pybench,nodes,ranks,remote-tune,threads,readme]}
steps=,${2:-build,tests,memcheck,bench,lane,proto,trace,seed,compare,stripes,load,sweep,host,wakes,bound,lat,torch,allocs,python,pybench,nodes,ranks,readme},
want() { [[ $steps == *,$1,* ]]; }
root=$(cd "$(dirname "$0")/.." && pwd)
build=${IPCPIPE_BUILD_ROOT:-$root/build}/gpu
jobs=$(nproc 2>/dev/null || echo 8)
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
export NCCL_NVLS_ENABLE=0 # keep NVLink multicast off on shared machines
# --compare loads libnccl.so.2 at run time: where only a Python wheel of
# NCCL is installed (PyTorch's), let the loader find it there.
if nccl=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0] + "/lib")' 2>/dev/null) &&
    [ -e "$nccl/libnccl.so.2" ]; then
    export LD_LIBRARY_PATH=$nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
fail=0

note() { echo "$*" | tee -a "$summary"; }
step() { # name, command...
    local name=$1 t0 rc
    shift
    t0=$(date +%s)
    "$@"
    rc=$?
    note "$(printf '%-10s rc=%-3d %4ds' "$name" "$rc" $(($(date +%s) - t0)))"
    [ "$rc" -eq 0 ] || fail=1
    return "$rc"
}

# The commit the figures come from; a copy of the tree without .git (or
# one git does not trust) says so.  IPCPIPE_COMMIT names it where the
# copy's .git is not the checkout's (a remote machine's copy of the work
# tree may carry an older one: its HEAD, with -dirty).
commit() {
    local c
    [ -z "${IPCPIPE_COMMIT:-}" ] ||
        { echo "$IPCPIPE_COMMIT (IPCPIPE_COMMIT: changes to it are not checked)"; return; }
    c=$(git -C "$root" -c safe.directory="$root" rev-parse --short HEAD 2>/dev/null) ||
        { echo "unknown (no git repository at $root)"; return; }
    [ -z "$(git -C "$root" -c safe.directory="$root" status --porcelain 2>/dev/null)" ] ||
        c+=-dirty
    echo "$c"
}

{
    date -u
    echo "commit: $(commit)"
    nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total --format=csv
    nvidia-smi topo -m
    echo "cpus: $jobs"
} >"$out/machine.txt" 2>&1

if want build; then
    # Warnings are errors in CI (gcc 12); another compiler here may warn
    # about more, which is reported but does not stop the GPU checks.
    # The Python package for the python3 that has PyTorch, where one has.
    pyopt=
    if py=$(command -v python3) && "$py" -c 'import torch' >/dev/null 2>&1; then
        pyopt=-DIPCPIPE_PYTHON=$py
    fi
    step build bash -c "cmake -S '$root' -B '$build' -DCMAKE_BUILD_TYPE=Release \
        -DIPCPIPE_WERROR=OFF $pyopt >'$out/build.log' 2>&1 && \
        cmake --build '$build' -j$jobs >>'$out/build.log' 2>&1"
    note "build warnings: $(grep -c 'warning:' "$out/build.log")"
    "$build/tools/ipcpipe-info" >>"$out/machine.txt" 2>&1
    grep 'warning:' "$out/build.log" | sort -u | head -n 20 >>"$summary"
    [ $fail -eq 0 ] || { cat "$summary"; exit 1; }
fi

if want tests; then
    step tests bash -c "cd '$build' && ctest -L gpu ${GPU_TEST_REGEX:+-R '$GPU_TEST_REGEX'} \
        --output-on-failure -j6 --timeout ${GPU_TEST_TIMEOUT:-600} >'$out/tests.log' 2>&1"
    grep -E 'tests passed|Failed|Not Run|\*\*\*' "$out/tests.log" | tail -n 40 >>"$summary"
fi

if want memcheck; then
    step memcheck python3 "$root/scripts/memcheck.py" "$build" --jobs 8 \
        --out "$out/memcheck.log"
fi

bench=$build/tools/ipcpipe-bench
# Striping is measured first (--tune writes the calibration file), so
# that no timed case pays for it; auto rows then show the striped path.
want bench && step bench bash -c "'$bench' --tune >'$out/bench.txt' 2>&1 && \
    '$bench' --mem cuda --sizes 8,4K,2M,8M,32M,128M,256M,1G \
    >>'$out/bench.txt' 2>&1 && '$bench' --mem cuda --sizes 2M,8M,32M,256M,1G \
    --json >'$out/bench.json' 2>>'$out/bench.txt'"
want bench && cat "$out/bench.txt" >>"$summary"

# The small-message lane: stream-ordered latency without it, then with it
# (IPCPIPE_SMALL on both ranks), sizes it takes; then with a request on
# every call (what tracking costs a call); then with every message sent
# the fenced way (IPCPIPE_SMALL_WORDS=0), what the flagged words gain.
want lane && step lane bash -c "'$bench' --mem cuda --case stream \
    --sizes 8,4K,64K >'$out/lane.txt' 2>&1 && IPCPIPE_SMALL=64K '$bench' \
    --mem cuda --case stream --sizes 8,512,4K,64K >>'$out/lane.txt' 2>&1 && \
    IPCPIPE_SMALL=64K '$bench' --mem cuda --case stream --sizes 8,512 \
    --stream-reqs every >>'$out/lane.txt' 2>&1 && \
    IPCPIPE_SMALL=64K IPCPIPE_SMALL_WORDS=0 '$bench' --mem cuda --case stream \
    --sizes 8,512 >>'$out/lane.txt' 2>&1"
want lane && cat "$out/lane.txt" >>"$summary"

# Where a transfer between processes spends the time the copies do not:
# the protocol's marks of each transfer (IPCPIPE_TRACE_COPIES=off, so no
# timing operations slow the queues), both sides on one time line.
if want proto; then
    step proto bash -c "for c in ${PROTO_CASES:-direct:256M auto:256M auto:1G bidir:1G}; do \
        echo \"## \$c\"; rm -f '$build'/proto.json*; \
        IPCPIPE_TRACE='$build/proto.json' IPCPIPE_TRACE_COPIES=off '$bench' \
            --mem cuda --case \${c%:*} --sizes \${c#*:} --iters 10 --lat-max 0 2>&1 | \
            grep -E '^ +[0-9]' && \
        python3 '$root/scripts/trace_stats.py' '$build/proto.json' || exit 1; \
        done >'$out/proto.txt' 2>&1"
    cat "$out/proto.txt" >>"$summary"
fi

# Where the staged path and striping lose time: timelines of a staged
# 256 MiB and an auto (striped) 1 GiB transfer, reduced by trace_stats.py
# to copy rates, gaps between copies and the ring's hand-over per chunk
# (the JSON stays in the build tree).
if want trace; then
    step trace bash -c "for c in staged:256M auto:256M auto:1G; do \
        echo \"## \$c\"; rm -f '$build'/trace.json*; \
        IPCPIPE_TRACE='$build/trace.json' '$bench' --mem cuda --case \${c%:*} \
            --sizes \${c#*:} --iters 3 --lat-max 0 2>&1 | grep -E '^ +[0-9]|trace of' && \
        python3 '$root/scripts/trace_stats.py' '$build/trace.json' || exit 1; \
        done >'$out/trace.txt' 2>&1"
    cat "$out/trace.txt" >>"$summary"
fi

# The forum post's case: ipcpipe against the post's own pattern, with a
# timeline of the ipcpipe transfers.
if want seed; then
    step seed bash -c "IPCPIPE_TRACE='$out/seed-trace.json' \
        '$build/examples/example_seed' --naive --size $((256 << 20)) \
        >'$out/seed.txt' 2>&1"
    cat "$out/seed.txt" >>"$summary"
fi

# The comparison of issue 4: NCCL, the post's pattern and the
# single-process copies beside ipcpipe, as a table and a chart.
if want compare; then
    step compare bash -c "'$bench' --mem cuda --compare --sizes 2M,8M,64M,512M,1G \
        --lat-max 0 --plot '$out/compare.svg' >'$out/compare.txt' 2>&1"
    cat "$out/compare.txt" >>"$summary"
fi

# Striping between processes at fixed shares (IPCPIPE_STRIPE=<share>)
# beside the direct path alone and the calibrated auto, one way and both
# ways: where the share that wins between processes lies, by size.
stripes_run() {
    "$bench" --mem cuda --case direct --case bidir-direct --case auto \
        --case bidir --sizes 256M,512M,1G --lat-max 0 2>&1 |
        grep -E '^ +[0-9]|^# +d2d' || return 1
    local s
    for s in ${STRIPE_SHARES:-0.06 0.08 0.10 0.12}; do
        echo "## IPCPIPE_STRIPE=$s"
        IPCPIPE_STRIPE=$s "$bench" --mem cuda --case auto --case bidir \
            --sizes 256M,512M,1G --lat-max 0 2>&1 | grep -E '^ +[0-9]' || return 1
    done
}
if want stripes; then
    step stripes stripes_run >"$out/stripes.txt" 2>&1
    cat "$out/stripes.txt" >>"$summary"
fi

# Beside another process's copies over one GPU's PCIe link (--load): the
# sender's D2H, then the receiver's H2D.  Striping must not leave auto
# slower than direct by more than noise (IPCPIPE_STRIPE_ADAPT).
load_run() {
    local k
    for k in d2h h2d; do
        echo "## --load $k"
        "$bench" --mem cuda --load "$k" --case direct --case auto \
            --sizes 256M,512M,1G --lat-max 0 2>&1 |
            grep -E '^ +[0-9]|^# load|--load' || return 1
    done
}
if want load; then
    step load load_run >"$out/load.txt" 2>&1
    cat "$out/load.txt" >>"$summary"
fi

if want sweep; then
    {
        # Staged-path tuning: slot size and queue count (FACTS: 16 MiB
        # slots reached 53.2 GB/s with a GPU-driven two-sided ring).
        # queues:chunk[:slots[:slots per queue]], slots by default filling
        # a 64 MiB ring, 4 slots a queue by default: 2:16M:4:2 is a second
        # queue in the 64 MiB ring, hiding the per-chunk hand-over or not;
        # 2:16M:8 the same in a 128 MiB ring (past the issue's limit) and
        # 1:16M:8 the deeper ring alone.
        for qcs in 1:16M 1:32M 2:8M 1:8M 2:16M:4:2 1:16M:8 2:16M:8; do
            IFS=: read -r q c s p <<<"$qcs"
            s=${s:-$((64 / ${c%M}))} p=${p:-4}
            echo "## staged: IPCPIPE_QUEUES=$q IPCPIPE_CHUNK=$c IPCPIPE_SLOTS=$s IPCPIPE_SLOTS_PER_QUEUE=$p"
            IPCPIPE_QUEUES=$q IPCPIPE_CHUNK=$c IPCPIPE_SLOTS=$s IPCPIPE_SLOTS_PER_QUEUE=$p \
                "$bench" --mem cuda --case staged --sizes 256M,1G --lat-max 0 2>&1 |
                grep -E '^ +[0-9]'
        done
        # Direct-path tuning: how finely a transfer is split over streams
        # (auto: not at all with device memory).
        for q in 1 4; do
            for piece in auto 256K 64M; do
                echo "## direct: IPCPIPE_QUEUES=$q IPCPIPE_PIECE=$piece"
                IPCPIPE_QUEUES=$q IPCPIPE_PIECE=$piece \
                    "$bench" --mem cuda --case direct --sizes 2M,8M,256M,1G \
                    --lat-max 0 2>&1 | grep -E '^ +[0-9]'
            done
        done
    } >"$out/sweep.txt" 2>&1
    note "sweep     (see sweep.txt)"
    cat "$out/sweep.txt" >>"$summary"
fi

# Host memory against Open MPI's shared-memory transport in the same runs
# (--compare's ompi rows; mpirun must be installed), ranks unbound and
# bound to one CPU each, on ipcp_mem_alloc buffers and on plain ones
# (posix_memalign, as an MPI program's), every host path of ipcpipe
# (HOST_CASES, HOST_SIZES: which cases and sizes).
host_run() {
    local pin alloc
    for pin in "" --pin; do
        for alloc in ipcp plain; do
            echo "## --mem host --alloc $alloc ${pin:-(unbound)}"
            # shellcheck disable=SC2046 # one --case per word
            "$bench" --mem host --alloc "$alloc" --compare \
                $(printf -- '--case %s ' ${HOST_CASES:-ompi auto direct staged}) \
                --sizes ${HOST_SIZES:-8,2K,32K,64K,128K,1M,16M,256M,1G} \
                $pin 2>&1 | grep -E '^ +[0-9]|^ +\^ (first|min-max)|^# +memcpy' || return 1
        done
    done
}
if want host; then
    step host host_run >"$out/host.txt" 2>&1
    cat "$out/host.txt" >>"$summary"
fi

# What keeps each rank's progress thread awake in small host windows, bound
# to one CPU each and unbound: the bench's 8 B and 2 KiB windows, posted
# back to back as well (--ahead), with each thread's account of its turns
# and each mailbox's (IPCPIPE_LOG_LEVEL=debug: why it polled on, what ended
# its blocking waits, its CPU time, the wake-ups each writer sent).
wakes_run() {
    local pin
    for pin in --pin ""; do
        echo "## --mem host --alloc plain ${pin:-(unbound)}"
        IPCPIPE_LOG_LEVEL=debug "$bench" --mem host --alloc plain --case auto \
            --sizes 8,2K --ahead 200 $pin 2>&1 |
            grep -E '^ +[0-9]|run ahead|progress thread:|mailbox with rank' ||
            return 1
    done
}
if want wakes; then
    step wakes wakes_run >"$out/wakes.txt" 2>&1
    cat "$out/wakes.txt" >>"$summary"
fi

# Device transfers with ranks bound to one CPU each against unbound, two
# processes on one GPU (or two): the stream-ordered and blocking small
# messages and a large transfer.
bound_run() {
    local pin
    for pin in "" --pin; do
        echo "## --mem cuda ${pin:-(unbound)}"
        "$bench" --mem cuda --case auto --case stream --sizes 8,4K,2M,256M $pin 2>&1 |
            grep -E '^ +[0-9]|^ +\^ (first|min-max)' || return 1
    done
}
if want bound; then
    step bound bound_run >"$out/bound.txt" 2>&1
    cat "$out/bound.txt" >>"$summary"
fi

# Where a bound rank's one CPU goes: the stream-ordered and blocking
# device cases run bound, then unbound, while every thread of the bench's
# processes (the command and its children) is sampled
# (/proc/PID/task/TID/schedstat: time run, time
# waited for the CPU, slices) every 50 ms, from the last CPU (off the
# bound ranks'); the last sample of each thread.
threads_sample() { # command...
    local main p t run wait sl k name
    local -A last=()
    "$@" >/dev/null 2>&1 &
    main=$!
    (
        taskset -cp "$(($(nproc) - 1))" $BASHPID >/dev/null 2>&1 || true
        while kill -0 "$main" 2>/dev/null; do
            for p in "$main" $(pgrep -P "$main"); do
                for t in /proc/$p/task/*; do
                    read -r run wait sl <"$t/schedstat" 2>/dev/null || continue
                    read -r name <"$t/comm" 2>/dev/null || name=?
                    last[$p/${t##*/}]="pid $p tid ${t##*/} $name: run $((run / 1000000)) ms, waited $((wait / 1000000)) ms, $sl slices"
                done
            done
            sleep 0.05
        done
        for k in "${!last[@]}"; do echo "${last[$k]}"; done | sort
    )
    wait "$main"
}
threads_run() {
    local pin c
    for pin in --pin ""; do
        for c in stream auto; do
            echo "## --mem cuda --case $c --sizes 8,4K ${pin:-(unbound)}"
            threads_sample "$bench" --mem cuda --case "$c" --sizes 8,4K $pin || return 1
        done
    done
}
if want threads; then
    step threads threads_run >"$out/threads.txt" 2>&1
    cat "$out/threads.txt" >>"$summary"
fi

# True latency: the stream case's ping-pong with the host waiting for every
# round trip (--stream-batch 1) beside the blocking one, unbound and bound.
lat_run() {
    local pin refs
    for pin in "" --pin; do
        # NCCL's round trips timed the same way, beside the unbound rows
        # (waived where there is no GPU per rank).
        refs=
        [ -n "$pin" ] || refs="--compare --case nccl"
        echo "## --mem cuda --stream-batch 1 ${pin:-(unbound)}"
        "$bench" --mem cuda --case auto --case stream $refs --sizes 8,4K,64K \
            --stream-batch 1 $pin 2>&1 |
            grep -E '^ +[0-9]|^ +\^ (min-max|the calls)' || return 1
    done
}
if want lat; then
    step lat lat_run >"$out/lat.txt" 2>&1
    cat "$out/lat.txt" >>"$summary"
fi

# Tensors of PyTorch's allocators between two processes on the GPU (where
# this Python has torch): path, median GB/s beside the same copy in one
# process, every byte checked.
# GPU memory the library did not allocate (issue 26): each allocator's
# auto row beside the direct row on ipcp_mem_alloc buffers, one run after
# the other in this step, and the bounce path forced on ipcp_mem_alloc
# buffers beside the host ring.
if want allocs; then
    allocs_run() {
        "$bench" --mem cuda --case direct --case staged --case bounce \
            --sizes 16M,64M,256M,1G --lat-max 0 2>&1 | grep -E '^ +[0-9]|^# memory' || return 1
        local a
        for a in plain vmm vmm0 pool spool; do
            "$bench" --mem cuda --alloc "$a" --case auto \
                --sizes 16M,64M,256M,1G --lat-max 0 2>&1 |
                grep -E '^ +[0-9]|^# memory' || return 1
        done
    }
    step allocs allocs_run >"$out/allocs.txt" 2>&1
    cat "$out/allocs.txt" >>"$summary"
fi

# Many ranks at once (issue 31): one rank a GPU (at least two ranks),
# every pattern of ipcpipe-bench-ranks on device memory, each flow beside
# its figure alone and the aggregate, after the doctor's PCI topology.
ranks_run() {
    local n
    n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
    [ "$n" -ge 2 ] || n=2
    "$build/tools/ipcpipe-info" | sed -n '/PCI topology/,/share its link/p'
    "$build/tools/ipcpipe-bench-ranks" --mem cuda --ranks "$n" \
        --sizes "${RANKS_SIZES:-1M,64M,256M}" --reps 5
}
if want ranks; then
    step ranks ranks_run >"$out/ranks.txt" 2>&1
    cat "$out/ranks.txt" >>"$summary"
fi

# The Python package's tests (python/tests: host memory, and PyTorch
# tensors on the GPU where the interpreter has torch).
if want python; then
    py=$(sed -n 's/^IPCPIPE_PYTHON:[A-Z]*=//p' "$build/CMakeCache.txt")
    if [ -n "$py" ] && "$py" -c 'import pytest, numpy' >/dev/null 2>&1; then
        step python env PYTHONPATH="$build/python" "$py" -m pytest -v \
            -p no:cacheprovider "$root/python/tests" >"$out/python.txt" 2>&1
        grep -E 'passed|failed|skipped|Error' "$out/python.txt" | tail -n 20 >>"$summary"
    else
        note "python     skipped: no pytest and numpy for ${py:-python3}"
    fi
fi

# ipcpipe from Python beside the C bench in the same run (python3 -m
# ipcpipe.bench, issue 28: Python and C alternating, 3 rounds, every byte
# checked), with the Python of the python step: host memory unbound and
# bound (per-call overhead at 8 bytes, bandwidth from 1 MiB), then GPU
# memory beside what a PyTorch user would otherwise write (a CUDA tensor
# shared with torch.multiprocessing plus copy_, and NCCL send/recv where
# there is a GPU per rank).  About 2 minutes on one H200.
pybench_run() {
    local pin
    for pin in "" --pin; do
        echo "## --mem host ${pin:-(unbound)}"
        PYTHONPATH="$build/python" "$py" -m ipcpipe.bench --mem host \
            --sizes "${PYBENCH_HOST_SIZES:-8,64K,1M,16M}" --timeout 150 \
            ${pin:+"$pin"} || return 1
    done
    echo "## --mem cuda"
    PYTHONPATH="$build/python" "$py" -m ipcpipe.bench --mem cuda \
        --sizes "${PYBENCH_SIZES:-8,64K,1M,16M,256M}" --timeout 150
}
if want pybench; then
    py=$(sed -n 's/^IPCPIPE_PYTHON:[A-Z]*=//p' "$build/CMakeCache.txt")
    if [ -n "$py" ] && "$py" -c 'import numpy' >/dev/null 2>&1; then
        step pybench pybench_run >"$out/pybench.txt" 2>&1
    else
        note "pybench    skipped: no numpy for ${py:-python3} (or no Python package built)"
    fi
fi

# Two ranks as two nodes (IPCPIPE_NODE) through ipcp_init_mpi: the remote
# path beside plain MPI on the same host buffers, device memory beside
# min(MPI host, pinned D2H, pinned H2D), and the stream-ordered calls
# beside the plain ones (NODES_SIZES: which sizes).
bench_nodes() { # its arguments
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        mpirun -np 2 --bind-to none "$build/tools/ipcpipe-bench-nodes" "$@" --reps 10
}
have_bench_nodes() {
    [ -x "$build/tools/ipcpipe-bench-nodes" ] && command -v mpirun >/dev/null
}
nodes_run() {
    local on
    for on in --ordered --on-node; do
        bench_nodes $on --sizes "${NODES_SIZES:-8,4K,64K,256K,1M,4M,16M,256M,1G}" || return 1
    done
}
# The settings of transfers with other nodes, in turns on one machine:
# host messages' IPCPIPE_REMOTE_INLINE (with the header as one message of
# two parts, or the header then the bytes contiguous) and device memory's
# staging piece IPCPIPE_REMOTE_CHUNK, and who makes the staging copies'
# driver calls, IPCPIPE_REMOTE_COPIES (each value twice; mpirun hands the
# ranks its environment).
remote_tune_run() {
    local set name values mem sizes v
    for set in "IPCPIPE_REMOTE_INLINE 64K,16K,8K host 16K,32K,64K,128K,256K" \
        "IPCPIPE_REMOTE_CHUNK 4M,1M,256K cuda 256K,1M,4M,16M" \
        "IPCPIPE_REMOTE_COPIES thread,caller cuda 64K,256K,1M"; do
        read -r name values mem sizes <<<"$set"
        for v in ${values//,/ } ${values//,/ }; do
            echo "## $name=$v"
            (export "$name=$v" && bench_nodes --mem "$mem" --sizes "$sizes") || return 1
        done
    done
}
if want remote-tune; then
    if have_bench_nodes; then
        step remote-tune remote_tune_run >"$out/remote-tune.txt" 2>&1
        grep -E '^##|ipcpipe (host|device)' "$out/remote-tune.txt" >>"$summary"
    else
        note "remote-tune skipped: no ipcpipe-bench-nodes (MPI not found) or no mpirun"
    fi
fi

if want nodes; then
    if have_bench_nodes; then
        step nodes nodes_run >"$out/nodes.txt" 2>&1
        cat "$out/nodes.txt" >>"$summary"
    else
        note "nodes      skipped: no ipcpipe-bench-nodes (MPI not found) or no mpirun"
    fi
fi

if want torch; then
    if python3 -c 'import torch' >/dev/null 2>&1; then
        step torch python3 "$root/scripts/torch_allocators.py" \
            "$build/src/libipcpipe.so" >"$out/torch.txt" 2>&1
        cat "$out/torch.txt" >>"$summary"
    else
        note "torch      skipped: this Python has no torch"
    fi
fi

# The README's test command as a user runs it on this machine (its own
# build trees; without the sanitizer builds and the fuzz stage, which CI
# runs and which take longer than one call): the normal build's tests,
# GPU tests among them, then the multi-process tests with the mailbox off
# and with each rank bound to one CPU.  Several minutes on 16 CPUs; with
# README_ONLY=all (then README_ONLY=mailbox-off,pinned) in two runs
# (scripts/test.sh's IPCPIPE_TEST_ONLY).
if want readme; then
    step readme env IPCPIPE_TEST_SANITIZERS=0 IPCPIPE_TEST_FUZZ=0 \
        ${README_ONLY:+IPCPIPE_TEST_ONLY=$README_ONLY} \
        IPCPIPE_BUILD_ROOT="$build/readme" "$root/scripts/test.sh" \
        >"$out/readme.txt" 2>&1
    grep -E '^== |tests passed|tests failed|\*\*\*' "$out/readme.txt" >>"$summary"
fi

note "gpu-check: $([ $fail -eq 0 ] && echo PASSED || echo FAILED)"

# The run's results file, named for the machine and the date (h200x2-
# 2026-12-06.txt: the GPU model, how many, the UTC date), as results/
# keeps them: the steps, the commit, the machine and every step's figures.
# A second run on one day appends to the same file.
model=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null |
    grep -oiE '\b[A-Z]{1,2}[0-9]{2,4}[A-Z]?\b' | head -n 1 | tr 'A-Z' 'a-z')
ngpu=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
name=${model:-nogpu}$([ "${ngpu:-0}" -gt 1 ] && echo "x$ngpu")-$(date -u +%F).txt
{
    echo "######## scripts/gpu-check.sh ${steps:1:-1} ($(date -u +%T) UTC)"
    cat "$out/machine.txt" "$summary"
} >>"$out/$name"
echo "results file: $out/$name"
exit $fail
