"""One rank of a case of test_ipcpipe.py or test_jobs.py (run by them,
with the job in IPCPIPE_RANK/SIZE/JOB): exits 0 when every check held.
Two ranks a case, or as SIZES says; in the killed_* cases one rank dies
on purpose (exit status 7, or SIGKILL)."""
import os
import re
import signal
import sys
import threading
import time

import numpy as np

import ipcpipe


SIZES = {"ring": 3, "killed_wait": 3}
HERE = os.path.dirname(os.path.abspath(__file__))


def fresh(n, seed):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def lib_status(name):
    """The value of IPCP_<name> in the library's header."""
    with open(os.path.join(HERE, "..", "..", "include", "ipcpipe.h")) as f:
        m = re.search(r"X\(" + name + r",\s*(-?[0-9]+),", f.read())
    assert m, f"IPCP_{name} is not in ipcpipe.h"
    return int(m.group(1))


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
    except ipcpipe.InvalidArgument as e:
        assert e.name == "IPCP_ERR_INVALID" and e.status == -1, e
        assert "out of range" in e.message, e.message
    # Stream-ordered calls move device memory only.
    try:
        comm.send(bytearray(8), peer, stream=0)
        raise AssertionError("a stream-ordered send of host memory")
    except ipcpipe.Unsupported as e:
        assert e.name == "IPCP_ERR_UNSUPPORTED", e
    try:
        comm.send(bytearray(8), peer, stream="s")
        raise AssertionError("a string taken for a stream")
    except TypeError as e:
        assert "CUDA stream" in str(e), e
    # 64 KiB into 1 KiB: the receiver fails and nothing is written.
    if comm.rank == 0:
        try:
            comm.send(fresh(65536, seed), peer, tag=9)
        except ipcpipe.Truncated as e:
            assert e.name == "IPCP_ERR_TRUNCATED", e
    else:
        small = np.zeros(1024, dtype=np.uint8)
        try:
            comm.recv(small, peer, tag=9)
            raise AssertionError("a truncated receive succeeded")
        except ipcpipe.Truncated as e:
            assert isinstance(e, ipcpipe.Error) and e.status == -6, e
        assert not small.any()
    comm.barrier()


def case_alloc(comm, seed):
    """Memory from Comm.alloc: sent and received as itself, seen by NumPy
    through the buffer protocol and DLPack; freed only without views."""
    peer = 1 - comm.rank
    n = (1 << 20) + 3
    mem = comm.alloc(n)
    assert len(mem) == n and mem.nbytes == n and mem.device is None, mem
    if comm.rank == 0:
        np.asarray(mem)[:] = fresh(n, seed)
        comm.barrier()
        info = comm.send(mem, peer)
    else:
        req = comm.irecv(mem, peer)
        try:
            mem.free()
            raise AssertionError("memory freed under a receive into it")
        except BufferError as e:
            assert "1 view" in str(e), e
        comm.barrier()
        info = req.wait()
        view = np.from_dlpack(mem)
        assert view.dtype == np.uint8 and view.shape == (n,), view
        assert np.array_equal(view, fresh(n, seed)), "received bytes differ"
        assert info.path == "direct", info
        try:
            mem.free()
            raise AssertionError("memory freed under a view")
        except BufferError as e:
            assert "1 view" in str(e), e
        try:
            comm.close()
            raise AssertionError("communicator closed under a view")
        except BufferError as e:
            assert "still viewed" in str(e), e
        del view
    assert info.nbytes == n, info
    comm.barrier()
    mem.free()
    try:
        memoryview(mem)
        raise AssertionError("a freed Memory gave a view")
    except ipcpipe.Error as e:
        assert "freed" in str(e), e


def case_putget(comm, seed):
    """Rank 1 registers an array and sends its packed descriptor; rank 0
    attaches it, puts and gets at an offset, every byte checked; out of
    range and forged descriptors refused."""
    peer = 1 - comm.rank
    n, off, k = 1 << 20, 4099, 300000
    if comm.rank == 1:
        region = np.zeros(n, dtype=np.uint8)
        reg = comm.register(region)
        desc = reg.pack()
        assert isinstance(desc, bytes) and desc, desc
        comm.send(bytearray(desc), peer)
        comm.barrier()  # rank 0 put
        assert np.array_equal(region[off:off + k], fresh(k, seed))
        assert not region[:off].any() and not region[off + k:].any()
        region[:] = fresh(n, seed + 1)
        comm.barrier()  # rank 0 gets
        comm.barrier()  # rank 0 released it
        reg.close()
        return
    raw = bytearray(256)
    info = comm.recv(raw, peer)
    desc = bytes(raw[:info.nbytes])
    remote = comm.attach(desc)
    assert remote.nbytes == n and remote.owner == 1, remote
    comm.put(fresh(k, seed), remote, offset=off)
    comm.barrier()
    comm.barrier()
    got = np.zeros(k, dtype=np.uint8)
    req = comm.iget(got, remote, offset=off)
    assert req.wait().nbytes == k
    assert np.array_equal(got, fresh(n, seed + 1)[off:off + k]), "get differs"
    try:
        comm.put(bytearray(16), remote, offset=n - 8)
        raise AssertionError("a put past the region's end")
    except ipcpipe.OutOfRange as e:
        assert e.name == "IPCP_ERR_OUT_OF_RANGE", e
    forged = bytearray(desc)
    forged[len(forged) // 2] ^= 0xFF
    try:
        comm.attach(bytes(forged))
        raise AssertionError("a forged descriptor attached")
    except ipcpipe.BadDescriptor as e:
        assert e.status == -9, e
    remote.close()
    comm.barrier()


def case_gil(comm, seed):
    """A thread runs while the main thread waits in a blocking receive."""
    peer = 1 - comm.rank
    if comm.rank == 0:
        time.sleep(0.5)
        comm.send(fresh(64, seed), peer)
        return
    ticks = [0]
    done = threading.Event()

    def spin():
        while not done.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    t = threading.Thread(target=spin)
    t.start()
    got = np.zeros(64, dtype=np.uint8)
    before = ticks[0]
    comm.recv(got, peer)
    during = ticks[0] - before
    done.set()
    t.join()
    assert np.array_equal(got, fresh(64, seed))
    assert during >= 50, f"the other thread ran {during} times in 0.5 s"


def case_interrupt(comm, seed):
    """Ctrl-C (SIGINT) ends a blocking receive and a Request's wait at
    once; the transfers still run, and complete into their buffers once
    the peer sends."""
    peer = 1 - comm.rank
    n = (1 << 20) + 3
    if comm.rank == 0:
        comm.barrier()
        comm.send(fresh(n, seed), peer, tag=21)
        comm.send(fresh(n, seed + 1), peer, tag=22)
        comm.barrier()
        comm.barrier()  # rank 1 left a receive running
        comm.close()
        return "closed"

    def interrupted(call):
        def kick():
            time.sleep(0.3)
            os.kill(os.getpid(), signal.SIGINT)
        t = threading.Thread(target=kick)
        t0 = time.monotonic()
        t.start()
        try:
            call()
            raise AssertionError("a wait with nothing sent returned")
        except KeyboardInterrupt:
            pass
        t.join()
        dt = time.monotonic() - t0
        assert dt < 2.0, f"Ctrl-C took {dt:.2f} s"

    got, got2 = np.zeros(n, dtype=np.uint8), np.zeros(n, dtype=np.uint8)
    interrupted(lambda: comm.recv(got, peer, tag=21))
    req = comm.irecv(got2, peer, tag=22)
    interrupted(req.wait)
    assert req.test() is None, "a receive done before the send"
    comm.barrier()
    assert req.wait().nbytes == n
    assert np.array_equal(got2, fresh(n, seed + 1)), "Request's data differ"
    comm.barrier()  # rank 0's sends ended: the interrupted receive's too
    assert np.array_equal(got, fresh(n, seed)), "interrupted recv's data"
    # Left running at close: an interrupted receive into memory from
    # alloc (its transfer's hold does not keep close from finalizing), and
    # a request, stale after it.
    mem = comm.alloc(4096)
    interrupted(lambda: comm.recv(mem, peer, tag=23))
    late = comm.irecv(bytearray(64), peer, tag=24)
    comm.barrier()
    comm.close()
    try:
        late.test()
        raise AssertionError("a request of a closed communicator tested")
    except ipcpipe.Error as e:
        assert "stale" in str(e), e
    return "closed"


def ring_buf(kind, n):
    return bytearray(n) if kind == "bytearray" else np.zeros(n, np.uint8)


def case_ring(comm, seed):
    """Three ranks in a ring, each sending to the next and receiving from
    the previous: blocking calls in turn (rank 0 first), then isend/irecv
    all at once, then every rank to both others; NumPy arrays on even
    ranks, bytearray on odd ones; every byte checked."""
    r, size = comm.rank, comm.size
    nxt, prv = (r + 1) % size, (r - 1) % size
    kind = "numpy" if r % 2 == 0 else "bytearray"

    def data(src, dst, i, n):
        d = fresh(n, seed + 1000 * i + 10 * src + dst)
        return d if kind == "numpy" else bytearray(d.tobytes())

    def check(got, src, i, n, info):
        assert info.nbytes == n, (src, i, info)
        want = fresh(n, seed + 1000 * i + 10 * src + r).tobytes()
        assert bytes(got) == want, f"{n} bytes from rank {src} differ"

    sizes = (5, 4096, (1 << 20) + 3, 4 << 20)
    for i, n in enumerate(sizes):  # blocking: the token goes round
        got = ring_buf(kind, n)
        if r == 0:
            assert comm.send(data(r, nxt, i, n), nxt, tag=i).nbytes == n
            check(got, prv, i, n, comm.recv(got, prv, tag=i))
        else:
            check(got, prv, i, n, comm.recv(got, prv, tag=i))
            assert comm.send(data(r, nxt, i, n), nxt, tag=i).nbytes == n
    for i, n in enumerate(sizes, 10):  # requests: all in flight at once
        got = ring_buf(kind, n)
        rq = comm.irecv(got, prv, tag=i)
        sq = comm.isend(data(r, nxt, i, n), nxt, tag=i)
        assert sq.wait().nbytes == n
        check(got, prv, i, n, rq.wait())
    i, n = 20, (256 << 10) + 1  # all to all: peers told apart by rank
    others = [p for p in range(size) if p != r]
    gots = {p: ring_buf(kind, n) for p in others}
    rqs = {p: comm.irecv(gots[p], p, tag=i) for p in others}
    sqs = [comm.isend(data(r, p, i, n), p, tag=i) for p in reversed(others)]
    for q in sqs:
        assert q.wait().nbytes == n
    for p in others:
        check(gots[p], p, i, n, rqs[p].wait())


def peer_lost(call, peer, within):
    """call() raises PeerLost naming peer, in less than `within` s."""
    t0 = time.monotonic()
    try:
        call()
        raise AssertionError(f"a wait on dead rank {peer} returned")
    except ipcpipe.PeerLost as e:
        err = e
    dt = time.monotonic() - t0
    assert isinstance(err, ipcpipe.Error), type(err)
    assert err.status == lib_status("ERR_PEER_LOST"), (err.status, err)
    assert err.name == "IPCP_ERR_PEER_LOST", err.name
    assert re.search(rf"\brank {peer}\b", err.message), err.message
    assert str(err) == err.message, (str(err), err.message)
    # The socket's end tells at once; keepalive would take 3/4 of the
    # Comm's timeout (30 s).
    assert dt < within, f"PeerLost after {dt:.2f} s: {err.message}"


def case_killed_recv(comm, seed):
    """Rank 1 exits (os._exit) after a barrier while rank 0 waits in a
    blocking recv from it: PeerLost, soon; a send to it fails the same
    way; closing the communicator then returns."""
    n = 1 << 20
    if comm.rank == 1:
        comm.barrier()
        time.sleep(0.3)  # rank 0 is in recv by then (or finds it gone)
        os._exit(7)
    got = np.zeros(n, dtype=np.uint8)
    comm.barrier()
    peer_lost(lambda: comm.recv(got, 1, tag=3), 1, 5.0)
    assert not got.any(), "a failed receive wrote its buffer"
    peer_lost(lambda: comm.send(fresh(n, seed), 1, tag=3), 1, 5.0)
    t0 = time.monotonic()
    comm.close()
    assert time.monotonic() - t0 < 5.0, "close after a loss took long"
    return "closed"


def case_killed_wait(comm, seed):
    """Rank 2 kills itself (SIGKILL) after a barrier while ranks 0 and 1
    wait in Request.wait() for its sends: PeerLost on both, soon; then 0
    and 1 still exchange data, every byte checked, and close."""
    n = (1 << 20) + 3
    if comm.rank == 2:
        comm.barrier()
        time.sleep(0.3)  # the others are in wait() by then
        os.kill(os.getpid(), signal.SIGKILL)
    got = np.zeros(n, dtype=np.uint8)
    req = comm.irecv(got, 2, tag=5)
    comm.barrier()
    peer_lost(req.wait, 2, 5.0)
    assert not got.any(), "a failed receive wrote its buffer"
    other = 1 - comm.rank
    back = bytearray(n)
    rq = comm.irecv(back, other, tag=6)
    assert comm.send(fresh(n, seed + comm.rank), other, tag=6).nbytes == n
    assert rq.wait().nbytes == n
    assert bytes(back) == fresh(n, seed + other).tobytes(), "survivors' data"
    comm.close()
    return "closed"


def main():
    case, seed = sys.argv[1], int(sys.argv[2])
    with ipcpipe.Comm(timeout=30) as comm:
        size = SIZES.get(case, 2)
        assert comm.size == size and 0 <= comm.rank < size, comm
        assert comm.job, comm.job
        if globals()["case_" + case](comm, seed) != "closed":
            comm.barrier()
    try:
        comm.barrier()
        raise AssertionError("a closed communicator answered")
    except ipcpipe.Error as e:
        assert "closed" in str(e), e
    print(f"{case} passed")


if __name__ == "__main__":
    main()
