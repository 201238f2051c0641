"""ipcpipe from Python between two processes on host memory: each case
runs two ranks of ranks.py as one job and needs both to pass."""
import os
import random
import re
import subprocess
import sys

import pytest

import ipcpipe

HERE = os.path.dirname(os.path.abspath(__file__))


def run_pair(case):
    seed = random.randrange(1 << 30)
    job = f"pytest-{os.getpid()}-{case}-{seed}"
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, IPCPIPE_RANK=str(rank), IPCPIPE_SIZE="2",
                   IPCPIPE_JOB=job)
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(HERE, "ranks.py"), case, str(seed)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True))
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        outs.append((p.returncode, out))
    for rank, (rc, out) in enumerate(outs):
        assert rc == 0, f"rank {rank} of {case} (seed {seed}):\n{out}"


@pytest.mark.parametrize("case", ["sendrecv", "requests", "dlpack", "errors",
                                  "alloc", "putget", "gil", "interrupt"])
def test_pair(case):
    run_pair(case)


def test_alone():
    """A job of one: its properties, and bad arguments refused."""
    with ipcpipe.Comm(rank=0, size=1, job=f"alone-{os.getpid()}") as c:
        assert (c.rank, c.size) == (0, 1)
        assert c.job == f"alone-{os.getpid()}"
    with pytest.raises(ValueError, match="path"):
        ipcpipe.Comm(rank=0, size=1, path="sideways")
    with pytest.raises(ValueError):
        ipcpipe.Comm(rank=-1, size=1)
    assert ipcpipe.version()


def bench(*args, timeout=240):
    env = dict(os.environ)
    for k in ("IPCPIPE_RANK", "IPCPIPE_SIZE", "IPCPIPE_JOB"):
        env.pop(k, None)
    return subprocess.run([sys.executable, "-m", "ipcpipe.bench", *args],
                          env=env, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=timeout)


def test_bench_fills():
    """The bench's checks around each repetition: on host memory the
    sender rewrites its sources before every one (the checked first and
    last with their own data), the receiver poisons only before those
    two; GPU buffers are written only for the checked ones."""
    from ipcpipe import bench as b

    class Rank:
        def __init__(self, rank):
            self.rank = rank

    class Bufs:
        def __init__(self, rewrite):
            self.rewrite = rewrite
            self.dst = [None] * 3
            self.fills, self.poisons = [], []

        def fill_src(self, which, ks):
            self.fills.append(which)

        def poison(self, ks):
            self.poisons.append(len(ks))

    for rewrite, want in ((True, [0, 0, 0, 0, 1]), (False, [0, 1])):
        bufs = Bufs(rewrite)
        before, _ = b.check_hooks(Rank(1), bufs, 5, [True], False)
        for i in range(5):
            before(i)
        assert bufs.fills == want and bufs.poisons == [], (rewrite, bufs.fills)
        bufs = Bufs(rewrite)
        before, _ = b.check_hooks(Rank(0), bufs, 5, [True], False)
        for i in range(5):
            before(i)
        assert bufs.fills == [] and bufs.poisons == [3, 3], bufs.poisons
    assert b.HostBuffers.rewrite is True


def test_bench():
    """python3 -m ipcpipe.bench: Python's rows beside the C bench's in
    alternating rounds, ranks bound to a CPU each (and the C bench's too),
    every byte verified; a bad size named; --mem cuda without PyTorch or a
    GPU refused with the reason (exit 2, as ipcpipe-bench --mem cuda)."""
    p = bench("--sizes", "8,1M", "--iters", "3", "--rounds", "2", "--pin")
    assert p.returncode == 0, p.stdout
    lines = p.stdout.splitlines()
    assert re.search(r"two processes bound to CPU \d+ and \d+; 2 rounds",
                     lines[0]), p.stdout
    c_found = "ipcpipe-bench not found" not in p.stdout
    if c_found:
        assert "--pin" in next(ln for ln in lines if ln.startswith("# C:"))
    rows = [ln.split() for ln in lines
            if ln and not ln.startswith(("#", "  size"))]
    want = [(s, r) for s in ("8", "1M")
            for r in (("python", "C") if c_found else ("python",))]
    assert [(r[0], r[2]) for r in rows] == want, p.stdout
    assert all(r[-1] == "yes" for r in rows), p.stdout
    # The 8-byte rows have a half round trip, the C row its difference.
    assert rows[0][5] != "-", p.stdout
    if c_found:
        assert re.fullmatch(r"[+-]\d+\.\d+", rows[1][-4]), p.stdout

    p = bench("--sizes", "12Q", timeout=60)
    assert p.returncode == 2 and "12Q" in p.stdout, p.stdout

    try:
        import torch
        gpu = torch.cuda.is_available()
    except ImportError:
        torch, gpu = None, False
    if not gpu:
        p = bench("--mem", "cuda", "--sizes", "8", timeout=120)
        why = "needs PyTorch" if torch is None else "no GPU visible"
        assert p.returncode == 2 and why in p.stdout, p.stdout
        assert "Traceback" not in p.stdout, p.stdout


def test_info(capsys, monkeypatch):
    """python3 -m ipcpipe.info runs ipcpipe-info, or prints the settings
    itself where the tool is not installed; a bad setting is an error."""
    p = subprocess.run([sys.executable, "-m", "ipcpipe.info"], text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=120)
    assert p.returncode == 0 and "IPCPIPE_CHUNK" in p.stdout, p.stdout
    import ipcpipe.info
    monkeypatch.setattr(ipcpipe.info, "find_tool", lambda: None)
    assert ipcpipe.info.main([]) == 0
    out = capsys.readouterr().out
    assert "ipcpipe-info is not installed" in out and "IPCPIPE_PATH=" in out
    names = [s[0] for s in ipcpipe.settings()]
    assert "IPCPIPE_TIMEOUT" in names and len(names) == len(set(names))
    p = subprocess.run(
        [sys.executable, "-c", "import ipcpipe\ntry:\n ipcpipe.settings()\n"
         "except ipcpipe.ConfigError as e: print('refused:', e.message)"],
        env=dict(os.environ, IPCPIPE_CHUNK="banana"), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    assert "refused:" in p.stdout and "IPCPIPE_CHUNK" in p.stdout, p.stdout
