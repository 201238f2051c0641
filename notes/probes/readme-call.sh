#!/bin/bash
# One part of the README's test command on a GPU machine, its outcome in
# one file ($OUT/log.txt): the machine, the summary, and the output of
# each test that failed.
#   IPCPIPE_COMMIT=<sha> bash notes/probes/readme-call.sh all
#   IPCPIPE_COMMIT=<sha> bash notes/probes/readme-call.sh mailbox-off,pinned
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
d=/tmp/readme-call
rm -rf "$d"
README_ONLY=${1:-all} bash scripts/gpu-check.sh "$d" readme > "$d.console" 2>&1
log=$OUT/log.txt
{
    cat "$d/machine.txt" "$d/summary.txt"
    echo "## failed tests"
    grep -E '^[0-9]+% tests passed|\*\*\*Failed|\*\*\*Timeout|\(Failed\)|\(Timeout\)' "$d/readme.txt"
    echo "## their output"
    grep -A30 -E '\*\*\*Failed|\*\*\*Timeout|\*\*\*Exception' "$d/readme.txt" | head -400
    echo "## tail of the run"
    tail -40 "$d/readme.txt"
} > "$log" 2>&1
