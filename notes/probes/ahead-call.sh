#!/bin/bash
# Stream-ordered transfers of up to 64 KiB with other nodes moved ahead
# of their streams (issue 29): main (m) against main + ahead.patch (k:
# receives copied in by a kernel on their streams) and main +
# ahead.patch + ahead-nok.patch (a: receives copied in on ipcpipe's
# queue).
# k's MPI, remote and stream tests on the GPU (label gpu ones skip
# nothing here), then bench-nodes' device rows with the ordered calls, m,
# a and k in turns (~4-5 min).  Log: $OUT/log.txt.  Land ahead.patch
# once k's tests pass (ahead-nok.patch is for the A/B only).
#   bash notes/probes/ahead-call.sh
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
L=$OUT/log.txt
P=notes/probes
t0=$(date +%s); el() { echo "[$(($(date +%s) - t0)) s] $*" >> $L; }
{ date; nvidia-smi -L; git log --oneline -1 2>/dev/null || echo "commit: ${IPCPIPE_COMMIT:-unknown}"; } >> $L
rm -rf /tmp/m /tmp/a /tmp/k && mkdir -p /tmp/m
tar --exclude=./build --exclude=./.git -cf - . | tar -x -C /tmp/m
cp -a /tmp/m /tmp/k && (cd /tmp/k && patch -p1 -s < $P/ahead.patch); echo "patch k rc=$?" >> $L
cp -a /tmp/k /tmp/a && (cd /tmp/a && patch -p1 -s < $P/ahead-nok.patch); echo "patch a rc=$?" >> $L
for t in m a k; do
  cmake -S /tmp/$t -B /tmp/$t/b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIPCPIPE_WERROR=ON > /tmp/$t.txt 2>&1 &&
    cmake --build /tmp/$t/b -j16 >> /tmp/$t.txt 2>&1; echo "build $t rc=$?" >> $L
done
el built
(cd /tmp/k/b && timeout 300 ctest -j4 -R "^mpi\.|api.remote|cuda.stream|tools.bench_nodes" --output-on-failure 2>&1 |
  grep -E "tests passed|tests failed|\*\*\*Failed|\*\*\*Timeout|Failed\b|FAIL|Exception|Skipped" | head -60) >> $L
el tests
for turn in 1 2; do
  for t in m a k; do
    echo "## $t turn $turn: mpirun -np 2 --bind-to none ipcpipe-bench-nodes --mem cuda --ordered --sizes 8,4K,64K,256K --reps 10" >> $L
    timeout 90 mpirun -np 2 --bind-to none /tmp/$t/b/tools/ipcpipe-bench-nodes --mem cuda --ordered --sizes 8,4K,64K,256K --reps 10 >> $L 2>&1
  done
done
el done
