#!/usr/bin/env python3
"""Runs the GPU tests of a build tree under compute-sanitizer memcheck.

The multi-process tests re-run their own binary as ranks, so the sanitizer
follows child processes (--target-processes all).  Cases larger than 256 MiB
are left out: memcheck slows every copy and they add nothing it would not
find at smaller sizes.
"""
import argparse
import json
import re
import shutil
import subprocess
import sys
import time


def gpu_tests(build):
    out = subprocess.run(["ctest", "--show-only=json-v1", "-L", "gpu"],
                         cwd=build, check=True, capture_output=True, text=True)
    for t in json.loads(out.stdout)["tests"]:
        name = t["name"]
        if re.search(r"(^|[^0-9])(1G|4G|512M|256M)", name):
            continue
        yield name, t["command"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--out", required=True)
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()
    tool = shutil.which("compute-sanitizer")
    if not tool:
        print("compute-sanitizer not found", file=sys.stderr)
        return 2
    failed, ran, skipped = [], 0, 0
    with open(args.out, "w") as log:
        for name, cmd in gpu_tests(args.build):
            t0 = time.time()
            full = [tool, "--tool", "memcheck", "--target-processes", "all",
                    "--error-exitcode", "99"] + cmd
            try:
                p = subprocess.run(full, cwd=args.build, capture_output=True,
                                   text=True, timeout=args.timeout)
                rc, text = p.returncode, p.stdout + p.stderr
            except subprocess.TimeoutExpired:
                rc, text = 124, "timeout"
            if rc == 77:
                skipped += 1
            else:
                ran += 1
            status = "ok" if rc in (0, 77) else "FAIL"
            log.write(f"== {name}: rc={rc} {status} {time.time() - t0:.1f}s\n")
            if status != "ok" or "ERROR SUMMARY: 0" not in text:
                log.write(text[-4000:] + "\n")
            if status != "ok":
                failed.append(name)
        log.write(f"memcheck: {ran} ran, {skipped} skipped, "
                  f"{len(failed)} failed: {failed}\n")
    print(f"memcheck: {ran} ran, {skipped} skipped, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
