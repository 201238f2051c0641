#!/bin/bash
# The first device call of the session after 2026-12-07 (fourth), about
# 4 minutes: branch heap-host against main (heap-call.sh), stream-ordered
# bound with callers that sleep at once (bound-spin-call.sh), and plain
# MPI with a cap on sends in flight (mpi_pace.c).  Log: $OUT/log.txt.
#   bash notes/probes/next-call.sh
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bash notes/probes/heap-call.sh
bash notes/probes/bound-spin-call.sh
L=$OUT/log.txt
mpicc -O2 notes/probes/mpi_pace.c -o /tmp/mpi_pace >> $L 2>&1
for t in 1 2; do
  echo "## mpi_pace $t" >> $L
  timeout 60 mpirun -np 2 --bind-to none /tmp/mpi_pace >> $L 2>&1
done
# ipcpipe-bench-ranks (issue 31) on the one GPU: its test, and a run of
# four ranks sharing it.
(cd /tmp/h/b && timeout 120 ctest -R bench_ranks --output-on-failure 2>&1 | tail -15) >> $L
echo "## bench-ranks 4 ranks cuda" >> $L
timeout 120 /tmp/h/b/tools/ipcpipe-bench-ranks --mem cuda --ranks 4 --sizes 1M,64M --reps 3 >> $L 2>&1
echo "bench-ranks rc=$?" >> $L
# PCI topology (issue 31): ipcpipe-info's GPU part and its tests.
(cd /tmp/h/b && timeout 60 ctest -R "common.info.mps|common.pcitopo" --output-on-failure 2>&1 | tail -25) >> $L
/tmp/h/b/tools/ipcpipe-info | sed -n '/^GPUs:/,$p' | head -30 >> $L
