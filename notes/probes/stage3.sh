#!/bin/bash
# Run at 022af0f (call B of results/gpu-2026-12-07d.txt); looks.patch landed in cbe4f09.
# Staged device: the event thread's looks every 4 ops, stamped (s), and
# main (m) against looks (l) in turns.  Log: $OUT/log.txt
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
L=$OUT/log.txt
t0=$(date +%s); el() { echo "[$(($(date +%s) - t0)) s] $*" >> $L; }
nvidia-smi -L >> $L
ompi_info --param btl vader --level 9 2>/dev/null | grep -iE "single_copy|eager_limit|max_send" >> $L
ompi_info --param pml ob1 --level 9 2>/dev/null | grep -iE "use_early|rget|send_pipeline" >> $L
for v in s m l; do
  rm -rf /tmp/$v && mkdir /tmp/$v && tar --exclude=./build --exclude=./.git -cf - . | (cd /tmp/$v && tar xf -)
done
(cd /tmp/s && patch -p1 -s < notes/probes/rx-stamps.patch && patch -p1 -s < notes/probes/looks-stamps.patch) >> $L 2>&1
(cd /tmp/l && patch -p1 -s < notes/probes/looks.patch) >> $L 2>&1
for v in s m l; do
  (cmake -S /tmp/$v -B /tmp/$v/b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF > /tmp/$v.txt 2>&1 && cmake --build /tmp/$v/b -j5 --target ipcpipe-bench-nodes >> /tmp/$v.txt 2>&1; echo "$v build rc=$?" >> $L) &
done
wait; el built
for t in 1 2; do
  for sz in 64K 256K; do
    W=64; [ $sz = 256K ] && W=16
    rm -f /tmp/rxst.* /tmp/pollst.*
    echo "## stamps looks $sz" >> $L
    timeout 40 mpirun -np 2 --bind-to none /tmp/s/b/tools/ipcpipe-bench-nodes --mem cuda --sizes $sz --reps 20 2>&1 | grep -E "ipcpipe device|MPI host" >> $L
    python3 notes/probes/rx_reps.py $W "/tmp/rxst.*" "/tmp/pollst.*" >> $L 2>&1
  done
done
el stamps
for v in m l m l m l; do
  echo "## ab $v" >> $L
  timeout 60 mpirun -np 2 --bind-to none /tmp/$v/b/tools/ipcpipe-bench-nodes --mem cuda --sizes 64K,256K,1M --reps 20 2>&1 | grep -E "ipcpipe device" >> $L
done
el done
