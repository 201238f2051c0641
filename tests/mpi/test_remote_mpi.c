/* A job of several nodes under mpirun, made on one machine by IPCPIPE_NODE
 * (rank r counts as on node r % NODES: each node's ranks are not
 * consecutive, so every rank is renumbered on its node): every pair moves
 * fresh data both ways at once at sizes from 0 bytes to 8 MiB, on-node and
 * off-node transfers mixed, every byte checked, off-node ones by the
 * remote path and on-node ones by another; blocking calls around a ring;
 * tests and timed waits of a receive from another node; receives too
 * small for their message (nothing written); a short message in place; a
 * barrier over the whole job; calls that do not reach another node refused with
 * the reason; a second job from a split communicator beside the first; finalize
 * with a receive from another node still posted.  Links the shared library
 * only, as a user's program does.
 *
 * With "cuda" (built with the CUDA headers; the driver loaded at run
 * time, 77 from every rank where there is no GPU), each side of each pair
 * picks host or device memory of its own (cuMemAlloc, as a user's), so
 * every pair of kinds crosses nodes, sizes up to 32 MiB, a device
 * receive too small, and stream-ordered transfers both ways (with "mt"
 * after it, under MPI_THREAD_MULTIPLE: the streams alone are waited
 * for).  "big": one message past INT_MAX bytes from rank 0
 * to rank 1.  "die": rank 3 ends without a word while the others wait
 * for it; mpirun must end the job (the ctest checks that it does, and
 * with a failure).
 *
 *   mpirun -np N test_remote_mpi NODES [cuda [mt]|big|die] */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unistd.h>

#include "ipcpipe_cuda.h"
#include "ipcpipe_mpi.h"
#include "mpitest.h"

#ifdef T_CUDA
#include <cuda.h>
#include <dlfcn.h>
#endif

static int nodes = 2;
static int use_dev; /* "cuda": buffers of device memory too */

#ifdef T_CUDA
/* The driver calls the test makes, loaded as the library loads them. */
static struct {
    CUresult (*init)(unsigned);
    CUresult (*count)(int *);
    CUresult (*get)(CUdevice *, int);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*set)(CUcontext);
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*free)(CUdeviceptr);
    CUresult (*htod)(CUdeviceptr, const void *, size_t);
    CUresult (*dtoh)(void *, CUdeviceptr, size_t);
    CUresult (*sync)(void);
    CUresult (*screate)(CUstream *, unsigned);
    CUresult (*ssync)(CUstream);
    CUresult (*sdestroy)(CUstream);
    CUresult (*dtod)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*memset)(CUdeviceptr, unsigned char, size_t);
} cu;

#define CU(call)                                                               \
    do {                                                                       \
        CUresult r_ = (call);                                                  \
        if (r_ != CUDA_SUCCESS)                                                \
            fail("%s:%d: %s: CUresult %d", __FILE__, __LINE__, #call,          \
                 (int)r_);                                                     \
    } while (0)

/* 1 when a GPU is here, its first device's context current. */
static int cu_open(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int n = 0;
    CUdevice d;
    CUcontext c;
    if (!h)
        return 0;
    *(void **)&cu.init = dlsym(h, "cuInit");
    *(void **)&cu.count = dlsym(h, "cuDeviceGetCount");
    *(void **)&cu.get = dlsym(h, "cuDeviceGet");
    *(void **)&cu.retain = dlsym(h, "cuDevicePrimaryCtxRetain");
    *(void **)&cu.set = dlsym(h, "cuCtxSetCurrent");
    *(void **)&cu.alloc = dlsym(h, "cuMemAlloc_v2");
    *(void **)&cu.free = dlsym(h, "cuMemFree_v2");
    *(void **)&cu.htod = dlsym(h, "cuMemcpyHtoD_v2");
    *(void **)&cu.dtoh = dlsym(h, "cuMemcpyDtoH_v2");
    *(void **)&cu.sync = dlsym(h, "cuCtxSynchronize");
    *(void **)&cu.screate = dlsym(h, "cuStreamCreate");
    *(void **)&cu.ssync = dlsym(h, "cuStreamSynchronize");
    *(void **)&cu.sdestroy = dlsym(h, "cuStreamDestroy_v2");
    *(void **)&cu.dtod = dlsym(h, "cuMemcpyDtoDAsync_v2");
    *(void **)&cu.memset = dlsym(h, "cuMemsetD8_v2");
    if (!cu.init || !cu.dtoh || !cu.sync || !cu.sdestroy || !cu.dtod ||
        !cu.memset || cu.init(0) != CUDA_SUCCESS ||
        cu.count(&n) != CUDA_SUCCESS || n < 1)
        return 0;
    CU(cu.get(&d, 0));
    CU(cu.retain(&c, d));
    CU(cu.set(c));
    return 1;
}
#endif

/* A buffer of n bytes, of device memory where dev is set. */
static unsigned char *buf_new(size_t n, int dev)
{
#ifdef T_CUDA
    if (dev) {
        CUdeviceptr p;
        CU(cu.alloc(&p, n ? n : 1));
        return (unsigned char *)(uintptr_t)p;
    }
#endif
    (void)dev;
    unsigned char *p = malloc(n ? n : 1);
    if (!p)
        fail("out of memory (%zu bytes)", n);
    return p;
}

static void buf_free(unsigned char *b, int dev)
{
#ifdef T_CUDA
    if (dev) {
        CU(cu.free((CUdeviceptr)(uintptr_t)b));
        return;
    }
#endif
    (void)dev;
    free(b);
}

/* Host bytes h into the buffer, and back. */
static void buf_put(unsigned char *b, const unsigned char *h, size_t n, int dev)
{
#ifdef T_CUDA
    if (dev) {
        /* A pageable copy may return before its DMA lands, and the
         * library's streams do not wait for the legacy one. */
        if (n)
            CU(cu.htod((CUdeviceptr)(uintptr_t)b, h, n));
        CU(cu.sync());
        return;
    }
#endif
    (void)dev;
    memcpy(b, h, n);
}

static void buf_get(unsigned char *h, const unsigned char *b, size_t n, int dev)
{
#ifdef T_CUDA
    if (dev) {
        if (n)
            CU(cu.dtoh(h, (CUdeviceptr)(uintptr_t)b, n));
        return;
    }
#endif
    (void)dev;
    memcpy(h, b, n);
}

/* Whether the buffer rank `from` sends rank `to` in round k is device
 * memory, and the one `to` receives it in: each side's own pick, so
 * that the four pairs of kinds all occur. */
static int dev_send(int from, int to, int k)
{
    return use_dev && (from * 7 + to * 3 + k) % 3 != 0;
}

static int dev_recv(int from, int to, int k)
{
    return use_dev && (to * 5 + from + k) % 2 == 0;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        fail("out of memory (%zu bytes)", n);
    return p;
}

/* The seed of the data rank `from` sends rank `to` in round k. */
static uint64_t seed_of(uint64_t base, int from, int to, int k)
{
    return base ^ ((uint64_t)from << 40) ^ ((uint64_t)to << 20) ^
           (uint64_t)k * 0x9e3779b97f4a7c15ull;
}

/* Every rank of c sends n fresh bytes to every other and receives theirs,
 * all posted at once; the ranks of `world_of` (the MPI communicator c was
 * made from) decide which peers are on this rank's node. */
static void all_pairs(ipcp_comm_t *c, MPI_Comm world_of, size_t n,
                      uint64_t base, int k)
{
    int me = ipcp_comm_rank(c), size = ipcp_comm_size(c), wme;
    unsigned char **out = xmalloc(sizeof(void *) * (size_t)size),
                  **in = xmalloc(sizeof(void *) * (size_t)size);
    ipcp_request_t **rr = xmalloc(sizeof(void *) * (size_t)size),
                   **sr = xmalloc(sizeof(void *) * (size_t)size);
    int *wr = xmalloc(sizeof(int) * (size_t)size);
    /* The MPI_COMM_WORLD rank of each rank of c, for its node. */
    MPI_Comm_rank(MPI_COMM_WORLD, &wme);
    MPI_Allgather(&wme, 1, MPI_INT, wr, 1, MPI_INT, world_of);
    unsigned char *tmp = xmalloc(n);
    for (int p = 0; p < size; p++) {
        if (p == me)
            continue;
        out[p] = buf_new(n, dev_send(me, p, k));
        in[p] = buf_new(n, dev_recv(p, me, k));
        fill(tmp, n, seed_of(base, me, p, k));
        buf_put(out[p], tmp, n, dev_send(me, p, k));
        memset(tmp, 0xa5, n);
        buf_put(in[p], tmp, n, dev_recv(p, me, k));
        OK(ipcp_irecv(c, in[p], n, p, 10 + k, &rr[p]));
    }
    for (int p = 0; p < size; p++)
        if (p != me)
            OK(ipcp_isend(c, out[p], n, p, 10 + k, &sr[p]));
    for (int p = 0; p < size; p++) {
        ipcp_xfer_info_t info;
        if (p == me)
            continue;
        int remote = wr[p] % nodes != t_rank % nodes;
        OK(ipcp_wait(rr[p], &info));
        unsigned char *want = xmalloc(n);
        fill(want, n, seed_of(base, p, me, k));
        buf_get(tmp, in[p], n, dev_recv(p, me, k));
        if (info.nbytes != n || memcmp(tmp, want, n) != 0)
            fail("%zu bytes from rank %d (%s node, %s to %s memory): data "
                 "differs (%zu came)",
                 n, p, remote ? "another" : "this",
                 dev_send(p, me, k) ? "device" : "host",
                 dev_recv(p, me, k) ? "device" : "host", info.nbytes);
        if ((info.path == IPCP_PATH_REMOTE) != remote)
            fail("%zu bytes from rank %d (%s node) came by path %s", n, p,
                 remote ? "another" : "this", ipcp_path_name(info.path));
        OK(ipcp_wait(sr[p], &info));
        if ((info.path == IPCP_PATH_REMOTE) != remote)
            fail("%zu bytes to rank %d (%s node) went by path %s", n, p,
                 remote ? "another" : "this", ipcp_path_name(info.path));
        free(want);
        buf_free(out[p], dev_send(me, p, k));
        buf_free(in[p], dev_recv(p, me, k));
    }
    free(tmp);
    free(out);
    free(in);
    free(rr);
    free(sr);
    free(wr);
}

/* Blocking calls around the ring of c, both directions. */
static void ring(ipcp_comm_t *c, size_t n, uint64_t base)
{
    int me = ipcp_comm_rank(c), size = ipcp_comm_size(c);
    int next = (me + 1) % size, prev = (me + size - 1) % size;
    unsigned char *out = xmalloc(n), *in = xmalloc(n), *want = xmalloc(n);
    ipcp_request_t *r;
    fill(out, n, seed_of(base, me, next, 99));
    fill(want, n, seed_of(base, prev, me, 99));
    OK(ipcp_irecv(c, in, n, prev, 3, &r));
    OK(ipcp_send(c, out, n, next, 3));
    OK(ipcp_wait(r, NULL));
    if (memcmp(in, want, n))
        fail("ring: %zu bytes from rank %d differ", n, prev);
    fill(out, n, seed_of(base, me, prev, 98));
    fill(want, n, seed_of(base, next, me, 98));
    if (me % 2 == 0) {
        OK(ipcp_send(c, out, n, prev, 4));
        OK(ipcp_recv(c, in, n, next, 4, NULL));
    } else {
        OK(ipcp_recv(c, in, n, next, 4, NULL));
        OK(ipcp_send(c, out, n, prev, 4));
    }
    if (memcmp(in, want, n))
        fail("ring back: %zu bytes from rank %d differ", n, next);
    free(out);
    free(in);
    free(want);
}

/* Rank 0 and rank 1 (on two nodes): a receive tested and waited for with
 * a time limit until its message comes; then one too small. */
static void test_and_truncate(ipcp_comm_t *c, uint64_t base)
{
    unsigned char buf[4096], want[4096];
    ipcp_request_t *r;
    ipcp_xfer_info_t info;
    int done = 0, me = ipcp_comm_rank(c);
    if (me == 1) {
        OK(ipcp_irecv(c, buf, sizeof(buf), 0, 5, &r));
        OK(ipcp_test(r, &done, &info) == IPCP_IN_PROGRESS ? IPCP_OK
                                                          : IPCP_ERR_STATE);
        MPI_Barrier(MPI_COMM_WORLD); /* rank 0 sends only now */
        while (!done) {
            ipcp_status_t st = ipcp_wait_for(r, 0.01, &done, &info);
            if (st != IPCP_OK && st != IPCP_IN_PROGRESS)
                OK(st);
        }
        fill(want, sizeof(want), seed_of(base, 0, 1, 5));
        if (info.nbytes != sizeof(buf) || memcmp(buf, want, sizeof(buf)))
            fail("tested receive: data differs");
        memset(buf, 0x5a, sizeof(buf));
        memset(want, 0x5a, sizeof(want));
        ipcp_status_t st = ipcp_recv(c, buf, 100, 0, 6, &info);
        if (st != IPCP_ERR_TRUNCATED || !strstr(ipcp_last_error(), "rank 0"))
            fail("100-byte receive of 4096 bytes: %s (%s)", ipcp_strerror(st),
                 ipcp_last_error());
        if (memcmp(buf, want, sizeof(buf)))
            fail("a receive too small was written");
        /* A short message into a receive that holds the longest (its
         * bytes in place, nothing past them written); one too long for a
         * receive that does not (nothing written). */
        size_t cap = 100000;
        unsigned char *big = xmalloc(cap), *bwant = xmalloc(cap);
        memset(big, 0x5a, cap);
        fill(bwant, 5000, seed_of(base, 0, 1, 7));
        OK(ipcp_recv(c, big, cap, 0, 7, &info));
        if (info.nbytes != 5000 || memcmp(big, bwant, 5000))
            fail("5000 bytes into a receive of %zu: %zu bytes, data %s", cap,
                 info.nbytes, memcmp(big, bwant, 5000) ? "differs" : "same");
        for (size_t i = 5000; i < cap; i++)
            if (big[i] != 0x5a)
                fail("5000 bytes into a receive of %zu: byte %zu written", cap,
                     i);
        memset(big, 0x5a, cap);
        st = ipcp_recv(c, big, 50000, 0, 8, &info);
        if (st != IPCP_ERR_TRUNCATED || !strstr(ipcp_last_error(), "rank 0"))
            fail("50000-byte receive of 60000 bytes: %s (%s)",
                 ipcp_strerror(st), ipcp_last_error());
        for (size_t i = 0; i < cap; i++)
            if (big[i] != 0x5a)
                fail("a 50000-byte receive too small: byte %zu written", i);
        free(big);
        free(bwant);
    } else if (me == 0) {
        fill(buf, sizeof(buf), seed_of(base, 0, 1, 5));
        MPI_Barrier(MPI_COMM_WORLD);
        OK(ipcp_send(c, buf, sizeof(buf), 1, 5));
        ipcp_status_t st = ipcp_send(c, buf, sizeof(buf), 1, 6);
        if (st != IPCP_OK && st != IPCP_ERR_TRUNCATED)
            fail("send of a message too large for its receive: %s (%s)",
                 ipcp_strerror(st), ipcp_last_error());
        unsigned char *out = xmalloc(60000);
        fill(out, 5000, seed_of(base, 0, 1, 7));
        OK(ipcp_send(c, out, 5000, 1, 7));
        fill(out, 60000, seed_of(base, 0, 1, 8));
        st = ipcp_send(c, out, 60000, 1, 8);
        if (st != IPCP_OK && st != IPCP_ERR_TRUNCATED)
            fail("send of 60000 bytes to a receive of 50000: %s (%s)",
                 ipcp_strerror(st), ipcp_last_error());
        free(out);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

/* Rank 0's device memory into a device receive of rank 1 (another node)
 * too small: nothing written, the pieces drained, the next message of the
 * tag whole; a short message likewise, and one into a large device
 * receive (nothing past it written). */
static void truncate_dev(ipcp_comm_t *c, uint64_t base)
{
    size_t big = (9 << 20) + 1, small = 1 << 20, next = 4097;
    int me = ipcp_comm_rank(c);
    unsigned char *h = xmalloc(big), *want = xmalloc(big);
    if (me == 0) {
        unsigned char *d = buf_new(big, 1);
        fill(h, big, seed_of(base, 0, 1, 50));
        buf_put(d, h, big, 1);
        ipcp_status_t st = ipcp_send(c, d, big, 1, 50);
        if (st != IPCP_OK && st != IPCP_ERR_TRUNCATED)
            fail("device send too large for its receive: %s (%s)",
                 ipcp_strerror(st), ipcp_last_error());
        fill(h, next, seed_of(base, 0, 1, 51));
        buf_put(d, h, next, 1);
        OK(ipcp_send(c, d, next, 1, 50));
        /* Short messages: one too long for a device receive, one into a
         * device receive larger than the longest short message. */
        fill(h, 60000, seed_of(base, 0, 1, 53));
        buf_put(d, h, 60000, 1);
        st = ipcp_send(c, d, 60000, 1, 53);
        if (st != IPCP_OK && st != IPCP_ERR_TRUNCATED)
            fail("short device send too large for its receive: %s (%s)",
                 ipcp_strerror(st), ipcp_last_error());
        OK(ipcp_send(c, d, 60000, 1, 54));
        buf_free(d, 1);
    } else if (me == 1) {
        unsigned char *d = buf_new(small, 1);
        memset(h, 0x5a, small);
        buf_put(d, h, small, 1);
        ipcp_status_t st = ipcp_recv(c, d, small, 0, 50, NULL);
        if (st != IPCP_ERR_TRUNCATED ||
            !strstr(ipcp_last_error(), "for a receive of 1048576"))
            fail("device receive of 1 MiB for 9 MiB: %s (%s)",
                 ipcp_strerror(st), ipcp_last_error());
        buf_get(h, d, small, 1);
        for (size_t i = 0; i < small; i++)
            if (h[i] != 0x5a)
                fail("a truncated device receive was written at %zu", i);
        ipcp_xfer_info_t info;
        OK(ipcp_recv(c, d, small, 0, 50, &info));
        fill(want, next, seed_of(base, 0, 1, 51));
        buf_get(h, d, next, 1);
        if (info.nbytes != next || memcmp(h, want, next))
            fail("the device message after a truncated one differs");
        memset(h, 0x5a, small);
        buf_put(d, h, small, 1);
        st = ipcp_recv(c, d, 50000, 0, 53, NULL);
        if (st != IPCP_ERR_TRUNCATED ||
            !strstr(ipcp_last_error(), "a message of 60000 bytes"))
            fail("device receive of 50000 bytes for 60000: %s (%s)",
                 ipcp_strerror(st), ipcp_last_error());
        buf_get(h, d, small, 1);
        for (size_t i = 0; i < small; i++)
            if (h[i] != 0x5a)
                fail("a truncated short device receive was written at %zu", i);
        OK(ipcp_recv(c, d, small, 0, 54, &info));
        fill(want, 60000, seed_of(base, 0, 1, 53));
        buf_get(h, d, small, 1);
        if (info.nbytes != 60000 || memcmp(h, want, 60000))
            fail("60000 device bytes into a device receive of 1 MiB differ");
        for (size_t i = 60000; i < small; i++)
            if (h[i] != 0x5a)
                fail("60000 device bytes into 1 MiB: byte %zu written", i);
        buf_free(d, 1);
    }
    free(h);
    free(want);
}

/* One tag's messages from rank 0 to rank 1 (on another node where there
 * are two) arrive in the order of the calls, whatever their length and
 * memory: with "cuda" device, host, device again (a short device message
 * is copied to host memory before it leaves, and the host one after it
 * must not pass it). */
static void order_dev(ipcp_comm_t *c, uint64_t base)
{
    static const size_t n[3] = {4096, 100, 40000};
    const int dev[3] = {use_dev, 0, use_dev};
    int me = ipcp_comm_rank(c);
    if (me > 1)
        return;
    ipcp_request_t *r[3];
    unsigned char *b[3], *h = xmalloc(n[2]), *want = xmalloc(n[2]);
    for (int i = 0; i < 3; i++) {
        b[i] = me == 0 ? buf_new(n[i], dev[i]) : xmalloc(n[2]);
        if (me == 0) {
            fill(h, n[i], seed_of(base, 0, 1, 60 + i));
            buf_put(b[i], h, n[i], dev[i]);
            OK(ipcp_isend(c, b[i], n[i], 1, 52, &r[i]));
        } else {
            OK(ipcp_irecv(c, b[i], n[2], 0, 52, &r[i]));
        }
    }
    for (int i = 0; i < 3; i++) {
        ipcp_xfer_info_t info;
        OK(ipcp_wait(r[i], &info));
        if (me == 1) {
            fill(want, n[i], seed_of(base, 0, 1, 60 + i));
            if (info.nbytes != n[i] || memcmp(b[i], want, n[i]))
                fail("message %d of tag 52 (%zu bytes of %s memory) came "
                     "as %zu bytes%s: out of order",
                     i, n[i], dev[i] ? "device" : "host", info.nbytes,
                     info.nbytes == n[i] ? " that differ" : "");
        }
    }
    for (int i = 0; i < 3; i++)
        buf_free(b[i], me == 0 && dev[i]);
    free(h);
    free(want);
}

#ifdef T_CUDA
/* Ranks 0 and 1 (on two nodes), device memory, stream-ordered calls both
 * ways at once: the sends on one stream of each rank's, each buffer
 * written by a copy enqueued just before it (behind a 64 MiB copy, so a
 * send that started early would read stale bytes), the receives on
 * another, each buffer copied out by a copy enqueued just after it (so a
 * receive whose stream went on early leaves stale bytes in the copy).
 * With threads (MPI_THREAD_MULTIPLE) only the streams are synchronized,
 * and one send has no request; otherwise each request is waited for
 * first, as transfers with other nodes then move in ipcpipe's calls, and
 * a send without a request is refused (nothing would move it). */
static void ordered_dev(ipcp_comm_t *c, uint64_t base, int threads)
{
    enum { N = 4 };
    static const size_t n[N] = {100, 4096, (64 << 10) + 5, (8 << 20) + 1};
    const size_t slow = 64 << 20;
    int me = ipcp_comm_rank(c), peer = 1 - me;
    if (me > 1 || nodes < 2)
        return;
    CUstream ss, rs;
    CUdeviceptr big, src[N], b[N], in[N], out[N];
    ipcp_request_t *sr[N], *rr[N];
    unsigned char *h = xmalloc(n[N - 1]), *want = xmalloc(n[N - 1]);
    CU(cu.screate(&ss, 0));
    CU(cu.screate(&rs, 0));
    CU(cu.alloc(&big, 2 * slow));
    for (int i = 0; i < N; i++) {
        CUdeviceptr *all[4] = {&src[i], &b[i], &in[i], &out[i]};
        for (int k = 0; k < 4; k++) {
            CU(cu.alloc(all[k], n[i]));
            CU(cu.memset(*all[k], 0, n[i]));
        }
        fill(h, n[i], seed_of(base, me, peer, 70 + i));
        buf_put((unsigned char *)(uintptr_t)src[i], h, n[i], 1);
    }
    for (int i = 0; i < N; i++) {
        OK(ipcp_irecv_on_stream(c, (void *)(uintptr_t)in[i], n[i], peer, 70 + i,
                                (ipcp_stream_t)rs, &rr[i]));
        CU(cu.dtod(out[i], in[i], n[i], rs));
        CU(cu.dtod(big + slow, big, slow, ss));
        CU(cu.dtod(b[i], src[i], n[i], ss));
        OK(ipcp_isend_on_stream(c, (void *)(uintptr_t)b[i], n[i], peer, 70 + i,
                                (ipcp_stream_t)ss,
                                threads && i == 1 ? NULL : &sr[i]));
    }
    for (int i = 0; i < N && !threads; i++) {
        ipcp_xfer_info_t info;
        OK(ipcp_wait(rr[i], &info));
        if (info.nbytes != n[i] || info.path != IPCP_PATH_REMOTE)
            fail("ordered receive %d: %zu bytes by path %s (want %zu, "
                 "remote)",
                 i, info.nbytes, ipcp_path_name(info.path), n[i]);
        OK(ipcp_wait(sr[i], NULL));
    }
    CU(cu.ssync(rs));
    CU(cu.ssync(ss));
    for (int i = 0; i < N; i++) {
        buf_get(h, (unsigned char *)(uintptr_t)out[i], n[i], 1);
        fill(want, n[i], seed_of(base, peer, me, 70 + i));
        if (memcmp(h, want, n[i]))
            fail("stream-ordered receive %d (%zu bytes) from another node%s: "
                 "the copy after it on its stream saw other bytes",
                 i, n[i], threads ? " (threads)" : "");
        ipcp_xfer_info_t info;
        if (threads) {
            OK(ipcp_wait(rr[i], &info));
            if (info.nbytes != n[i])
                fail("ordered receive %d: %zu bytes (want %zu)", i, info.nbytes,
                     n[i]);
        }
        if (threads && i != 1)
            OK(ipcp_wait(sr[i], NULL));
        CU(cu.free(src[i]));
        CU(cu.free(b[i]));
        CU(cu.free(in[i]));
        CU(cu.free(out[i]));
    }
    /* Without threads, nothing would move a send without a request. */
    ipcp_status_t st = ipcp_isend_on_stream(c, (void *)(uintptr_t)big, 8, peer,
                                            79, (ipcp_stream_t)ss, NULL);
    if (!threads && (st != IPCP_ERR_UNSUPPORTED ||
                     !strstr(ipcp_last_error(), "MPI_THREAD_MULTIPLE")))
        fail("a stream-ordered send to another node without a request, "
             "without MPI_THREAD_MULTIPLE: %s (%s)",
             ipcp_strerror(st), ipcp_last_error());
    if (threads) {
        OK(st);
        OK(ipcp_recv(c, h, 8, peer, 79, NULL));
        CU(cu.ssync(ss));
    }
    CU(cu.sdestroy(ss));
    CU(cu.sdestroy(rs));
    CU(cu.free(big));
    free(h);
    free(want);
}
#endif

/* Ranks 0 and 1 (on two nodes): rank 0 sends one buffer in eight
 * transfers at once, twice (more than the transport keeps a layout for
 * at once), then eight of different lengths out of it; rank 1 takes each
 * into a buffer of its own and checks its length and bytes. */
static void one_buffer(ipcp_comm_t *c, uint64_t base)
{
    enum { N = 8 };
    const size_t n = 64 << 10;
    int me = ipcp_comm_rank(c);
    unsigned char *b = xmalloc(n), *want = xmalloc(n), *in[N];
    ipcp_request_t *r[N];
    ipcp_xfer_info_t info;
    for (int i = 0; i < N; i++)
        in[i] = xmalloc(n);
    if (me > 1 || nodes < 2)
        goto out;
    fill(want, n, seed_of(base, 0, 1, 61));
    if (me == 0)
        memcpy(b, want, n);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            /* The third round: lengths that differ by message. */
            size_t len = round < 2 ? n : n - 100 * (size_t)i;
            memset(in[i], 0, n);
            OK(me == 0 ? ipcp_isend(c, b, len, 1, 61, &r[i])
                       : ipcp_irecv(c, in[i], n, 0, 61, &r[i]));
        }
        for (int i = 0; i < N; i++) {
            size_t len = round < 2 ? n : n - 100 * (size_t)i;
            OK(ipcp_wait(r[i], &info));
            if (me == 1 && (info.nbytes != len || memcmp(in[i], want, len) ||
                            (len < n && in[i][len] != 0)))
                fail("one buffer: message %d of round %d: %zu bytes (want "
                     "%zu) or its bytes differ",
                     i, round, info.nbytes, len);
        }
    }
out:
    for (int i = 0; i < N; i++)
        free(in[i]);
    free(b);
    free(want);
}

/* One-sided calls over the job: each rank registers a host region of a
 * slice per rank, packs it, and every rank imports the regions of the
 * next two ranks (on another node and, with two nodes, on this one),
 * puts fresh bytes into its own slice of each, gets them back, and
 * checks after a barrier that its own region holds every slice put into
 * it and zeros elsewhere.  With device memory, what MPI here cannot
 * reach is refused with the reason. */
static void onesided(ipcp_comm_t *c, uint64_t base)
{
    const size_t L = (256 << 10) + 3;
    int me = ipcp_comm_rank(c), size = ipcp_comm_size(c);
    size_t n = L * (size_t)size, dlen = 0;
    unsigned char *reg = xmalloc(n), *out = xmalloc(L), *back = xmalloc(L),
                  *want = xmalloc(L);
    unsigned char *descs = xmalloc((size_t)size * IPCP_DESC_MAX);
    unsigned char d[IPCP_DESC_MAX];
    ipcp_mem_t *mem;
    memset(reg, 0, n);
    OK(ipcp_mem_register(c, reg, n, &mem));
    memset(d, 0, sizeof(d));
    OK(ipcp_mem_pack(mem, d, sizeof(d), &dlen));
    MPI_Allgather(d, IPCP_DESC_MAX, MPI_BYTE, descs, IPCP_DESC_MAX, MPI_BYTE,
                  MPI_COMM_WORLD);
    int targets[2] = {(me + 1) % size, (me + 2) % size};
    for (int i = 0; i < 2; i++) {
        int t = targets[i];
        ipcp_rmem_t *rm;
        ipcp_request_t *r;
        if (t == me || (i == 1 && t == targets[0]))
            continue;
        OK(ipcp_rmem_import(c, descs + (size_t)t * IPCP_DESC_MAX, dlen, &rm));
        if (ipcp_rmem_owner(rm) != t || ipcp_rmem_size(rm) != n)
            fail("region of rank %d: owner %d, %zu bytes", t,
                 ipcp_rmem_owner(rm), ipcp_rmem_size(rm));
        fill(out, L, seed_of(base, me, t, 90));
        OK(ipcp_iput(c, out, L, rm, (size_t)me * L, &r));
        OK(ipcp_wait(r, NULL));
        OK(ipcp_put(c, out, 0, rm, n)); /* nothing, at the end */
        memset(back, 0, L);
        OK(ipcp_get(c, back, L, rm, (size_t)me * L));
        if (memcmp(back, out, L))
            fail("get from rank %d's region: not the bytes put there", t);
        ipcp_status_t st = ipcp_iput(c, out, 2, rm, n - 1, &r);
        if (st != IPCP_ERR_OUT_OF_RANGE ||
            !strstr(ipcp_last_error(), "outside"))
            fail("a put past rank %d's region: %s (%s)", t, ipcp_strerror(st),
                 ipcp_last_error());
#ifdef T_CUDA
        if (use_dev && t % nodes != me % nodes) {
            unsigned char *dv = buf_new(L, 1);
            st = ipcp_iput(c, dv, L, rm, 0, &r);
            if (st != IPCP_ERR_UNSUPPORTED ||
                !strstr(ipcp_last_error(), "does not read device memory"))
                fail("a put of device memory to another node: %s (%s)",
                     ipcp_strerror(st), ipcp_last_error());
            buf_free(dv, 1);
        }
#endif
        OK(ipcp_rmem_release(rm));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int o = 0; o < size; o++) {
        int into = (o + 1) % size == me || (o + 2) % size == me;
        if (into && o != me)
            fill(want, L, seed_of(base, o, me, 90));
        else
            memset(want, 0, L);
        if (memcmp(reg + (size_t)o * L, want, L))
            fail("slice %d of this rank's region: %s", o,
                 into && o != me ? "not the bytes rank o put" : "not zeros");
    }
    OK(ipcp_mem_deregister(mem));
    free(reg);
    free(out);
    free(back);
    free(want);
    free(descs);
}

/* A job without one-sided access (IPCPIPE_REMOTE_RMA=off): a region's
 * descriptor says no rank elsewhere reaches it, and importing it on
 * another node is refused with the reason. */
static void no_onesided(ipcp_comm_t *c, MPI_Comm world_of)
{
    int me = ipcp_comm_rank(c), size = ipcp_comm_size(c), wme, wpeer;
    int peer = (me + 1) % size;
    unsigned char reg[64], d[IPCP_DESC_MAX], pd[IPCP_DESC_MAX];
    size_t dlen = 0;
    ipcp_mem_t *mem;
    ipcp_rmem_t *rm;
    OK(ipcp_mem_register(c, reg, sizeof(reg), &mem));
    OK(ipcp_mem_pack(mem, d, sizeof(d), &dlen));
    MPI_Sendrecv(d, IPCP_DESC_MAX, MPI_BYTE, (me + size - 1) % size, 5, pd,
                 IPCP_DESC_MAX, MPI_BYTE, peer, 5, world_of, MPI_STATUS_IGNORE);
    MPI_Comm_rank(MPI_COMM_WORLD, &wme);
    MPI_Sendrecv(&wme, 1, MPI_INT, (me + size - 1) % size, 6, &wpeer, 1,
                 MPI_INT, peer, 6, world_of, MPI_STATUS_IGNORE);
    if (wpeer % nodes != wme % nodes) {
        ipcp_status_t st = ipcp_rmem_import(c, pd, dlen, &rm);
        if (st != IPCP_ERR_UNSUPPORTED ||
            !strstr(ipcp_last_error(), "cannot be reached from another node"))
            fail("import of a region on another node without one-sided "
                 "access: %s (%s)",
                 ipcp_strerror(st), ipcp_last_error());
    }
    MPI_Barrier(world_of);
    OK(ipcp_mem_deregister(mem));
}

/* Calls that reach only this node's ranks, aimed at rank 1 from rank 0. */
static void refused(ipcp_comm_t *c)
{
    if (ipcp_comm_rank(c) != 0)
        return;
    ipcp_request_t *r;
    if (nodes > 1) { /* rank 1 is on another node: host memory refused */
        ipcp_status_t st = ipcp_isend_on_stream(c, "x", 1, 1, 0, 0, &r);
        const char *want = use_dev ? "need device memory" : "CUDA backend";
        if (st != IPCP_ERR_UNSUPPORTED || !strstr(ipcp_last_error(), want))
            fail("stream-ordered send of host memory to another node: %s "
                 "(%s), want a reason with \"%s\"",
                 ipcp_strerror(st), ipcp_last_error(), want);
    }
    if (ipcp_isend(c, "x", 1, 9, 0, &r) != IPCP_ERR_INVALID ||
        !strstr(ipcp_last_error(), "out of range"))
        fail("a rank past the job: %s", ipcp_last_error());
}

/* Rank 0 enters the barrier late; the others must not leave before. */
static void barrier(ipcp_comm_t *c)
{
    double t0 = MPI_Wtime();
    if (ipcp_comm_rank(c) == 0) {
        struct timespec ts = {0, 200 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    OK(ipcp_barrier(c));
    if (MPI_Wtime() - t0 < 0.15)
        fail("left the barrier %.3f s after entering it, before rank 0 came",
             MPI_Wtime() - t0);
}

/* One message past INT_MAX bytes, rank 0 to rank 1 (another node). */
static void big(ipcp_comm_t *c, uint64_t base)
{
    size_t n = (size_t)2147483647 + 4097;
    int me = ipcp_comm_rank(c);
    if (me > 1)
        return;
    unsigned char *b = xmalloc(n), *want = xmalloc(n);
    ipcp_xfer_info_t info;
    fill(want, n, seed_of(base, 0, 1, 60));
    if (me == 0) {
        OK(ipcp_send(c, want, n, 1, 60));
    } else {
        memset(b, 0xa5, n);
        OK(ipcp_recv(c, b, n, 0, 60, &info));
        if (info.nbytes != n || info.path != IPCP_PATH_REMOTE ||
            memcmp(b, want, n))
            fail("%zu bytes from rank 0: data differs (%zu came, path %s)", n,
                 info.nbytes, ipcp_path_name(info.path));
        printf("rank 1: %zu bytes from rank 0 (another node): checked\n", n);
    }
    free(b);
    free(want);
}

/* Rank 3 ends without a word; the others wait for a message from it
 * (rank 1 on its node, ranks 0 and 2 on the other) and say what ipcpipe
 * told them, if they are still running then. */
static void die(ipcp_comm_t *c)
{
    int me = ipcp_comm_rank(c);
    unsigned char b[64];
    OK(ipcp_barrier(c));
    if (me == 3) {
        fprintf(stderr, "rank 3: ending now, without MPI_Finalize\n");
        _exit(7);
    }
    ipcp_status_t st = ipcp_recv(c, b, sizeof(b), 3, 70, NULL);
    printf("rank %d: a receive from rank 3 (%s node) returned %s (%s)\n", me,
           me % nodes == 1 ? "this" : "another", ipcp_strerror(st),
           ipcp_last_error());
    fflush(stdout);
}

int main(int argc, char **argv)
{
    ipcp_comm_t *world = NULL, *half = NULL;
    MPI_Comm split;
    int rank, size;
    uint64_t base = 0;
    char node[16];
    static const size_t sizes[] = {0,
                                   1,
                                   4096,
                                   4097,
                                   40000,
                                   64 << 10,
                                   (64 << 10) + 5,
                                   (1 << 20) + 3,
                                   (8 << 20) + 1};

    /* "mt" after the mode: MPI_THREAD_MULTIPLE, so that ipcpipe's
     * progress thread may move transfers with other nodes on. */
    int threads = 0, want_level = argc > 3 && !strcmp(argv[3], "mt")
                                      ? MPI_THREAD_MULTIPLE
                                      : MPI_THREAD_SINGLE;
    MPI_Init_thread(&argc, &argv, want_level, &threads);
    if (want_level == MPI_THREAD_MULTIPLE && threads != want_level)
        fail("MPI_THREAD_MULTIPLE asked, MPI gave level %d", threads);
    threads = want_level == MPI_THREAD_MULTIPLE;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    t_rank = rank;
    const char *mode = argc > 2 ? argv[2] : "";
    if (argc > 1)
        nodes = atoi(argv[1]);
    if (!strcmp(mode, "cuda")) {
#ifdef T_CUDA
        int here = cu_open(), all = 0;
        MPI_Allreduce(&here, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all) {
            if (rank == 0)
                printf("SKIP: no GPU for every rank\n");
            MPI_Finalize();
            return 77;
        }
        use_dev = 1;
#else
        fail("built without the CUDA headers: no cuda mode");
#endif
    }
    if (nodes < 1 || size < (strcmp(mode, "big") ? 2 : 1) * nodes)
        fail("%d nodes of %d ranks: each node needs two", nodes, size);
    snprintf(node, sizeof(node), "node%d", rank % nodes);
    setenv("IPCPIPE_NODE", node, 1);
    OK(ipcp_init_mpi(MPI_COMM_WORLD, NULL, &world));
    if (ipcp_comm_rank(world) != rank || ipcp_comm_size(world) != size)
        fail("rank %d of %d, MPI says %d of %d", ipcp_comm_rank(world),
             ipcp_comm_size(world), rank, size);
    if (rank == 0)
        base = (uint64_t)(MPI_Wtime() * 1e6) ^ 0x9e3779b97f4a7c15ull;
    MPI_Bcast(&base, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (!strcmp(mode, "big") || !strcmp(mode, "die")) {
        if (mode[0] == 'b')
            big(world, base);
        else
            die(world);
        OK(ipcp_finalize(world));
        MPI_Finalize();
        return 0;
    }
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        all_pairs(world, MPI_COMM_WORLD, sizes[i], base, (int)i);
    if (use_dev)
        all_pairs(world, MPI_COMM_WORLD, (32 << 20) + 5, base, 20);
    ring(world, (256 << 10) + 1, base);
    test_and_truncate(world, base);
    if (use_dev && nodes > 1)
        truncate_dev(world, base);
    order_dev(world, base);
    onesided(world, base);
#ifdef T_CUDA
    if (use_dev)
        ordered_dev(world, base, threads);
#endif
    one_buffer(world, base);
    refused(world);
    barrier(world);
    /* A second job: the first and second half of the ranks, each over
     * both nodes. */
    MPI_Comm_split(MPI_COMM_WORLD, rank < size / 2, rank, &split);
    /* Without one-sided access: Open MPI 4.1 makes the windows of both
     * halves under one name on this host (IPCPIPE_REMOTE_RMA). */
    setenv("IPCPIPE_REMOTE_RMA", "off", 1);
    OK(ipcp_init_mpi(split, NULL, &half));
    unsetenv("IPCPIPE_REMOTE_RMA");
    no_onesided(half, split);
    all_pairs(half, split, (1 << 20) + 7, base + 1, 7);
    ring(world, 4097, base + 2);
    MPI_Comm_free(&split);
    OK(ipcp_finalize(half));
    /* A receive from another node that nothing matches, left posted. */
    ipcp_request_t *orphan;
    static unsigned char spare[64];
    OK(ipcp_irecv(world, spare, sizeof(spare), (rank + 1) % size, 77, &orphan));
    OK(ipcp_barrier(world));
    OK(ipcp_finalize(world));
    if (ipcp_wait(orphan, NULL) != IPCP_ERR_INVALID)
        fail("the receive left posted outlived finalize");
    printf("rank %d of %d (node %s): every pair at 0 B to %s MiB%s, rings, "
           "a tested receive, truncation, barrier, a split job: checked\n",
           rank, size, node, use_dev ? "32" : "8",
           use_dev ? " (host and device memory)" : "");
    MPI_Finalize();
    return 0;
}
