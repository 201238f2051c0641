#!/usr/bin/env python3
"""ipcpipe on tensors from PyTorch's CUDA allocator, two processes on one GPU.

    python3 scripts/torch_allocators.py LIBIPCPIPE [CONF ...]

For each allocator setting (PYTORCH_CUDA_ALLOC_CONF; default: the default
allocator, expandable_segments:True, backend:cudaMallocAsync) it starts two
ranks that move 1, 16, 64 and 256 MiB tensors with ipcp_send/ipcp_recv
(through ctypes, the library's C API), 20 timed transfers after one, and
prints the path the receiver saw, GB/s and whether every byte arrived.
Exit status 0 when every transfer arrived intact.
"""
import ctypes
import os
import subprocess
import sys
import time

SIZES_MIB = (1, 16, 64, 256)
REPS = 20


class Info(ctypes.Structure):
    _fields_ = [("nbytes", ctypes.c_size_t), ("path", ctypes.c_int)]


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
        t0 = 0.0
        for i in range(REPS + 1):
            if i == 1:
                t0 = time.time()
            if rank == 0:
                st = lib.ipcp_send(comm, ptr, ctypes.c_size_t(n), 1, mb)
            else:
                st = lib.ipcp_recv(comm, ptr, ctypes.c_size_t(n), 0, mb,
                                   ctypes.byref(info))
            if st != 0:
                sys.exit(f"{conf}: {mb} MiB: {lib.ipcp_last_error().decode()}")
        dt = time.time() - t0
        if rank == 1:
            torch.cuda.synchronize()
            same = torch.equal(ref, t)
            ok = ok and same
            print(f"{conf}: {mb} MiB: path "
                  f"{lib.ipcp_path_name(info.path).decode()}, "
                  f"{n * REPS / dt / 1e9:.1f} GB/s, verified "
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
