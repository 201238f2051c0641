#!/usr/bin/env python3
"""ipcpipe on tensors from PyTorch's CUDA allocator, two processes on one GPU.

    python3 scripts/torch_allocators.py LIBIPCPIPE [CONF ...]

For each allocator setting (PYTORCH_CUDA_ALLOC_CONF; default: the default
allocator, expandable_segments:True, backend:cudaMallocAsync) it starts two
ranks that move 1, 16, 64 and 256 MiB tensors with ipcp_send/ipcp_recv
(through ctypes, the library's C API), 20 timed transfers after one (each
after a barrier, timed by the receiver), and prints the path the receiver
saw, the median GB/s with the slowest and fastest beside the median of
the same copy within one process on the GPU (its ceiling), and whether
every byte arrived (checked before the ceiling's copies overwrite it).
Exit status 0 when every transfer arrived intact.
"""
import ctypes
import os
import statistics
import subprocess
import sys
import time

SIZES_MIB = (1, 16, 64, 256)
REPS = 20


class Info(ctypes.Structure):
    _fields_ = [("nbytes", ctypes.c_size_t), ("path", ctypes.c_int)]


def copy_ceiling(torch, dst, src):
    """Median GB/s of dst.copy_(src) on this GPU in this process: what the
    copy engine gives one process, the bound of a transfer between two."""
    gbs = []
    for i in range(REPS + 1):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        dst.copy_(src)
        torch.cuda.synchronize()
        if i:
            gbs.append(dst.numel() / (time.perf_counter() - t0) / 1e9)
    return statistics.median(gbs)


def rank_main(lib_path):
    import torch

    rank = int(os.environ["IPCPIPE_RANK"])
    torch.cuda.set_device(0)
    torch.zeros(1, device="cuda")
    lib = ctypes.CDLL(lib_path)
    lib.ipcp_path_name.restype = ctypes.c_char_p
    lib.ipcp_last_error.restype = ctypes.c_char_p
    comm = ctypes.c_void_p()
    if lib.ipcp_init(None, ctypes.byref(comm)) != 0:
        sys.exit("ipcp_init: " + lib.ipcp_last_error().decode())
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "default")
    ok = True
    for mb in SIZES_MIB:
        n = mb << 20
        t = torch.empty(n, dtype=torch.uint8, device="cuda")
        gen = torch.Generator(device="cuda")
        gen.manual_seed(1000 + mb)
        ref = torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda",
                            generator=gen)
        if rank == 0:
            t.copy_(ref)
        else:
            t.fill_(0)
        torch.cuda.synchronize()
        ptr = ctypes.c_void_p(t.data_ptr())
        info = Info()
        gbs = []
        for i in range(REPS + 1):
            if lib.ipcp_barrier(comm) != 0:
                sys.exit(f"{conf}: barrier: {lib.ipcp_last_error().decode()}")
            t0 = time.perf_counter()
            if rank == 0:
                st = lib.ipcp_send(comm, ptr, ctypes.c_size_t(n), 1, mb)
            else:
                st = lib.ipcp_recv(comm, ptr, ctypes.c_size_t(n), 0, mb,
                                   ctypes.byref(info))
            dt = time.perf_counter() - t0
            if st != 0:
                sys.exit(f"{conf}: {mb} MiB: {lib.ipcp_last_error().decode()}")
            if i:  # the first makes the mappings
                gbs.append(n / dt / 1e9)
        if rank == 1:
            torch.cuda.synchronize()
            same = torch.equal(ref, t)
            ok = ok and same
            gbs.sort()
            ceil = copy_ceiling(torch, t, ref)
            med = statistics.median(gbs)
            print(f"{conf}: {mb} MiB: path "
                  f"{lib.ipcp_path_name(info.path).decode()}, "
                  f"{med:.1f} GB/s ({gbs[0]:.1f}-{gbs[-1]:.1f}), "
                  f"device copy in one process {ceil:.1f} GB/s "
                  f"({100 * med / ceil:.0f}%), verified "
                  f"{'yes' if same else 'NO'}", flush=True)
        del t
    lib.ipcp_finalize(comm)
    sys.exit(0 if ok else 1)


def main():
    if "IPCPIPE_RANK" in os.environ:
        rank_main(sys.argv[1])
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    confs = sys.argv[2:] or ["", "expandable_segments:True",
                             "backend:cudaMallocAsync"]
    rc = 0
    for conf in confs:
        env = dict(os.environ, IPCPIPE_SIZE="2",
                   IPCPIPE_JOB=f"torch{os.getpid()}{len(conf)}")
        if conf:
            env["PYTORCH_CUDA_ALLOC_CONF"] = conf
        else:
            env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        ranks = [subprocess.Popen([sys.executable, __file__, sys.argv[1]],
                                  env=dict(env, IPCPIPE_RANK=str(r)))
                 for r in (0, 1)]
        for p in ranks:
            rc |= p.wait(timeout=300)
    sys.exit(1 if rc else 0)


if __name__ == "__main__":
    main()
