"""ipcpipe from Python against the C library in the same run.

    python3 -m ipcpipe.bench [--sizes 8,64K,1M,16M] [--mem host|cuda]
                             [--rounds N] [--pin] [--iters N]
                             [--devices same|split] [--c-bench PATH]

Starts two ranks of itself (one job, IPCPIPE_RANK/SIZE/JOB) that time, as
ipcpipe-bench does: the half round trip of a blocking ping-pong (sizes up
to 64 KiB; rank 1 echoes what it received) and the bandwidth of a window
of W = 64 MiB / size transfers (1 to 64) posted with isend/irecv and
waited for, each repetition timed by rank 0 from when both ranks have
left a barrier.  The first warm-up and the last timed transfer carry
fresh data into a poisoned buffer, and every byte of them is checked; on
host memory the sender rewrites its sources before every repetition
(not timed), as ipcpipe-bench does.
Then ipcpipe-bench (--c-bench, PATH, or the build tree beside the
package) runs its auto case on the same sizes.  Python and C alternate,
--rounds times (P, C, P, C, ...), so that every ratio compares figures of
the same run.  --pin binds rank i of both to the i-th CPU this process
may use (ipcpipe-bench --pin).

--mem cuda moves PyTorch tensors (both ranks on GPU 0, or with --devices
split rank r on GPU r mod n) and adds, between the same two ranks, what a
PyTorch user would otherwise write (ipcpipe._bench_torch): a CUDA tensor
of the receiver shared with the sender through torch.multiprocessing's
pickler and written with copy_, and torch.distributed send/recv over
NCCL (a GPU per rank; waived, with the reason, otherwise).  Without
PyTorch or a GPU it exits 2 saying why, as ipcpipe-bench does.
"""
import argparse
import csv
import importlib
import io
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from array import array

from ._tools import find_tool

LAT_MAX = 64 << 10
WARMUP = 2  # untimed repetitions first, as ipcpipe-bench's --warmup
TAG_TIMES = 1 << 20  # rank 1's start times, after each timed loop
POISON = 0xA5


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


def reps(nbytes, iters):
    """ipcpipe-bench's count: about 2 GiB, 40 to 1000 (or --iters)."""
    return iters or max(40, min(1000, (2 << 30) // max(nbytes, 1)))


def now():
    # CLOCK_MONOTONIC, as ipcpipe-bench: one clock for every process of a
    # host, so that rank 1's start times compare with rank 0's.
    return time.clock_gettime(time.CLOCK_MONOTONIC)


class HostBuffers:
    """W send and receive NumPy arrays of one size, with the data of the
    first warm-up (which=0) and of the last timed transfer (which=1).
    The sender rewrites its sources before every repetition, as
    ipcpipe-bench does on host memory: a program sends what it just wrote,
    and a source sent unchanged again and again would be read from caches
    that a fresh one is not in."""

    rewrite = True

    def __init__(self, n, w, seed):
        import numpy as np
        self.data = [np.random.default_rng([seed, k]).integers(
            0, 256, n, dtype=np.uint8) for k in (0, 1)]
        self.src = [np.zeros(n, dtype=np.uint8) for _ in range(w)]
        self.dst = [np.zeros(n, dtype=np.uint8) for _ in range(w)]

    def fill_src(self, which, ks):
        for k in ks:
            self.src[k][:] = self.data[which]

    def poison(self, ks):
        for k in ks:
            self.dst[k].fill(POISON)

    def matches(self, which, ks):
        return all((self.dst[k] == self.data[which]).all() for k in ks)


def check_hooks(comm, bufs, total, ok, pingpong):
    """before(i) and after(i) of a loop of `total` repetitions: fresh data
    into poisoned buffers at the first and the last, every byte checked
    by rank 0 after them.  A window: rank 1 fills its W sources, rank 0
    poisons its W destinations.  A ping-pong: rank 0 sends buffer 0 and
    both poison their buffer 0, so an echo of old bytes cannot pass."""
    ks = [0] if pingpong else range(len(bufs.dst))
    marked = {0: 0, total - 1: 1}
    sender = comm.rank == (0 if pingpong else 1)
    rewrite = getattr(bufs, "rewrite", False)

    def before(i):
        if i not in marked:
            if sender and rewrite:
                bufs.fill_src(0, ks)
            return
        if comm.rank == 0 or pingpong:
            bufs.poison(ks)
        if sender:
            bufs.fill_src(marked[i], ks)

    def after(i):
        if i in marked and comm.rank == 0 and not bufs.matches(marked[i], ks):
            ok[0] = False

    return before, after


def timed_reps(comm, iters, rep, before, after):
    """Seconds of each of `iters` repetitions of rep() (both ranks, after
    WARMUP untimed ones), as ipcpipe-bench times a window: each starts at
    a barrier, from when both ranks have left it to when rep() returns on
    rank 0.  Rank 0 gets the list, rank 1 None."""
    starts, ends = array("d"), array("d")
    for i in range(WARMUP + iters):
        before(i)
        comm.barrier()
        t0 = now()
        rep()
        t1 = now()
        after(i)
        if i >= WARMUP:
            starts.append(t0)
            ends.append(t1)
    if comm.rank == 1:
        comm.send(starts, 0, tag=TAG_TIMES)
        return None
    theirs = array("d", bytes(8 * len(starts)))
    comm.recv(theirs, 1, tag=TAG_TIMES)
    return [e - max(s, p) for s, e, p in zip(starts, ends, theirs)]


def pingpong(comm, rounds, ping, pong, before, after):
    """Half round trips in seconds of a ping-pong started by rank 0 (its
    ping() sends and receives the echo; rank 1's pong() receives and
    sends it back), rounds back to back after one barrier, as
    ipcpipe-bench's.  Rank 0 gets the list, rank 1 None."""
    out = []
    comm.barrier()
    for i in range(WARMUP + rounds):
        before(i)
        if comm.rank == 0:
            t0 = now()
            ping()
            t1 = now()
            if i >= WARMUP:
                out.append((t1 - t0) / 2)
        else:
            pong()
        after(i)
    return out if comm.rank == 0 else None


def measure(comm, bufs, n, iters, window_rep, ping=None, pong=None):
    """One row on rank 0: GB/s of each window, microseconds of each half
    round trip (None above LAT_MAX or without ping), and whether every
    checked byte arrived."""
    w, ok, nrep = len(bufs.dst), [True], reps(len(bufs.dst) * n, iters)
    t = timed_reps(comm, nrep, window_rep,
                   *check_hooks(comm, bufs, WARMUP + nrep, ok, False))
    lat = None
    if ping and n <= LAT_MAX:
        rounds = reps(n, iters)
        lat = pingpong(comm, rounds, ping, pong,
                       *check_hooks(comm, bufs, WARMUP + rounds, ok, True))
    if comm.rank != 0:
        return None
    return {"bw": [n * w / s / 1e9 for s in t],
            "lat": [s * 1e6 for s in lat] if lat else None, "ok": ok[0]}


def row_ipcpipe(comm, bufs, n, iters, tag):
    """ipcpipe from Python: rank 1 sends, rank 0 receives W buffers."""
    peer, w = 1 - comm.rank, len(bufs.dst)

    def window_rep():
        if comm.rank == 0:
            reqs = [comm.irecv(bufs.dst[k], 1, tag=tag + k) for k in range(w)]
        else:
            reqs = [comm.isend(bufs.src[k], 0, tag=tag + k) for k in range(w)]
        for r in reqs:
            r.wait()

    def ping():
        comm.send(bufs.src[0], peer, tag=tag + 64)
        comm.recv(bufs.dst[0], peer, tag=tag + 65)

    def pong():
        comm.recv(bufs.dst[0], peer, tag=tag + 64)
        comm.send(bufs.dst[0], peer, tag=tag + 65)

    return measure(comm, bufs, n, iters, window_rep, ping, pong)


def rank_main(args):
    import ipcpipe
    bt = None
    if args.mem == "cuda":
        from . import _bench_torch as bt
        bt.rank_setup(args)
    out = []
    with ipcpipe.Comm(timeout=120) as comm:
        print("CPUS", sorted(os.sched_getaffinity(0)), flush=True)
        for k, n in enumerate(args.sizes):
            w = window(n)
            seed = args.seed * 1000 + k
            tag = 1000 * (k + 1)
            rows = {}
            if bt:
                rows.update(bt.rows(comm, args, n, w, seed, tag))
            else:
                rows["python"] = row_ipcpipe(comm, HostBuffers(n, w, seed),
                                             n, args.iters, tag)
            out.append({"size": n, "w": w, "rows": rows})
        comm.barrier()
        if bt:
            bt.rank_finish(comm)
    if int(os.environ["IPCPIPE_RANK"]) == 0:
        print("RESULTS", json.dumps(out), flush=True)


def spawn(args, rnd, store):
    """One round of the Python ranks: [{size, w, rows}], CPUs of each."""
    job = f"pybench-{os.getpid()}-{rnd}-{int(time.time())}"
    allowed = sorted(os.sched_getaffinity(0))
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, IPCPIPE_RANK=str(rank), IPCPIPE_SIZE="2",
                   IPCPIPE_JOB=job)
        # NumPy asks for transparent huge pages (madvise) for arrays of
        # 4 MiB and more, ipcpipe-bench (posix_memalign) does not: without
        # it both rows move the same kind of memory (H100, 16 MiB: Python
        # 1.29x C with it, 1.03x without), unless the caller sets it.
        env.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
        argv = [sys.executable, "-m", "ipcpipe.bench", "--rank-main",
                "--sizes", ",".join(str(n) for n in args.sizes),
                "--mem", args.mem, "--iters", str(args.iters),
                "--seed", str(args.seed + rnd), "--devices", args.devices,
                "--store", f"{store}/nccl-{rnd}"]
        if args.pin:
            argv += ["--cpu", str(allowed[rank % len(allowed)])]
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                      text=True))
    try:
        outs = [p.communicate(timeout=args.timeout)[0] for p in procs]
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        sys.exit(f"ipcpipe.bench: round {rnd + 1}: the Python ranks ran "
                 f"past --timeout {args.timeout} s; killed")
    for rank, p in enumerate(procs):
        if p.returncode != 0:
            sys.exit(f"ipcpipe.bench: round {rnd + 1}: rank {rank} failed "
                     f"({p.returncode})")
    cpus = [line[5:].strip("[]") for o in outs for line in o.splitlines()
            if line.startswith("CPUS ")]
    for line in outs[0].splitlines():
        if line.startswith("RESULTS "):
            return json.loads(line[len("RESULTS "):]), cpus
    sys.exit("ipcpipe.bench: rank 0 printed no results")


def c_command(bench, args):
    cmd = [bench, "--mem", args.mem, "--alloc", "plain", "--case", "auto",
           "--csv", "--sizes", ",".join(str(n) for n in args.sizes),
           "--timeout", str(args.timeout)]
    if args.iters:
        cmd += ["--iters", str(args.iters)]
    if args.mem == "cuda":
        cmd += ["--devices", args.devices]
    if args.pin:
        cmd += ["--pin"]
    return cmd


def c_round(cmd, timeout):
    """ipcpipe-bench's auto rows: {size: {bw, bw_min, bw_max, lat, ...}}."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=timeout + 30)
    except subprocess.TimeoutExpired:
        print(f"# C round: {cmd[0]} ran past {timeout + 30} s; killed")
        return {}
    if p.returncode != 0:
        print(f"# C round: {' '.join(cmd)} failed ({p.returncode}): "
              f"{p.stderr[-300:].strip()}")
        return {}

    def num(r, k):
        return float(r[k]) if r.get(k) else None

    rows = {}
    if not p.stdout.strip():
        print(f"# C round: {cmd[0]} printed no rows")
    for r in csv.DictReader(io.StringIO(p.stdout)):
        if r.get("status") != "ok":
            print(f"# C round: {r.get('case')}: {r.get('status')} "
                  f"{r.get('reason')}")
            continue
        rows[int(r["size"])] = {
            "bw": num(r, "gbps"), "bw_min": num(r, "gbps_min"),
            "bw_max": num(r, "gbps_max"), "lat": num(r, "latency_us"),
            "lat_min": num(r, "latency_min_us"),
            "lat_max": num(r, "latency_max_us"),
            "ok": r.get("verified") == "true"}
    return rows


class Row:
    """One row of the table over every round: the figure, its range, each
    round's median (for the ratios of the same round), verified."""

    def __init__(self):
        self.bw, self.lat = Stat(), Stat()
        self.ok, self.waived = True, None

    def add_samples(self, r):
        if "waived" in r:
            self.waived = r["waived"]
            return
        self.bw.add(r["bw"])
        self.lat.add(r["lat"])
        self.ok &= r["ok"]

    def add_c(self, r):
        if r is None:  # this round's run failed (a '# C round' line)
            r = dict.fromkeys(("bw", "bw_min", "bw_max", "lat", "lat_min",
                               "lat_max"), None)
            r["ok"] = True
        self.bw.add_summary(r["bw"], r["bw_min"], r["bw_max"])
        self.lat.add_summary(r["lat"], r["lat_min"], r["lat_max"])
        self.ok &= r["ok"]


class Stat:
    """Every repetition of every round (measured here), or each round's
    median and range (ipcpipe-bench's, which prints no repetitions)."""

    def __init__(self):
        self.samples, self.rounds, self.lo, self.hi = [], [], [], []

    def add(self, xs):
        if xs:
            self.samples += xs
            self.rounds.append(statistics.median(xs))
            self.lo.append(min(xs))
            self.hi.append(max(xs))
        else:
            self.rounds.append(None)

    def add_summary(self, m, lo, hi):
        self.rounds.append(m)
        if m is not None:
            self.lo.append(lo if lo is not None else m)
            self.hi.append(hi if hi is not None else m)

    def median(self):
        if self.samples:
            return statistics.median(self.samples)
        got = [x for x in self.rounds if x is not None]
        return statistics.median(got) if got else None

    def text(self):
        m = self.median()
        if m is None:
            return "-"
        return f"{num(m)} [{num(min(self.lo))}-{num(max(self.hi))}]"


def num(x, sign=""):
    """Two decimals, or three digits below 0.1 (GB/s of 8 bytes)."""
    d = 2 if x == 0 or abs(x) >= 0.1 else 2 - math.floor(math.log10(abs(x)))
    return f"{x:{sign}.{d}f}"


def compare(py, other, op):
    """Python's figures against another row's round by round (each round's
    medians, measured minutes apart at most): the median of the rounds'
    comparisons [the lowest, the highest]."""
    per = [op(x, y) for x, y in zip(py.rounds, other.rounds)
           if x is not None and y]
    if not per:
        return "-"
    sign = "+" if op is minus else ""
    return (f"{num(statistics.median(per), sign)} "
            f"[{num(min(per), sign)}, {num(max(per), sign)}]")


def ratio(a, b):
    return a / b


def minus(a, b):
    return a - b


def print_table(args, bench, cmd, cpus, table, elapsed):
    import ipcpipe
    bound = (f"bound to CPU {' and '.join(cpus)}" if args.pin
             else "unbound")
    mem = (f"{args.mem} memory" if args.mem == "host" else
           f"GPU memory (--devices {args.devices})")
    print(f"# ipcpipe {ipcpipe.version()} from Python "
          f"({sys.version.split()[0]}), {mem}, two processes {bound}; "
          f"{args.rounds} round{'s' if args.rounds > 1 else ''} of Python "
          f"then C, {elapsed:.0f} s")
    print("# figures: median [min-max] of every timed repetition of every "
          "round; C's: the median of its rounds' medians [its slowest and "
          "fastest repetition]")
    print("# ratio: Python's GB/s over the row's, +us: Python's half round "
          "trip minus the row's, of each round's medians: the median of the "
          "rounds [lowest, highest]")
    if args.mem == "host":
        hp = os.environ.get("NUMPY_MADVISE_HUGEPAGE", "0")
        print(f"# NumPy arrays {'with' if hp != '0' else 'without'} "
              f"madvise(MADV_HUGEPAGE) (NUMPY_MADVISE_HUGEPAGE={hp}); the C "
              "bench's buffers without")
    print("# C: " + (" ".join(cmd) if bench else
                     "ipcpipe-bench not found (--c-bench PATH)"))
    print(f"{'size':>6} {'W':>3}  {'row':<11}{'GB/s':>26} {'ratio':>19}  "
          f"{'half RTT us':>26} {'+us':>22}  verified")
    bad = False
    for (n, w), rows in table.items():
        py = rows["python"]
        for name, row in rows.items():
            head = f"{fmt_size(n):>6} {w:>3}  {name:<11}"
            if row.waived:
                print(f"{head}waived: {row.waived}")
                continue
            if row.bw.median() is None:
                print(f"{head}no figures (the '# C round' lines say why)")
                bad = True
                continue
            own = name == "python"
            r = "" if own else compare(py.bw, row.bw, ratio)
            d = "" if own or not py.lat.median() else compare(py.lat, row.lat,
                                                              minus)
            print(f"{head}{row.bw.text():>26} {r:>19}  "
                  f"{row.lat.text() if row.lat.median() else '-':>26} "
                  f"{d:>22}  {'yes' if row.ok else 'NO'}")
            bad |= not row.ok
    return bad


def cuda_preflight(args):
    """--mem cuda: exits 2 saying why where it cannot run here, as
    ipcpipe-bench --mem cuda does without a GPU."""
    def waived(why):
        print(f"ipcpipe.bench: --mem cuda: {why}", file=sys.stderr)
        sys.exit(2)

    try:
        import torch
    except ImportError as e:
        waived(f"needs PyTorch for its tensors and rows ({e})")
    if not torch.cuda.is_available():
        waived(f"no GPU visible to PyTorch {torch.__version__} "
               f"(torch.cuda.is_available() is False)")
    try:
        importlib.import_module("ipcpipe._bench_torch")
    except ImportError as e:
        sys.exit(f"ipcpipe.bench: --mem cuda: cannot import "
                 f"ipcpipe._bench_torch beside {__file__} ({e}); the build "
                 f"tree must hold every .py file of python/ipcpipe")
    if args.devices == "auto":
        args.devices = "split" if torch.cuda.device_count() >= 2 else "same"


def main():
    ap = argparse.ArgumentParser(prog="python3 -m ipcpipe.bench",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="8,64K,1M,16M",
                    type=lambda s: [parse_size(x) for x in s.split(",")])
    ap.add_argument("--mem", choices=("host", "cuda"), default="host")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of Python then C (default 3)")
    ap.add_argument("--pin", action="store_true",
                    help="bind rank i to the i-th CPU this process may use "
                         "(Python and C ranks)")
    ap.add_argument("--iters", type=int, default=0,
                    help="timed repetitions and ping-pong rounds (default: "
                         "ipcpipe-bench's, about 2 GiB, 40 to 1000)")
    ap.add_argument("--devices", choices=("auto", "same", "split"),
                    default="auto",
                    help="--mem cuda: both ranks on GPU 0 (same) or rank r "
                         "on GPU r mod n (split; default where 2 or more)")
    ap.add_argument("--timeout", type=int, default=600,
                    help="seconds a round's ranks may run (default 600)")
    ap.add_argument("--c-bench", default=None,
                    help="ipcpipe-bench to compare with (default: on PATH "
                         "or in the build tree)")
    ap.add_argument("--seed", type=int, default=int(time.time()) & 0xFFFF)
    ap.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--store", help=argparse.SUPPRESS)
    ap.add_argument("--cpu", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cpu is not None:
        # First, as ipcp_launch's --pin binds before exec: the threads the
        # rank starts later (CUDA's, NCCL's) inherit the one CPU.
        os.sched_setaffinity(0, {args.cpu})
    if args.rank_main:
        rank_main(args)
        return
    if args.rounds < 1 or args.iters < 0:
        ap.error("--rounds must be 1 or more and --iters 0 or more")
    if args.mem == "cuda":
        cuda_preflight(args)
    bench = args.c_bench or find_tool("ipcpipe-bench")
    cmd = c_command(bench, args) if bench else []
    table, cpus, t0 = {}, [], time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ipcpipe-bench-") as store:
        for rnd in range(args.rounds):
            res, cpus = spawn(args, rnd, store)
            crow = c_round(cmd, args.timeout) if bench else {}
            for s in res:
                rows = table.setdefault((s["size"], s["w"]), {})
                for name, r in s["rows"].items():
                    rows.setdefault(name, Row()).add_samples(r)
                    if name == "python" and bench:
                        rows.setdefault("C", Row()).add_c(
                            crow.get(s["size"]))
    bad = print_table(args, bench, cmd, cpus, table, time.monotonic() - t0)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
