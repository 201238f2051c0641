#!/bin/bash
# Branch drive-dev (notes/probes/drive-dev.patch: on one CPU a waiting
# caller takes the progress thread's turns with the device backend open)
# against main, issue 24: the branch's GPU stream and sendrecv tests with
# every rank bound to one CPU, then ipcpipe-bench bound and unbound under
# MPS (started here, stopped at the end), main (m) and the branch (d) in
# turns.  Log: $OUT/log.txt (appended).   bash notes/probes/drive-call.sh
set -u
L=$OUT/log.txt
t0=$(date +%s); el() { echo "[$(($(date +%s) - t0)) s] $*" >> $L; }
for v in m d; do
  rm -rf /tmp/$v && mkdir /tmp/$v && tar --exclude=./build --exclude=./.git -cf - . | (cd /tmp/$v && tar xf -)
done
(cd /tmp/d && patch -p1 -s < notes/probes/drive-dev.patch) >> $L 2>&1
(cmake -S /tmp/m -B /tmp/m/b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF > /tmp/m.txt 2>&1 &&
 cmake --build /tmp/m/b -j4 --target ipcpipe-bench >> /tmp/m.txt 2>&1; echo "drive m build rc=$?" >> $L) &
cmake -S /tmp/d -B /tmp/d/b -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIPCPIPE_WERROR=ON > /tmp/d.txt 2>&1 &&
  cmake --build /tmp/d/b -j12 >> /tmp/d.txt 2>&1; echo "drive d build rc=$?" >> $L
wait; el built
(cd /tmp/d/b && IPCP_LAUNCH_PIN=1 timeout 300 ctest -j8 -L gpu -R "cuda.stream|cuda.sendrecv" --output-on-failure 2>&1 |
  grep -E "tests passed|tests failed|\*\*\*Failed|\*\*\*Timeout|Failed\b" | head -40) >> $L
el tests
nvidia-cuda-mps-control -d >> $L 2>&1; echo "MPS start rc=$?" >> $L
trap 'echo quit | nvidia-cuda-mps-control' EXIT
sleep 1
for t in 1 2 3; do
  for v in m d; do
    for pin in "" --pin; do
      echo "## drive $v MPS ${pin:-unbound} turn $t" >> $L
      timeout 40 /tmp/$v/b/tools/ipcpipe-bench --mem cuda --case stream --case auto --sizes 8,4K,2M $pin 2>&1 | grep -E '^ +[0-9]' >> $L
    done
  done
done
echo quit | nvidia-cuda-mps-control; trap - EXIT; sleep 2
echo "## MPS stopped: $(pgrep -c nvidia-cuda-mps || true) MPS processes left" >> $L
el drive
