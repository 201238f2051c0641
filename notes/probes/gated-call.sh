#!/bin/bash
# What GPU-gated stream-ordered transfers would gain (issues 24 and 30):
# notes/probes/gated.cu (host-gated against stream-gated and kernel-gated
# copies, both ranks on the one GPU) beside ipcpipe-bench's stream case on
# the same sizes, unbound and each rank on one CPU, without and with the
# MPS daemon (started here, stopped at the end).  ~3 min.  Log:
# $OUT/log.txt.
#   bash notes/probes/gated-call.sh
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
L=$OUT/log.txt
t0=$(date +%s); el() { echo "[$(($(date +%s) - t0)) s] $*" >> $L; }
. notes/probes/mps.sh
{ date; nvidia-smi -L; echo "commit: ${IPCPIPE_COMMIT:-unknown}"; } >> $L
rm -rf /tmp/m && mkdir /tmp/m && tar --exclude=./build --exclude=./.git -cf - . | (cd /tmp/m && tar xf -)
cmake -S /tmp/m -B /tmp/m/b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF > /tmp/m.txt 2>&1 &&
  cmake --build /tmp/m/b -j16 --target ipcpipe-bench >> /tmp/m.txt 2>&1; echo "build bench rc=$?" >> $L
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
$NVCC -O2 -arch=native notes/probes/gated.cu $(mpicc -showme:compile) $(mpicc -showme:link) -lcuda -o /tmp/gated >> $L 2>&1; echo "build gated rc=$?" >> $L
el built
runs() {
  for pin in "" 1; do
    echo "## $1, gated ${pin:+PIN=1 (each rank on one CPU)}" >> $L
    timeout 60 mpirun -np 2 --bind-to none ${pin:+-x PIN=1} /tmp/gated 64 >> $L 2>&1
    echo "## $1, ipcpipe-bench --mem cuda --case stream --sizes 8,4K,64K,2M ${pin:+--pin}" >> $L
    timeout 60 /tmp/m/b/tools/ipcpipe-bench --mem cuda --case stream --sizes 8,4K,64K,2M ${pin:+--pin} 2>&1 | grep -E '^ +[0-9]|stream' >> $L
  done
}
runs "no MPS"
el nomps
mps_start
runs MPS
mps_stop
el done
