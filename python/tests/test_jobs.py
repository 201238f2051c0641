"""ipcpipe from Python in jobs of three ranks, and in jobs where a rank
dies: each case runs the ranks of ranks.py as one job, every rank under
one deadline, and kills what is left of them when it fails."""
import os
import random
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
DEADLINE = 120  # seconds for the whole job


def run_ranks(case, size, died=None):
    """Runs `size` ranks of ranks.py's case; each must exit 0, or with
    died[rank]'s status (a negative one: killed by that signal)."""
    died = died or {}
    seed = random.randrange(1 << 30)
    job = f"pytest-{os.getpid()}-{case}-{seed}"
    procs, outs = [], []
    end = time.monotonic() + DEADLINE
    try:
        for rank in range(size):
            env = dict(os.environ, IPCPIPE_RANK=str(rank),
                       IPCPIPE_SIZE=str(size), IPCPIPE_JOB=job)
            procs.append(subprocess.Popen(
                [sys.executable, os.path.join(HERE, "ranks.py"), case,
                 str(seed)], env=env, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True))
        for p in procs:
            left = max(end - time.monotonic(), 0.1)
            out, _ = p.communicate(timeout=left)
            outs.append((p.returncode, out))
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case} (seed {seed}) ran past {DEADLINE} s")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for rank, (rc, out) in enumerate(outs):
        want = died.get(rank, 0)
        assert rc == want, \
            f"rank {rank} of {case} (seed {seed}): status {rc}, not " \
            f"{want}:\n{out}"
        if rank not in died:
            assert f"{case} passed" in out, out
    return outs


def test_ring():
    """Three ranks pass NumPy and bytearray buffers round a ring, blocking
    and with requests, then all to all; every byte checked."""
    run_ranks("ring", 3)


def test_killed_recv():
    """A rank exits while its peer waits in a blocking recv from it."""
    run_ranks("killed_recv", 2, died={1: 7})


def test_killed_wait():
    """A rank of three dies of SIGKILL while both others wait in
    Request.wait() for it; they go on between themselves."""
    run_ranks("killed_wait", 3, died={2: -signal.SIGKILL})
