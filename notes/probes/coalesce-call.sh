#!/bin/bash
# One device call for branch staged-coalesce (notes/probes/coalesce.patch:
# a run of one queue's short copies and notifies as one cuMemcpyBatchAsync
# and one event): its CUDA and remote tests, then main (m) against it (c)
# in turns.  Log: $OUT/log.txt.
#   bash notes/probes/coalesce-call.sh
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
L=$OUT/log.txt
t0=$(date +%s); el() { echo "[$(($(date +%s) - t0)) s] $*" >> $L; }
nvidia-smi -L >> $L
for v in m c; do
  rm -rf /tmp/$v && mkdir /tmp/$v && tar --exclude=./build --exclude=./.git -cf - . | (cd /tmp/$v && tar xf -)
done
(cd /tmp/c && patch -p1 -s < notes/probes/coalesce.patch) >> $L 2>&1
(cmake -S /tmp/m -B /tmp/m/b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF > /tmp/m.txt 2>&1 &&
 cmake --build /tmp/m/b -j4 --target ipcpipe-bench-nodes >> /tmp/m.txt 2>&1; echo "m build rc=$?" >> $L) &
cmake -S /tmp/c -B /tmp/c/b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIPCPIPE_WERROR=ON > /tmp/c.txt 2>&1 &&
  cmake --build /tmp/c/b -j12 >> /tmp/c.txt 2>&1; echo "c build rc=$?" >> $L
wait; el built
(cd /tmp/c/b && timeout 240 ctest -j4 -R "cuda.backend|cuda.sendrecv.*staged|api.remote|mpi.remote|mpi.bench_nodes" --output-on-failure 2>&1 |
  grep -E "tests passed|tests failed|\*\*\*Failed|\*\*\*Timeout|Failed\b" | head -40) >> $L
el tests
for v in m c m c m c; do
  echo "## ab $v" >> $L
  timeout 60 mpirun -np 2 --bind-to none /tmp/$v/b/tools/ipcpipe-bench-nodes --mem cuda --sizes 64K,256K,1M,4M --reps 20 2>&1 | grep -E "ipcpipe device" >> $L
done
el done
