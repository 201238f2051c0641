/* The engine's side of the small-message lane (engine/lane.c) between two
 * processes, on a machine without a GPU: a fake device backend whose
 * "device memory" is shared host memory and whose "kernels" run the lane's
 * protocol (backend/lane_abi.h) on one CPU thread per fake stream, in
 * stream order.  The CUDA kernels themselves are tested by cuda.lane.* on
 * GPUs; this covers, under the sanitizers, what the engine does around
 * them: the LANE messages, numbering, completion records and their reuse,
 * tag and length checks, mismatched settings, peer loss and finalize.
 *
 *   test_lane burst|pingpong|tag|trunc|mismatch|mismatch0|peerloss|finalize|
 *             capture|launchfail|mismatchwords|importfail
 *
 * CMake sets IPCPIPE_SMALL=4K.  The fake device backend is in
 * test_lane_fake.c. */
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "engine/engine.h"
#include "ipcpipe_cuda.h"
#include "test_lane_int.h"
#include "testutil.h"

enum { TAG_SEED = 1, TAG_MSG = 7, TAG_OTHER = 9 };

/* ---- The ranks ------------------------------------------------------------
 */

#define NBURST     300
#define NPING      5000
#define PING_CHUNK 1000 /* round trips in flight at most (4096 records) */

typedef struct side {
    ipcp_comm_t *comm;
    fk_stream_t *stream;
    unsigned char *buf; /* fake device memory */
    size_t len;
    size_t small;
    uint64_t seed;
} side_t;

static ipcp_stream_t us(const side_t *s)
{
    return (ipcp_stream_t)(void *)s->stream;
}

/* Rank 0 queues NBURST messages before rank 1 posts a receive (more than
 * the 64 inbox slots: credits wrap), at odd offsets, into receives up to 7
 * bytes larger; every byte and the byte after each message checked. */
static void burst(side_t *s)
{
    static ipcp_request_t *reqs[NBURST];
    size_t small = s->small;
    if (t_rank == 0) {
        for (int i = 0; i < NBURST; i++) {
            t_fill(s->buf + t_lane_off(small, i), t_lane_size(small, i),
                   s->seed + i);
            T_OK(ipcp_isend_on_stream(s->comm, s->buf + t_lane_off(small, i),
                                      t_lane_size(small, i), 1, TAG_MSG, us(s),
                                      &reqs[i]));
        }
        T_OK(ipcp_barrier(s->comm));
        t_lane_wait_all(reqs, NBURST, small, 0);
        fk_sync(s->stream, 30, "burst sender");
        return;
    }
    memset(s->buf, 0xA5, s->len);
    T_OK(ipcp_barrier(s->comm));
    usleep(20000);
    for (int i = 0; i < NBURST; i++) {
        size_t cap = t_lane_size(small, i) + (size_t)(i % 2) * 7;
        T_OK(ipcp_irecv_on_stream(s->comm, s->buf + t_lane_off(small, i),
                                  cap < small ? cap : small, 0, TAG_MSG, us(s),
                                  &reqs[i]));
    }
    t_lane_wait_all(reqs, NBURST, small, 1);
    fk_sync(s->stream, 30, "burst receiver");
    for (int i = 0; i < NBURST; i++) {
        size_t end = t_lane_off(small, i) + t_lane_size(small, i);
        t_verify(s->buf + t_lane_off(small, i), t_lane_size(small, i),
                 s->seed + i, "burst");
        if (s->buf[end] != 0xA5)
            T_FAIL("message %d: the byte after it was written", i);
    }
}

/* NPING round trips of 8 bytes, PING_CHUNK at a time, without requests
 * except the last of each chunk; the completion records (4096 a direction)
 * are reused; every echo checked.  tracked: a request for every call, all
 * waited at the end, so that records still held by finished requests are
 * collected while later calls post. */
static void pingpong(side_t *s, int tracked)
{
    static ipcp_request_t *all[2 * NPING];
    unsigned char *mine = s->buf, *echo = s->buf + (size_t)NPING * 8;
    if (t_rank == 0)
        for (int i = 0; i < NPING; i++)
            t_fill(mine + (size_t)i * 8, 8, s->seed + i);
    memset(echo, 0, (size_t)NPING * 8);
    T_OK(ipcp_barrier(s->comm));
    /* tracked: as if a thread posted without pause all along, which keeps
     * the progress thread off the lanes but for a poll every 50 us: the
     * calls collect most records they reuse themselves. */
    /* The communicator behind the public handle (internals). */
    ipcp_comm_t *comm = ipcp__comm_of(s->comm);
    T_CHECK(comm != NULL);
    if (tracked)
        atomic_fetch_add(&comm->lane_posting, 1);
    for (int c = 0; c < NPING; c += PING_CHUNK) {
        ipcp_request_t *rq[2] = {NULL, NULL};
        for (int i = c; i < c + PING_CHUNK; i++) {
            int last = i == c + PING_CHUNK - 1, j = 2 * i;
            ipcp_request_t **r0 = tracked ? &all[j] : last ? &rq[0] : NULL;
            ipcp_request_t **r1 = tracked ? &all[j + 1] : last ? &rq[1] : NULL;
            void *m = mine + (size_t)i * 8;
            if (t_rank == 0) {
                T_OK(
                    ipcp_isend_on_stream(s->comm, m, 8, 1, TAG_MSG, us(s), r0));
                T_OK(ipcp_irecv_on_stream(s->comm, echo + (size_t)i * 8, 8, 1,
                                          TAG_OTHER, us(s), r1));
            } else {
                T_OK(
                    ipcp_irecv_on_stream(s->comm, m, 8, 0, TAG_MSG, us(s), r0));
                T_OK(ipcp_isend_on_stream(s->comm, m, 8, 0, TAG_OTHER, us(s),
                                          r1));
            }
        }
        if (!tracked) {
            T_OK(ipcp_wait(rq[0], NULL));
            T_OK(ipcp_wait(rq[1], NULL));
        }
        fk_sync(s->stream, 30, "ping-pong");
    }
    if (tracked)
        atomic_fetch_sub(&comm->lane_posting, 1);
    for (int j = 0; tracked && j < 2 * NPING; j++) {
        ipcp_xfer_info_t info;
        T_OK(ipcp_wait(all[j], &info));
        if (info.nbytes != 8 || info.path != IPCP_PATH_LANE)
            T_FAIL("round trip %d, call %d: %zu bytes by path %d, want 8 by "
                   "the lane",
                   j / 2, j % 2, info.nbytes, (int)info.path);
    }
    for (int i = 0; i < NPING; i++)
        t_verify((t_rank == 0 ? echo : mine) + (size_t)i * 8, 8, s->seed + i,
                 t_rank == 0 ? "echo" : "ping");
    T_OK(ipcp_barrier(s->comm));
}

/* A broken contract on the receiving side: the receive fails with the
 * status and message, writes nothing, and the next message arrives. */
static void contract(side_t *s, int bad_tag)
{
    /* A message sent as flagged words (at most IPCP_LANE_INLINE_MAX
     * bytes), then one sent plainly. */
    static const size_t sizes[2][2] = {{300, 4000}, {8, 4000}};
    for (int m = 0; m < 2; m++) {
        ipcp_request_t *r0, *r1;
        size_t n = sizes[bad_tag][m];
        uint64_t seed = s->seed + 10 * (uint64_t)m;
        if (t_rank == 0) {
            t_fill(s->buf, n, seed);
            t_fill(s->buf + 8192, 1, seed + 1);
            T_OK(ipcp_isend_on_stream(s->comm, s->buf, n, 1, TAG_MSG, us(s),
                                      &r0));
            T_OK(ipcp_isend_on_stream(s->comm, s->buf + 8192, 1, 1, TAG_OTHER,
                                      us(s), &r1));
            T_OK(ipcp_wait(r0, NULL));
            T_OK(ipcp_wait(r1, NULL));
        } else {
            memset(s->buf, 0xA5, s->len);
            T_OK(ipcp_irecv_on_stream(s->comm, s->buf, bad_tag ? n : 100, 0,
                                      bad_tag ? TAG_OTHER : TAG_MSG, us(s),
                                      &r0));
            T_OK(ipcp_irecv_on_stream(s->comm, s->buf + 8192, 1, 0, TAG_OTHER,
                                      us(s), &r1));
            if (bad_tag) {
                T_STATUS(ipcp_wait(r0, NULL), IPCP_ERR_STATE);
                T_MSG_HAS("has tag 7, this receive tag 9");
            } else {
                char want[64];
                snprintf(want, sizeof want,
                         "has %zu bytes, more than the receive's 100", n);
                T_STATUS(ipcp_wait(r0, NULL), IPCP_ERR_TRUNCATED);
                T_MSG_HAS(want);
            }
            T_OK(ipcp_wait(r1, NULL));
            fk_sync(s->stream, 30, "contract");
            for (size_t j = 0; j < n; j++)
                if (s->buf[j] != 0xA5)
                    T_FAIL("message of %zu bytes: the failed receive wrote "
                           "byte %zu",
                           n, j);
            t_verify(s->buf + 8192, 1, seed + 1, "next message");
        }
        T_OK(ipcp_barrier(s->comm));
    }
}

/* A post (status st, request r) that must fail, at the call or at its
 * wait, with want and a message that has msg. */
static void fails(ipcp_status_t st, ipcp_request_t *r, ipcp_status_t want,
                  const char *msg)
{
    if (st == IPCP_OK)
        st = ipcp_wait(r, NULL);
    T_STATUS(st, want);
    T_MSG_HAS(msg);
}

/* The ranks disagree on IPCPIPE_SMALL (rank 1 may have none): rank 0's
 * send fails, at the call or at its wait, with IPCP_ERR_CONFIG. */
static void mismatch(side_t *s, const char *want)
{
    if (t_rank == 0) {
        ipcp_request_t *r = NULL;
        ipcp_status_t st =
            ipcp_isend_on_stream(s->comm, s->buf, 100, 1, TAG_MSG, us(s), &r);
        fails(st, r, IPCP_ERR_CONFIG, want);
        fk_sync(s->stream, 30, "mismatch");
    }
    T_OK(ipcp_barrier(s->comm));
}

/* Rank 1 dies while rank 0's receive waits: it fails with
 * IPCP_ERR_PEER_LOST, its kernel leaves, and later sends fail at once. */
static void peerloss(side_t *s)
{
    ipcp_request_t *r = NULL;
    if (t_rank == 0)
        T_OK(ipcp_irecv_on_stream(s->comm, s->buf, 8, 1, TAG_MSG, us(s), &r));
    T_OK(ipcp_barrier(s->comm));
    if (t_rank == 1)
        kill(getpid(), SIGKILL);
    T_STATUS(ipcp_wait(r, NULL), IPCP_ERR_PEER_LOST);
    fk_sync(s->stream, 20, "after the loss");
    T_STATUS(ipcp_isend_on_stream(s->comm, s->buf, 8, 1, TAG_MSG, us(s), NULL),
             IPCP_ERR_PEER_LOST);
}

/* A stream that captures a graph is refused before the lane numbers a
 * message: both calls fail with the backend's reason, and the message sent
 * afterwards is the receive's next (its bytes checked). */
static void capture(side_t *s)
{
    ipcp_request_t *r = NULL;
    s->stream->capturing = 1;
    if (t_rank == 0)
        T_STATUS(
            ipcp_isend_on_stream(s->comm, s->buf, 8, 1, TAG_MSG, us(s), &r),
            IPCP_ERR_UNSUPPORTED);
    else
        T_STATUS(
            ipcp_irecv_on_stream(s->comm, s->buf, 8, 0, TAG_MSG, us(s), &r),
            IPCP_ERR_UNSUPPORTED);
    T_MSG_HAS("capturing a CUDA graph");
    T_CHECK(r == NULL);
    s->stream->capturing = 0;
    memset(s->buf, 0xA5, 64);
    if (t_rank == 0) {
        t_fill(s->buf, 40, s->seed);
        T_OK(ipcp_isend_on_stream(s->comm, s->buf, 40, 1, TAG_MSG, us(s), &r));
    } else {
        T_OK(ipcp_irecv_on_stream(s->comm, s->buf, 64, 0, TAG_MSG, us(s), &r));
    }
    ipcp_xfer_info_t info = {0, IPCP_PATH_AUTO};
    T_OK(ipcp_wait(r, &info));
    T_EQ_U64(info.nbytes, 40);
    T_EQ_INT(info.path, IPCP_PATH_LANE);
    fk_sync(s->stream, 30, "capture");
    if (t_rank == 1) {
        t_verify(s->buf, 40, s->seed, "message after the refused calls");
        for (int i = 40; i < 64; i++)
            if (s->buf[i] != 0xA5)
                T_FAIL("byte %d past the message was written", i);
    }
    T_OK(ipcp_barrier(s->comm));
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Rank 1's launch of a numbered message fails: its send fails with the
 * launch's status, its lane is unusable, and rank 0's receive waiting for
 * that message fails (the lane's second LANE message) instead of waiting
 * until finalize; later calls fail at once on both sides. */
static void launchfail(side_t *s)
{
    ipcp_request_t *r = NULL;
    if (t_rank == 0)
        T_OK(ipcp_irecv_on_stream(s->comm, s->buf, 8, 1, TAG_MSG, us(s), &r));
    T_OK(ipcp_barrier(s->comm));
    if (t_rank == 1) {
        fk_fail_launch = 1;
        T_STATUS(
            ipcp_isend_on_stream(s->comm, s->buf, 8, 0, TAG_MSG, us(s), &r),
            IPCP_ERR_CUDA);
        T_MSG_HAS("fake launch of message 0 failed");
        T_STATUS(
            ipcp_isend_on_stream(s->comm, s->buf, 8, 0, TAG_MSG, us(s), NULL),
            IPCP_ERR_CUDA);
        T_MSG_HAS("launching message 0 failed");
    } else {
        double t0 = now_s();
        T_STATUS(ipcp_wait(r, NULL), IPCP_ERR_STATE);
        T_MSG_HAS("rank 1's side of the lane broke (IPCP_ERR_CUDA");
        if (now_s() - t0 > 10.0)
            T_FAIL("the receive learned of the break after %.1f s",
                   now_s() - t0);
        T_STATUS(
            ipcp_isend_on_stream(s->comm, s->buf, 8, 1, TAG_MSG, us(s), NULL),
            IPCP_ERR_STATE);
        T_MSG_HAS("rank 1's side of the lane broke");
    }
    fk_sync(s->stream, 20, "after the failed launch");
    T_OK(ipcp_barrier(s->comm));
}

/* Rank 0 cannot map rank 1's block, while rank 1 maps rank 0's: rank 0's
 * lane is unusable at once, and rank 1 learns it (from rank 0's LANE
 * message or a second one), so that no send of its waits forever for
 * credits rank 0 will never give: each of its sends fails, at the call or
 * at the wait, or went into rank 0's inbox before the news came (at most
 * the inbox's 64). */
#define NIMPORT 100
static void importfail(side_t *s)
{
    if (t_rank == 0) {
        ipcp_request_t *r = NULL;
        ipcp_status_t st =
            ipcp_irecv_on_stream(s->comm, s->buf, 8, 1, TAG_MSG, us(s), &r);
        fails(st, r, IPCP_ERR_UNSUPPORTED, "cannot map rank 1's GPU memory");
        fk_sync(s->stream, 20, "importfail receiver");
        T_OK(ipcp_barrier(s->comm));
        return;
    }
    static ipcp_request_t *reqs[NIMPORT];
    int ok = 0, failed = 0;
    double t0 = now_s();
    for (int i = 0; i < NIMPORT; i++) {
        reqs[i] = NULL;
        ipcp_status_t st = ipcp_isend_on_stream(s->comm, s->buf, 8, 0, TAG_MSG,
                                                us(s), &reqs[i]);
        if (st == IPCP_OK)
            continue;
        T_STATUS(st, IPCP_ERR_UNSUPPORTED);
        T_MSG_HAS("rank 0");
        failed++;
    }
    for (int i = 0; i < NIMPORT; i++) {
        if (!reqs[i])
            continue;
        ipcp_status_t st = ipcp_wait(reqs[i], NULL);
        if (st == IPCP_OK) {
            ok++;
            continue;
        }
        T_STATUS(st, IPCP_ERR_UNSUPPORTED);
        T_MSG_HAS("rank 0");
        failed++;
    }
    if (now_s() - t0 > 10.0)
        T_FAIL("rank 1's sends took %.1f s to end", now_s() - t0);
    if (ok > 64 || failed < NIMPORT - 64)
        T_FAIL("%d sends went through and %d failed; rank 0's inbox holds "
               "64",
               ok, failed);
    printf("rank 1: %d sends into rank 0's inbox before the news, %d failed\n",
           ok, failed);
    fk_sync(s->stream, 20, "importfail sender");
    T_OK(ipcp_barrier(s->comm));
}

/* A receive no one sends to is still waiting at finalize: finalize
 * releases its kernel and returns. */
static void at_finalize(side_t *s)
{
    if (t_rank == 0)
        T_OK(ipcp_irecv_on_stream(s->comm, s->buf, 8, 1, TAG_MSG, us(s), NULL));
    T_OK(ipcp_barrier(s->comm));
}

static const char *const cases[] = {
    "burst",         "pingpong",   "tag",      "trunc",   "mismatch",
    "mismatch0",     "peerloss",   "finalize", "capture", "launchfail",
    "mismatchwords", "importfail", "tracked"};

/* The case named by argv[1] (t_pick_case; exits on --list or a bad
 * name). */
static int pick_case(int argc, char **argv)
{
    int rc, i = t_pick_case(argc, argv, cases, sizeof(cases) / sizeof(cases[0]),
                            sizeof(cases[0]), &rc);
    if (i < 0)
        exit(rc);
    return i;
}

static int rank_main(int argc, char **argv)
{
    int c = pick_case(argc, argv);
    const char *v = getenv("IPCPIPE_SMALL");
    side_t s = {0};
    ipcp_alloc_params_t p;
    void *ptr;

    ipcp__device_backend_for_tests = &fk_ops;
    fk_fail_import = c == 11 && getenv("IPCPIPE_RANK") &&
                     strcmp(getenv("IPCPIPE_RANK"), "0") == 0;
    s.small = v ? t_parse_size(v) : 0;
    T_OK(ipcp_init(NULL, &s.comm));
    t_rank = ipcp_comm_rank(s.comm);
    s.stream = fk_stream_new();
    s.len = (size_t)NBURST * (4096 + 16) + 2 * (size_t)NPING * 8;
    ipcp_alloc_params_init(&p);
    p.type = IPCP_MEM_CUDA;
    T_OK(ipcp_mem_alloc(s.comm, s.len, &p, &ptr));
    s.buf = ptr;
    s.seed = t_shared_seed(s.comm, TAG_SEED);
    switch (c) {
    case 0:
        burst(&s);
        break;
    case 1:
    case 12:
        pingpong(&s, c == 12);
        break;
    case 2:
    case 3:
        contract(&s, c == 2);
        break;
    case 4:
    case 5:
        mismatch(&s, "IPCPIPE_SMALL=");
        break;
    case 10:
        mismatch(&s, "rank 1 has IPCPIPE_SMALL_WORDS=0, this rank 512");
        break;
    case 11:
        importfail(&s);
        break;
    case 6:
        peerloss(&s);
        break;
    case 7:
        at_finalize(&s);
        break;
    case 8:
        capture(&s);
        break;
    default:
        launchfail(&s);
    }
    if (c != 6)
        T_OK(ipcp_mem_free(s.comm, s.buf));
    T_OK(ipcp_finalize(s.comm));
    fk_sync(s.stream, 20, "after finalize");
    fk_stream_free(s.stream);
    return 0;
}

/* Rank 1 sends every lane message of up to 512 bytes the fenced way. */
static void words_on_rank1(int rank, void *arg)
{
    (void)arg;
    if (rank == 1)
        setenv("IPCPIPE_SMALL_WORDS", "0", 1);
}

int main(int argc, char **argv)
{
    if (ipcp_launch_is_rank())
        return t_mp_main(argc, argv, 2, 120, rank_main);
    int c = pick_case(argc, argv);
    if (c == 10)
        return t_launch2(argv, -1, words_on_rank1, NULL);
    if (c == 4 || c == 5)
        return t_launch2(argv, -1, t_small_on_rank1, c == 4 ? "1024" : "0");
    if (c == 6)
        return t_launch2(argv, 1, NULL, NULL);
    return t_mp_main(argc, argv, 2, 120, rank_main);
}
