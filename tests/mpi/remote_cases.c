/* The cases of test_remote_mpi with device memory (truncation, order,
 * stream-ordered calls) and one-sided calls (remote_test.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remote_test.h"

/* Rank 0's device memory into a device receive of rank 1 (another node)
 * too small: nothing written, the pieces drained, the next message of the
 * tag whole; a short message likewise, and one into a large device
 * receive (nothing past it written). */
void truncate_dev(ipcp_comm_t *c, uint64_t base)
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
void order_dev(ipcp_comm_t *c, uint64_t base)
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

/* Host receives shorter than 64 KiB ask their message's length first;
 * others (longer, device memory) are posted at once, unless one of their
 * tag asks before them: rank 1 takes rank 0's messages of one tag in the
 * order it posted the receives, each where it fits, nothing past its
 * bytes written.  A receive of another tag is not held up by one whose
 * message has not come (rank 0 sends that only once the other arrived). */
void order_asked(ipcp_comm_t *c, uint64_t base)
{
    enum { N = 5 };
    static const size_t len[N] = {12000, 70000, 500, 100, 20000};
    static const size_t cap[N] = {16384, 100000, 1000, 16384, 65536};
    const int dev[N] = {0, 0, 0, 0, use_dev};
    int me = ipcp_comm_rank(c);
    if (me > 1)
        return;
    ipcp_request_t *r[N];
    unsigned char *b[N], *h = xmalloc(cap[1]), *want = xmalloc(cap[1]);
    for (int i = 0; i < N; i++) {
        size_t n = me == 0 ? len[i] : cap[i];
        b[i] = buf_new(n, dev[i]);
        fill(h, n, me == 0 ? seed_of(base, 0, 1, 70 + i) : 0x5a5a);
        buf_put(b[i], h, n, dev[i]);
        if (me == 0)
            OK(ipcp_isend(c, b[i], len[i], 1, 53, &r[i]));
        else
            OK(ipcp_irecv(c, b[i], cap[i], 0, 53, &r[i]));
    }
    for (int i = 0; i < N; i++) {
        ipcp_xfer_info_t info;
        OK(ipcp_wait(r[i], &info));
        if (me == 0)
            continue;
        buf_get(h, b[i], cap[i], dev[i]);
        fill(want, cap[i], 0x5a5a);
        fill(want, len[i], seed_of(base, 0, 1, 70 + i));
        if (info.nbytes != len[i] || memcmp(h, want, cap[i]))
            fail("message %d of tag 53 (%zu bytes into a receive of %zu, "
                 "%s memory) came as %zu bytes%s",
                 i, len[i], cap[i], dev[i] ? "device" : "host", info.nbytes,
                 info.nbytes == len[i] ? " that differ or spill" : "");
    }
    for (int i = 0; i < N; i++)
        buf_free(b[i], dev[i]);
    uint64_t go = 0;
    unsigned char *m = want;
    if (me == 0) {
        fill(m, 3000, seed_of(base, 0, 1, 80));
        OK(ipcp_send(c, m, 3000, 1, 55));
        OK(ipcp_recv(c, &go, sizeof(go), 1, 56, NULL));
        fill(m, 3000, seed_of(base, 0, 1, 81));
        OK(ipcp_send(c, m, 3000, 1, 54));
    } else {
        ipcp_request_t *r54, *r55;
        OK(ipcp_irecv(c, h, 8192, 0, 54, &r54));
        OK(ipcp_irecv(c, h + 8192, 8192, 0, 55, &r55));
        OK(ipcp_wait(r55, NULL));
        OK(ipcp_send(c, &go, sizeof(go), 0, 56));
        OK(ipcp_wait(r54, NULL));
        fill(m, 3000, seed_of(base, 0, 1, 81));
        fill(m + 3000, 3000, seed_of(base, 0, 1, 80));
        if (memcmp(h, m, 3000) || memcmp(h + 8192, m + 3000, 3000))
            fail("tags 54 and 55: data differs");
    }
    free(h);
    free(want);
}

#ifdef T_CUDA
/* A stream-ordered send without a request to another node: without
 * threads refused (nothing would move it on), with threads it arrives. */
static void ordered_norequest(ipcp_comm_t *c, int peer, CUstream ss,
                              CUdeviceptr big, int threads)
{
    unsigned char h[8];
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
}

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
void ordered_dev(ipcp_comm_t *c, uint64_t base)
{
    const int threads = mpi_threads;
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
    ordered_norequest(c, peer, ss, big, threads);
    CU(cu.sdestroy(ss));
    CU(cu.sdestroy(rs));
    CU(cu.free(big));
    free(h);
    free(want);
}
#endif

/* The round of the bytes rank o leaves in rank t's region: with device
 * memory a rank on another node overwrites its host put with puts from
 * device buffers (through pinned slots), the last a stream-ordered one. */
static int onesided_round(int o, int t)
{
    return use_dev && t % nodes != o % nodes ? 92 : 90;
}

#ifdef T_CUDA
/* This rank's slice of rank t's region (elsewhere), got into a zeroed
 * device buffer dg, is want (else the failure says what). */
static void onesided_dev_get(ipcp_comm_t *c, ipcp_rmem_t *rm, int t, size_t L,
                             unsigned char *dg, const unsigned char *want,
                             const char *what)
{
    unsigned char *back = xmalloc(L);
    memset(back, 0, L);
    buf_put(dg, back, L, 1);
    OK(ipcp_get(c, dg, L, rm, (size_t)ipcp_comm_rank(c) * L));
    buf_get(back, dg, L, 1);
    if (memcmp(back, want, L))
        fail("a get into device memory from rank %d's region: not the "
             "bytes %s",
             t, what);
    free(back);
}

/* A stream-ordered put into rank t's region (elsewhere), then a
 * stream-ordered get back, on one stream: the put's buffer is written by
 * a copy enqueued just before it (behind a 64 MiB copy, so a put that
 * started early would send stale bytes), the get's is copied out by a
 * copy enqueued just after it (so a get whose stream went on early, or
 * that ran before the put ended, leaves other bytes there). */
static void onesided_dev_ordered(ipcp_comm_t *c, ipcp_rmem_t *rm, int t,
                                 size_t L, uint64_t base)
{
    const size_t slow = 64 << 20;
    size_t at = (size_t)ipcp_comm_rank(c) * L;
    unsigned char *h = xmalloc(L), *back = xmalloc(L);
    CUstream s;
    CUdeviceptr big, src, dv, dg, out;
    ipcp_request_t *pr, *gr;
    CUdeviceptr *all[4] = {&src, &dv, &dg, &out};
    CU(cu.screate(&s, 0));
    CU(cu.alloc(&big, 2 * slow));
    for (int k = 0; k < 4; k++) {
        CU(cu.alloc(all[k], L));
        CU(cu.memset(*all[k], 0, L));
    }
    fill(h, L, seed_of(base, ipcp_comm_rank(c), t, 92));
    buf_put((unsigned char *)(uintptr_t)src, h, L, 1);
    CU(cu.dtod(big + slow, big, slow, s));
    CU(cu.dtod(dv, src, L, s));
    OK(ipcp_iput_on_stream(c, (void *)(uintptr_t)dv, L, rm, at,
                           (ipcp_stream_t)s, &pr));
    OK(ipcp_iget_on_stream(c, (void *)(uintptr_t)dg, L, rm, at,
                           (ipcp_stream_t)s, &gr));
    CU(cu.dtod(out, dg, L, s));
    if (!mpi_threads) {
        /* Nothing would move a put without a request on. */
        ipcp_status_t st = ipcp_iput_on_stream(c, (void *)(uintptr_t)dv, L, rm,
                                               at, (ipcp_stream_t)s, NULL);
        if (st != IPCP_ERR_UNSUPPORTED ||
            !strstr(ipcp_last_error(), "MPI_THREAD_MULTIPLE"))
            fail("a stream-ordered put elsewhere without a request, without "
                 "MPI_THREAD_MULTIPLE: %s (%s)",
                 ipcp_strerror(st), ipcp_last_error());
    }
    OK(ipcp_wait(pr, NULL));
    OK(ipcp_wait(gr, NULL));
    CU(cu.ssync(s));
    buf_get(back, (unsigned char *)(uintptr_t)out, L, 1);
    if (memcmp(back, h, L))
        fail("a stream-ordered put then get with rank %d's region: the copy "
             "after the get saw other bytes",
             t);
    memset(back, 0, L);
    OK(ipcp_get(c, back, L, rm, at));
    if (memcmp(back, h, L))
        fail("a stream-ordered put into rank %d's region: a get into host "
             "memory finds other bytes",
             t);
    for (int k = 0; k < 4; k++)
        CU(cu.free(*all[k]));
    CU(cu.free(big));
    CU(cu.sdestroy(s));
    free(h);
    free(back);
}

/* Rank t's region (elsewhere) from device memory.  out: the bytes this
 * rank's host put left in its slice.  A get into device memory must find
 * them (no staged transfer of this rank held them, so stale slot bytes
 * cannot pass); then fresh bytes put from device memory must be what a
 * get into host memory finds, and a get into device memory too. */
static void onesided_dev(ipcp_comm_t *c, ipcp_rmem_t *rm, int t, size_t L,
                         const unsigned char *out, uint64_t base)
{
    int me = ipcp_comm_rank(c);
    unsigned char *h = xmalloc(L), *back = xmalloc(L);
    unsigned char *dv = buf_new(L, 1), *dg = buf_new(L, 1);
    ipcp_request_t *r;
    onesided_dev_get(c, rm, t, L, dg, out,
                     "this rank put there from host memory");
    fill(h, L, seed_of(base, me, t, 91));
    buf_put(dv, h, L, 1);
    OK(ipcp_iput(c, dv, L, rm, (size_t)me * L, &r));
    OK(ipcp_wait(r, NULL));
    memset(back, 0, L);
    OK(ipcp_get(c, back, L, rm, (size_t)me * L));
    if (memcmp(back, h, L))
        fail("a put from device memory into rank %d's region: a get into "
             "host memory finds other bytes",
             t);
    onesided_dev_get(c, rm, t, L, dg, h, "put there from device memory");
    onesided_dev_ordered(c, rm, t, L, base);
    buf_free(dv, 1);
    buf_free(dg, 1);
    free(h);
    free(back);
}
#endif

/* One-sided calls over the job: each rank registers a host region of a
 * slice per rank, packs it, and every rank imports the regions of the
 * next two ranks (on another node and, with two nodes, on this one),
 * puts fresh bytes into its own slice of each, gets them back, and
 * checks after a barrier that its own region holds every slice put into
 * it and zeros elsewhere.  With device memory the ranks elsewhere put
 * and get again from device buffers, plainly and then stream-ordered. */
void onesided(ipcp_comm_t *c, uint64_t base)
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
        if (onesided_round(me, t) == 92)
            onesided_dev(c, rm, t, L, out, base);
#endif
        OK(ipcp_rmem_release(rm));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int o = 0; o < size; o++) {
        int into = (o + 1) % size == me || (o + 2) % size == me;
        if (into && o != me)
            fill(want, L, seed_of(base, o, me, onesided_round(o, me)));
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

/* A region of this node that goes away leaves the imports of regions
 * elsewhere be, even where their owner's rank in the job and region id
 * are those of the region gone (owner ranks are numbered per node here,
 * per job elsewhere): every rank registers a region and imports those of
 * the next two ranks; the ranks of node 0 deregister theirs; every
 * import of a region not on node 0 then still takes a put and a get, and
 * one on node 0 of this node is refused (its owner said it went). */
void onesided_dereg(ipcp_comm_t *c, uint64_t base)
{
    enum { N = 4096 };
    int me = ipcp_comm_rank(c), size = ipcp_comm_size(c);
    unsigned char *reg = xmalloc((size_t)size * N), out[N], back[N];
    unsigned char *descs = xmalloc((size_t)size * IPCP_DESC_MAX);
    unsigned char d[IPCP_DESC_MAX];
    size_t dlen = 0;
    ipcp_mem_t *mem;
    ipcp_rmem_t *rm[2] = {NULL, NULL};
    int t[2] = {(me + 1) % size, (me + 2) % size};
    if (nodes < 2 || size < 4) {
        free(descs);
        free(reg);
        return;
    }
    /* A slice per rank: each origin puts into its own. */
    OK(ipcp_mem_register(c, reg, (size_t)size * N, &mem));
    memset(d, 0, sizeof(d));
    OK(ipcp_mem_pack(mem, d, sizeof(d), &dlen));
    MPI_Allgather(d, IPCP_DESC_MAX, MPI_BYTE, descs, IPCP_DESC_MAX, MPI_BYTE,
                  MPI_COMM_WORLD);
    for (int i = 0; i < 2; i++)
        OK(ipcp_rmem_import(c, descs + (size_t)t[i] * IPCP_DESC_MAX, dlen,
                            &rm[i]));
    MPI_Barrier(MPI_COMM_WORLD);
    if (me % nodes == 0)
        OK(ipcp_mem_deregister(mem));
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < 2; i++) {
        int here = t[i] % nodes == me % nodes;
        if (t[i] % nodes != 0) {
            fill(out, N, seed_of(base, me, t[i], 95));
            OK(ipcp_put(c, out, N, rm[i], (size_t)me * N));
            OK(ipcp_get(c, back, N, rm[i], (size_t)me * N));
            if (memcmp(back, out, N))
                fail("region of rank %d after a region of node 0 went: not "
                     "the bytes put there",
                     t[i]);
        } else if (here) {
            ipcp_status_t st = ipcp_put(c, out, N, rm[i], (size_t)me * N);
            if (st != IPCP_ERR_NOT_REGISTERED)
                fail("a put into rank %d's deregistered region: %s (%s)", t[i],
                     ipcp_strerror(st), ipcp_last_error());
        }
        OK(ipcp_rmem_release(rm[i]));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me % nodes != 0)
        OK(ipcp_mem_deregister(mem));
    free(descs);
    free(reg);
}

/* A job without one-sided access (IPCPIPE_REMOTE_RMA=off): a region's
 * descriptor says no rank elsewhere reaches it, and importing it on
 * another node is refused with the reason. */
void no_onesided(ipcp_comm_t *c, MPI_Comm world_of)
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
