"""ipcpipe from Python on a GPU with PyTorch: two ranks of ranks_gpu.py
on GPU 0 per case.  Skipped where torch or a GPU is missing."""
import os
import random
import subprocess
import sys

import pytest

try:
    import torch
    HAVE_GPU = torch.cuda.is_available()
except ImportError:
    HAVE_GPU = False

pytestmark = pytest.mark.skipif(not HAVE_GPU, reason="no torch with a GPU")
HERE = os.path.dirname(os.path.abspath(__file__))


def run_pair(case, **env_add):
    seed = random.randrange(1 << 30)
    job = f"pytest-gpu-{os.getpid()}-{case}-{seed}"
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, IPCPIPE_RANK=str(rank), IPCPIPE_SIZE="2",
                   IPCPIPE_JOB=job, **env_add)
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(HERE, "ranks_gpu.py"), case,
             str(seed)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True))
    outs = []
    for rank, p in enumerate(procs):
        out, _ = p.communicate(timeout=240)
        assert p.returncode == 0, f"rank {rank} of {case} ({env_add}):\n{out}"
        outs.append(out)
    return outs


@pytest.mark.parametrize("conf", ["", "expandable_segments:True",
                                  "backend:cudaMallocAsync"])
def test_allocator(conf):
    """Each allocator's tensors take a device path, and the receiver's log
    says which and why (at info level, once per path and peer)."""
    outs = run_pair("allocator", PYTORCH_CUDA_ALLOC_CONF=conf,
                    IPCPIPE_LOG_LEVEL="info")
    if conf == "backend:cudaMallocAsync":
        want = ("bounce path (neither buffer lies in a shareable "
                "allocation")
    else:
        want = "direct path ("
    assert f"bytes from rank 0: {want}" in outs[1], (
        f"{conf or 'default'}: the receiver's log does not say "
        f"\"{want}\":\n{outs[1]}")


@pytest.mark.parametrize("case", ["stream", "alloc"])
def test_case(case):
    run_pair(case)
