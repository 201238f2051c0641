#!/bin/bash
# The README's bench-nodes table at the working tree's commit: one
# Release build, then the command the README names (medians of 10).
# Log: $OUT/log.txt.   bash notes/probes/readme-nodes-call.sh
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
L=$OUT/log.txt
t0=$(date +%s); el() { echo "[$(($(date +%s) - t0)) s] $*" >> $L; }
nvidia-smi -L >> $L
rm -rf /tmp/r && mkdir /tmp/r && tar --exclude=./build --exclude=./.git -cf - . | (cd /tmp/r && tar xf -)
cmake -S /tmp/r -B /tmp/r/b -DCMAKE_BUILD_TYPE=Release > /tmp/r.txt 2>&1 &&
  cmake --build /tmp/r/b -j16 --target ipcpipe-bench-nodes >> /tmp/r.txt 2>&1; echo "build rc=$?" >> $L
el built
echo "## mpirun -np 2 --bind-to none ipcpipe-bench-nodes --ordered --sizes 8,4K,64K,256K,1M,4M,16M,256M --reps 10" >> $L
timeout 150 mpirun -np 2 --bind-to none /tmp/r/b/tools/ipcpipe-bench-nodes --ordered --sizes 8,4K,64K,256K,1M,4M,16M,256M --reps 10 >> $L 2>&1
el done
