#!/usr/bin/env bash
# Builds ipcpipe (Release) and runs ipcpipe-bench between two processes it
# spawns itself: on GPU memory when a GPU is visible, else on host memory.
# Arguments go to ipcpipe-bench (see ipcpipe-bench --help).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${IPCPIPE_BUILD_ROOT:-$root/build}/release
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
cmake --build "$dir" -j"$jobs" >/dev/null
exec "$dir/tools/ipcpipe-bench" "$@"
