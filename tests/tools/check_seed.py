#!/usr/bin/env python3
"""example_seed's options, on any machine (they are read before it looks
for a GPU): sizes take K, M and G, a bad size or count is named, exit 2.

  check_seed.py EXAMPLE_SEED"""
import subprocess
import sys


def run(exe, args):
    return subprocess.run([exe] + args, capture_output=True, text=True,
                          timeout=60)


def main(exe):
    cases = [
        (["--size", "1Q"], "--size 1Q: not a size"),
        (["--size", "-4K"], "--size -4K: not a size"),
        (["--chunks", "3x"], "--chunks 3x: not a count"),
        # Sizes with suffixes, seen in the check that refuses a zero count.
        (["--size", "1G", "--chunks", "0"], "--size 1073741824, --chunks 0"),
        (["--size", "64K", "--iters", "0"], "--size 65536, --chunks 16, "
                                           "--iters 0"),
        (["--size", "3M", "--chunks", "0"], "--size 3145728,"),
    ]
    for args, want in cases:
        p = run(exe, args)
        if p.returncode != 2 or want not in p.stderr:
            print(f"FAIL: {' '.join(args)}: exit {p.returncode}, stderr "
                  f"{p.stderr!r}; expected exit 2 and {want!r}")
            return 1
    print(f"ok: {len(cases)} option errors named")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
