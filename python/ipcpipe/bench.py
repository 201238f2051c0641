"""ipcpipe from Python against the C library in the same run.

    python3 -m ipcpipe.bench [--sizes 8,64K,1M,16M] [--mem host|cuda]
                             [--c-bench PATH] [--iters N]

Starts two ranks of itself (one job, IPCPIPE_RANK/SIZE/JOB) that time, as
ipcpipe-bench does: the half round trip of a blocking ping-pong (sizes up
to 64 KiB) and the bandwidth of a window of W = 64 MiB / size transfers
(1 to 64) posted with isend/irecv and waited for; each the median of its
repetitions, with the slowest and fastest.  Every received byte is
checked after the timed repetitions.  Then, where ipcpipe-bench is found
(--c-bench, PATH, or the build tree beside the package), it runs the same
sizes and prints its auto rows beside these: what the Python layer costs
a call and a byte.  --mem cuda moves PyTorch tensors on GPU 0 (both
ranks), against the C bench's --mem cuda --devices same.
"""
import argparse
import csv
import io
import os
import statistics
import subprocess
import sys
import time

from ._tools import find_tool

LAT_MAX = 64 << 10


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip()
    try:
        if s and s[-1].upper() in mult:
            return int(s[:-1]) * mult[s[-1].upper()]
        return int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad size {s!r} (8, 64K, 1M, 1G)")


def fmt_size(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def window(n):
    return max(1, min(64, (64 << 20) // max(n, 1)))


class Buffers:
    """Send and receive buffers of one size: NumPy arrays, or tensors."""

    def __init__(self, mem, n, w, seed):
        self.mem = mem
        if mem == "cuda":
            import torch
            g = torch.Generator().manual_seed(seed)
            data = torch.randint(0, 256, (n,), dtype=torch.uint8, generator=g)
            self.want = data
            self.src = [data.cuda() for _ in range(w)]
            self.dst = [torch.zeros(n, dtype=torch.uint8, device="cuda")
                        for _ in range(w)]
            torch.cuda.synchronize()  # the library's streams do not wait
        else:
            import numpy as np
            data = np.random.default_rng(seed).integers(0, 256, n,
                                                        dtype=np.uint8)
            self.want = data
            self.src = [data.copy() for _ in range(w)]
            self.dst = [np.zeros(n, dtype=np.uint8) for _ in range(w)]

    def check(self):
        for d in self.dst:
            got = d.cpu() if self.mem == "cuda" else d
            if not (got == self.want).all():
                return False
        return True


def rank_latency(comm, n, iters, bufs):
    """Half round trips of a blocking ping-pong, in us: median, min, max."""
    peer = 1 - comm.rank
    times = []
    for i in range(iters + 2):
        comm.barrier()
        t0 = time.perf_counter()
        if comm.rank == 0:
            comm.send(bufs.src[0], peer, tag=1)
            comm.recv(bufs.dst[0], peer, tag=2)
        else:
            comm.recv(bufs.dst[0], peer, tag=1)
            comm.send(bufs.src[0], peer, tag=2)
        if i >= 2:
            times.append((time.perf_counter() - t0) / 2 * 1e6)
    return times


def rank_bandwidth(comm, n, iters, bufs):
    """GB/s of windows of W transfers, rank 1 to rank 0, as rank 0 saw."""
    w = len(bufs.dst)
    rates = []
    for i in range(iters + 2):
        comm.barrier()
        t0 = time.perf_counter()
        if comm.rank == 0:
            reqs = [comm.irecv(bufs.dst[k], 1, tag=10 + k) for k in range(w)]
        else:
            reqs = [comm.isend(bufs.src[k], 0, tag=10 + k) for k in range(w)]
        for r in reqs:
            r.wait()
        if i >= 2:
            rates.append(n * w / (time.perf_counter() - t0) / 1e9)
    return rates


def rank_main(args):
    import ipcpipe
    if args.mem == "cuda":
        import torch
        torch.cuda.set_device(0)
    out = []
    with ipcpipe.Comm(timeout=120) as comm:
        for k, n in enumerate(args.sizes):
            w = window(n)
            iters = args.iters or max(20, min(200, (1 << 30) // (w * n)))
            bufs = Buffers(args.mem, n, w, args.seed + k)
            lat = (rank_latency(comm, n, iters, bufs) if n <= LAT_MAX
                   else None)
            bw = rank_bandwidth(comm, n, iters, bufs)
            ok = bufs.check() if comm.rank == 0 else True
            out.append((n, w, iters, bw, lat, ok))
        comm.barrier()
    if int(os.environ["IPCPIPE_RANK"]) == 0:
        print("RESULTS", repr(out), flush=True)


def spawn(args):
    job = f"pybench-{os.getpid()}-{int(time.time())}"
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, IPCPIPE_RANK=str(rank), IPCPIPE_SIZE="2",
                   IPCPIPE_JOB=job)
        argv = [sys.executable, "-m", "ipcpipe.bench", "--rank-main",
                "--sizes", ",".join(str(n) for n in args.sizes),
                "--mem", args.mem, "--iters", str(args.iters),
                "--seed", str(args.seed)]
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                      text=True))
    outs = [p.communicate()[0] for p in procs]
    for rank, p in enumerate(procs):
        if p.returncode != 0:
            sys.exit(f"ipcpipe.bench: rank {rank} failed ({p.returncode})")
    for line in outs[0].splitlines():
        if line.startswith("RESULTS "):
            import ast
            return ast.literal_eval(line[len("RESULTS "):])
    sys.exit("ipcpipe.bench: rank 0 printed no results")


def find_c_bench(path):
    return path or find_tool("ipcpipe-bench")


def c_rows(bench, args):
    """ipcpipe-bench's auto rows for the same sizes: {size: (gbps, lat)}."""
    cmd = [bench, "--mem", args.mem, "--alloc", "plain", "--case", "auto",
           "--csv", "--sizes",
           ",".join(str(n) for n in args.sizes)]
    if args.mem == "cuda":
        cmd += ["--devices", "same"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    if p.returncode != 0:
        print(f"# {' '.join(cmd)} failed ({p.returncode}): {p.stderr[-300:]}")
        return {}
    rows = {}
    for r in csv.DictReader(io.StringIO(p.stdout)):
        lat = float(r["latency_us"]) if r.get("latency_us") else None
        rows[int(r["size"])] = (float(r["gbps"]) if r.get("gbps") else None,
                                lat)
    return rows


def med(xs):
    return f"{statistics.median(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]"


def main():
    ap = argparse.ArgumentParser(prog="python3 -m ipcpipe.bench",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="8,64K,1M,16M",
                    type=lambda s: [parse_size(x) for x in s.split(",")])
    ap.add_argument("--mem", choices=("host", "cuda"), default="host")
    ap.add_argument("--iters", type=int, default=0,
                    help="timed repetitions (default: 1 GiB / (W x size), "
                         "20 to 200)")
    ap.add_argument("--c-bench", default=None,
                    help="ipcpipe-bench to compare with (default: on PATH "
                         "or in the build tree)")
    ap.add_argument("--seed", type=int, default=int(time.time()) & 0xFFFF)
    ap.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank_main:
        rank_main(args)
        return
    import ipcpipe
    res = spawn(args)
    bench = find_c_bench(args.c_bench)
    crow = c_rows(bench, args) if bench else {}
    print(f"# ipcpipe {ipcpipe.version()} from Python "
          f"({sys.version.split()[0]}), {args.mem} memory, two processes; "
          f"medians [min-max]")
    print(f"# C: {bench or 'ipcpipe-bench not found (--c-bench PATH)'}")
    print(f"{'size':>6} {'W':>3}  {'Python GB/s':>24} {'C GB/s':>8} "
          f"{'ratio':>6}  {'Python half RTT us':>24} {'C us':>7} "
          f"{'+us':>6}  verified")
    bad = False
    for n, w, iters, bw, lat, ok in res:
        c_bw, c_lat = crow.get(n, (None, None))
        ratio = f"{statistics.median(bw) / c_bw:.2f}" if c_bw else "-"
        lat_s = med(lat) if lat else "-"
        c_lat_s = f"{c_lat:.2f}" if c_lat and lat else "-"
        extra = (f"{statistics.median(lat) - c_lat:+.2f}"
                 if c_lat and lat else "-")
        print(f"{fmt_size(n):>6} {w:>3}  {med(bw):>24} "
              f"{(f'{c_bw:.2f}' if c_bw else '-'):>8} {ratio:>6}  "
              f"{lat_s:>24} {c_lat_s:>7} {extra:>6}  "
              f"{'yes' if ok else 'NO'}")
        bad |= not ok
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
