#!/bin/bash
# Stamped staged transfers: main against the poller's looks after every 4
# ops (cuda-next's 3d5554e), sizes SZ (default 64K), in turns a b a b.
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
L=$OUT/log.txt
t0=$(date +%s); el() { echo "[$(($(date +%s) - t0)) s] $*" >> $L; }
nvidia-smi -L >> $L
for v in a b; do
  rm -rf /tmp/$v && mkdir /tmp/$v && tar --exclude=./build --exclude=./.git -cf - . | (cd /tmp/$v && tar xf -)
  (cd /tmp/$v && git apply --unsafe-paths notes/probes/rx-stamps.patch 2>>$L || patch -p1 -s < notes/probes/rx-stamps.patch) >> $L 2>&1
done
(cd /tmp/b && patch -p1 -s < notes/probes/looks.patch) >> $L 2>&1
for v in a b; do
  (cmake -S /tmp/$v -B /tmp/$v/b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF > /tmp/$v.txt 2>&1 && cmake --build /tmp/$v/b -j8 --target ipcpipe-bench-nodes >> /tmp/$v.txt 2>&1; echo "$v build rc=$?" >> $L) &
done
wait; el built
for v in a b a b; do
  for sz in ${SZ:-64K}; do
    rm -f /tmp/rxst.*
    echo "## $v $sz" >> $L
    timeout 40 mpirun -np 2 --bind-to none /tmp/$v/b/tools/ipcpipe-bench-nodes --mem cuda --sizes $sz --reps 20 2>&1 | grep -E "ipcpipe device" >> $L
    python3 notes/probes/rx_stamps.py "/tmp/rxst.*" 2>&1 | grep -v gap >> $L; python3 notes/probes/rx_windows.py "/tmp/rxst.*" >> $L 2>&1
  done
done
el done
