#!/bin/bash
# The tools' tests on a GPU (tools.*: the bench's --stream-wait ways,
# bench-ranks' tables with NCCL's rows or its reason, bench-nodes) with
# the heap/stack classification and cold-start tests, then bench-ranks'
# NCCL line on device memory, then the README's bench-nodes command;
# for a call with little device time left (~3-4 min).  PATCH names a
# patch of notes/probes applied to the copy first.  Log: $OUT/log.txt.
#   PATCH=ranks-nccl bash notes/probes/tools-gpu-call.sh
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
L=$OUT/log.txt
t0=$(date +%s); el() { echo "[$(($(date +%s) - t0)) s] $*" >> $L; }
{ date; nvidia-smi -L; git log --oneline -1 2>/dev/null || echo "commit: ${IPCPIPE_COMMIT:-unknown}"; } >> $L
rm -rf /tmp/t && mkdir /tmp/t && tar --exclude=./build --exclude=./.git -cf - . | (cd /tmp/t && tar xf -)
[ -n "${PATCH:-}" ] && { (cd /tmp/t && patch -p1 -s < notes/probes/$PATCH.patch); echo "patch $PATCH rc=$?" >> $L; }
cmake -S /tmp/t -B /tmp/t/b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIPCPIPE_WERROR=ON > /tmp/t.txt 2>&1 &&
  cmake --build /tmp/t/b -j16 >> /tmp/t.txt 2>&1; echo "build rc=$?" >> $L
el built
(cd /tmp/t/b && timeout 200 ctest -j4 -R "^tools\.|mpi.bench_nodes|common.heap|engine.cold" --output-on-failure 2>&1 |
  grep -E "tests passed|tests failed|\*\*\*Failed|\*\*\*Timeout|Failed\b|FAIL|Skipped" | head -40) >> $L
el tests
for n in 2 4; do
  echo "## ipcpipe-bench-ranks --mem cuda --ranks $n --pattern all2all --sizes 1M,16M --reps 3" >> $L
  timeout 60 /tmp/t/b/tools/ipcpipe-bench-ranks --mem cuda --ranks $n --pattern all2all --sizes 1M,16M --reps 3 >> $L 2>&1
done
el ranks
echo "## mpirun -np 2 --bind-to none ipcpipe-bench-nodes --ordered --sizes 8,4K,64K,256K,1M,4M,16M,256M --reps 10" >> $L
timeout 120 mpirun -np 2 --bind-to none /tmp/t/b/tools/ipcpipe-bench-nodes --ordered --sizes 8,4K,64K,256K,1M,4M,16M,256M --reps 10 >> $L 2>&1
el done
