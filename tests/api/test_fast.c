/* The callers' own way for small host messages (engine/mbox.c): senders
 * write eager messages into the peer's mailbox, waiting receivers read it
 * themselves.  These cases check that it keeps the library's promises
 * where it meets the progress thread's way:
 *
 *   order.posted, order.late  messages of every size (eager ones through
 *       the mailbox, larger ones through the progress thread, more than
 *       the mailbox holds at once) arrive in the order sent, with the
 *       receives posted before the sends or long after them
 *   trunc.posted, trunc.late  an eager message longer than its receive
 *       fails that receive with IPCP_ERR_TRUNCATED and the sizes, and the
 *       next message still arrives
 *   threads  two threads of each rank, each with its own tag, send and
 *       receive at once
 *   test  a ping-pong of isend/irecv, each receive polled with ipcp_test
 *       only: the poll reads the mailbox, which the progress thread leaves
 *       to callers for IPCPIPE_SPIN_US (set to 50 ms by the test: with
 *       nobody reading, each message would be that late)
 *
 * While every receive that waits is one whose caller reads the mailbox,
 * the receiver's progress thread sleeps without being woken for eager
 * messages (IPCP_MBOX_LAZY).  A wake-up lost there costs up to the
 * thread's longest sleep (the keepalive's step, 100 ms) each time, so
 * these cases bound time:
 *   lazy.sleeper  IPCPIPE_SPIN_US=100: each blocking receive stops reading
 *       after 0.1 ms and sleeps, and its message, sent 2-6 ms later,
 *       must wake the thread (50 rounds)
 *   lazy.full  rank 1 sends 30 bursts of 2100 eager messages (each a
 *       little more than a mailbox holds), 2 ms apart, while rank 0 makes
 *       no call for 5 s: the sends end, and every message arrives in
 *       order.  (Once the mailbox is full the sender waits for room,
 *       waking the receiver's thread after 50 us, and after 1 ms its own
 *       thread takes over, whose messages always wake: a lost wake-up
 *       for room costs one stall of 0.1 s here, which no bound catches
 *       reliably.)
 *   lazy.rts  20 times an eager message nobody receives yet, then a 1 MiB
 *       send into a posted receive whose caller makes no call for 5 s:
 *       the progress thread still takes each RTS behind an eager message,
 *       and the blocking sends end meanwhile
 *
 *   came  receives posted after their messages came complete when posted
 *       (a kept message, or the one at the inbox's head: no request), in
 *       the order sent per tag, beside a receive of another tag, one too
 *       small (IPCP_ERR_TRUNCATED) and a receive posted before its message
 *       came, which a later one for the same tag must not overtake
 *
 *   pipe  messages over 64 KiB up to IPCPIPE_EAGER (256 KiB, its largest,
 *       set by the test), one at a time, each
 *       one pipelined record (the receiver copies while the sender
 *       writes): into receives posted before, kept, or read where they
 *       came; one too long for its receive fails it and writes nothing
 *
 *   test_api_fast --case NAME [--ranks N]  (order.* in a job of N ranks:
 *       rank 1 sends to rank 0, the others meet them at the barriers) */
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apitest.h"

#define TAG_SEED    1
#define TAG_MSG     2
#define TAG_BACK    3
#define NMSG        160
#define WINDOW      32
#define THREAD_MSGS 2000

/* Eager (up to IPCPIPE_EAGER, 128 KiB: plain records up to 64 KiB,
 * pipelined ones above), the direct path; with empty messages among
 * them. */
static const size_t sizes[] = {8,         1,
                               0,         2048,
                               20000,     (1 << 20) + 3,
                               8,         40 << 10,
                               16 << 10,  60 << 10,
                               65537,     64 << 10,
                               98311,     (256 << 10) + 1,
                               256 << 10, 200 << 10};
#define NSIZES  (sizeof(sizes) / sizeof(sizes[0]))
#define MAXSIZE ((size_t)(1 << 20) + 3)
#define STRIDE  (MAXSIZE + 64) /* room for a byte that must stay */

static size_t msg_size(int i)
{
    return sizes[(size_t)i % NSIZES];
}

/* Whether message i of n bytes must come eager (1) or not (0), or may (-1).
 * 64 KiB with its header fits a mailbox record but no socket message: it
 * goes eager once the peer's inbox is on, which it surely is after the
 * first window (rank 0 offered it right after its PATH, long before its
 * answers to the window's direct sends), and never without the mailbox.
 * Longer ones up to IPCPIPE_EAGER go eager as pipelined records when the
 * sender's caller writes them (not behind the 1 MiB send that its thread
 * carries, nor when the mailbox stays full for a millisecond), else
 * through a rendezvous; never without the mailbox. */
static int eager_path(ipcp_comm_t *comm, size_t n, int i)
{
    const char *mbox = getenv("IPCPIPE_MAILBOX");
    int off = mbox && strcmp(mbox, "off") == 0;
    /* Jobs of more than 16 ranks: plain records hold 32 KiB - 16 and
     * pipelined ones 96 KiB - 16 with their headers; 40 and 60 KiB go
     * eager either way (pipelined, or on the socket behind a marker). */
    int big = ipcp_comm_size(comm) > 16;
    if (n <= (64 << 10) - 16) /* a record or a socket message */
        return 1;
    if (off || n > (big ? (96 << 10) - 40 : 128 << 10)) /* IPCPIPE_EAGER */
        return 0;
    if (n == (64 << 10) && !big)
        return i >= WINDOW ? 1 : -1;
    return -1;
}

/* Rank 1 sends NMSG messages, W at a time; rank 0 receives them posted
 * first (all at once, before the sends) or late (one by one, after the
 * sends had time to fill the mailbox). */
static void order(ipcp_comm_t *comm, int late)
{
    if (t_rank > 1) { /* a larger job's other ranks: the barriers only */
        T_OK(ipcp_barrier(comm));
        T_OK(ipcp_barrier(comm));
        return;
    }
    uint64_t seed = t_shared_seed(comm, TAG_SEED);
    unsigned char *buf = t_malloc((size_t)NMSG * STRIDE);
    ipcp_request_t *reqs[NMSG];
    if (t_rank == 1) {
        for (int i = 0; i < NMSG; i++)
            t_fill(buf + (size_t)i * STRIDE, msg_size(i), seed + (uint64_t)i);
        T_OK(ipcp_barrier(comm));
        for (int i = 0; i < NMSG; i += WINDOW) {
            for (int j = i; j < i + WINDOW && j < NMSG; j++)
                T_OK(ipcp_isend(comm, buf + (size_t)j * STRIDE, msg_size(j), 0,
                                TAG_MSG, &reqs[j]));
            for (int j = i; j < i + WINDOW && j < NMSG; j++)
                T_OK(ipcp_wait(reqs[j], NULL));
        }
    } else {
        memset(buf, 0xA5, (size_t)NMSG * STRIDE);
        ipcp_xfer_info_t info;
        if (!late)
            for (int i = 0; i < NMSG; i++)
                T_OK(ipcp_irecv(comm, buf + (size_t)i * STRIDE, MAXSIZE, 1,
                                TAG_MSG, &reqs[i]));
        T_OK(ipcp_barrier(comm));
        if (late)
            usleep(200 * 1000);
        for (int i = 0; i < NMSG; i++) {
            unsigned char *b = buf + (size_t)i * STRIDE;
            if (late)
                T_OK(ipcp_recv(comm, b, MAXSIZE, 1, TAG_MSG, &info));
            else
                T_OK(ipcp_wait(reqs[i], &info));
            T_EQ_U64(info.nbytes, msg_size(i));
            int path = eager_path(comm, msg_size(i), i);
            if (path == 1)
                T_EQ_INT(info.path, IPCP_PATH_EAGER);
            else if (path == 0)
                T_CHECK(info.path != IPCP_PATH_EAGER);
            t_verify(b, msg_size(i), seed + (uint64_t)i, "message");
            /* Nothing past the message's end was written. */
            T_CHECK(b[msg_size(i)] == 0xA5);
        }
    }
    free(buf);
    T_OK(ipcp_barrier(comm));
}

/* 100 bytes into a 50-byte receive, then 8 bytes into a fitting one. */
static void trunc_case(ipcp_comm_t *comm, int late)
{
    uint64_t seed = t_shared_seed(comm, TAG_SEED);
    unsigned char big[100], small[50 + API_GUARD];
    if (t_rank == 1) {
        t_fill(big, sizeof(big), seed);
        if (!late)
            T_OK(ipcp_barrier(comm)); /* rank 0's receive is posted */
        T_OK(ipcp_send(comm, big, sizeof(big), 0, TAG_MSG));
        T_OK(ipcp_send(comm, big, 8, 0, TAG_MSG));
        if (late)
            T_OK(ipcp_barrier(comm));
    } else {
        ipcp_request_t *req = NULL;
        memset(small, 0x5A, sizeof(small));
        if (!late) {
            T_OK(ipcp_irecv(comm, small, 50, 1, TAG_MSG, &req));
            T_OK(ipcp_barrier(comm));
            T_STATUS(ipcp_wait(req, NULL), IPCP_ERR_TRUNCATED);
        } else {
            T_OK(ipcp_barrier(comm)); /* both messages were sent */
            T_STATUS(ipcp_recv(comm, small, 50, 1, TAG_MSG, NULL),
                     IPCP_ERR_TRUNCATED);
        }
        T_MSG_HAS("message from rank 1 (tag 2) has 100 bytes but the "
                  "receive buffer of rank 0 has 50");
        for (size_t i = 0; i < sizeof(small); i++)
            T_CHECK(small[i] == 0x5A); /* a refused message writes nothing */
        ipcp_xfer_info_t info;
        T_OK(ipcp_recv(comm, small, 50, 1, TAG_MSG, &info));
        T_EQ_U64(info.nbytes, 8);
        t_verify(small, 8, seed, "the message after the truncated one");
    }
    T_OK(ipcp_barrier(comm));
}

typedef struct th_arg {
    ipcp_comm_t *comm;
    int tag;
    uint64_t seed;
} th_arg_t;

/* One thread: THREAD_MSGS messages of its own tag, sizes 1 to 3000,
 * rank 1 sending each and rank 0 answering it (a ping-pong per tag). */
static void *th_main(void *p)
{
    th_arg_t *a = p;
    unsigned char buf[3000];
    for (int i = 0; i < THREAD_MSGS; i++) {
        size_t len = 1 + (size_t)(i * 37) % sizeof(buf);
        uint64_t s = a->seed + (uint64_t)a->tag * 1000003u + (uint64_t)i;
        ipcp_xfer_info_t info;
        if (t_rank == 1) {
            t_fill(buf, len, s);
            T_OK(ipcp_send(a->comm, buf, len, 0, a->tag));
            T_OK(ipcp_recv(a->comm, buf, sizeof(buf), 0, a->tag, &info));
            T_EQ_U64(info.nbytes, len);
            t_verify(buf, len, s + 1, "answer");
        } else {
            T_OK(ipcp_recv(a->comm, buf, sizeof(buf), 1, a->tag, &info));
            T_EQ_U64(info.nbytes, len);
            t_verify(buf, len, s, "message");
            t_fill(buf, len, s + 1);
            T_OK(ipcp_send(a->comm, buf, len, 1, a->tag));
        }
    }
    return NULL;
}

static void threads(ipcp_comm_t *comm)
{
    uint64_t seed = t_shared_seed(comm, TAG_SEED);
    pthread_t th[2];
    th_arg_t args[2];
    for (int i = 0; i < 2; i++) {
        args[i] = (th_arg_t){comm, 10 + i, seed};
        T_EQ_INT(pthread_create(&th[i], NULL, th_main, &args[i]), 0);
    }
    for (int i = 0; i < 2; i++)
        T_EQ_INT(pthread_join(th[i], NULL), 0);
    T_OK(ipcp_barrier(comm));
}

#define TEST_ROUNDS 100

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Polls req with ipcp_test until it is done (no ipcp_wait). */
static void test_until_done(ipcp_request_t *req, ipcp_xfer_info_t *info)
{
    int done = 0;
    ipcp_status_t st;
    while ((st = ipcp_test(req, &done, info)) == IPCP_IN_PROGRESS && !done)
        ;
    T_STATUS(st, IPCP_OK);
    T_CHECK(done);
}

static void test_case(ipcp_comm_t *comm)
{
    uint64_t seed = t_shared_seed(comm, TAG_SEED);
    unsigned char out[64], in[64];
    int peer = 1 - t_rank;
    T_OK(ipcp_barrier(comm));
    double t0 = now_s();
    for (int i = 0; i < TEST_ROUNDS; i++) {
        uint64_t s = seed + (uint64_t)i;
        size_t len = 1 + (size_t)i % sizeof(out);
        ipcp_request_t *rr, *sr;
        ipcp_xfer_info_t info;
        memset(in, 0xee, sizeof(in));
        T_OK(ipcp_irecv(comm, in, sizeof(in), peer, TAG_MSG, &rr));
        if (t_rank == 1) {
            t_fill(out, len, s);
            T_OK(ipcp_isend(comm, out, len, peer, TAG_MSG, &sr));
            test_until_done(sr, NULL);
        }
        test_until_done(rr, &info);
        T_EQ_U64(info.nbytes, len);
        t_verify(in, len, t_rank == 0 ? s : s + 1, "message");
        if (t_rank == 0) {
            t_fill(out, len, s + 1);
            T_OK(ipcp_isend(comm, out, len, peer, TAG_MSG, &sr));
            test_until_done(sr, NULL);
        }
    }
    double el = now_s() - t0;
    /* Left to the progress thread, 2 x TEST_ROUNDS messages would take
     * 50 ms each: 10 s. */
    if (el > 2.5)
        T_FAIL("%d round trips polled with ipcp_test took %.2f s", TEST_ROUNDS,
               el);
    T_OK(ipcp_barrier(comm));
}

#define LAZY_ROUNDS 50

static void lazy_sleeper(ipcp_comm_t *comm)
{
    uint64_t seed = t_shared_seed(comm, TAG_SEED);
    unsigned char buf[8 + API_GUARD];
    T_OK(ipcp_barrier(comm));
    double t0 = now_s();
    for (int i = 0; i < LAZY_ROUNDS; i++) {
        uint64_t s = seed + (uint64_t)i;
        if (t_rank == 1) {
            usleep((useconds_t)(2000 + (s % 5) * 1000));
            t_fill(buf, 8, s);
            T_OK(ipcp_send(comm, buf, 8, 0, TAG_MSG));
            T_OK(ipcp_recv(comm, buf, 1, 0, TAG_BACK, NULL));
        } else {
            ipcp_xfer_info_t info;
            memset(buf, 0xee, sizeof(buf));
            T_OK(ipcp_recv(comm, buf, 8, 1, TAG_MSG, &info));
            T_EQ_U64(info.nbytes, 8);
            t_verify(buf, 8, s, "message");
            T_OK(ipcp_send(comm, buf, 1, 1, TAG_BACK));
        }
    }
    double el = now_s() - t0;
    /* About 0.2 s of sleeps; a lost wake-up costs up to 0.1 s a round. */
    if (el > 2.5)
        T_FAIL("%d round trips with sleeping receivers took %.2f s",
               LAZY_ROUNDS, el);
    T_OK(ipcp_barrier(comm));
}

#define FULL_BURSTS 30
#define FULL_BURST  2100
#define FULL_MSGS   (FULL_BURSTS * FULL_BURST)
#define IDLE_S      5

static void lazy_full(ipcp_comm_t *comm)
{
    uint64_t seed = t_shared_seed(comm, TAG_SEED);
    uint64_t v;
    T_OK(ipcp_barrier(comm));
    if (t_rank == 1) {
        double t0 = now_s();
        for (int i = 0; i < FULL_MSGS; i++) {
            if (i && i % FULL_BURST == 0)
                usleep(2000);
            v = seed + (uint64_t)i;
            T_OK(ipcp_send(comm, &v, sizeof(v), 0, TAG_MSG));
        }
        double el = now_s() - t0;
        /* 60 ms of pauses: this catches a hang, not a stall. */
        if (el > 4.0)
            T_FAIL("%d eager sends to a rank that made no call took %.2f s",
                   FULL_MSGS, el);
    } else {
        sleep(IDLE_S);
        for (int i = 0; i < FULL_MSGS; i++) {
            ipcp_xfer_info_t info;
            v = 0;
            T_OK(ipcp_recv(comm, &v, sizeof(v), 1, TAG_MSG, &info));
            T_EQ_U64(info.nbytes, sizeof(v));
            T_EQ_U64(v, seed + (uint64_t)i);
        }
    }
    T_OK(ipcp_barrier(comm));
}

#define RTS_LEN    ((size_t)1 << 20)
#define RTS_ROUNDS 20

static void lazy_rts(ipcp_comm_t *comm)
{
    uint64_t seed = t_shared_seed(comm, TAG_SEED);
    size_t stride = RTS_LEN + API_GUARD;
    unsigned char *big = t_malloc(RTS_ROUNDS * stride);
    unsigned char small[8];
    ipcp_request_t *reqs[RTS_ROUNDS];
    ipcp_xfer_info_t info;
    if (t_rank == 1) {
        t_fill(big, RTS_LEN, seed + 1);
        T_OK(ipcp_barrier(comm)); /* rank 0's receives are posted */
        double t0 = now_s();
        for (int i = 0; i < RTS_ROUNDS; i++) {
            t_fill(small, sizeof(small), seed + 2 + (uint64_t)i);
            T_OK(ipcp_send(comm, small, sizeof(small), 0, TAG_MSG));
            T_OK(ipcp_send(comm, big, RTS_LEN, 0, TAG_BACK));
        }
        double el = now_s() - t0;
        /* A lost wake-up costs 0.1 s a round: about 2 s for all. */
        if (el > 1.0)
            T_FAIL("%d sends of 1 MiB into posted receives took %.2f s "
                   "while their receiver made no call",
                   RTS_ROUNDS, el);
    } else {
        memset(big, 0xee, RTS_ROUNDS * stride);
        for (int i = 0; i < RTS_ROUNDS; i++)
            T_OK(ipcp_irecv(comm, big + (size_t)i * stride, RTS_LEN, 1,
                            TAG_BACK, &reqs[i]));
        T_OK(ipcp_barrier(comm));
        sleep(IDLE_S);
        for (int i = 0; i < RTS_ROUNDS; i++) {
            T_OK(ipcp_wait(reqs[i], &info));
            T_EQ_U64(info.nbytes, RTS_LEN);
            t_verify(big + (size_t)i * stride, RTS_LEN, seed + 1,
                     "large message");
            T_CHECK(big[(size_t)i * stride + RTS_LEN] == 0xee);
        }
        for (int i = 0; i < RTS_ROUNDS; i++) {
            T_OK(ipcp_recv(comm, small, sizeof(small), 1, TAG_MSG, &info));
            t_verify(small, sizeof(small), seed + 2 + (uint64_t)i,
                     "eager message");
        }
    }
    free(big);
    T_OK(ipcp_barrier(comm));
}

#define TAG_A 4
#define TAG_B 5
#define TAG_C 6

/* Whether h is a request that completed when posted (IPCP_HANDLE_DONE in
 * src/common/handle.h: its low 4 bits are 5). */
static int done_when_posted(const ipcp_request_t *h)
{
    return ((uintptr_t)h & 15) == 5;
}

/* came's last part on rank 0.  A receive posted before its message came
 * goes first.  Both messages come while this rank makes no call: they
 * stay at the inbox's head (the progress thread leaves them to callers
 * for IPCPIPE_SPIN_US, 100 ms here), where the later receive finds them. */
static void came_posted_first(ipcp_comm_t *comm, uint64_t seed)
{
    unsigned char first[8], second[8];
    ipcp_request_t *r1, *r2;
    ipcp_xfer_info_t info;
    memset(first, 0, 8);
    memset(second, 0, 8);
    T_OK(ipcp_irecv(comm, first, 8, 1, TAG_A, &r1));
    T_OK(ipcp_barrier(comm));
    usleep(20 * 1000);
    T_OK(ipcp_irecv(comm, second, 8, 1, TAG_A, &r2));
    T_OK(ipcp_wait(r2, &info));
    T_OK(ipcp_wait(r1, &info));
    t_verify(first, 8, seed + 200, "message of the receive posted first");
    t_verify(second, 8, seed + 201, "message of the receive posted after");
}

static void came(ipcp_comm_t *comm)
{
    static const size_t a_len[] = {8, 0, 32 << 10, 3};
    enum { NA = sizeof(a_len) / sizeof(a_len[0]) };
    uint64_t seed = t_shared_seed(comm, TAG_SEED);
    unsigned char *buf = t_malloc((size_t)NA * STRIDE);
    unsigned char b[100 + API_GUARD], c[64], first[8], second[8];
    ipcp_xfer_info_t info;
    ipcp_request_t *r;
    if (t_rank == 1) {
        t_fill(b, 100, seed + 100);
        T_OK(ipcp_send(comm, b, 8, 0, TAG_A));
        T_OK(ipcp_send(comm, b, 100, 0, TAG_B));
        for (int i = 1; i < NA; i++) {
            t_fill(buf, a_len[i], seed + (uint64_t)i);
            T_OK(ipcp_send(comm, buf, a_len[i], 0, TAG_A));
        }
        t_fill(c, sizeof(c), seed + 300);
        T_OK(ipcp_send(comm, c, sizeof(c), 0, TAG_C));
        T_OK(ipcp_barrier(comm)); /* all of them came */
        T_OK(ipcp_barrier(comm)); /* rank 0 posted its early receive */
        t_fill(first, 8, seed + 200);
        t_fill(second, 8, seed + 201);
        T_OK(ipcp_send(comm, first, 8, 0, TAG_A));
        T_OK(ipcp_send(comm, second, 8, 0, TAG_A));
        T_OK(ipcp_barrier(comm)); /* rank 0's receives ended */
        free(buf);
        return;
    }
    memset(buf, 0xA5, (size_t)NA * STRIDE);
    T_OK(ipcp_barrier(comm));
    /* The inbox's head is tag A's: B's receive waits the usual way, and
     * its wait keeps the messages before its own. */
    T_OK(ipcp_irecv(comm, b, 100, 1, TAG_B, &r));
    T_OK(ipcp_wait(r, &info));
    T_EQ_U64(info.nbytes, 100);
    t_verify(b, 100, seed + 100, "tag B's message");
    int ndone = 0;
    for (int i = 0; i < NA; i++) {
        unsigned char *d = buf + (size_t)i * STRIDE;
        size_t want = i ? a_len[i] : 8;
        info.nbytes = 777;
        if (i == 2) {
            T_OK(ipcp_recv(comm, d, MAXSIZE, 1, TAG_A, &info));
        } else {
            T_OK(ipcp_irecv(comm, d, MAXSIZE, 1, TAG_A, &r));
            ndone += done_when_posted(r);
            T_OK(ipcp_wait(r, &info));
        }
        T_EQ_U64(info.nbytes, want);
        T_EQ_INT(info.path, IPCP_PATH_EAGER);
        if (i)
            t_verify(d, want, seed + (uint64_t)i, "tag A's message");
        else
            t_verify(d, 8, seed + 100, "tag A's first message");
        T_CHECK(d[want] == 0xA5);
    }
    /* Without the mailbox (IPCPIPE_MAILBOX=off) none does. */
    const char *mbox = getenv("IPCPIPE_MAILBOX");
    int want = mbox && strcmp(mbox, "off") == 0 ? 0 : NA - 1;
    if (ndone != want)
        T_FAIL("%d of %d receives of messages kept completed when posted "
               "(expected %d)",
               ndone, NA - 1, want);
    /* 64 bytes came for a 10-byte receive. */
    T_OK(ipcp_irecv(comm, c, 10, 1, TAG_C, &r));
    T_CHECK(!done_when_posted(r));
    T_STATUS(ipcp_wait(r, &info), IPCP_ERR_TRUNCATED);
    T_MSG_HAS("has 64 bytes but the receive buffer of rank 0 has 10");
    came_posted_first(comm, seed);
    T_OK(ipcp_barrier(comm));
    free(buf);
}

/* One pipelined message of len bytes (seed s) from rank 1 into rank 0's
 * receive of cap bytes at b: posted before it is sent (how 0), after it
 * was kept (1: rank 0 met it in a barrier behind it), or after it came
 * (2: a while after).  Returns the send's or the receive's status (info
 * filled on rank 0). */
static ipcp_status_t pipe_one(ipcp_comm_t *comm, unsigned char *b, size_t len,
                              size_t cap, uint64_t s, int how,
                              ipcp_xfer_info_t *info)
{
    ipcp_status_t st = IPCP_OK;
    ipcp_request_t *r = NULL;
    unsigned char done = 0;
    if (t_rank == 1) {
        t_fill(b, len, s);
        if (how == 0)
            T_OK(ipcp_barrier(comm)); /* rank 0's receive is posted */
        /* Not complete when posted without the mailbox (a rendezvous):
         * waited for after rank 0's barrier. */
        T_OK(ipcp_isend(comm, b, len, 0, TAG_MSG, &r));
        if (how != 0)
            T_OK(ipcp_barrier(comm));
        st = ipcp_wait(r, NULL);
        T_OK(ipcp_recv(comm, &done, 1, 0, TAG_BACK, NULL));
        return st;
    }
    memset(b, 0xA5, cap + API_GUARD);
    if (how == 0) {
        T_OK(ipcp_irecv(comm, b, cap, 1, TAG_MSG, &r));
        T_OK(ipcp_barrier(comm));
        st = ipcp_wait(r, info);
    } else {
        if (how == 1)
            T_OK(ipcp_barrier(comm));
        else
            usleep(20 * 1000);
        st = ipcp_recv(comm, b, cap, 1, TAG_MSG, info);
        if (how == 2)
            T_OK(ipcp_barrier(comm));
    }
    /* Read out: the next message finds the mailbox empty, not behind
     * this one (a barrier lets rank 1 go before rank 0 has read it: 256
     * KiB copied under ThreadSanitizer outlasted the sender's wait for
     * room, and the next message took the rendezvous). */
    T_OK(ipcp_send(comm, &done, 1, 1, TAG_BACK));
    return st;
}

/* Messages over 64 KiB up to IPCPIPE_EAGER, one at a time: each goes
 * eager as one pipelined record (never without the mailbox), into a
 * receive posted before, kept, or read where it came; one longer than
 * its receive fails that receive and writes nothing, and the next
 * arrives. */
static void pipe_case(ipcp_comm_t *comm)
{
    static const size_t lens[] = {65537, 96 << 10, (128 << 10) + 5,
                                  (255 << 10) + 3, 256 << 10};
    enum { NL = sizeof(lens) / sizeof(lens[0]), CAP = 256 << 10 };
    const char *mbox = getenv("IPCPIPE_MAILBOX");
    int off = mbox && strcmp(mbox, "off") == 0;
    uint64_t seed = t_shared_seed(comm, TAG_SEED);
    unsigned char *b = t_malloc(CAP + API_GUARD), ping[8] = {0};
    ipcp_xfer_info_t info;
    /* Until rank 1's thread has read rank 0's offer of its inbox (rank 1
     * may read what rank 0 sends before that: slow under TSan), its sends
     * take the rendezvous: pipelined messages again until one goes eager,
     * rank 0 telling rank 1 the path of each. */
    for (int k = 0; !off && ping[0] != IPCP_PATH_EAGER; k++) {
        if (k == 500)
            T_FAIL("no pipelined message went eager in 500 tries");
        T_OK(pipe_one(comm, b, lens[0], CAP, seed, 2, &info));
        if (t_rank == 0) {
            ping[0] = (unsigned char)info.path;
            T_OK(ipcp_send(comm, ping, sizeof(ping), 1, TAG_BACK));
        } else
            T_OK(ipcp_recv(comm, ping, sizeof(ping), 0, TAG_BACK, NULL));
        if (ping[0] != IPCP_PATH_EAGER)
            usleep(10 * 1000);
    }
    for (int i = 0; i < NL; i++)
        for (int how = 0; how < 3; how++) {
            uint64_t s = seed + (uint64_t)(3 * i + how);
            T_OK(pipe_one(comm, b, lens[i], CAP, s, how, &info));
            if (t_rank == 1)
                continue;
            T_EQ_U64(info.nbytes, lens[i]);
            if (off)
                T_CHECK(info.path != IPCP_PATH_EAGER);
            else
                T_EQ_INT(info.path, IPCP_PATH_EAGER);
            t_verify(b, lens[i], s, "pipelined message");
            T_CHECK(b[lens[i]] == 0xA5);
        }
    for (int how = 0; how < 3; how++) {
        ipcp_status_t st =
            pipe_one(comm, b, 96 << 10, 64 << 10, seed + 100, how, &info);
        /* An eager send ends when written; a rendezvous hears the
         * receiver's refusal. */
        if (t_rank == 1 && !off)
            T_OK(st);
        else if (t_rank == 1)
            T_STATUS(st, IPCP_ERR_TRUNCATED);
        if (t_rank == 0) {
            T_STATUS(st, IPCP_ERR_TRUNCATED);
            T_MSG_HAS("has 98304 bytes but the receive buffer of rank 0 has "
                      "65536");
            for (size_t k = 0; k < (64 << 10) + API_GUARD; k++)
                if (b[k] != 0xA5)
                    T_FAIL("byte %zu of a refused message's receive was "
                           "written",
                           k);
        }
        T_OK(pipe_one(comm, b, 8, 64 << 10, seed + 101, how, &info));
        if (t_rank == 0)
            t_verify(b, 8, seed + 101, "the message after the truncated one");
    }
    T_OK(ipcp_barrier(comm));
    free(b);
}

static int rank_main(int argc, char **argv)
{
    const char *name = api_opt(argc, argv, "--case", "");
    ipcp_comm_t *comm;
    T_OK(ipcp_init(NULL, &comm));
    t_rank = ipcp_comm_rank(comm);
    if (strcmp(name, "order.posted") == 0)
        order(comm, 0);
    else if (strcmp(name, "order.late") == 0)
        order(comm, 1);
    else if (strcmp(name, "trunc.posted") == 0)
        trunc_case(comm, 0);
    else if (strcmp(name, "trunc.late") == 0)
        trunc_case(comm, 1);
    else if (strcmp(name, "threads") == 0)
        threads(comm);
    else if (strcmp(name, "test") == 0)
        test_case(comm);
    else if (strcmp(name, "lazy.sleeper") == 0)
        lazy_sleeper(comm);
    else if (strcmp(name, "lazy.full") == 0)
        lazy_full(comm);
    else if (strcmp(name, "lazy.rts") == 0)
        lazy_rts(comm);
    else if (strcmp(name, "came") == 0)
        came(comm);
    else if (strcmp(name, "pipe") == 0)
        pipe_case(comm);
    else
        T_FAIL("unknown --case \"%s\"", name);
    T_OK(ipcp_finalize(comm));
    return 0;
}

int main(int argc, char **argv)
{
    /* --ranks N: order.* in a larger job (rank 1 to rank 0, the others
     * only at the barriers). */
    return t_mp_main(argc, argv, (int)api_opt_long(argc, argv, "--ranks", 2),
                     120, rank_main);
}
