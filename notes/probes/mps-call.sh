#!/bin/bash
# Both ranks on the one GPU: are staged device transfers (bench-nodes)
# and bound/unbound device cases held by the two processes' contexts
# taking turns on the GPU?  The same builds without and with the MPS
# daemon (started here, stopped at the end), in one call: bench-nodes
# --mem cuda, rx-stamps of 64K/256K windows (notes/probes/rx-stamps.patch),
# ipcpipe-bench bound/unbound.  Log: $OUT/log.txt.
#   bash notes/probes/mps-call.sh
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
L=$OUT/log.txt
t0=$(date +%s); el() { echo "[$(($(date +%s) - t0)) s] $*" >> $L; }
nvidia-smi -L >> $L
for v in m s; do
  rm -rf /tmp/$v && mkdir /tmp/$v && tar --exclude=./build --exclude=./.git -cf - . | (cd /tmp/$v && tar xf -)
  [ $v = s ] && (cd /tmp/s && patch -p1 -s < notes/probes/rx-stamps.patch) >> $L 2>&1
  (cmake -S /tmp/$v -B /tmp/$v/b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF > /tmp/$v.txt 2>&1 &&
   cmake --build /tmp/$v/b -j8 --target ipcpipe-bench-nodes ipcpipe-bench ipcpipe-info >> /tmp/$v.txt 2>&1; echo "$v build rc=$?" >> $L) &
done
wait; el built
nodes() { timeout 60 mpirun -np 2 --bind-to none /tmp/m/b/tools/ipcpipe-bench-nodes --mem cuda --sizes 64K,256K,1M,4M,16M --reps 20 2>&1 | grep -E "ipcpipe device|MPI host|pinned" >> $L; }
stamps() {
  for sz in 64K 256K; do
    W=64; [ $sz = 256K ] && W=16
    rm -f /tmp/rxst.*
    echo "## stamps $sz $1" >> $L
    timeout 40 mpirun -np 2 --bind-to none /tmp/s/b/tools/ipcpipe-bench-nodes --mem cuda --sizes $sz --reps 20 2>&1 | grep -E "ipcpipe device" >> $L
    python3 notes/probes/rx_reps.py $W "/tmp/rxst.*" "/tmp/none.*" >> $L 2>&1
  done
}
bound() {
  for pin in "" --pin "" --pin; do
    echo "## bench --mem cuda ${pin:-unbound} $1" >> $L
    timeout 40 /tmp/m/b/tools/ipcpipe-bench --mem cuda --case auto --case stream --sizes 8,4K,2M $pin 2>&1 | grep -E '^ +[0-9]' >> $L
  done
}
echo "## no MPS: bench-nodes" >> $L; nodes; stamps "no MPS"
nvidia-cuda-mps-control -d >> $L 2>&1; echo "MPS start rc=$?" >> $L
trap 'echo quit | nvidia-cuda-mps-control' EXIT
sleep 1
/tmp/m/b/tools/ipcpipe-info 2>&1 | grep -i mps >> $L
for t in 1 2 3; do echo "## MPS: bench-nodes turn $t" >> $L; nodes; done
stamps MPS
bound MPS
el mps
echo quit | nvidia-cuda-mps-control; trap - EXIT; sleep 2
echo "## MPS stopped: $(pgrep -c nvidia-cuda-mps || true) MPS processes left" >> $L
echo "## no MPS: bench-nodes again" >> $L; nodes
bound "no MPS"
el done
