#!/usr/bin/env bash
# Runs "$@" and samples every thread of its processes named ipcpipe-bench
# (run, runqueue wait, slices; schedstat) every 50 ms; prints the last
# sample of each thread at the end.
"$@" &
main=$!
declare -A last
while kill -0 $main 2>/dev/null; do
    for p in $(pgrep -f tools/ipcpipe-bench); do
        for t in /proc/$p/task/*; do
            [ -r $t/schedstat ] || continue
            read -r run wait sl < $t/schedstat 2>/dev/null || continue
            c=$(cat $t/comm 2>/dev/null)
            last[$p/${t##*/}]="pid $p tid ${t##*/} $c run $((run/1000000)) ms wait $((wait/1000000)) ms slices $sl cpus $(awk '/Cpus_allowed_list/{print $2}' $t/status 2>/dev/null)"
        done
    done
    sleep 0.05
done
wait $main; rc=$?
for k in "${!last[@]}"; do echo "${last[$k]}"; done | sort
exit $rc
