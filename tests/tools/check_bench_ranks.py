#!/usr/bin/env python3
"""ipcpipe-bench-ranks: its tables, its data check seen to fail, and its
options.  Checks formats and counts, never timing values.

    check_bench_ranks.py MODE BENCH

Modes: host (every pattern's table on host memory, 4 ranks, and 3 ranks
where pairs is left out), corrupt (IPCP_BENCH_CORRUPT=1: the check names
the slot and byte, exit 1 or 2), options (bad input refused, exit 2,
saying why, before any rank starts), cuda (the tables on device memory,
with NCCL's grouped rows where NCCL runs (else the reason it did not),
and without them under --nccl off; skips, 77, where no GPU is usable)."""
import re
import subprocess
import sys

FLOAT = r"\d+\.\d+"
STAT = rf"{FLOAT} \[{FLOAT}-{FLOAT}\]"


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def run(bench, args, env=None):
    return subprocess.run([bench] + args, capture_output=True, text=True,
                          timeout=180, env=env)


def flows(pattern, n):
    if pattern == "ring":
        return [(s, (s + 1) % n) for s in range(n)]
    if pattern == "pairs":
        return [(s, s + 1) for s in range(0, n - 1, 2)]
    return [(s, d) for s in range(n) for d in range(n) if s != d]


def tables(out):
    """{(pattern, size): [lines of the table]} from the bench's stdout."""
    got, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"^(ring|pairs|all2all), (\d+) ranks, (\d+) bytes x(\d+)"
                     r" a flow$", line)
        if m:
            cur = (m.group(1), int(m.group(3)))
            check(cur not in got, f"table {cur} twice")
            got[cur] = []
        elif cur and line.startswith("  "):
            got[cur].append(line)
        else:
            cur = None
    return got


def check_table(key, lines, n, paths, nccl=False):
    pattern, size = key
    want = flows(pattern, n)
    check(lines[0].split()[:2] == ["flow", "path"],
          f"{key}: header {lines[0]!r}")
    rows = lines[1:1 + len(want)]
    for (s, d), row in zip(want, rows):
        m = re.match(rf"^  {s} -> {d} +(\w+) +({STAT}) +({STAT}) +({FLOAT})$",
                     row)
        check(m, f"{key}: flow {s} -> {d}: row {row!r}")
        check(m.group(1) in paths, f"{key}: path {m.group(1)!r} of {row!r}")
        # A figure, above zero at sizes whose figures cannot round to it.
        check(size < 65536 or float(m.group(2).split()[0]) > 0,
              f"{key}: no figure: {row!r}")
    agg = lines[1 + len(want)]
    check(re.match(rf"^  aggregate +{FLOAT} \(sum\) +{STAT} +{FLOAT}$", agg),
          f"{key}: aggregate row {agg!r}")
    check("checked in every slot" in lines[2 + len(want)],
          f"{key}: no data line: {lines[2 + len(want)]!r}")
    if nccl:
        row = lines[3 + len(want)]
        check(re.match(rf"^  NCCL +grouped +{STAT} +ipcpipe/NCCL {FLOAT}$",
                       row), f"{key}: NCCL row {row!r}")
        check(size < 65536 or float(row.split()[2]) > 0,
              f"{key}: no NCCL figure: {row!r}")
        check("NCCL's last repetition checked in every slot" in
              lines[4 + len(want)], f"{key}: no NCCL data line")
    check(len(lines) == 3 + len(want) + 2 * nccl,
          f"{key}: {len(lines)} lines")


def mode_tables(bench, mem, paths, extra=()):
    for n, pats in ((4, ["ring", "pairs", "all2all"]),
                    (3, ["ring", "all2all"])):
        sizes = ["8", "64K", "1M"]
        p = run(bench, ["--ranks", str(n), "--mem", mem, "--sizes",
                        ",".join(sizes), "--reps", "2", "--timeout", "240"]
                + list(extra))
        check(p.returncode == 0,
              f"{n} ranks: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
        check(re.search(rf"^ipcpipe \S+, {n} ranks, {mem if mem == 'host' else 'device'}"
                        r" memory", p.stdout, re.M),
              f"{n} ranks: header line\n{p.stdout}")
        ran = re.search(r"^NCCL \(.+\): each pattern also as ncclSend/"
                        r"ncclRecv, all of a rank's in one group$", p.stdout,
                        re.M)
        why = re.search(r"^NCCL: not run: (.*)$", p.stdout, re.M)
        if mem == "host" or "off" in extra:
            check(not ran and not why, f"{n} ranks: NCCL lines\n{p.stdout}")
        else:
            check(bool(ran) != bool(why) and (ran or len(why.group(1)) > 8),
                  f"{n} ranks: NCCL ran, or the reason it did not, once\n"
                  f"{p.stdout}")
        got = tables(p.stdout)
        want = [(pt, s) for pt in pats for s in (8, 65536, 1048576)]
        check(sorted(got) == sorted(want),
              f"{n} ranks: tables {sorted(got)}, expected {sorted(want)}")
        for key in want:
            check_table(key, got[key], n, paths, bool(ran))
        if n == 3:
            check("pairs: left out (3 ranks, an odd number)" in p.stdout,
                  f"3 ranks: no note on pairs\n{p.stdout}")


def mode_corrupt(bench):
    env = dict(__import__("os").environ, IPCP_BENCH_CORRUPT="1")
    p = run(bench, ["--ranks", "2", "--pattern", "ring", "--sizes", "64K",
                    "--reps", "1"], env=env)
    check(p.returncode not in (0, 77),
          f"corrupted: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    check(re.search(r"alone, flow \d -> \d, 65536 bytes: slot 63 byte 32768 "
                    r"is 0x[0-9a-f]{2}, expected 0x[0-9a-f]{2}", p.stderr),
          f"corrupted: no message naming the byte\n{p.stderr}")
    check("aggregate" not in p.stdout, f"a table printed\n{p.stdout}")


BAD = [
    (["--ranks", "1"], "--ranks takes a whole number from 2 to 64, not '1'"),
    (["--ranks", "4x"], "--ranks takes a whole number from 2 to 64, not '4x'"),
    (["--pattern", "star"],
     "--pattern takes ring, pairs, all2all or all, not 'star'"),
    (["--ranks", "3", "--pattern", "pairs"],
     "--pattern pairs needs an even number of ranks, not 3"),
    (["--mem", "disk"], "--mem takes host or cuda, not 'disk'"),
    (["--sizes", "1M,,4K"], "--sizes: bad list '1M,,4K'"),
    (["--sizes", "0"], "--sizes: bad list '0'"),
    (["--reps", "0"], "--reps takes a whole number from 1 to 100, not '0'"),
    (["--window", "65"], "--window takes a whole number from 1 to 64"),
    (["--nccl", "maybe"], "--nccl takes on or off, not 'maybe'"),
    (["--frob"], "--frob: unknown option"),
    (["--reps"], "--reps: unknown option or missing value"),
]


def mode_options(bench):
    for args, msg in BAD:
        p = run(bench, args)
        check(p.returncode == 2, f"{args}: exit {p.returncode}\n{p.stderr}")
        check(msg in p.stderr, f"{args}: {p.stderr!r} lacks {msg!r}")
        check("[rank" not in p.stderr, f"{args}: ranks started\n{p.stderr}")
    p = run(bench, ["--help"])
    check(p.returncode == 0 and p.stdout.startswith("usage: "),
          f"--help: exit {p.returncode}\n{p.stdout}")


def gpu_usable(bench):
    p = run(bench, ["--ranks", "2", "--mem", "cuda", "--sizes", "8",
                    "--reps", "1", "--pattern", "ring"])
    return p.returncode == 0, p


def main():
    mode, bench = sys.argv[1], sys.argv[2]
    try:
        if mode == "host":
            mode_tables(bench, "host", {"eager", "direct", "staged"})
        elif mode == "corrupt":
            mode_corrupt(bench)
        elif mode == "options":
            mode_options(bench)
        elif mode == "cuda":
            ok, p = gpu_usable(bench)
            if not ok and "--mem cuda:" in p.stderr:
                print(f"skipped: {p.stderr.strip()}")
                return 77
            check(ok, f"--mem cuda: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
            paths = {"direct", "staged", "bounce", "auto", "eager"}
            mode_tables(bench, "cuda", paths)
            mode_tables(bench, "cuda", paths, ["--nccl", "off"])
        else:
            raise Fail(f"unknown mode {mode}")
    except Fail as e:
        print(f"FAIL: {e}")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
