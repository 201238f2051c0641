#!/bin/bash
# Issue 24's bound/unbound table at main, both ranks on the one GPU:
# TURNS (4) turns each of unbound and --pin, without and with the MPS daemon
# (started here, stopped at the end).  Log: $OUT/log.txt.
#   bash notes/probes/bound-table-call.sh
set -u
L=$OUT/log.txt
t0=$(date +%s); el() { echo "[$(($(date +%s) - t0)) s] $*" >> $L; }
. notes/probes/mps.sh
nvidia-smi -L >> $L
rm -rf /tmp/m && mkdir /tmp/m && tar --exclude=./build --exclude=./.git -cf - . | (cd /tmp/m && tar xf -)
cmake -S /tmp/m -B /tmp/m/b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF > /tmp/m.txt 2>&1 &&
  cmake --build /tmp/m/b -j16 --target ipcpipe-bench >> /tmp/m.txt 2>&1; echo "build rc=$?" >> $L
el built
runs() {
  for t in $(seq ${TURNS:-4}); do
    for pin in "" --pin; do
      echo "## $1 ${pin:-unbound} turn $t" >> $L
      timeout 40 /tmp/m/b/tools/ipcpipe-bench --mem cuda --case auto --case stream --sizes 8,4K,2M $pin 2>&1 | grep -E '^ +[0-9]' >> $L
    done
  done
}
runs "no MPS"
el nomps
mps_start
runs MPS
mps_stop
el done
