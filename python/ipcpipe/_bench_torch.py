"""python3 -m ipcpipe.bench --mem cuda: PyTorch tensors, and beside
ipcpipe what a PyTorch user would otherwise write between two processes,
timed and checked as ipcpipe's rows are (bench.measure):

- torch-copy: the receiver (rank 0) allocates W CUDA tensors and shares
  them with the sender through torch.multiprocessing's pickler (what a
  torch.multiprocessing Queue sends: CUDA IPC handles); the sender runs
  dst.copy_(src) W times, synchronizes, and tells the receiver with an
  8-byte ipcpipe message, the fastest signal the two have (a Queue or an
  Event costs more).  One GPU, or two with --devices split.
- nccl: torch.distributed send/recv over NCCL, a window as one
  batch_isend_irecv group waited for and synchronized, a ping-pong of
  send and recv; NCCL needs a GPU per rank, so with one GPU (or --devices
  same) the row is waived with that reason.
"""
import os
import pickle
from array import array
from datetime import timedelta

from multiprocessing.reduction import ForkingPickler

import torch
import torch.distributed as dist
import torch.multiprocessing  # noqa: F401 (registers CUDA tensors' pickling)

from .bench import POISON, measure, row_ipcpipe

_state = {"nccl": None, "waived": None}


class TorchBuffers:
    """As bench.HostBuffers, on the current GPU: W source and destination
    tensors (dst: another process's, shared, when given), the data of the
    first warm-up (which=0) and of the last timed transfer (which=1)."""

    def __init__(self, n, w, seed, dst=None):
        gens = [torch.Generator().manual_seed(seed * 2 + k) for k in (0, 1)]
        self.data = [torch.randint(0, 256, (n,), dtype=torch.uint8,
                                   generator=g) for g in gens]
        self.data_dev = [d.cuda() for d in self.data]
        self.src = [torch.zeros(n, dtype=torch.uint8, device="cuda")
                    for _ in range(w)]
        self.dst = dst if dst is not None else [
            torch.zeros(n, dtype=torch.uint8, device="cuda")
            for _ in range(w)]
        torch.cuda.synchronize()  # ipcpipe's streams do not wait for torch's

    def fill_src(self, which, ks):
        for k in ks:
            self.src[k].copy_(self.data_dev[which])
        torch.cuda.synchronize()

    def poison(self, ks):
        for k in ks:
            self.dst[k].fill_(POISON)
        torch.cuda.synchronize()

    def matches(self, which, ks):
        return all(torch.equal(self.dst[k].cpu(), self.data[which])
                   for k in ks)


def rank_setup(args):
    """Picks this rank's GPU; joins torch.distributed (NCCL) where there is
    a GPU per rank, else notes why its row is waived."""
    rank, ndev = int(os.environ["IPCPIPE_RANK"]), torch.cuda.device_count()
    dev = 0 if args.devices == "same" else rank % ndev
    torch.cuda.set_device(dev)
    if ndev < 2:
        why = f"NCCL needs a GPU per rank ({ndev} GPU visible)"
    elif args.devices == "same":
        why = "NCCL needs a GPU per rank (--devices same: both on GPU 0)"
    elif not (dist.is_available() and dist.is_nccl_available()):
        why = f"PyTorch {torch.__version__} has no NCCL backend"
    else:
        why = None
        dist.init_process_group("nccl", init_method="file://" + args.store,
                                rank=rank, world_size=2,
                                timeout=timedelta(seconds=120))
        _state["nccl"] = True
    _state["waived"] = why


def rank_finish(comm):
    if _state["nccl"]:
        dist.destroy_process_group()


def rows(comm, args, n, w, seed, tag):
    """This size's rows, rank 0's figures (rank 1's are None)."""
    out = {"python": row_ipcpipe(comm, TorchBuffers(n, w, seed), n,
                                 args.iters, tag)}
    out["torch-copy"] = row_copy(comm, n, w, seed, args.iters, tag + 100)
    if _state["waived"]:
        out["nccl"] = {"waived": _state["waived"]}
    else:
        out["nccl"] = row_nccl(comm, n, w, seed, args.iters)
    return out


def share(comm, bufs, n, w, seed, tag):
    """Rank 0's destination tensors, pickled as a torch.multiprocessing
    Queue pickles them, opened by rank 1: rank 1's buffers."""
    if comm.rank == 0:
        blob = ForkingPickler.dumps(bufs.dst)
        comm.send(array("q", [len(blob)]), 1, tag=tag)
        comm.send(bytearray(blob), 1, tag=tag + 1)
        return bufs
    size = array("q", [0])
    comm.recv(size, 0, tag=tag)
    blob = bytearray(size[0])
    comm.recv(blob, 0, tag=tag + 1)
    dst = pickle.loads(blob)
    if len(dst) != w or any(t.numel() != n or not t.is_cuda for t in dst):
        raise RuntimeError(f"torch-copy: rank 0's tensors arrived as "
                           f"{[(t.device, t.numel()) for t in dst]}")
    return TorchBuffers(n, w, seed, dst=dst)


def row_copy(comm, n, w, seed, iters, tag):
    """A shared CUDA tensor and copy_, rank 1 writing rank 0's tensors."""
    bufs = share(comm, TorchBuffers(n, w, seed) if comm.rank == 0 else None,
                 n, w, seed, tag)
    done = array("q", [0])

    # Between two GPUs copy_ runs on the source's stream and makes the
    # destination's wait for it: both are synchronized before the signal.
    other = (bufs.dst[0].device if comm.rank == 1 and
             bufs.dst[0].device != bufs.src[0].device else None)

    def window_rep():
        if comm.rank == 1:
            for k in range(w):
                bufs.dst[k].copy_(bufs.src[k])
            torch.cuda.synchronize()
            if other is not None:
                torch.cuda.synchronize(other)
            comm.send(done, 0, tag=tag + 2)
        else:
            comm.recv(done, 1, tag=tag + 2)

    r = measure(comm, bufs, n, iters, window_rep)
    # The sender closes its mappings before the owner frees the memory.
    bufs.dst = bufs.src = None
    torch.cuda.synchronize()
    comm.barrier()
    if comm.rank == 0:
        torch.cuda.ipc_collect()
    return r


def row_nccl(comm, n, w, seed, iters):
    """torch.distributed send/recv with the NCCL backend, rank 1 to 0."""
    bufs, peer = TorchBuffers(n, w, seed), 1 - comm.rank

    def window_rep():
        op, ts = ((dist.irecv, bufs.dst) if comm.rank == 0
                  else (dist.isend, bufs.src))
        for req in dist.batch_isend_irecv([dist.P2POp(op, t, peer)
                                           for t in ts]):
            req.wait()
        torch.cuda.synchronize()

    def ping():
        dist.send(bufs.src[0], peer)
        dist.recv(bufs.dst[0], peer)
        torch.cuda.synchronize()

    def pong():
        dist.recv(bufs.dst[0], peer)
        dist.send(bufs.dst[0], peer)
        torch.cuda.synchronize()

    return measure(comm, bufs, n, iters, window_rep, ping, pong)
