"""One rank of a two-rank GPU case of test_gpu.py (both ranks on GPU 0,
with PyTorch): exits 0 when every check held."""
import os
import sys

import torch

import ipcpipe


def fresh(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n,), dtype=torch.uint8, generator=g)


def case_allocator(comm, seed):
    """Tensors of the allocator PYTORCH_CUDA_ALLOC_CONF names move on a
    device path (direct, or bounce where neither can be shared), never
    through host memory; every byte checked."""
    peer = 1 - comm.rank
    for i, n in enumerate(((1 << 20) + 3, 64 << 20)):
        want = fresh(n, seed + i)
        if comm.rank == 0:
            info = comm.send(want.cuda(), peer, tag=i)
        else:
            got = torch.zeros(n, dtype=torch.uint8, device="cuda")
            info = comm.recv(got, peer, tag=i)
            assert torch.equal(got.cpu(), want), f"{n} bytes differ"
        conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "default")
        assert info.nbytes == n, info
        assert info.path in ("direct", "bounce"), f"{conf}: {info}"


def case_stream(comm, seed):
    """The stream-ordered calls on torch.cuda.current_stream(): the data is
    written behind a kernel already queued there, and read after it."""
    peer = 1 - comm.rank
    n = (8 << 20) + 1
    s = torch.cuda.current_stream()
    want = fresh(n, seed)
    if comm.rank == 0:
        src = torch.zeros(n, dtype=torch.uint8, device="cuda")
        torch.cuda._sleep(20_000_000)  # the copy below waits for it
        src.copy_(want.cuda(non_blocking=True))
        req = comm.send(src, peer, stream=s)
    else:
        dst = torch.zeros(n, dtype=torch.uint8, device="cuda")
        req = comm.recv(dst, peer, stream=s)
        check = dst.clone()  # ordered after the receive in the stream
        s.synchronize()
        assert torch.equal(check.cpu(), want), "stream-ordered bytes differ"
    assert isinstance(req, ipcpipe.Request), req
    assert req.wait().nbytes == n


def case_alloc(comm, seed):
    """Comm.alloc on the GPU, seen by torch through DLPack and
    __cuda_array_interface__, sent and received as itself."""
    peer = 1 - comm.rank
    n = (4 << 20) + 7
    mem = comm.alloc(n, device=0)
    assert mem.device == 0 and len(mem) == n, mem
    if comm.rank == 0:
        torch.from_dlpack(mem).copy_(fresh(n, seed).cuda())
        torch.cuda.synchronize()
        info = comm.send(mem, peer)
    else:
        info = comm.recv(mem, peer)
        view = torch.as_tensor(mem, device="cuda")
        assert torch.equal(view.cpu(), fresh(n, seed)), "bytes differ"
        assert info.path == "direct", info
        del view
    assert info.nbytes == n, info
    comm.barrier()


def main():
    case, seed = sys.argv[1], int(sys.argv[2])
    torch.cuda.set_device(0)
    with ipcpipe.Comm(timeout=60) as comm:
        globals()["case_" + case](comm, seed)
        comm.barrier()
    print(f"{case} passed")


if __name__ == "__main__":
    main()
