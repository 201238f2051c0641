#!/bin/sh
# mpi.remote.np4.die: rank 3 of a two-node job ends without a word while
# the others wait for it.  mpirun must end the job with a failing status
# well before the ranks' timeout, and whatever a rank says it was told
# before mpirun ends it must be IPCP_ERR_PEER_LOST (rank 1, on rank 3's
# node, usually says so first; a rank mpirun ends first says nothing).
#
#   die_check.sh MPIEXEC NPFLAG TEST_BINARY
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
t0=$(date +%s)
timeout 100 "$1" "$2" 4 "$3" 2 die >"$out" 2>&1
rc=$?
t=$(($(date +%s) - t0))
cat "$out"
echo "mpirun: exit $rc after $t s"
fail=0
if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$t" -ge 90 ]; then
    echo "FAIL: mpirun should end the job with a failing status within 90 s"
    fail=1
fi
told=$(grep -c 'a receive from rank 3' "$out")
wrong=$(grep 'a receive from rank 3' "$out" | grep -Evc 'returned IPCP_ERR_PEER_LOST \((peer )?rank 3 ')
if [ "$wrong" -ne 0 ]; then
    echo "FAIL: $wrong of $told ranks were told something else than that rank 3 was lost"
    fail=1
else
    echo "$told ranks said what they were told, all IPCP_ERR_PEER_LOST naming rank 3"
fi
exit $fail
