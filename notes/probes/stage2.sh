#!/bin/bash
# Run at 4e2522a (call A of results/gpu-2026-12-07d.txt).
# Staged device timeline per rep (rx-stamps + poll-stamps), thread and
# caller copies; bound/unbound device bench, thread schedstats, pointer-query costs.  Log: $OUT/log.txt
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
L=$OUT/log.txt
t0=$(date +%s); el() { echo "[$(($(date +%s) - t0)) s] $*" >> $L; }
nvidia-smi -L >> $L
for v in s m; do
  rm -rf /tmp/$v && mkdir /tmp/$v && tar --exclude=./build --exclude=./.git -cf - . | (cd /tmp/$v && tar xf -)
done
(cd /tmp/s && patch -p1 -s < notes/probes/rx-stamps.patch && patch -p1 -s < notes/probes/poll-stamps.patch) >> $L 2>&1
for v in s:ipcpipe-bench-nodes m:ipcpipe-bench; do
  (cmake -S /tmp/${v%:*} -B /tmp/${v%:*}/b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF > /tmp/${v%:*}.txt 2>&1 && cmake --build /tmp/${v%:*}/b -j8 --target ${v#*:} >> /tmp/${v%:*}.txt 2>&1; echo "$v build rc=$?" >> $L) &
done
wait; el built
for cp in thread caller thread caller; do
  for sz in 64K 256K; do
    W=64; [ $sz = 256K ] && W=16
    rm -f /tmp/rxst.* /tmp/pollst.*
    echo "## stamps copies=$cp $sz" >> $L
    timeout 40 mpirun -np 2 --bind-to none -x IPCPIPE_REMOTE_COPIES=$cp /tmp/s/b/tools/ipcpipe-bench-nodes --mem cuda --sizes $sz --reps 20 2>&1 | grep -E "ipcpipe device|MPI host" >> $L
    python3 notes/probes/rx_reps.py $W "/tmp/rxst.*" "/tmp/pollst.*" >> $L 2>&1
  done
done
el stamps
for pin in "" --pin "" --pin; do
  echo "## bench --mem cuda ${pin:-unbound}" >> $L
  timeout 40 /tmp/m/b/tools/ipcpipe-bench --mem cuda --case auto --case stream --sizes 8,4K,2M $pin 2>&1 | grep -E '^ +[0-9]' >> $L
done
echo "## threads, --pin, 8,4K" >> $L
timeout 60 bash notes/probes/threads.sh /tmp/m/b/tools/ipcpipe-bench --mem cuda --case stream --sizes 8,4K --pin >> $L 2>&1
el bound
gcc -O2 notes/probes/ptrcost.c -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcuda -o /tmp/ptrcost >> $L 2>&1 && /tmp/ptrcost >> $L 2>&1
el done
