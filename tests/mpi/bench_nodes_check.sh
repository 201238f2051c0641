#!/bin/sh
# mpi.bench_nodes: ipcpipe-bench-nodes on host memory, as docs/tools.md
# runs it.  Two ranks standing for two nodes: every size's ipcpipe row
# carries a ratio to MPI's and "verified" (the bench stops, failing, on a
# byte that differs or a transfer that did not take the remote path),
# beside MPI's row; both latency rows; then --on-node: ipcp_init_mpi's job
# beside ipcp_init's on one node, verified.  Formats and counts only,
# never timing values.
#
#   bench_nodes_check.sh MPIEXEC NPFLAG BENCH
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
fail=0
count() { grep -c "$1" "$out"; }
expect() { # what, pattern, count
    n=$(count "$2")
    if [ "$n" -ne "$3" ]; then
        echo "FAIL: $1: $n lines match '$2', expected $3"
        fail=1
    fi
}
timeout 200 "$1" "$2" 2 "$3" --mem host --sizes 8,64K,1M --reps 3 \
    --rounds 200 >"$out" 2>&1
rc=$?
cat "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: exit $rc"; fail=1; }
expect header '^ipcpipe .*two ranks on two nodes (IPCPIPE_NODE)' 1
expect "MPI rows" '^MPI host  *[0-9]' 3
expect "ipcpipe rows" '^ipcpipe host  *[0-9].* GB/s .*x MPI  verified$' 3
expect "MPI latency" '^MPI latency  *8 .* us .*half round trip$' 1
expect "ipcpipe latency" '^ipcpipe latency  *8 .* us .* us vs MPI$' 1
timeout 200 "$1" "$2" 2 "$3" --mem host --sizes 64K --reps 3 --rounds 0 \
    --on-node >"$out" 2>&1
rc=$?
cat "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: --on-node: exit $rc"; fail=1; }
expect "--on-node rows" 'x ipcp_init  verified$' 1
exit $fail
