"""One rank of a two-rank case of test_ipcpipe.py (run by it, with the
job in IPCPIPE_RANK/SIZE/JOB): exits 0 when every check held."""
import sys

import numpy as np

import ipcpipe


def fresh(n, seed):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def case_sendrecv(comm, seed):
    """NumPy arrays of several sizes, every byte checked; the path named."""
    peer = 1 - comm.rank
    for i, n in enumerate((7, 4096, (1 << 20) + 3, 8 << 20)):
        if comm.rank == 0:
            info = comm.send(fresh(n, seed + i), peer, tag=i)
        else:
            got = np.zeros(n, dtype=np.uint8)
            info = comm.recv(got, peer, tag=i)
            assert np.array_equal(got, fresh(n, seed + i)), f"{n} bytes differ"
        assert info.nbytes == n, info
        assert info.path in ("direct", "staged", "eager", "striped"), info


def case_requests(comm, seed):
    """isend/irecv on bytearray, memoryview and a float array; test() until
    done, then wait() refused on a completed request."""
    peer = 1 - comm.rank
    n = 300000
    data = fresh(n, seed).tobytes()
    if comm.rank == 0:
        reqs = [comm.isend(bytearray(data), peer, tag=1),
                comm.isend(memoryview(data), peer, tag=2),
                comm.isend(np.arange(1000, dtype=np.float64), peer, tag=3)]
    else:
        a, b = bytearray(n), memoryview(bytearray(n))
        c = np.zeros(1000, dtype=np.float64)
        reqs = [comm.irecv(a, peer, tag=1), comm.irecv(b, peer, tag=2),
                comm.irecv(c, peer, tag=3)]
    infos = [None] * 3
    while any(i is None for i in infos):
        for k, r in enumerate(reqs):
            if infos[k] is None:
                infos[k] = r.test()
    assert [i.nbytes for i in infos] == [n, n, 8000], infos
    if comm.rank == 1:
        assert bytes(a) == data and bytes(b) == data
        assert np.array_equal(c, np.arange(1000, dtype=np.float64))
    try:
        reqs[0].wait()
        raise AssertionError("wait() on a completed request")
    except ipcpipe.Error as e:
        assert "completed already" in str(e), e


class DLOnly:
    """An array seen through DLPack alone (as PyTorch's CPU tensors are)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def case_dlpack(comm, seed):
    """Buffers that only DLPack describes; a strided one refused."""
    peer = 1 - comm.rank
    n = (256 << 10) + 5
    if comm.rank == 0:
        info = comm.send(DLOnly(fresh(n, seed)), peer, tag=4)
    else:
        got = np.zeros(n, dtype=np.uint8)
        info = comm.recv(DLOnly(got), peer, tag=4)
        assert np.array_equal(got, fresh(n, seed)), "DLPack receive differs"
    assert info.nbytes == n, info
    try:
        comm.send(DLOnly(np.zeros(64, dtype=np.uint8)[::2]), peer)
        raise AssertionError("a strided DLPack tensor was accepted")
    except ValueError as e:
        assert "DLPack tensor is not C-contiguous" in str(e), e


def case_errors(comm, seed):
    """Refusals with reasons, and a truncated receive."""
    peer = 1 - comm.rank
    for buf, words in ((b"read-only", "writable"),
                       (np.zeros(64, dtype=np.uint8)[::2], "contiguous")):
        try:
            comm.recv(buf, peer)
            raise AssertionError(f"recv into {type(buf)} accepted")
        except ValueError as e:
            assert words in str(e), e
    try:
        comm.send(bytearray(8), 5)
        raise AssertionError("a send to rank 5 of 2 was accepted")
    except ipcpipe.Error as e:
        assert e.args[1] == "IPCP_ERR_INVALID", e.args
    try:
        comm.send(bytearray(8), peer, stream=0)
        raise AssertionError("stream accepted")
    except NotImplementedError:
        pass
    # 64 KiB into 1 KiB: the receiver fails and nothing is written.
    if comm.rank == 0:
        try:
            comm.send(fresh(65536, seed), peer, tag=9)
        except ipcpipe.Error as e:
            assert e.args[1] == "IPCP_ERR_TRUNCATED", e.args
    else:
        small = np.zeros(1024, dtype=np.uint8)
        try:
            comm.recv(small, peer, tag=9)
            raise AssertionError("a truncated receive succeeded")
        except ipcpipe.Error as e:
            assert e.args[1] == "IPCP_ERR_TRUNCATED", e.args
        assert not small.any()
    comm.barrier()


def main():
    case, seed = sys.argv[1], int(sys.argv[2])
    with ipcpipe.Comm(timeout=30) as comm:
        assert comm.size == 2 and comm.rank in (0, 1)
        assert comm.job, comm.job
        globals()["case_" + case](comm, seed)
        comm.barrier()
    try:
        comm.barrier()
        raise AssertionError("a closed communicator answered")
    except ipcpipe.Error as e:
        assert "closed" in str(e), e
    print(f"{case} passed")


if __name__ == "__main__":
    main()
