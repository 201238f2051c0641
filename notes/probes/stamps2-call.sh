#!/bin/bash
# Staged 64 KiB windows with rx-stamps2 (notes/probes/rx-stamps2.patch: also when each copy was handed over and when its notify ran) at
# main after the coalesce merge (s), and the same with a send's call
# testing the oldest transfer (st, -DRX_POST_TEST): when each message's
# copy ended, when MPI finished it, when the receiver saw it.
# Log: $OUT/log.txt.   bash notes/probes/stamps2-call.sh
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
L=$OUT/log.txt
t0=$(date +%s); el() { echo "[$(($(date +%s) - t0)) s] $*" >> $L; }
nvidia-smi -L >> $L
for v in s st; do
  rm -rf /tmp/$v && mkdir /tmp/$v && tar --exclude=./build --exclude=./.git -cf - . | (cd /tmp/$v && tar xf -)
  (cd /tmp/$v && patch -p1 -s < notes/probes/rx-stamps2.patch && patch -p1 -s < notes/probes/post-test.patch) >> $L 2>&1
  F="-DCMAKE_C_FLAGS="; [ $v = st ] && F="-DCMAKE_C_FLAGS=-DRX_POST_TEST"
  (cmake -S /tmp/$v -B /tmp/$v/b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF "$F" > /tmp/$v.txt 2>&1 &&
   cmake --build /tmp/$v/b -j8 --target ipcpipe-bench-nodes >> /tmp/$v.txt 2>&1; echo "$v build rc=$?" >> $L) &
done
wait; el built
for t in 1 2; do
  for v in s st; do
    for sz in 64K 256K; do
      W=64; [ $sz = 256K ] && W=16
      rm -f /tmp/rxst.*
      echo "## $v $sz turn $t" >> $L
      timeout 40 mpirun -np 2 --bind-to none /tmp/$v/b/tools/ipcpipe-bench-nodes --mem cuda --sizes $sz --reps 20 2>&1 | grep -E "ipcpipe device|MPI host" >> $L
      python3 notes/probes/rx_reps2.py $W "/tmp/rxst.*" >> $L 2>&1
    done
  done
done
el done
