#!/bin/bash
# One device call for the staged path (issue 29): plain MPI over hot,
# evicted and copy-engine buffers (mpi_cold.c), then the stamped windows
# (stamps-call.sh, 64K).  Log: $OUT/log.txt.
#   bash notes/probes/staged-next.sh
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
L=$OUT/log.txt
mpicc -O2 notes/probes/mpi_cold.c -I/usr/local/cuda/include \
    -L/usr/local/cuda/lib64 -lcuda -o /tmp/mpi_cold >> $L 2>&1
for t in 1 2; do
    echo "## mpi_cold turn $t" >> $L
    timeout 120 mpirun -np 2 --bind-to none /tmp/mpi_cold >> $L 2>&1
done
bash notes/probes/stamps-call.sh
