#!/bin/bash
# Bound ranks (issue 24): does a CUDA event thread that sleeps between its
# passes on a process's one CPU (notes/probes/poller-sleep.patch, 20 us:
# s20, 5 us: s5), instead of taking yield turns with the caller and the
# progress thread, bring bound device figures nearer unbound?  main (m)
# and the two in turns, bound (--pin) and not; schedstat of s20 bound.
# Log: $OUT/log.txt.   bash notes/probes/bound-call.sh
set -u
L=$OUT/log.txt
t0=$(date +%s); el() { echo "[$(($(date +%s) - t0)) s] $*" >> $L; }
nvidia-smi -L >> $L
for v in m s20:20000 s5:5000; do
  n=${v%%:*}
  rm -rf /tmp/$n && mkdir /tmp/$n && tar --exclude=./build --exclude=./.git -cf - . | (cd /tmp/$n && tar xf -)
  [ $n = m ] || (cd /tmp/$n && patch -p1 -s < notes/probes/poller-sleep.patch) >> $L 2>&1
  F="-DCMAKE_C_FLAGS="; [ $n = m ] || F="-DCMAKE_C_FLAGS=-DCUDA_POLL_SLEEP_NS=${v#*:}"
  (cmake -S /tmp/$n -B /tmp/$n/b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF "$F" > /tmp/$n.txt 2>&1 &&
   cmake --build /tmp/$n/b -j5 --target ipcpipe-bench >> /tmp/$n.txt 2>&1; echo "$n build rc=$?" >> $L) &
done
wait; el built
for t in 1 2; do
  for v in m s20 s5; do
    for pin in "" --pin; do
      echo "## $v ${pin:-unbound}" >> $L
      timeout 40 /tmp/$v/b/tools/ipcpipe-bench --mem cuda --case auto --case stream --sizes 8,4K,2M $pin 2>&1 | grep -E '^ +[0-9]' >> $L
    done
  done
done
el runs
echo "## threads, s20 --pin, 8,4K" >> $L
timeout 60 bash notes/probes/threads.sh /tmp/s20/b/tools/ipcpipe-bench --mem cuda --case stream --sizes 8,4K --pin 2>&1 | grep -E "^pid|latency|^ +[0-9]" >> $L
el done
