#!/bin/bash
# A device call for branch cuda-next: IPCPIPE_CUDA_SCHED fixed,
# the poller's looks between ops: tests, bound keep/yield, staged A/B
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
t0=$(date +%s); el() { echo "[$(($(date +%s) - t0)) s] $*" >> $OUT/log.txt; }
# s1: every op handed over first (the old way); s2: a look after each op
(for v in s1:100000 ${LITE-s2:1}; do
   cmake -S . -B build/${v%:*} -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF "-DCMAKE_C_FLAGS=-DCUDA_OPS_PER_LOOK=${v#*:}" >> /tmp/build1.txt 2>&1 &&
   cmake --build build/${v%:*} -j3 --target ipcpipe-bench-nodes >> /tmp/build1.txt 2>&1; echo "${v%:*} rc=$?" >> /tmp/build1.txt
 done) &
cmake -S . -B build/s -DCMAKE_BUILD_TYPE=RelWithDebInfo > /tmp/build.txt 2>&1 &&
cmake --build build/s -j10 --target test_cuda_backend ipcpipe-bench >> /tmp/build.txt 2>&1; el build rc=$?
(cd build/s && timeout 30 ctest -R "cuda.backend.sched" --output-on-failure 2>&1 | grep -E "Test +#|tests passed|FAIL" ) >> $OUT/log.txt
el sched tests done
for run in --pin:keep --pin:yield :keep --pin:yield; do
  pin=${run%:*} sched=${run#*:}
  echo "## --mem cuda ${pin:-(unbound)} IPCPIPE_CUDA_SCHED=$sched" >> $OUT/log.txt
  IPCPIPE_CUDA_SCHED=$sched timeout 30 build/s/tools/ipcpipe-bench --mem cuda --case auto --case stream --sizes ${PIN_SIZES:-8,4K,2M} $pin 2>&1 | grep -E '^ +[0-9]' >> $OUT/log.txt
  el run done
done
cmake --build build/s -j16 --target test_remote_mpi_cuda ipcpipe-bench-nodes >> /tmp/build.txt 2>&1; el build2 rc=$?
wait; grep -E "^s[12] rc=" /tmp/build1.txt >> $OUT/log.txt
(cd build/s && timeout 60 ctest -R "mpi.remote.cuda" --output-on-failure 2>&1 | grep -E "Test +#|tests passed|FAIL") >> $OUT/log.txt
el remote tests done
for v in s s1 ${LITE-s2} s s1 ${LITE-s2}; do
  echo "## $v" >> $OUT/log.txt
  timeout 30 mpirun -np 2 --bind-to none build/$v/tools/ipcpipe-bench-nodes --mem cuda --sizes 64K,256K,1M,4M --reps 10 2>&1 | grep -E "ipcpipe device|MPI host" >> $OUT/log.txt
done
el ab done
cat $OUT/log.txt
