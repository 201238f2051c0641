#!/bin/bash
# Branch heap-host (notes/probes/heap-host.patch: a host buffer in the brk
# heap classified without the CUDA driver's pointer query) against main,
# issue 29's host rows: its remote and heap tests, then bench-nodes with
# both memory kinds in one process (as the README's run) and host only,
# main (m) and the branch (h) in turns.  Log: $OUT/log.txt.
#   bash notes/probes/heap-call.sh
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
L=$OUT/log.txt
t0=$(date +%s); el() { echo "[$(($(date +%s) - t0)) s] $*" >> $L; }
nvidia-smi -L >> $L
for v in m h; do
  rm -rf /tmp/$v && mkdir /tmp/$v && tar --exclude=./build --exclude=./.git -cf - . | (cd /tmp/$v && tar xf -)
done
# PATCH names another branch's patch measured the same way (stack-call.sh).
(cd /tmp/h && patch -p1 -s < notes/probes/${PATCH:-heap-host}.patch) >> $L 2>&1
(cmake -S /tmp/m -B /tmp/m/b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF > /tmp/m.txt 2>&1 &&
 cmake --build /tmp/m/b -j4 --target ipcpipe-bench-nodes >> /tmp/m.txt 2>&1; echo "m build rc=$?" >> $L) &
cmake -S /tmp/h -B /tmp/h/b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIPCPIPE_WERROR=ON > /tmp/h.txt 2>&1 &&
  cmake --build /tmp/h/b -j12 >> /tmp/h.txt 2>&1; echo "h build rc=$?" >> $L
wait; el built
(cd /tmp/h/b && timeout 240 ctest -j4 -R "common.heap|engine.cold|api.remote|mpi.remote|mpi.bench_nodes|cuda.sendrecv.*host" --output-on-failure 2>&1 |
  grep -E "tests passed|tests failed|\*\*\*Failed|\*\*\*Timeout|Failed\b" | head -40) >> $L
el tests
for t in 1 2 3; do
  for v in m h; do
    echo "## $v both kinds, turn $t" >> $L
    timeout 90 mpirun -np 2 --bind-to none /tmp/$v/b/tools/ipcpipe-bench-nodes --sizes 8,64K,128K,256K --reps 20 2>&1 | grep -E "host|latency" >> $L
    echo "## $v --mem host, turn $t" >> $L
    timeout 60 mpirun -np 2 --bind-to none /tmp/$v/b/tools/ipcpipe-bench-nodes --mem host --sizes 8,64K,128K,256K --reps 20 2>&1 | grep -E "host|latency" >> $L
  done
done
el done
