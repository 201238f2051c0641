#!/bin/bash
# Staged device messages to another node (issue 29): does a header leave
# at any step of a send to its peer (notes/probes/prompt-flush.patch, c),
# and with a send's call testing the oldest transfer too (cst, with
# notes/probes/post-test.patch, -DRX_POST_TEST), move the window's end
# earlier than main (m)?  bench-nodes in turns, then rx-stamps2 of c and
# cst.  Log: $OUT/log.txt.   bash notes/probes/flush-call.sh
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
L=$OUT/log.txt
t0=$(date +%s); el() { echo "[$(($(date +%s) - t0)) s] $*" >> $L; }
nvidia-smi -L >> $L
for v in m c cst sc scst; do
  rm -rf /tmp/$v && mkdir /tmp/$v && tar --exclude=./build --exclude=./.git -cf - . | (cd /tmp/$v && tar xf -)
  case $v in s*) (cd /tmp/$v && patch -p1 -s < notes/probes/rx-stamps2.patch) >> $L 2>&1 ;; esac
  case $v in m) ;; *) (cd /tmp/$v && patch -p1 -s < notes/probes/prompt-flush.patch && patch -p1 -s < notes/probes/post-test.patch) >> $L 2>&1 ;; esac
  F="-DCMAKE_C_FLAGS="; case $v in *cst) F="-DCMAKE_C_FLAGS=-DRX_POST_TEST" ;; esac
  (cmake -S /tmp/$v -B /tmp/$v/b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF "$F" > /tmp/$v.txt 2>&1 &&
   cmake --build /tmp/$v/b -j3 --target ipcpipe-bench-nodes >> /tmp/$v.txt 2>&1; echo "$v build rc=$?" >> $L) &
done
wait; el built
for turn in 1 2 3; do
  for v in m c cst; do
    echo "## $v cuda turn $turn" >> $L
    timeout 60 mpirun -np 2 --bind-to none /tmp/$v/b/tools/ipcpipe-bench-nodes --mem cuda --sizes 64K,256K,1M,4M --reps 20 2>&1 | grep -E "ipcpipe device" >> $L
  done
done
el ab
for v in sc scst; do
  for sz in 64K 256K; do
    W=64; [ $sz = 256K ] && W=16
    rm -f /tmp/rxst.*
    echo "## stamps $v $sz" >> $L
    timeout 40 mpirun -np 2 --bind-to none /tmp/$v/b/tools/ipcpipe-bench-nodes --mem cuda --sizes $sz --reps 20 2>&1 | grep -E "ipcpipe device" >> $L
    python3 notes/probes/rx_reps2.py $W "/tmp/rxst.*" >> $L 2>&1
  done
done
el done
