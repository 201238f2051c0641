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

#include "ipcpipe_mpi.h"
#include "remote_test.h"

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

/* Ranks 0 and 1: a long message (a header, then pieces) for a receive
 * that asks its length first is cut, nothing written, and the next
 * message of the tag arrives whole. */
static void truncate_asked(ipcp_comm_t *c, uint64_t base)
{
    const size_t cap = 20000, n = 70000, next = 9000;
    unsigned char *b = xmalloc(n), *want = xmalloc(n);
    ipcp_xfer_info_t info;
    int me = ipcp_comm_rank(c);
    if (me == 1) {
        memset(b, 0x5a, n);
        memset(want, 0x5a, n);
        ipcp_status_t st = ipcp_recv(c, b, cap, 0, 9, &info);
        if (st != IPCP_ERR_TRUNCATED || !strstr(ipcp_last_error(), "rank 0"))
            fail("%zu-byte receive of %zu bytes: %s (%s)", cap, n,
                 ipcp_strerror(st), ipcp_last_error());
        if (memcmp(b, want, n))
            fail("a %zu-byte receive too small was written", cap);
        OK(ipcp_recv(c, b, cap, 0, 9, &info));
        fill(want, next, seed_of(base, 0, 1, 10));
        if (info.nbytes != next || memcmp(b, want, next))
            fail("%zu bytes after a message cut: %zu bytes, data %s", next,
                 info.nbytes, memcmp(b, want, next) ? "differs" : "same");
    } else if (me == 0) {
        fill(b, n, seed_of(base, 0, 1, 9));
        ipcp_status_t st = ipcp_send(c, b, n, 1, 9);
        if (st != IPCP_OK && st != IPCP_ERR_TRUNCATED)
            fail("send of %zu bytes to a receive of %zu: %s (%s)", n, cap,
                 ipcp_strerror(st), ipcp_last_error());
        fill(b, next, seed_of(base, 0, 1, 10));
        OK(ipcp_send(c, b, next, 1, 9));
    }
    free(b);
    free(want);
}

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

/* Calls that reach only this node's ranks, aimed at rank 1 from rank 0. */
static void refused(ipcp_comm_t *c)
{
    if (ipcp_comm_rank(c) != 0)
        return;
    ipcp_request_t *r;
    if (nodes > 1) { /* rank 1 is on another node: host memory refused */
        ipcp_status_t st = ipcp_isend_on_stream(c, "x", 1, 1, 0, 0, &r);
        /* Host memory: refused by the CUDA backend where it loaded (a
         * GPU machine, whether or not this case uses device buffers), or
         * for want of it. */
        const char *e = ipcp_last_error(), *want = "need device memory";
        int ok = strstr(e, want) || (!use_dev && strstr(e, "CUDA backend"));
        if (st != IPCP_ERR_UNSUPPORTED || !ok)
            fail("stream-ordered send of host memory to another node: %s "
                 "(%s), want a reason with \"%s\"%s",
                 ipcp_strerror(st), e, want,
                 use_dev ? "" : " or \"CUDA backend\"");
    }
    if (ipcp_isend(c, "x", 1, 9, 0, &r) != IPCP_ERR_INVALID ||
        !strstr(ipcp_last_error(), "out of range"))
        fail("a rank past the job: %s", ipcp_last_error());
}

/* Rank 0 enters the barrier late; the others must not leave before.
 * The ranks start the wait together (MPI's barrier first): they end the
 * phases before at different times, and a rank that came 50 ms after
 * rank 0 would wait only 150 ms of its 200 (seen on a GPU machine). */
static void barrier(ipcp_comm_t *c)
{
    MPI_Barrier(MPI_COMM_WORLD);
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

/* "cuda": 1 when every rank has a GPU (device buffers then), 0 when one
 * has none (the test is skipped). */
static int dev_open(int rank)
{
#ifdef T_CUDA
    int here = cu_open(), all = 0;
    MPI_Allreduce(&here, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all && rank == 0)
        printf("SKIP: no GPU for every rank\n");
    use_dev = all;
    return all;
#else
    (void)rank;
    fail("built without the CUDA headers: no cuda mode");
    return 0;
#endif
}

/* Every case but the split job, in order, with the job of all ranks. */
static void phases(ipcp_comm_t *world, uint64_t base)
{
    static const size_t sizes[] = {0,
                                   1,
                                   4096,
                                   4097,
                                   40000,
                                   64 << 10,
                                   (64 << 10) + 5,
                                   (1 << 20) + 3,
                                   (8 << 20) + 1};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        all_pairs(world, MPI_COMM_WORLD, sizes[i], base, (int)i);
    if (use_dev)
        all_pairs(world, MPI_COMM_WORLD, (32 << 20) + 5, base, 20);
    ring(world, (256 << 10) + 1, base);
    test_and_truncate(world, base);
    truncate_asked(world, base);
    if (use_dev && nodes > 1)
        truncate_dev(world, base);
    order_dev(world, base);
    order_asked(world, base);
    /* Without a window (IPCPIPE_REMOTE_RMA=off): refused, saying so. */
    const char *rma = getenv("IPCPIPE_REMOTE_RMA");
    if (rma && !strcmp(rma, "off"))
        no_onesided(world, MPI_COMM_WORLD);
    else {
        onesided(world, base);
        onesided_dereg(world, base);
    }
#ifdef T_CUDA
    if (use_dev)
        ordered_dev(world, base);
#endif
    one_buffer(world, base);
    refused(world);
    barrier(world);
}

/* A second job beside the first: the first and second half of the
 * ranks, each over both nodes, without one-sided access (Open MPI 4.1
 * makes the windows of both halves under one name on this host:
 * IPCPIPE_REMOTE_RMA). */
static void split_job(ipcp_comm_t *world, uint64_t base)
{
    ipcp_comm_t *half = NULL;
    MPI_Comm split;
    int rank = ipcp_comm_rank(world), size = ipcp_comm_size(world);
    MPI_Comm_split(MPI_COMM_WORLD, rank < size / 2, rank, &split);
    setenv("IPCPIPE_REMOTE_RMA", "off", 1);
    OK(ipcp_init_mpi(split, NULL, &half));
    unsetenv("IPCPIPE_REMOTE_RMA");
    no_onesided(half, split);
    all_pairs(half, split, (1 << 20) + 7, base + 1, 7);
    ring(world, 4097, base + 2);
    MPI_Comm_free(&split);
    OK(ipcp_finalize(half));
}

int main(int argc, char **argv)
{
    ipcp_comm_t *world = NULL;
    int rank, size;
    uint64_t base = 0;
    char node[16];

    /* "mt" after the mode: MPI_THREAD_MULTIPLE, so that ipcpipe's
     * progress thread may move transfers with other nodes on. */
    int provided = 0, want_level = argc > 3 && !strcmp(argv[3], "mt")
                                       ? MPI_THREAD_MULTIPLE
                                       : MPI_THREAD_SINGLE;
    MPI_Init_thread(&argc, &argv, want_level, &provided);
    if (want_level == MPI_THREAD_MULTIPLE && provided != want_level)
        fail("MPI_THREAD_MULTIPLE asked, MPI gave level %d", provided);
    mpi_threads = want_level == MPI_THREAD_MULTIPLE;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    t_rank = rank;
    const char *mode = argc > 2 ? argv[2] : "";
    if (argc > 1)
        nodes = atoi(argv[1]);
    if (!strcmp(mode, "cuda") && !dev_open(rank)) {
        MPI_Finalize();
        return 77;
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
    phases(world, base);
    split_job(world, base);
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
