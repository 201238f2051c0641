#!/bin/bash
# Staged device windows (issue 29): how much of a window is the wake-up
# of threads that slept between windows?  main with IPCPIPE_SPIN_US
# 50 (default) against 2000, in turns; rx-stamps2 of both at 64K.
# Log: $OUT/log.txt.   bash notes/probes/spin-call.sh
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
L=$OUT/log.txt
t0=$(date +%s); el() { echo "[$(($(date +%s) - t0)) s] $*" >> $L; }
nvidia-smi -L >> $L
for v in m s; do
  rm -rf /tmp/$v && mkdir /tmp/$v && tar --exclude=./build --exclude=./.git -cf - . | (cd /tmp/$v && tar xf -)
  [ $v = s ] && (cd /tmp/$v && patch -p1 -s < notes/probes/rx-stamps2.patch) >> $L 2>&1
  (cmake -S /tmp/$v -B /tmp/$v/b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF > /tmp/$v.txt 2>&1 &&
   cmake --build /tmp/$v/b -j8 --target ipcpipe-bench-nodes >> /tmp/$v.txt 2>&1; echo "$v build rc=$?" >> $L) &
done
wait; el built
for turn in 1 2 3; do
  for sp in 50 2000; do
    echo "## spin $sp turn $turn" >> $L
    timeout 60 mpirun -np 2 --bind-to none -x IPCPIPE_SPIN_US=$sp /tmp/m/b/tools/ipcpipe-bench-nodes --mem cuda --sizes 64K,256K,1M,4M --reps 20 2>&1 | grep -E "ipcpipe device" >> $L
  done
done
el ab
for sp in 50 2000; do
  rm -f /tmp/rxst.*
  echo "## stamps spin $sp 64K" >> $L
  timeout 40 mpirun -np 2 --bind-to none -x IPCPIPE_SPIN_US=$sp /tmp/s/b/tools/ipcpipe-bench-nodes --mem cuda --sizes 64K --reps 20 2>&1 | grep -E "ipcpipe device" >> $L
  python3 notes/probes/rx_reps2.py 64 "/tmp/rxst.*" >> $L 2>&1
done
el done
