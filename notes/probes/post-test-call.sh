#!/bin/bash
# One device call (issue 29): does a send's call testing the oldest
# running transfer (notes/probes/post-test.patch, -DRX_POST_TEST) help
# an MPI without single copy?  Builds: main (m), branch staged-coalesce
# (c, notes/probes/coalesce.patch), and each with the test (t, ct);
# bench-nodes device and host rows in turns.  Log: $OUT/log.txt.
#   bash notes/probes/post-test-call.sh
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
L=$OUT/log.txt
t0=$(date +%s); el() { echo "[$(($(date +%s) - t0)) s] $*" >> $L; }
nvidia-smi -L >> $L
for v in m c t ct; do
  rm -rf /tmp/$v && mkdir /tmp/$v && tar --exclude=./build --exclude=./.git -cf - . | (cd /tmp/$v && tar xf -)
  case $v in c|ct) (cd /tmp/$v && patch -p1 -s < notes/probes/coalesce.patch) >> $L 2>&1 ;; esac
  F="-DCMAKE_C_FLAGS="; case $v in t|ct) F="-DCMAKE_C_FLAGS=-DRX_POST_TEST" ;; esac
  (cmake -S /tmp/$v -B /tmp/$v/b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF "$F" > /tmp/$v.txt 2>&1 &&
   cmake --build /tmp/$v/b -j4 --target ipcpipe-bench-nodes >> /tmp/$v.txt 2>&1; echo "$v build rc=$?" >> $L) &
done
wait; el built
for turn in 1 2 3; do
  for v in m t c ct; do
    echo "## $v cuda" >> $L
    timeout 60 mpirun -np 2 --bind-to none /tmp/$v/b/tools/ipcpipe-bench-nodes --mem cuda --sizes 64K,256K,1M,4M --reps 20 2>&1 | grep -E "ipcpipe device" >> $L
    echo "## $v host" >> $L
    timeout 60 mpirun -np 2 --bind-to none /tmp/$v/b/tools/ipcpipe-bench-nodes --mem host --sizes 64K,128K,256K --reps 20 2>&1 | grep -E "ipcpipe host|x MPI" >> $L
  done
done
el done
