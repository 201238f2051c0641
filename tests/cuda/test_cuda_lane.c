/* The small-message lane (IPCPIPE_SMALL, engine/lane.c) between two
 * processes: stream-ordered messages moved by kernels.
 *
 *   test_cuda_lane CASE --devices same|split
 *
 *   burst     rank 0 sends 200 messages of 1 byte to IPCPIPE_SMALL on its
 *             stream before rank 1 receives any (more than the 64 inbox
 *             slots: the credits wrap), at odd offsets, into receives up to
 *             7 bytes larger; then 100 round trips of a ping-pong; every
 *             byte checked against fresh data, every length reported
 *   legacy    the same ping-pong on the legacy default stream with no
 *             requests (req NULL): the stream alone orders and completes
 *   tag       a receive that expects another tag fails with IPCP_ERR_STATE
 *             naming both tags and writes nothing; the next receive gets
 *             the next message
 *   trunc     a message larger than its receive fails with
 *             IPCP_ERR_TRUNCATED, writes nothing, and the lane goes on
 *   mismatch  IPCPIPE_SMALL differs between the ranks: the operations fail
 *             with IPCP_ERR_CONFIG naming IPCPIPE_SMALL, and nothing hangs
 *   mismatch0 rank 1 has IPCPIPE_SMALL=0 and makes no lane: rank 0's send
 *             fails the same way (rank 1 answers its LANE message)
 *   capture   while the stream captures a graph, stream-ordered calls of
 *             lane size and of protocol size fail with IPCP_ERR_UNSUPPORTED
 *             and enqueue nothing; after the capture the next message is
 *             the receive's (bytes checked)
 *
 * CMake sets IPCPIPE_SMALL=64K. */
#include <time.h>
#include <unistd.h>

#include "cudatest.h"
#include "ipcpipe_cuda.h"

#define NBURST 200
#define NPING  100
enum { TAG_SEED = 1, TAG_MSG = 7, TAG_OTHER = 9 };

typedef struct side {
    CUcontext ctx;
    CUstream stream;
    CUdeviceptr buf; /* ipcp_mem_alloc: slices of `small` bytes + 16 */
    size_t len;
    unsigned char *host;
} side_t;

static size_t small_size(void)
{
    const char *s = getenv("IPCPIPE_SMALL");
    if (!s)
        T_FAIL("IPCPIPE_SMALL is not set (CMake sets it)");
    return t_parse_size(s);
}

static void side_init(ipcp_comm_t *comm, side_t *s, int device, size_t len,
                      int legacy)
{
    ipcp_alloc_params_t p;
    void *ptr;
    s->ctx = ct_use_device(device);
    s->stream = NULL;
    if (!legacy)
        CU_OK(IPCP_CU(cuStreamCreate)(&s->stream, CU_STREAM_NON_BLOCKING));
    ipcp_alloc_params_init(&p);
    p.type = IPCP_MEM_CUDA;
    p.device = device;
    T_OK(ipcp_mem_alloc(comm, len, &p, &ptr));
    s->buf = (CUdeviceptr)(uintptr_t)ptr;
    s->len = len;
    s->host = t_malloc(len);
}

static void side_fini(ipcp_comm_t *comm, side_t *s)
{
    free(s->host);
    T_OK(ipcp_mem_free(comm, (void *)(uintptr_t)s->buf));
    if (s->stream)
        CU_OK(IPCP_CU(cuStreamDestroy)(s->stream));
}

static void *at(side_t *s, size_t off)
{
    return (void *)(uintptr_t)(s->buf + off);
}

/* Fills the source slices of messages [from, to) with fresh data. */
static void fill(side_t *s, size_t small, uint64_t seed, int from, int to)
{
    for (int i = from; i < to; i++)
        t_fill(s->host + t_lane_off(small, i), t_lane_size(small, i),
               seed + (uint64_t)i);
    ct_htod(s->buf, s->host, s->len);
}

/* Poisons the destination, so that a byte not written shows. */
static void poison(side_t *s)
{
    ct_memset(s->buf, 0xA5, s->len);
}

static void check(side_t *s, size_t small, uint64_t seed, int from, int to,
                  const char *what)
{
    CU_OK(IPCP_CU(cuMemcpyDtoH)(s->host, s->buf, s->len));
    for (int i = from; i < to; i++) {
        char w[96];
        snprintf(w, sizeof w, "%s, message %d (%zu bytes)", what, i,
                 t_lane_size(small, i));
        t_verify(s->host + t_lane_off(small, i), t_lane_size(small, i),
                 seed + (uint64_t)i, w);
        /* The byte after the message is still the poison. */
        size_t end = t_lane_off(small, i) + t_lane_size(small, i);
        if (s->host[end] != 0xA5)
            T_FAIL("%s: byte %zu after the message was written (0x%02x)", w,
                   end, s->host[end]);
    }
}

/* Rank 0 sends NBURST messages before rank 1 posts a receive. */
static void burst(ipcp_comm_t *comm, side_t *s, size_t small, uint64_t seed)
{
    static ipcp_request_t *reqs[NBURST];
    if (t_rank == 0) {
        fill(s, small, seed, 0, NBURST);
        for (int i = 0; i < NBURST; i++)
            T_OK(ipcp_isend_on_stream(comm, at(s, t_lane_off(small, i)),
                                      t_lane_size(small, i), 1, TAG_MSG,
                                      s->stream, &reqs[i]));
        T_OK(ipcp_barrier(comm));
        t_lane_wait_all(reqs, NBURST, small, 0);
    } else {
        poison(s);
        T_OK(ipcp_barrier(comm)); /* the sender has queued them all */
        usleep(20000);
        for (int i = 0; i < NBURST; i++) {
            size_t cap = t_lane_size(small, i) + (size_t)(i % 2) * 7;
            if (cap > small)
                cap = small;
            T_OK(ipcp_irecv_on_stream(comm, at(s, t_lane_off(small, i)), cap, 0,
                                      TAG_MSG, s->stream, &reqs[i]));
        }
        t_lane_wait_all(reqs, NBURST, small, 1);
        CU_OK(IPCP_CU(cuStreamSynchronize)(s->stream));
        check(s, small, seed, 0, NBURST, "burst");
    }
}

/* Round trips: rank 0 sends message i, rank 1 receives it and sends it
 * back from where it landed; rank 0 receives the echo into another slice
 * set.  With reqs NULL the stream alone orders everything. */
static void pingpong(ipcp_comm_t *comm, side_t *s, size_t small, uint64_t seed,
                     int use_reqs)
{
    static ipcp_request_t *tx[NPING], *rx[NPING];
    size_t half = (size_t)NPING * (small + 16);
    if (t_rank == 0) {
        fill(s, small, seed, 0, NPING);
        ct_memset(s->buf + half, 0xA5, s->len - half);
    } else {
        poison(s);
    }
    T_OK(ipcp_barrier(comm));
    for (int i = 0; i < NPING; i++) {
        void *mine = at(s, t_lane_off(small, i));
        size_t n = t_lane_size(small, i);
        if (t_rank == 0) {
            T_OK(ipcp_isend_on_stream(comm, mine, n, 1, TAG_MSG, s->stream,
                                      use_reqs ? &tx[i] : NULL));
            T_OK(ipcp_irecv_on_stream(comm, at(s, half + t_lane_off(small, i)),
                                      n, 1, TAG_OTHER, s->stream,
                                      use_reqs ? &rx[i] : NULL));
        } else {
            T_OK(ipcp_irecv_on_stream(comm, mine, n, 0, TAG_MSG, s->stream,
                                      use_reqs ? &rx[i] : NULL));
            T_OK(ipcp_isend_on_stream(comm, mine, n, 0, TAG_OTHER, s->stream,
                                      use_reqs ? &tx[i] : NULL));
        }
    }
    CU_OK(IPCP_CU(cuStreamSynchronize)(s->stream));
    if (use_reqs) {
        t_lane_wait_all(rx, NPING, small, 1);
        t_lane_wait_all(tx, NPING, small, 0);
    }
    if (t_rank == 1) {
        check(s, small, seed, 0, NPING, "ping");
    } else {
        CU_OK(IPCP_CU(cuMemcpyDtoH)(s->host, s->buf + half, s->len - half));
        for (int i = 0; i < NPING; i++)
            t_verify(s->host + t_lane_off(small, i), t_lane_size(small, i),
                     seed + (uint64_t)i, "echo");
    }
    T_OK(ipcp_barrier(comm));
}

/* A broken contract on the receiving side: the receive fails with
 * `expect`, its buffer keeps the poison, and the next message arrives. */
static void contract(ipcp_comm_t *comm, side_t *s, size_t small, uint64_t seed,
                     int bad_tag)
{
    ipcp_request_t *r0, *r1;
    size_t n = bad_tag ? 8 : 4095;
    if (t_rank == 0) {
        fill(s, small, seed, 0, 2);
        T_OK(ipcp_isend_on_stream(comm, at(s, 0), n, 1, TAG_MSG, s->stream,
                                  &r0));
        T_OK(ipcp_isend_on_stream(comm, at(s, t_lane_off(small, 1)), 1, 1,
                                  TAG_OTHER, s->stream, &r1));
        T_OK(ipcp_wait(r0, NULL));
        T_OK(ipcp_wait(r1, NULL));
    } else {
        poison(s);
        T_OK(ipcp_irecv_on_stream(comm, at(s, 0), bad_tag ? n : 100, 0,
                                  bad_tag ? TAG_OTHER : TAG_MSG, s->stream,
                                  &r0));
        T_OK(ipcp_irecv_on_stream(comm, at(s, t_lane_off(small, 1)), 1, 0,
                                  TAG_OTHER, s->stream, &r1));
        if (bad_tag) {
            T_STATUS(ipcp_wait(r0, NULL), IPCP_ERR_STATE);
            T_MSG_HAS("has tag 7, this receive tag 9");
        } else {
            T_STATUS(ipcp_wait(r0, NULL), IPCP_ERR_TRUNCATED);
            T_MSG_HAS("has 4095 bytes, more than the receive's 100");
        }
        T_OK(ipcp_wait(r1, NULL));
        CU_OK(IPCP_CU(cuStreamSynchronize)(s->stream));
        CU_OK(IPCP_CU(cuMemcpyDtoH)(s->host, s->buf, s->len));
        for (size_t j = 0; j < n; j++)
            if (s->host[j] != 0xA5)
                T_FAIL("the failed receive wrote byte %zu (0x%02x)", j,
                       s->host[j]);
        t_verify(s->host + t_lane_off(small, 1), 1, seed + 1, "next message");
    }
    T_OK(ipcp_barrier(comm));
}

/* The ranks disagree on IPCPIPE_SMALL: each side's first lane operation
 * fails, at the call or at its wait, with IPCP_ERR_CONFIG. */
static void mismatch(ipcp_comm_t *comm, side_t *s)
{
    ipcp_request_t *r = NULL;
    ipcp_status_t st;
    if (t_rank == 1 && small_size() == 0) { /* no lane on this side */
        T_OK(ipcp_barrier(comm));
        return;
    }
    if (t_rank == 0)
        st = ipcp_isend_on_stream(comm, at(s, 0), 100, 1, TAG_MSG, s->stream,
                                  &r);
    else
        st = ipcp_irecv_on_stream(comm, at(s, 0), 100, 0, TAG_MSG, s->stream,
                                  &r);
    if (st == IPCP_OK)
        st = ipcp_wait(r, NULL);
    T_STATUS(st, IPCP_ERR_CONFIG);
    T_MSG_HAS("IPCPIPE_SMALL");
    CU_OK(IPCP_CU(cuStreamSynchronize)(s->stream));
    T_OK(ipcp_barrier(comm));
}

/* A graph replays what was captured, and a transfer happens once: every
 * stream-ordered call is refused while the stream captures, before the
 * lane numbers a message (the message after the capture arrives). */
static void capture(ipcp_comm_t *comm, side_t *s, size_t small, uint64_t seed)
{
    ipcp_request_t *r = NULL;
    CUgraph graph = NULL;
    size_t sizes[2] = {8, small + 1}; /* the lane's, the protocol's */
    CU_OK(IPCP_CU(cuStreamBeginCapture)(s->stream,
                                        CU_STREAM_CAPTURE_MODE_RELAXED));
    for (int i = 0; i < 2; i++) {
        if (t_rank == 0)
            T_STATUS(ipcp_isend_on_stream(comm, at(s, 0), sizes[i], 1, TAG_MSG,
                                          s->stream, &r),
                     IPCP_ERR_UNSUPPORTED);
        else
            T_STATUS(ipcp_irecv_on_stream(comm, at(s, 0), sizes[i], 0, TAG_MSG,
                                          s->stream, &r),
                     IPCP_ERR_UNSUPPORTED);
        T_MSG_HAS("is capturing a CUDA graph");
        T_CHECK(r == NULL);
    }
    CU_OK(IPCP_CU(cuStreamEndCapture)(s->stream, &graph));
    if (graph)
        CU_OK(IPCP_CU(cuGraphDestroy)(graph));
    if (t_rank == 0)
        fill(s, small, seed, 0, 1);
    else
        poison(s);
    ipcp_xfer_info_t info = {0, IPCP_PATH_AUTO};
    if (t_rank == 0)
        T_OK(ipcp_isend_on_stream(comm, at(s, t_lane_off(small, 0)),
                                  t_lane_size(small, 0), 1, TAG_MSG, s->stream,
                                  &r));
    else
        T_OK(ipcp_irecv_on_stream(comm, at(s, t_lane_off(small, 0)),
                                  t_lane_size(small, 0), 0, TAG_MSG, s->stream,
                                  &r));
    T_OK(ipcp_wait(r, &info));
    T_EQ_U64(info.nbytes, t_lane_size(small, 0));
    T_EQ_INT(info.path, IPCP_PATH_LANE);
    CU_OK(IPCP_CU(cuStreamSynchronize)(s->stream));
    if (t_rank == 1)
        check(s, small, seed, 0, 1, "the message after the capture");
    T_OK(ipcp_barrier(comm));
}

static const char *const cases[] = {"burst",    "legacy",    "tag",    "trunc",
                                    "mismatch", "mismatch0", "capture"};

static int pick_case(int argc, char **argv)
{
    if (argc < 2)
        T_FAIL("usage: test_cuda_lane CASE --devices same|split");
    for (int i = 0; i < (int)(sizeof(cases) / sizeof(cases[0])); i++)
        if (strcmp(argv[1], cases[i]) == 0)
            return i;
    T_FAIL("unknown case \"%s\"", argv[1]);
}

static int rank_main(int argc, char **argv)
{
    int c = pick_case(argc, argv);
    int split = strcmp(ct_opt(argc, argv, "--devices", "same"), "split") == 0;
    ipcp_comm_t *comm = NULL;
    uint64_t seed = 0;
    side_t s;
    size_t small = small_size();

    T_OK(ipcp_init(NULL, &comm));
    t_rank = ipcp_comm_rank(comm);
    side_init(comm, &s, split ? t_rank : 0, (size_t)NBURST * (small + 16),
              c == 1);
    seed = t_shared_seed(comm, TAG_SEED);
    switch (c) {
    case 0:
        burst(comm, &s, small, seed);
        T_OK(ipcp_barrier(comm));
        pingpong(comm, &s, small, seed + 1000, 1);
        break;
    case 1:
        pingpong(comm, &s, small, seed, 0);
        break;
    case 2:
    case 3:
        contract(comm, &s, small, seed, c == 2);
        break;
    case 4:
    case 5:
        mismatch(comm, &s);
        break;
    default:
        capture(comm, &s, small, seed);
    }
    side_fini(comm, &s);
    T_OK(ipcp_finalize(comm));
    return 0;
}

int main(int argc, char **argv)
{
    if (ipcp_launch_is_rank())
        return t_mp_main(argc, argv, 2, 240, rank_main);
    int c = pick_case(argc, argv);
    int split = strcmp(ct_opt(argc, argv, "--devices", "same"), "split") == 0;
    int rc = ct_check_machine(split ? 2 : 1);
    if (rc)
        return rc;
    if (c == 4 || c == 5)
        return t_launch2(argv, -1, t_small_on_rank1, c == 4 ? "4096" : "0");
    return t_mp_main(argc, argv, 2, 240, rank_main);
}
