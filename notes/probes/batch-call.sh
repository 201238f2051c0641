#!/bin/bash
# The poller's batched copies (notes/probes/poll-batch.patch applied;
# CUDA_POLL_BATCH 32, the default) against one
# call a copy (1) and batches of 8: remote tests, staged A/B, threads.
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
L=$OUT/log.txt
t0=$(date +%s); el() { echo "[$(($(date +%s) - t0)) s] $*" >> $L; }
echo "commit ${IPCPIPE_COMMIT:-?} $(nvidia-smi -L)" >> $L
(for v in b1:1 b8:8; do
   cmake -S . -B build/${v%:*} -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF "-DCMAKE_C_FLAGS=-DCUDA_POLL_BATCH=${v#*:}" >> /tmp/build1.txt 2>&1 &&
   cmake --build build/${v%:*} -j4 --target ipcpipe-bench-nodes >> /tmp/build1.txt 2>&1; echo "${v%:*} rc=$?" >> /tmp/build1.txt
 done) &
cmake -S . -B build/t -DCMAKE_BUILD_TYPE=RelWithDebInfo > /tmp/build.txt 2>&1 &&
cmake --build build/t -j12 --target test_api_remote test_remote_mpi test_remote_mpi_cuda ipcpipe-bench-nodes >> /tmp/build.txt 2>&1; el build rc=$?
grep -E "error|warning" /tmp/build.txt | head >> $L
(cd build/t && timeout 200 ctest -R "api.remote|mpi.remote|mpi.bench_nodes" --output-on-failure 2>&1 | grep -E "Test +#|tests passed|FAIL|rror" | head -60) >> $L
el tests done
wait; grep -E "^b[18] rc=" /tmp/build1.txt >> $L
for v in t b1 b8 t b1 b8; do
  echo "## $v" >> $L
  timeout 40 mpirun -np 2 --bind-to none build/$v/tools/ipcpipe-bench-nodes --mem cuda --sizes 64K,256K,1M,4M --reps 10 2>&1 | grep -E "ipcpipe device|MPI host|pinned" >> $L
done
el ab done
for v in t b1; do
  echo "## threads $v 64K reps 200" >> $L
  timeout 60 bash notes/probes/threads.sh mpirun -np 2 --bind-to none build/$v/tools/ipcpipe-bench-nodes --mem cuda --sizes 64K --reps 200 2>&1 | grep -E "ipcpipe device|MPI host|ipcp|bench-n" | grep -v "run 0 ms" >> $L
done
el done
