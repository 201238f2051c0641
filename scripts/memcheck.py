#!/usr/bin/env python3
"""Runs GPU tests of a build tree under compute-sanitizer memcheck.

The multi-process tests re-run their own binary as ranks, so the sanitizer
follows child processes (--target-processes all).  Memcheck slows every
launch and copy, so it runs the backend's own tests and the two-process
cases of one odd size (1 MiB + 3: several chunks, unaligned ends) on every
path and buffer kind, each with its CTest environment (the .stripe
variants stripe), and the small-message lane's kernels (burst: every size
up to IPCPIPE_SMALL at odd offsets; trunc: a refused message); larger sizes
add nothing it would not find there.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import time


# Left out, with the reason: memcheck reports every CUDA API error, and
# cuda.backend.shm provokes one on purpose (a second registration of a
# range must fail); cuda.backend.queue orders two streams of one process by
# a flag, and memcheck's serialization of their work leaves the waiting
# stream in front forever.  Two-process cases, where the waits depend on the
# other process, are not affected.
EXCLUDED = {"cuda.backend.shm", "cuda.backend.queue"}


def gpu_tests(build):
    out = subprocess.run(["ctest", "--show-only=json-v1", "-L", "gpu"],
                         cwd=build, check=True, capture_output=True, text=True)
    for t in json.loads(out.stdout)["tests"]:
        name = t["name"]
        if name in EXCLUDED:
            continue
        if (name.startswith("cuda.backend.") or ".1M+3." in name or
                name.startswith(("cuda.lane.burst.", "cuda.lane.trunc."))):
            env = {}
            for prop in t.get("properties", []):
                if prop.get("name") == "ENVIRONMENT":
                    for kv in prop.get("value", []):
                        k, _, v = kv.partition("=")
                        env[k] = v
            yield name, t["command"], env


def run_one(tool, build, timeout, name, cmd, env):
    t0 = time.time()
    # API errors are not reported: the library asks the driver about
    # memory it did not allocate by calls that fail on purpose where the
    # answer is no (cuMemRetainAllocationHandle on memory that is not VMM,
    # cuMemPoolExportToShareableHandle on a pool without handle types) and
    # checks every result itself; memcheck is here for device accesses.
    full = [tool, "--tool", "memcheck", "--target-processes", "all",
            "--report-api-errors", "no", "--error-exitcode", "99"] + cmd
    try:
        p = subprocess.run(full, cwd=build, capture_output=True, text=True,
                           timeout=timeout, env={**os.environ, **env})
        rc, text = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        rc, text = 124, "timeout"
    return name, rc, text, time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--out", required=True)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--jobs", type=int, default=4)
    args = ap.parse_args()
    tool = shutil.which("compute-sanitizer")
    if not tool:
        print("compute-sanitizer not found", file=sys.stderr)
        return 2
    failed, ran, skipped = [], 0, 0
    tests = list(gpu_tests(args.build))
    with open(args.out, "w") as log, \
            concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futs = [pool.submit(run_one, tool, args.build, args.timeout, n, c, e)
                for n, c, e in tests]
        for f in futs:
            name, rc, text, dt = f.result()
            if rc == 77:
                skipped += 1
            else:
                ran += 1
            status = "ok" if rc in (0, 77) else "FAIL"
            log.write(f"== {name}: rc={rc} {status} {dt:.1f}s\n")
            if status != "ok" or (rc == 0 and "ERROR SUMMARY: 0" not in text):
                log.write(text[-4000:] + "\n")
            if status != "ok":
                failed.append(name)
        log.write(f"memcheck: {ran} ran, {skipped} skipped, "
                  f"{len(failed)} failed: {failed}\n")
    print(f"memcheck: {ran} ran, {skipped} skipped, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
