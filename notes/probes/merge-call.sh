#!/bin/bash
# One device call after a change to CUDA code on main: the README's test
# command (all) at IPCPIPE_COMMIT, then bench-nodes (device and host rows,
# three turns), plain MPI with paced posts (notes/probes/mpi_pace.c), and
# the threads of a bound auto 4 KiB run.  Log: $OUT/log.txt.
#   IPCPIPE_COMMIT=<sha> bash notes/probes/merge-call.sh
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
L=$OUT/log.txt
bash notes/probes/readme-call.sh all
t0=$(date +%s); el() { echo "[$(($(date +%s) - t0)) s] $*" >> $L; }
# The normal build of the README's command (scripts/test.sh under gpu-check).
B=$(dirname "$(dirname "$(find "$PWD/build/gpu/readme" -path '*/tools/ipcpipe-bench-nodes' -type f | head -1)")")
echo "## bench from $B" >> $L
for turn in 1 2 3; do
  echo "## bench-nodes --mem cuda, turn $turn" >> $L
  timeout 60 mpirun -np 2 --bind-to none $B/tools/ipcpipe-bench-nodes --mem cuda --sizes 64K,256K,1M,4M --reps 20 >> $L 2>&1
  echo "## bench-nodes --mem host, turn $turn" >> $L
  timeout 60 mpirun -np 2 --bind-to none $B/tools/ipcpipe-bench-nodes --mem host --sizes 8,64K,128K,256K,1M --reps 20 >> $L 2>&1
done
el bench
mpicc -O2 notes/probes/mpi_pace.c -o /tmp/mpi_pace >> $L 2>&1
for t in 1 2; do
  echo "## mpi_pace $t" >> $L
  timeout 60 mpirun -np 2 --bind-to none /tmp/mpi_pace >> $L 2>&1
done
el pace
echo "## threads, auto 4K --pin" >> $L
timeout 60 bash notes/probes/threads.sh $B/tools/ipcpipe-bench --mem cuda --case auto --sizes 4K --pin 2>&1 | grep -E "^pid|^ +[0-9]" >> $L
echo "## threads, auto 4K unbound" >> $L
timeout 60 bash notes/probes/threads.sh $B/tools/ipcpipe-bench --mem cuda --case auto --sizes 4K 2>&1 | grep -E "^pid|^ +[0-9]" >> $L
el done
