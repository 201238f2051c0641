#!/bin/bash
# Stream-ordered transfers of up to 64 KiB with other nodes moved ahead
# of their streams (issue 29): main + ahead.patch (k) built, its MPI,
# remote and stream tests on the GPU (--timeout a test, so that a hang
# names its test), then, if they all passed, the README's bench-nodes
# command on k for the README's table.  AB="m a k" adds bench-nodes'
# ordered device rows of main (m), k and k + ahead-nok.patch (a: the
# queue copies instead of the kernel) in turns (+2-3 min).  STAMPS=1
# adds k + ahead-stamps.patch (s): the ordered rows with each process's
# host times of its transfers ahead (+1 min).  MPS=1 adds k's ordered
# rows with the MPS daemon running (started here, stopped after, also
# when the call is cut short; +~1 min): both ranks share the one GPU,
# whose contexts otherwise take turns, which two real nodes never do.
# Log: $OUT/log.txt.  ~3-4 min without AB, STAMPS and MPS.
#   bash notes/probes/ahead-call.sh
#   STAMPS=1 AB="m k" bash notes/probes/ahead-call.sh
#   MPS=1 STAMPS=1 AB="a k" bash notes/probes/ahead-call.sh
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
L=$OUT/log.txt
P=$PWD/notes/probes
AB=${AB:-}
STAMPS=${STAMPS:-}
MPS=${MPS:-}
t0=$(date +%s); el() { echo "[$(($(date +%s) - t0)) s] $*" >> $L; }
. $P/mps.sh
# bench-nodes' ordered device rows of build $1 (sizes $2), titled $3;
# further arguments go to mpirun.
ordered() {
  local b=$1 sizes=$2 title=$3; shift 3
  echo "## $title: mpirun -np 2 --bind-to none $* ipcpipe-bench-nodes --mem cuda --ordered --sizes $sizes --reps 10" >> $L
  timeout 90 mpirun -np 2 --bind-to none "$@" /tmp/$b/b/tools/ipcpipe-bench-nodes --mem cuda --ordered --sizes $sizes --reps 10 >> $L 2>&1
}
{ date; nvidia-smi -L; echo "commit: ${IPCPIPE_COMMIT:-unknown} + ahead.patch"; } >> $L
rm -rf /tmp/m /tmp/a /tmp/k && mkdir -p /tmp/m
tar --exclude=./build --exclude=./.git -cf - . | tar -x -C /tmp/m
cp -a /tmp/m /tmp/k && (cd /tmp/k && patch -p1 -s < $P/ahead.patch); echo "patch k rc=$?" >> $L
cp -a /tmp/k /tmp/a && (cd /tmp/a && patch -p1 -s < $P/ahead-nok.patch); echo "patch a rc=$?" >> $L
if [ -n "$STAMPS" ]; then
  rm -rf /tmp/s && cp -a /tmp/k /tmp/s && (cd /tmp/s && patch -p1 -s < $P/ahead-stamps.patch); echo "patch s rc=$?" >> $L
fi
for t in k $(echo "$AB" | tr ' ' '\n' | grep -v '^k$') ${STAMPS:+s}; do
  cmake -S /tmp/$t -B /tmp/$t/b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIPCPIPE_WERROR=ON > /tmp/$t.txt 2>&1 &&
    cmake --build /tmp/$t/b -j16 >> /tmp/$t.txt 2>&1; echo "build $t rc=$?" >> $L
done
el built
(cd /tmp/k/b && timeout 400 ctest -j4 --timeout 150 -R "^mpi\.|api.remote|cuda.stream|tools.bench_nodes" -E "split" --output-on-failure > /tmp/k-tests.txt 2>&1
 grep -E "tests passed|tests failed|\*\*\*Failed|\*\*\*Timeout|Exception|\(Failed\)|\(Timeout\)" /tmp/k-tests.txt | head -40
 grep -A40 -E "\*\*\*Failed|\*\*\*Timeout" /tmp/k-tests.txt | head -200) >> $L
el tests
if grep -q "100% tests passed" $L; then
  echo "## README: mpirun -np 2 --bind-to none ipcpipe-bench-nodes --ordered --sizes 8,4K,64K,256K,1M,4M,16M,256M --reps 10 (k)" >> $L
  timeout 200 mpirun -np 2 --bind-to none /tmp/k/b/tools/ipcpipe-bench-nodes --ordered --sizes 8,4K,64K,256K,1M,4M,16M,256M --reps 10 >> $L 2>&1
  el readme-bench
fi
for turn in 1 2; do
  for t in $AB; do
    ordered $t 8,4K,64K,256K "$t turn $turn"
  done
done
[ -n "$STAMPS" ] && ordered s 8,4K,64K "s" -x IPCPIPE_AHEAD_STAMPS=1
if [ -n "$MPS" ]; then
  mps_start
  for turn in 1 2; do
    ordered k 8,4K,64K,256K "k under MPS, turn $turn"
  done
  mps_stop
fi
el done
