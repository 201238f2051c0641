#!/bin/bash
# Issue 24, stream-ordered bound: does a waiting caller that sleeps at
# once (IPCPIPE_SPIN_US=0) instead of taking yield turns with the
# progress thread bring bound nearer unbound?  Under MPS (started here,
# stopped at the end), default spin against 0, bound and unbound, three
# turns.  Log: $OUT/log.txt (appended).   bash notes/probes/bound-spin-call.sh
set -u
L=$OUT/log.txt
t0=$(date +%s); el() { echo "[$(($(date +%s) - t0)) s] $*" >> $L; }
rm -rf /tmp/bs && mkdir /tmp/bs && tar --exclude=./build --exclude=./.git -cf - . | (cd /tmp/bs && tar xf -)
cmake -S /tmp/bs -B /tmp/bs/b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF > /tmp/bs.txt 2>&1 &&
  cmake --build /tmp/bs/b -j16 --target ipcpipe-bench >> /tmp/bs.txt 2>&1; echo "bound-spin build rc=$?" >> $L
nvidia-cuda-mps-control -d >> $L 2>&1; echo "MPS start rc=$?" >> $L
trap 'echo quit | nvidia-cuda-mps-control' EXIT
sleep 1
for t in 1 2 3; do
  for sp in 50 0; do
    for pin in "" --pin; do
      echo "## MPS spin $sp ${pin:-unbound} turn $t" >> $L
      IPCPIPE_SPIN_US=$sp timeout 40 /tmp/bs/b/tools/ipcpipe-bench --mem cuda --case stream --case auto --sizes 8,4K,2M $pin 2>&1 | grep -E '^ +[0-9]' >> $L
    done
  done
done
echo quit | nvidia-cuda-mps-control; trap - EXIT; sleep 2
echo "## MPS stopped: $(pgrep -c nvidia-cuda-mps || true) MPS processes left" >> $L
el bound-spin
