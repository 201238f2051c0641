/* The public calls' routing of ranks on other nodes (engine/remote.h),
 * with a transport of this test's: a one-rank job here made rank 1 of a
 * job of 3, whose ranks 0 and 2 are "elsewhere".  The transport echoes:
 * a receive from a rank elsewhere completes with the oldest unread send
 * to that rank with its tag (so no MPI is needed, and the sanitizers see
 * the routing; remote_echo.c).  Checks: ranks and size as the job's, every byte
 * of an echoed transfer (with the header, in pieces), path remote, a receive
 * too small (nothing written, the rest drained), a short message in place, what
 * no ipcpipe sends (a short message, another version's header, a sender that
 * stops, pieces too long and too short: each drained), a send the transport
 * refuses (its call fails, the next ones arrive), test and a timed wait, the
 * barrier reaching the transport, calls that do not reach another node refused,
 * finalize ending a receive still posted and closing the transport once, maps
 * that do not fit refused (and the transport closed), the job's name as the
 * caller gave it, staged device memory's pieces.  Receives take sends in the
 * order they were posted, as MPI's do (the pieces of a message share a tag).
 *
 *   test_api_remote loop|badmap|device|inline|staged|staged_odd|
 *                   staged_small|staged_short */
#include "apitest.h"

#include <unistd.h>

#include "common/log.h"
#include "common/status.h"
#include "engine/remote.h"
#include "engine/remote_xfer.h"
#include "fakedev.h"
#include "ipcpipe_cuda.h"
#include "remote_echo.h"

static ipcp_comm_t *one_rank(void)
{
    static char job[64];
    ipcp_comm_params_t p;
    ipcp_comm_t *comm = NULL;
    snprintf(job, sizeof job, "apiremote-%ld", (long)getpid());
    ipcp_comm_params_init(&p);
    p.rank = 0;
    p.size = 1;
    p.job_id = job;
    T_OK(ipcp_init(&p, &comm));
    return comm;
}

/* Sends n fresh bytes to `peer` (elsewhere) and receives them back. */
static void round_trip(ipcp_comm_t *c, int peer, size_t n, int tag)
{
    unsigned char *out = t_malloc(n + 1), *in = t_malloc(n + 1);
    ipcp_request_t *r;
    ipcp_xfer_info_t info;
    uint64_t seed = t_fresh_seed();
    ipcp_pattern_fill(out, n, seed, 0);
    memset(in, 0, n + 1);
    T_OK(ipcp_send(c, out, n, peer, tag));
    T_OK(ipcp_irecv(c, in, n, peer, tag, &r));
    T_OK(ipcp_wait(r, &info));
    T_EQ_U64(info.nbytes, n);
    T_EQ_INT(info.path, IPCP_PATH_REMOTE);
    T_CHECK(memcmp(in, out, n) == 0);
    free(out);
    free(in);
}

/* Receives too small and short messages in place (case_loop). */
static void loop_truncated(ipcp_comm_t *c)
{
    unsigned char buf[256], small[16];
    ipcp_xfer_info_t info;
    memset(buf, 0x33, sizeof(buf));
    /* Too small, in the header and in pieces: nothing written, the
     * pieces drained (the next message of the tag arrives whole). */
    memset(small, 0x5a, sizeof(small));
    T_OK(ipcp_send(c, buf, sizeof(buf), 0, 5));
    T_STATUS(ipcp_recv(c, small, sizeof(small), 0, 5, NULL),
             IPCP_ERR_TRUNCATED);
    T_MSG_HAS("a message of 256 bytes from rank 0 (on another node) for a "
              "receive of 16");
    T_CHECK(small[0] == 0x5a && small[15] == 0x5a);
    /* Into a receive that holds the longest short message (in place:
     * nothing past the message written): bytes behind a header (which
     * the buffer's first bytes took, put back), a message of one piece
     * (its header there first), bytes alone; then one too long for a
     * receive that does not hold the longest (cut in the job's room, the
     * buffer untouched). */
    {
        static const size_t ns[] = {0,
                                    1,
                                    100,
                                    IPCP_RX_COPY,
                                    IPCP_RX_COPY + 1,
                                    IPCP_RX_HEAD,
                                    IPCP_RX_HEAD + 1,
                                    5000};
        size_t cap = 100000;
        unsigned char *out = t_malloc(cap), *in = t_malloc(cap);
        for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++) {
            size_t n = ns[k];
            ipcp_pattern_fill(out, cap, t_fresh_seed(), 0);
            memset(in, 0x5a, cap);
            T_OK(ipcp_send(c, out, n, 0, 5));
            T_OK(ipcp_recv(c, in, cap, 0, 5, &info));
            T_EQ_U64(info.nbytes, n);
            T_CHECK(memcmp(in, out, n) == 0);
            for (size_t i = n; i < cap; i++)
                T_CHECK(in[i] == 0x5a);
        }
        memset(in, 0x5a, cap);
        T_OK(ipcp_send(c, out, 60000, 0, 5));
        T_STATUS(ipcp_recv(c, in, 50000, 0, 5, NULL), IPCP_ERR_TRUNCATED);
        T_MSG_HAS("a message of 60000 bytes from rank 0 (on another node) "
                  "for a receive of 50000");
        for (size_t i = 0; i < cap; i++)
            T_CHECK(in[i] == 0x5a);
        free(out);
        free(in);
    }
    {
        size_t big = 300000, part = 100000;
        unsigned char *out = t_malloc(big), *in = t_malloc(big);
        ipcp_pattern_fill(out, big, t_fresh_seed(), 0);
        memset(in, 0x5a, big);
        T_OK(ipcp_send(c, out, big, 0, 5));
        T_STATUS(ipcp_recv(c, in, part, 0, 5, NULL), IPCP_ERR_TRUNCATED);
        T_MSG_HAS("a message of 300000 bytes from rank 0");
        for (size_t i = 0; i < big; i++)
            T_CHECK(in[i] == 0x5a);
        free(out);
        free(in);
        round_trip(c, 0, 70000, 5);
    }
}

/* What no ipcpipe sends (case_loop). */
static void loop_hostile(ipcp_comm_t *c)
{
    unsigned char buf[256];
    /* What no ipcpipe sends: a short message, a header of another
     * version, a sender that stops after its header (a piece of no
     * bytes: the others asked for are cancelled). */
    {
        struct {
            uint32_t magic, seq;
            uint64_t len;
            uint32_t chunk, flags;
        } h = {0x69707232u, 0, 8, 0, 0};
        void *op;
        int cancels = echo.cancels;
        T_OK(echo_post(0, 1, "junk", 4, 0, 8, &op));
        T_STATUS(ipcp_recv(c, buf, sizeof(buf), 0, 8, NULL),
                 IPCP_ERR_PEER_LOST);
        T_MSG_HAS("a message of 4 bytes from rank 0 (on another node) is no "
                  "ipcpipe header");
        T_OK(echo_post(0, 1, &h, sizeof(h), 0, 8, &op));
        T_STATUS(ipcp_recv(c, buf, sizeof(buf), 0, 8, NULL),
                 IPCP_ERR_PEER_LOST);
        T_MSG_HAS("a header ipcpipe cannot read (magic 0x69707232");
        /* A short message whose bytes are not its length. */
        h.magic = 0x69707233u;
        T_OK(echo_post(0, 1, &h, sizeof(h), 0, 8, &op));
        T_STATUS(ipcp_recv(c, buf, sizeof(buf), 0, 8, NULL),
                 IPCP_ERR_PEER_LOST);
        T_MSG_HAS("cannot read (magic 0x69707233, 24 bytes, length 8");
        /* The same into a receive in place: the buffer as it was. */
        {
            size_t cap = 100000;
            unsigned char *big = t_malloc(cap);
            const void *msg[3] = {"junk", &h, &h};
            const size_t len[3] = {4, sizeof(h), sizeof(h)};
            for (int k = 0; k < 3; k++) {
                h.magic = k == 1 ? 0x69707232u : 0x69707233u;
                memset(big, 0x5a, cap);
                T_OK(echo_post(0, 1, (void *)msg[k], len[k], 0, 8, &op));
                T_STATUS(ipcp_recv(c, big, cap, 0, 8, NULL),
                         IPCP_ERR_PEER_LOST);
                for (size_t i = 0; i < cap; i++)
                    T_CHECK(big[i] == 0x5a);
            }
            free(big);
        }
        h.seq = 999;
        h.len = 3 * 65536;
        h.chunk = 65536;
        unsigned char *in = t_malloc(h.len);
        T_OK(echo_post(0, 1, &h, sizeof(h), 0, 8, &op));
        T_OK(echo_post(1, 1, "", 0, 0, 999, &op));
        T_STATUS(ipcp_recv(c, in, h.len, 0, 8, NULL), IPCP_ERR_PEER_LOST);
        T_MSG_HAS("rank 0 (on another node) stopped sending after 0 of "
                  "196608 bytes");
        T_EQ_INT(echo.cancels - cancels, 2);
        /* A piece longer than due, then one shorter: each fails the
         * receive naming the rank, the rest of its message is drained
         * (the next message of the tag arrives whole). */
        unsigned char *junk = t_malloc(70000);
        memset(junk, 7, 70000);
        h.seq = 998;
        h.len = 2 * 65536;
        T_OK(echo_post(0, 1, &h, sizeof(h), 0, 8, &op));
        T_OK(echo_post(1, 1, junk, 70000, 0, 998, &op));
        T_OK(echo_post(1, 1, junk, 65536, 0, 998, &op));
        memset(in, 0x5a, h.len);
        T_STATUS(ipcp_recv(c, in, h.len, 0, 8, NULL), IPCP_ERR_PEER_LOST);
        T_MSG_HAS("rank 0 (on another node) sent a piece longer than the "
                  "65536 bytes due");
        h.seq = 997;
        T_OK(echo_post(0, 1, &h, sizeof(h), 0, 8, &op));
        T_OK(echo_post(1, 1, junk, 100, 0, 997, &op));
        T_OK(echo_post(1, 1, junk, 65536, 0, 997, &op));
        T_STATUS(ipcp_recv(c, in, h.len, 0, 8, NULL), IPCP_ERR_PEER_LOST);
        T_MSG_HAS("sent a piece of 100 bytes where 65536 were due");
        free(junk);
        free(in);
        round_trip(c, 0, 70000, 8);
    }
}

/* Sends the transport refuses (case_loop). */
static void loop_refused(ipcp_comm_t *c)
{
    ipcp_request_t *r;
    /* A send the transport refuses fails its call with the transport's
     * reason and leaves nothing behind; the sends around it arrive, in
     * order: short (behind a header, and its bytes alone) and long. */
    {
        static const size_t len[3] = {100, 40000, 100000};
        for (int k = 0; k < 3; k++) {
            size_t n = len[k];
            unsigned char *m[3], *in = t_malloc(n);
            for (int i = 0; i < 3; i++) {
                m[i] = t_malloc(n);
                memset(m[i], 'A' + i, n);
            }
            T_OK(ipcp_send(c, m[0], n, 0, 9));
            echo.refuse = 1;
            T_STATUS(ipcp_send(c, m[1], n, 0, 9), IPCP_ERR_SYSTEM);
            T_MSG_HAS("echo: a send refused");
            T_OK(ipcp_isend(c, m[2], n, 0, 9, &r));
            T_OK(ipcp_wait(r, NULL));
            for (int i = 0; i < 3; i += 2) {
                ipcp_xfer_info_t got;
                memset(in, 0, n);
                T_OK(ipcp_recv(c, in, n, 0, 9, &got));
                T_EQ_INT((int)got.nbytes, (int)n);
                T_CHECK(memcmp(in, m[i], n) == 0);
            }
            for (int i = 0; i < 3; i++)
                free(m[i]);
            free(in);
        }
    }
}

static int case_loop(void)
{
    setenv("IPCPIPE_REMOTE_CHUNK", "64K", 1);
    ipcp_comm_t *c = one_rank();
    int local[3] = {-1, 0, -1};
    unsigned char buf[256];
    ipcp_request_t *r;
    ipcp_xfer_info_t info;
    int done = 0;
    T_OK(ipcp__comm_remote(c, "whole", 1, 3, local, &echo_ops, &echo));
    T_EQ_INT(ipcp_comm_rank(c), 1);
    T_EQ_INT(ipcp_comm_size(c), 3);
    /* In the header, at its edge, in pieces of 64 KiB (IPCPIPE_REMOTE_CHUNK
     * below): one, several, past the window of 8, the last one short. */
    round_trip(c, 0, 0, 1);
    round_trip(c, 2, 4095, 2);
    round_trip(c, 2, 4096, 2);
    round_trip(c, 0, 4097, 2);
    round_trip(c, 2, 65535, 2);
    int pieces = echo.piece_sends;
    round_trip(c, 2, 65536, 2); /* IPCPIPE_REMOTE_INLINE's default */
    T_EQ_INT(echo.piece_sends - pieces, 0);
    round_trip(c, 0, 65537, 3);
    T_EQ_INT(echo.piece_sends - pieces, 2);
    round_trip(c, 0, 1 << 20, 3);
    round_trip(c, 2, (2 << 20) + 3, 3);
    /* Tested, then waited for with a time limit, until its send comes. */
    T_OK(ipcp_irecv(c, buf, sizeof(buf), 2, 4, &r));
    T_STATUS(ipcp_test(r, &done, &info), IPCP_IN_PROGRESS);
    T_EQ_INT(done, 0);
    T_STATUS(ipcp_wait_for(r, 0.001, &done, &info), IPCP_IN_PROGRESS);
    T_OK(ipcp_send(c, "hello", 6, 2, 4));
    T_OK(ipcp_wait_for(r, 5.0, &done, &info));
    T_EQ_INT(done, 1);
    T_EQ_U64(info.nbytes, 6);
    T_CHECK(strcmp((char *)buf, "hello") == 0);
    loop_truncated(c);
    loop_hostile(c);
    loop_refused(c);
    /* To this rank; past the job. */
    T_STATUS(ipcp_isend(c, buf, 1, 1, 6, &r), IPCP_ERR_INVALID);
    T_MSG_HAS("is this rank");
    T_STATUS(ipcp_isend(c, buf, 1, 3, 6, &r), IPCP_ERR_INVALID);
    T_MSG_HAS("out of range [0, 3)");
    /* Stream-ordered: without a request where only the caller's threads
     * may call the transport (nothing would move it on); of host memory
     * (or without a GPU) as on one node. */
    T_STATUS(ipcp_isend_on_stream(c, buf, 1, 0, 6, 0, NULL),
             IPCP_ERR_UNSUPPORTED);
    T_MSG_HAS("rank 0 is on another node, and ipcpipe's thread may not call");
    T_STATUS(ipcp_isend_on_stream(c, buf, 1, 0, 6, 0, &r),
             IPCP_ERR_UNSUPPORTED);
    /* Without a GPU, no CUDA backend; with one, host memory refused. */
    T_CHECK(strstr(ipcp_last_error(), "needs the CUDA backend") ||
            strstr(ipcp_last_error(), "need device memory"));
    T_CHECK(strcmp(ipcp_comm_job(c), "whole") == 0);
    T_OK(ipcp_barrier(c));
    T_EQ_INT(echo.barriers, 1);
    /* Left posted: finalize cancels it and closes the transport. */
    T_OK(ipcp_irecv(c, buf, sizeof(buf), 0, 9, &r));
    int cancels = echo.cancels;
    T_OK(ipcp_finalize(c));
    T_EQ_INT(echo.cancels - cancels, 1);
    T_EQ_INT(echo.closes, 1);
    T_STATUS(ipcp_wait(r, NULL), IPCP_ERR_INVALID);
    return 0;
}

/* A message of n bytes, and the pieces and messages of bytes alone the
 * transport saw for it (case_inline, case_staged_short). */
typedef struct form_case {
    size_t n;
    int pieces, alone;
} form_case_t;

/* What the transport saw since it had seen pieces and alone, as m says. */
static void form_check(const form_case_t *m, int pieces, int alone)
{
    T_EQ_INT(echo.piece_sends - pieces, m->pieces);
    T_EQ_INT(echo.alone_sends - alone, m->alone);
}

/* IPCPIPE_REMOTE_INLINE=16K: host messages up to IPCP_RX_COPY bytes leave
 * copied behind their header, those past IPCP_RX_HEAD up to 16 KiB as
 * their bytes alone, all others as the header, then pieces straight from
 * the buffer.  Every byte arrives either
 * way (a receiver takes every form whatever its own setting: it reads
 * none). */
static int case_inline(void)
{
    static const form_case_t m[] = {
        {1, 0, 0},
        {IPCP_RX_COPY, 0, 0},
        {IPCP_RX_COPY + 1, 1, 0},
        {IPCP_RX_HEAD, 1, 0},
        {IPCP_RX_HEAD + 1, 0, 1},
        {4096, 0, 1},
        {16384, 0, 1},
        {16385, 1, 0},
        {65536, 1, 0},
        {65537, 2, 0},
        {200000, 4, 0},
    };
    setenv("IPCPIPE_REMOTE_INLINE", "16K", 1);
    setenv("IPCPIPE_REMOTE_CHUNK", "64K", 1);
    ipcp_comm_t *c = one_rank();
    int local[3] = {-1, 0, -1};
    T_OK(ipcp__comm_remote(c, "whole", 1, 3, local, &echo_ops, &echo));
    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
        int pieces = echo.piece_sends, alone = echo.alone_sends;
        round_trip(c, 2, m[i].n, 8);
        form_check(&m[i], pieces, alone);
    }
    /* Too long for its receive, with the header and past it (then one
     * piece of the message's length, drained): nothing written, and the
     * tag's next message arrives whole. */
    for (size_t n = 5000; n <= 20000; n += 15000) {
        unsigned char *out = t_malloc(n), small[16];
        memset(out, 0x21, n);
        memset(small, 0x5a, sizeof(small));
        T_OK(ipcp_send(c, out, n, 2, 9));
        T_STATUS(ipcp_recv(c, small, sizeof(small), 2, 9, NULL),
                 IPCP_ERR_TRUNCATED);
        T_MSG_HAS("for a receive of 16");
        T_CHECK(small[0] == 0x5a && small[15] == 0x5a);
        round_trip(c, 2, n, 9);
        free(out);
    }
    T_OK(ipcp_finalize(c));
    return 0;
}

/* (Fake) device memory that is host memory (tests/util/fakedev.h) as the
 * process's device backend.  Short messages into device memory are copied
 * from a host slot: the host backend's queues copy this device's memory. */
static void use_fakedev(void)
{
    static ipcp__backend_ops_t fk;
    fakedev_ops(&fk);
    fk.queue_user = fk.queue_create;
    ipcp__device_backend_for_tests = &fk;
}

/* n fresh bytes from src to rank 0 (elsewhere) and back into dst, each
 * of them host or (fake) device memory; every byte checked, nothing past
 * n written. */
static void device_trip(ipcp_comm_t *c, unsigned char *src, unsigned char *dst,
                        size_t n)
{
    ipcp_request_t *r;
    ipcp_xfer_info_t info;
    ipcp_pattern_fill(src, n, t_fresh_seed(), 0);
    memset(dst, 0x5a, n + 1);
    T_OK(ipcp_isend(c, src, n, 0, 7, &r));
    T_OK(ipcp_wait(r, NULL));
    T_OK(ipcp_recv(c, dst, n, 0, 7, &info));
    T_EQ_U64(info.nbytes, n);
    T_EQ_INT(info.path, IPCP_PATH_REMOTE);
    T_CHECK(memcmp(dst, src, n) == 0);
    T_CHECK(dst[n] == 0x5a);
}

/* Two (fake) device buffers and two host ones of cap bytes and one more,
 * for device_trip. */
static void trip_buffers(size_t cap, unsigned char *dev[2],
                         unsigned char *host[2])
{
    for (int i = 0; i < 2; i++) {
        dev[i] = t_malloc(cap + 1);
        fakedev_add(dev[i], cap + 1, NULL);
        host[i] = t_malloc(cap + 1);
    }
}

static void trip_buffers_free(unsigned char *dev[2], unsigned char *host[2])
{
    for (int i = 0; i < 2; i++) {
        free(dev[i]);
        free(host[i]);
    }
}

/* A transport that reads device memory (ops->device_mem, a CUDA-aware
 * MPI), with a device that is host memory (tests/util/fakedev.h): device
 * buffers go to it as they are, never staged through host memory; short
 * and long messages in
 * every pairing of host and device memory arrive whole. */
static int case_device(void)
{
    use_fakedev();
    setenv("IPCPIPE_REMOTE_CHUNK", "64K", 1);
    ipcp_comm_t *c = one_rank();
    int local[2] = {-1, 0};
    /* The same transport, reading and writing device memory itself (a
     * CUDA-aware MPI); the communicator keeps the table until finalize. */
    static ipcp__remote_ops_t dev_ops;
    dev_ops = echo_ops;
    dev_ops.device_mem = 1;
    T_OK(ipcp__comm_remote(c, "whole", 1, 2, local, &dev_ops, &echo));
    const size_t cap = (1u << 20) + 4,
                 sizes[] = {0, 1, 8, 4096, 4097, 65536, 65537, 1u << 20};
    unsigned char *dev[2], *host[2];
    trip_buffers(cap, dev, host);
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t n = sizes[k];
        device_trip(c, dev[0], dev[1], n);
        device_trip(c, host[0], dev[1], n);
        device_trip(c, dev[0], host[1], n);
    }
    T_CHECK(echo.device_ops > 0);
    /* Straight from and into the user's device buffers: pieces name them
     * (the first piece at the buffer's start). */
    echo.watch = dev[0];
    device_trip(c, dev[0], host[1], 1u << 20);
    T_CHECK(echo.watched > 0);
    echo.watched = 0;
    echo.watch = dev[1];
    device_trip(c, host[0], dev[1], 1u << 20);
    T_CHECK(echo.watched > 0);
    T_OK(ipcp_finalize(c));
    trip_buffers_free(dev, host);
    return 0;
}

/* The pieces of one trip from src (n bytes) to rank 0 elsewhere. */
static int staged_pieces(ipcp_comm_t *c, unsigned char *src, unsigned char *dst,
                         size_t n)
{
    int before = echo.piece_sends;
    device_trip(c, src, dst, n);
    return echo.piece_sends - before;
}

typedef struct staged_case {
    size_t n;
    int pieces;
} staged_case_t;

/* Staged trips of each m[k].n bytes with IPCPIPE_REMOTE_CHUNK at chunk,
 * each in m[k].pieces pieces; host memory's n_host in host_pieces. */
static int staged_run(const char *chunk, const staged_case_t *m, size_t cnt,
                      size_t n_host, int host_pieces)
{
    use_fakedev();
    setenv("IPCPIPE_REMOTE_CHUNK", chunk, 1);
    ipcp_comm_t *c = one_rank();
    int local[2] = {-1, 0};
    T_OK(ipcp__comm_remote(c, "whole", 1, 2, local, &echo_ops, &echo));
    size_t cap = n_host;
    for (size_t k = 0; k < cnt; k++)
        cap = m[k].n > cap ? m[k].n : cap;
    unsigned char *dev[2], *host = t_malloc(cap + 1);
    for (int i = 0; i < 2; i++) {
        dev[i] = t_malloc(cap + 1);
        fakedev_add(dev[i], cap + 1, NULL);
    }
    for (size_t k = 0; k < cnt; k++)
        T_EQ_INT(staged_pieces(c, dev[0], dev[1], m[k].n), m[k].pieces);
    T_EQ_INT(staged_pieces(c, host, dev[1], n_host), host_pieces);
    T_EQ_INT(echo.device_ops, 0);
    T_OK(ipcp_finalize(c));
    for (int i = 0; i < 2; i++)
        free(dev[i]);
    free(host);
    return 0;
}

/* A transport that does not read device memory (Open MPI as packaged):
 * (fake) device buffers are staged through pinned slots, in pieces of
 * about a sixteenth of the message from 1 MiB up to IPCPIPE_REMOTE_CHUNK
 * (4 MiB in 1 MiB pieces, where every piece was the setting's before);
 * host memory keeps the setting's pieces.  Every byte checked. */
static int case_staged(void)
{
    static const staged_case_t m[] = {
        {(64u << 10) + 1, 1}, {(1u << 20) + 3, 2},  {(4u << 20) + 5, 5},
        {16u << 20, 16},      {(16u << 20) + 1, 9},
    };
    return staged_run("4M", m, sizeof(m) / sizeof(m[0]), (4u << 20) + 5, 2);
}

/* A setting of no power of two bounds the pieces too (3 MiB: 64 MiB + 1
 * in pieces of 3 MiB, not 4). */
static int case_staged_odd(void)
{
    static const staged_case_t m[] = {{(4u << 20) + 5, 5},
                                      {(64u << 20) + 1, 22}};
    return staged_run("3M", m, 2, (7u << 20), 3);
}

/* A setting of 1 MiB or less is every piece. */
static int case_staged_small(void)
{
    static const staged_case_t m[] = {{(4u << 20) + 5, 9}};
    return staged_run("512K", m, 1, (1u << 20) + 1, 3);
}

/* Short staged messages: device memory's bytes through a pinned slot,
 * behind a header up to IPCP_RX_COPY bytes, alone from IPCP_RX_HEAD + 1
 * to IPCP_RX_INLINE, in one piece between; from and into host memory
 * too.  Every byte checked, nothing past the message written. */
static int case_staged_short(void)
{
    static const form_case_t m[] = {
        {0, 0, 0},
        {1, 0, 0},
        {IPCP_RX_COPY, 0, 0},
        {IPCP_RX_COPY + 1, 1, 0},
        {IPCP_RX_HEAD, 1, 0},
        {IPCP_RX_HEAD + 1, 0, 1},
        {4096, 0, 1},
        {IPCP_RX_INLINE - 1, 0, 1},
        {IPCP_RX_INLINE, 0, 1},
        {IPCP_RX_INLINE + 1, 1, 0},
    };
    use_fakedev();
    ipcp_comm_t *c = one_rank();
    int local[2] = {-1, 0};
    T_OK(ipcp__comm_remote(c, "whole", 1, 2, local, &echo_ops, &echo));
    const size_t cap = IPCP_RX_INLINE + 2;
    unsigned char *dev[2], *host[2];
    trip_buffers(cap, dev, host);
    for (size_t k = 0; k < sizeof(m) / sizeof(m[0]); k++) {
        int pieces = echo.piece_sends, alone = echo.alone_sends;
        device_trip(c, dev[0], dev[1], m[k].n);
        form_check(&m[k], pieces, alone);
        device_trip(c, host[0], dev[1], m[k].n);
        device_trip(c, dev[0], host[1], m[k].n);
    }
    T_EQ_INT(echo.device_ops, 0);
    T_OK(ipcp_finalize(c));
    trip_buffers_free(dev, host);
    return 0;
}

/* Maps that do not fit the node's job are refused, and the transport is
 * closed each time. */
static int case_badmap(void)
{
    ipcp_comm_t *c = one_rank();
    int twice[3] = {0, 0, -1}, none[2] = {-1, -1}, other[2] = {0, -1};
    int past[2] = {1, -1}, big[2] = {5, 0}, good[2] = {-1, 0};
    T_STATUS(ipcp__comm_remote(c, "whole", 0, 3, twice, &echo_ops, &echo),
             IPCP_ERR_INVALID);
    T_MSG_HAS("does not name each");
    T_STATUS(ipcp__comm_remote(c, "whole", 0, 2, none, &echo_ops, &echo),
             IPCP_ERR_INVALID);
    T_STATUS(ipcp__comm_remote(c, "whole", 1, 2, other, &echo_ops, &echo),
             IPCP_ERR_INVALID);
    T_STATUS(ipcp__comm_remote(c, "whole", 0, 2, past, &echo_ops, &echo),
             IPCP_ERR_INVALID);
    T_STATUS(ipcp__comm_remote(c, "whole", 1, 2, big, &echo_ops, &echo),
             IPCP_ERR_INVALID);
    T_MSG_HAS("does not name each");
    T_STATUS(ipcp__comm_remote(c, "whole", 5, 2, good, &echo_ops, &echo),
             IPCP_ERR_INVALID);
    T_MSG_HAS("cannot hold");
    T_EQ_INT(echo.closes, 6);
    T_OK(ipcp__comm_remote(c, "whole", 1, 2, good, &echo_ops, &echo));
    T_STATUS(ipcp__comm_remote(c, "whole", 1, 2, good, &echo_ops, &echo),
             IPCP_ERR_STATE);
    T_MSG_HAS("reaches other nodes already");
    T_EQ_INT(echo.closes, 7);
    T_OK(ipcp_finalize(c));
    T_EQ_INT(echo.closes, 8);
    return 0;
}

static const struct {
    const char *name;
    int (*fn)(void);
} cases[] = {
    {"loop", case_loop},
    {"badmap", case_badmap},
    {"device", case_device},
    {"inline", case_inline},
    {"staged", case_staged},
    {"staged_odd", case_staged_odd},
    {"staged_small", case_staged_small},
    {"staged_short", case_staged_short},
};

int main(int argc, char **argv)
{
    int rc, i = t_pick_case(argc, argv, cases, sizeof(cases) / sizeof(cases[0]),
                            sizeof(cases[0]), &rc);
    if (i < 0)
        return rc;
    return cases[i].fn();
}
