#!/bin/bash
# Issue 24, stream-ordered rows bound against unbound under MPS, both ranks
# on the one GPU, by how the bench's ranks wait for their stream: unbound
# with cuStreamSynchronize (auto) and with a blocking-sync event, bound
# (--pin) polling and yielding (auto) and with the event.  TURNS (2) turns
# of each, in turns.  Log: $OUT/log.txt (appended).
#   bash notes/probes/wait-call.sh
set -u
L=$OUT/log.txt
t0=$(date +%s); el() { echo "[$(($(date +%s) - t0)) s] $*" >> $L; }
rm -rf /tmp/w && mkdir /tmp/w && tar --exclude=./build --exclude=./.git -cf - . | (cd /tmp/w && tar xf -)
cmake -S /tmp/w -B /tmp/w/b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF > /tmp/w.txt 2>&1 &&
  cmake --build /tmp/w/b -j16 --target ipcpipe-bench >> /tmp/w.txt 2>&1; echo "wait build rc=$?" >> $L
el built
nvidia-cuda-mps-control -d >> $L 2>&1; echo "MPS start rc=$?" >> $L
trap 'echo quit | nvidia-cuda-mps-control' EXIT
sleep 1
for t in $(seq ${TURNS:-2}); do
  for v in "unbound" "unbound --stream-wait event" "--pin" "--pin --stream-wait event"; do
    echo "## $v turn $t" >> $L
    timeout 40 /tmp/w/b/tools/ipcpipe-bench --mem cuda --case stream --sizes 8,4K,2M ${v#unbound} 2>&1 | grep -E '^ +[0-9]' >> $L
  done
done
echo quit | nvidia-cuda-mps-control; trap - EXIT; sleep 2
echo "## MPS stopped: $(pgrep -c nvidia-cuda-mps || true) MPS processes left" >> $L
el done
