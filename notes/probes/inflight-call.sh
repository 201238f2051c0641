#!/bin/bash
# notes/probes/inflight.patch (a cap on channel-0 messages in flight to a
# peer, IPCPIPE_REMOTE_INFLIGHT) against main, issue 29's staged device
# rows: bench-nodes --mem cuda with caps 0 (main), 4, 8 and 16, in turns,
# two turns (~4 min).  Log: $OUT/log.txt (appended).
#   bash notes/probes/inflight-call.sh
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
L=$OUT/log.txt
t0=$(date +%s); el() { echo "[$(($(date +%s) - t0)) s] $*" >> $L; }
for v in m i; do
  rm -rf /tmp/$v && mkdir /tmp/$v && tar --exclude=./build --exclude=./.git -cf - . | (cd /tmp/$v && tar xf -)
done
(cd /tmp/i && patch -p1 -s < notes/probes/inflight.patch) >> $L 2>&1
for v in m i; do
  (cmake -S /tmp/$v -B /tmp/$v/b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF > /tmp/$v.txt 2>&1 &&
   cmake --build /tmp/$v/b -j8 --target ipcpipe-bench-nodes >> /tmp/$v.txt 2>&1; echo "$v build rc=$?" >> $L) &
done
wait; el built
for t in 1 2; do
  for c in 0 4 8 16; do
    v=i; [ $c = 0 ] && v=m
    echo "## $v cap $c turn $t" >> $L
    IPCPIPE_REMOTE_INFLIGHT=$c timeout 90 mpirun -np 2 --bind-to none /tmp/$v/b/tools/ipcpipe-bench-nodes \
      --mem cuda --sizes 64K,256K,1M --reps 20 --rounds 0 2>&1 | grep -E "device|MPI host" >> $L
  done
done
el done
