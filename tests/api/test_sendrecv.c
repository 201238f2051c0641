/* Two-sided transfers through the public API, every byte verified.
 *
 *   test_api_sendrecv --ranks N --pattern P --size S [--path direct|staged|
 *       auto] [--how set|param|env] [--alloc malloc|mem|null] [--soff N]
 *       [--roff N] [--count N] [--pvm off] [--force all|receiver]
 *
 * Patterns: oneway (rank 0 -> 1, blocking send/recv), ring (rank r sends to
 * r+1 while receiving from r-1, isend+irecv, wait both; with 2 ranks this is
 * both directions at once), alltoall (every pair, both ways, all posted at
 * once), many (--count messages of 1..--many-max bytes, default 4096, over
 * 3 tags interleaved, windows of outstanding requests, received in posting
 * order per tag),
 * poll (isend/irecv completed by polling ipcp_test), crossing (ranks 0
 * and 1: rank 0 posts a send to rank 1 and a receive from it; rank 1 sends
 * first and posts its receive only once its send completed, so rank 0's
 * receive has to complete while its own send still waits for its CTS).
 *
 * --force receiver: only rank 1 (the receiver of oneway) forces the path;
 * the receiver decides, so the reported path must still be the forced one.
 *
 * Data comes from a fresh seed that the sender sends first.  The receiver
 * checks info.nbytes, info.path (the forced path, or a concrete one under
 * auto) and the bytes around its buffer. */
#include "apitest.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

enum { TAG_SEED = 1, TAG_DATA = 7, TAG_MANY0 = 20, MANY_TAGS = 3 };

typedef struct cfg {
    int nranks;
    const char *pattern;
    size_t size;
    ipcp_path_t path;
    const char *how;
    api_alloc_t alloc;
    size_t soff, roff;
    long count;
    size_t many_max; /* many: largest message */
    int pvm_off;
    int recv_only; /* only the receiving rank (1) forces the path */
} cfg_t;

static cfg_t parse(int argc, char **argv)
{
    cfg_t c;
    c.nranks = (int)api_opt_long(argc, argv, "--ranks", 2);
    c.pattern = api_opt(argc, argv, "--pattern", "oneway");
    c.size = api_opt_size(argc, argv, "--size", "4095");
    c.path = api_parse_path(api_opt(argc, argv, "--path", "auto"));
    c.how = api_opt(argc, argv, "--how", "set");
    c.alloc = api_parse_alloc(api_opt(argc, argv, "--alloc", "malloc"));
    c.soff = api_opt_size(argc, argv, "--soff", "0");
    c.roff = api_opt_size(argc, argv, "--roff", "0");
    c.count = api_opt_long(argc, argv, "--count", 10000);
    c.many_max = api_opt_size(argc, argv, "--many-max", "4096");
    c.pvm_off = strcmp(api_opt(argc, argv, "--pvm", "auto"), "off") == 0;
    c.recv_only =
        strcmp(api_opt(argc, argv, "--force", "all"), "receiver") == 0;
    if (c.recv_only && strcmp(c.pattern, "oneway") != 0)
        T_FAIL("--force receiver goes with --pattern oneway");
    if (c.many_max < 1)
        T_FAIL("--many-max must be at least 1");
    if (c.nranks < 2 || c.nranks > IPCP_LAUNCH_MAX_RANKS)
        T_FAIL("--ranks %d: need 2..%d", c.nranks, IPCP_LAUNCH_MAX_RANKS);
    return c;
}

/* Expected path of a receive: the forced one; under auto with process_vm
 * switched off, a malloc'd buffer cannot be written directly. */
static void check_path(const cfg_t *c, const ipcp_xfer_info_t *info,
                       const char *what)
{
    ipcp_path_t got = info->path;
    api_expect_path(got, c->path, info->nbytes, what);
    if (c->path == IPCP_PATH_AUTO && c->pvm_off &&
        c->alloc == API_ALLOC_MALLOC && got == IPCP_PATH_DIRECT)
        T_FAIL("%s: path direct into malloc memory with IPCPIPE_PVM=off", what);
}

/* rank 0 -> rank 1 with the blocking calls. */
static void run_oneway(ipcp_comm_t *comm, const cfg_t *c)
{
    int rank = ipcp_comm_rank(comm);
    api_buf_t b;
    memset(&b, 0, sizeof b);
    if (rank == 0) {
        uint64_t seed = t_fresh_seed();
        api_ctl_send(comm, 1, TAG_SEED, &seed, sizeof seed);
        void *p = api_buf_alloc(comm, c->alloc, c->size, c->soff, &b);
        if (c->size)
            t_fill(p, c->size, seed);
        T_OK(ipcp_send(comm, p, c->size, 1, TAG_DATA));
        if (c->size)
            t_verify(p, c->size, seed, "send buffer after the send");
        api_buf_check_guards(&b, "send buffer");
    } else if (rank == 1) {
        uint64_t seed;
        api_ctl_recv(comm, 0, TAG_SEED, &seed, sizeof seed);
        void *p = api_buf_alloc(comm, c->alloc, c->size, c->roff, &b);
        ipcp_xfer_info_t info = {(size_t)-1, IPCP_PATH_AUTO};
        T_OK(ipcp_recv(comm, p, c->size, 0, TAG_DATA, &info));
        T_EQ_U64(info.nbytes, c->size);
        check_path(c, &info, "ipcp_recv");
        if (c->size)
            t_verify(p, c->size, seed, "received data");
        api_buf_check_guards(&b, "receive buffer");
    }
    T_OK(ipcp_barrier(comm));
    api_buf_free(comm, &b);
}

/* One send buffer to dst and one receive buffer from src: seeds exchanged,
 * the send buffer filled from ours. */
typedef struct pair {
    uint64_t peer_seed;
    api_buf_t sb, rb;
    void *sp, *rp;
} pair_t;

static void pair_setup(ipcp_comm_t *comm, const cfg_t *c, int dst, int src,
                       pair_t *p)
{
    uint64_t seed = t_fresh_seed();
    ipcp_request_t *sreq = api_ctl_isend(comm, dst, TAG_SEED, &seed, 8);
    api_ctl_recv(comm, src, TAG_SEED, &p->peer_seed, 8);
    api_wait_ok(sreq, 8, "seed isend");
    p->sp = api_buf_alloc(comm, c->alloc, c->size, c->soff, &p->sb);
    p->rp = api_buf_alloc(comm, c->alloc, c->size, c->roff, &p->rb);
    if (c->size)
        t_fill(p->sp, c->size, seed);
}

/* Checks what arrived and both buffers' guards, then frees them after a
 * barrier. */
static void pair_finish(ipcp_comm_t *comm, const cfg_t *c, pair_t *p)
{
    if (c->size)
        t_verify(p->rp, c->size, p->peer_seed, "received data");
    api_buf_check_guards(&p->rb, "receive buffer");
    api_buf_check_guards(&p->sb, "send buffer");
    T_OK(ipcp_barrier(comm));
    api_buf_free(comm, &p->sb);
    api_buf_free(comm, &p->rb);
}

/* Each rank sends to r+1 and receives from r-1, both posted at once. */
static void run_ring(ipcp_comm_t *comm, const cfg_t *c)
{
    int rank = ipcp_comm_rank(comm), n = ipcp_comm_size(comm);
    int dst = (rank + 1) % n, src = (rank + n - 1) % n;
    pair_t pr;
    pair_setup(comm, c, dst, src, &pr);
    void *sp = pr.sp, *rp = pr.rp;
    ipcp_request_t *sreq = NULL, *rreq = NULL;
    T_OK(ipcp_irecv(comm, rp, c->size, src, TAG_DATA, &rreq));
    T_OK(ipcp_isend(comm, sp, c->size, dst, TAG_DATA, &sreq));
    ipcp_xfer_info_t info = {(size_t)-1, IPCP_PATH_AUTO};
    T_OK(ipcp_wait(rreq, &info));
    T_EQ_U64(info.nbytes, c->size);
    check_path(c, &info, "irecv");
    info.nbytes = (size_t)-1;
    T_OK(ipcp_wait(sreq, &info));
    T_EQ_U64(info.nbytes, c->size);
    pair_finish(comm, c, &pr);
}

/* Rank 0's receive from rank 1 completes while rank 0's own send to rank
 * 1 waits for a CTS that rank 1 gives only after that receive: the engine
 * may hold a receiver's staged chunks back while a send of its own waits
 * for its CTS, but never until that CTS comes. */
static void run_crossing(ipcp_comm_t *comm, const cfg_t *c)
{
    int rank = ipcp_comm_rank(comm), peer = 1 - rank;
    enum { TAG_TO1 = 8, TAG_TO0 = 9 };
    if (rank > 1) {
        T_OK(ipcp_barrier(comm));
        return;
    }
    pair_t pr;
    pair_setup(comm, c, peer, peer, &pr);
    void *sp = pr.sp, *rp = pr.rp;
    ipcp_xfer_info_t info = {(size_t)-1, IPCP_PATH_AUTO};
    if (rank == 0) {
        ipcp_request_t *sreq = NULL, *rreq = NULL;
        T_OK(ipcp_isend(comm, sp, c->size, 1, TAG_TO1, &sreq));
        T_OK(ipcp_irecv(comm, rp, c->size, 1, TAG_TO0, &rreq));
        T_OK(ipcp_wait(rreq, &info));
        T_EQ_U64(info.nbytes, c->size);
        check_path(c, &info, "irecv while the own isend waits");
        api_wait_ok(sreq, c->size, "isend");
    } else {
        T_OK(ipcp_send(comm, sp, c->size, 0, TAG_TO0));
        T_OK(ipcp_recv(comm, rp, c->size, 0, TAG_TO1, &info));
        T_EQ_U64(info.nbytes, c->size);
        check_path(c, &info, "recv after the send");
    }
    pair_finish(comm, c, &pr);
}

/* Every ordered pair at once; data from rank a to b has seed mix(seed_a, b). */
static void run_alltoall(ipcp_comm_t *comm, const cfg_t *c)
{
    int rank = ipcp_comm_rank(comm), n = ipcp_comm_size(comm);
    uint64_t seed = t_fresh_seed();
    uint64_t *peer_seed = calloc((size_t)n, sizeof *peer_seed);
    ipcp_request_t **sreq = calloc((size_t)n, sizeof *sreq);
    ipcp_request_t **rreq = calloc((size_t)n, sizeof *rreq);
    api_buf_t *sb = calloc((size_t)n, sizeof *sb);
    api_buf_t *rb = calloc((size_t)n, sizeof *rb);
    T_CHECK(peer_seed && sreq && rreq && sb && rb);
    for (int p = 0; p < n; p++)
        if (p != rank)
            sreq[p] = api_ctl_isend(comm, p, TAG_SEED, &seed, 8);
    for (int p = 0; p < n; p++)
        if (p != rank)
            api_ctl_recv(comm, p, TAG_SEED, &peer_seed[p], 8);
    for (int p = 0; p < n; p++)
        if (p != rank)
            api_wait_ok(sreq[p], 8, "seed isend");

    for (int p = 0; p < n; p++) {
        if (p == rank)
            continue;
        void *rp = api_buf_alloc(comm, c->alloc, c->size, c->roff, &rb[p]);
        T_OK(ipcp_irecv(comm, rp, c->size, p, TAG_DATA, &rreq[p]));
    }
    for (int i = 1; i < n; i++) {
        int p = (rank + i) % n; /* spread the first sends over peers */
        void *sp = api_buf_alloc(comm, c->alloc, c->size, c->soff, &sb[p]);
        if (c->size)
            t_fill(sp, c->size, api_mix(seed, (uint64_t)p));
        T_OK(ipcp_isend(comm, sp, c->size, p, TAG_DATA, &sreq[p]));
    }
    for (int p = 0; p < n; p++) {
        if (p == rank)
            continue;
        char what[64];
        ipcp_xfer_info_t info = {(size_t)-1, IPCP_PATH_AUTO};
        snprintf(what, sizeof what, "data from rank %d", p);
        T_OK(ipcp_wait(rreq[p], &info));
        T_EQ_U64(info.nbytes, c->size);
        check_path(c, &info, what);
        if (c->size)
            t_verify(rb[p].ptr, c->size, api_mix(peer_seed[p], (uint64_t)rank),
                     what);
        api_buf_check_guards(&rb[p], what);
    }
    for (int p = 0; p < n; p++)
        if (p != rank)
            api_wait_ok(sreq[p], c->size, "data isend");
    T_OK(ipcp_barrier(comm));
    for (int p = 0; p < n; p++) {
        if (p == rank)
            continue;
        api_buf_free(comm, &sb[p]);
        api_buf_free(comm, &rb[p]);
    }
    free(peer_seed);
    free(sreq);
    free(rreq);
    free(sb);
    free(rb);
}

/* Message i of the many-messages stream: tag, size and data seed. */
static int many_tag(uint64_t seed, long i)
{
    return (int)(api_mix(seed, (uint64_t)i) % MANY_TAGS);
}
static size_t many_size(const cfg_t *c, uint64_t seed, long i)
{
    return 1 + (size_t)(api_mix(seed ^ 1, (uint64_t)i) % c->many_max);
}
static uint64_t many_seed(uint64_t seed, long i)
{
    return api_mix(seed ^ 2, (uint64_t)i);
}

enum { MANY_SWIN = 48, MANY_RWIN = 16 };

static void many_send(ipcp_comm_t *comm, const cfg_t *c, uint64_t seed)
{
    api_buf_t b;
    size_t stride = c->many_max + c->soff;
    unsigned char *pool =
        api_buf_alloc(comm, c->alloc, stride * MANY_SWIN, 0, &b);
    ipcp_request_t *req[MANY_SWIN] = {0};
    size_t len[MANY_SWIN] = {0};
    for (long i = 0; i < c->count + MANY_SWIN; i++) {
        int slot = (int)(i % MANY_SWIN);
        if (req[slot]) {
            api_wait_ok(req[slot], len[slot], "many: isend");
            req[slot] = NULL;
        }
        if (i >= c->count)
            continue;
        unsigned char *p = pool + (size_t)slot * stride + c->soff;
        len[slot] = many_size(c, seed, i);
        t_fill(p, len[slot], many_seed(seed, i));
        T_OK(ipcp_isend(comm, p, len[slot], 1, TAG_MANY0 + many_tag(seed, i),
                        &req[slot]));
    }
    api_buf_free(comm, &b);
}

typedef struct many_rslot {
    ipcp_request_t *req;
    long index;
    unsigned char *p;
} many_rslot_t;

static long many_next(uint64_t seed, long from, long count, int tag)
{
    while (from < count && many_tag(seed, from) != tag)
        from++;
    return from;
}

/* Per tag, a window of receives posted in order with --many-max buffers
 * (larger than any message: info.nbytes gives the size).  The oldest of each
 * tag is tested; tags are posted in an order unrelated to the sender's. */
static void many_recv(ipcp_comm_t *comm, const cfg_t *c, uint64_t seed)
{
    api_buf_t b;
    size_t stride = c->many_max + c->roff + 16;
    unsigned char *pool =
        api_buf_alloc(comm, c->alloc, stride * MANY_TAGS * MANY_RWIN, 0, &b);
    many_rslot_t slot[MANY_TAGS][MANY_RWIN];
    long next[MANY_TAGS]; /* next index to post, per tag */
    int head[MANY_TAGS] = {0}, used[MANY_TAGS] = {0};
    long received = 0;
    uint64_t canary = t_fresh_seed();
    for (int t = 0; t < MANY_TAGS; t++) {
        next[t] = many_next(seed, 0, c->count, t);
        for (int k = 0; k < MANY_RWIN; k++)
            slot[t][k].p =
                pool + ((size_t)t * MANY_RWIN + (size_t)k) * stride + c->roff;
    }
    double deadline = api_now() + 120;
    while (received < c->count) {
        long before = received;
        for (int t = MANY_TAGS - 1; t >= 0; t--) {
            while (used[t] < MANY_RWIN && next[t] < c->count) {
                many_rslot_t *s = &slot[t][(head[t] + used[t]) % MANY_RWIN];
                s->index = next[t];
                ipcp_pattern_fill(s->p, c->many_max, canary, 0);
                T_OK(ipcp_irecv(comm, s->p, c->many_max, 0, TAG_MANY0 + t,
                                &s->req));
                used[t]++;
                next[t] = many_next(seed, next[t] + 1, c->count, t);
            }
            if (!used[t])
                continue;
            many_rslot_t *s = &slot[t][head[t]];
            int done = -1;
            ipcp_xfer_info_t info = {(size_t)-1, IPCP_PATH_AUTO};
            ipcp_status_t st = ipcp_test(s->req, &done, &info);
            if (done == 0) {
                T_STATUS(st, IPCP_IN_PROGRESS);
                continue;
            }
            T_EQ_INT(done, 1);
            if (st != IPCP_OK)
                T_FAIL("many: message %ld (tag %d): %s (last error: %s)",
                       s->index, TAG_MANY0 + t, ipcp_strerror(st),
                       ipcp_last_error());
            size_t want = many_size(c, seed, s->index);
            char what[96];
            snprintf(what, sizeof what, "many: message %ld (tag %d, %zu bytes)",
                     s->index, TAG_MANY0 + t, want);
            if (info.nbytes != want)
                T_FAIL("%s: info.nbytes %zu (a message matched out of order?)",
                       what, info.nbytes);
            check_path(c, &info, what);
            api_verify_at(s->p, want, many_seed(seed, s->index), 0, what);
            api_verify_at(s->p + want, c->many_max - want, canary, want,
                          "bytes past the message in the receive buffer");
            head[t] = (head[t] + 1) % MANY_RWIN;
            used[t]--;
            received++;
        }
        if (received == before)
            sched_yield(); /* leave the cores to the progress threads */
        if (api_now() > deadline)
            T_FAIL("many: only %ld of %ld messages in 120 s", received,
                   c->count);
    }
    api_buf_check_guards(&b, "receive pool");
    api_buf_free(comm, &b);
    printf("rank 1: %ld messages received and verified\n", received);
}

static void run_many(ipcp_comm_t *comm, const cfg_t *c)
{
    int rank = ipcp_comm_rank(comm);
    uint64_t seed;
    if (rank == 0) {
        seed = t_fresh_seed();
        api_ctl_send(comm, 1, TAG_SEED, &seed, 8);
        many_send(comm, c, seed);
    } else if (rank == 1) {
        api_ctl_recv(comm, 0, TAG_SEED, &seed, 8);
        many_recv(comm, c, seed);
    }
    T_OK(ipcp_barrier(comm));
}

/* Completes req by polling ipcp_test; returns the number of in-progress
 * answers seen. */
static long poll_done(ipcp_request_t *req, ipcp_xfer_info_t *info)
{
    long spins = 0;
    double deadline = api_now() + 60;
    for (;;) {
        int done = -1;
        ipcp_status_t st = ipcp_test(req, &done, info);
        if (done == 1) {
            T_OK(st);
            return spins;
        }
        T_EQ_INT(done, 0);
        T_STATUS(st, IPCP_IN_PROGRESS);
        spins++;
        sched_yield();
        if (api_now() > deadline)
            T_FAIL("ipcp_test still in progress after 60 s (%ld polls)", spins);
    }
}

static void run_poll(ipcp_comm_t *comm, const cfg_t *c)
{
    int rank = ipcp_comm_rank(comm);
    api_buf_t b;
    memset(&b, 0, sizeof b);
    ipcp_request_t *req = NULL;
    ipcp_xfer_info_t info = {(size_t)-1, IPCP_PATH_AUTO};
    uint64_t seed = 0;
    if (rank == 0) {
        seed = t_fresh_seed();
        api_ctl_send(comm, 1, TAG_SEED, &seed, 8);
        void *p = api_buf_alloc(comm, c->alloc, c->size, c->soff, &b);
        t_fill(p, c->size, seed);
        T_OK(ipcp_isend(comm, p, c->size, 1, TAG_DATA, &req));
        long spins = poll_done(req, &info);
        T_EQ_U64(info.nbytes, c->size);
        printf("rank 0: send done after %ld polls\n", spins);
    } else if (rank == 1) {
        api_ctl_recv(comm, 0, TAG_SEED, &seed, 8);
        void *p = api_buf_alloc(comm, c->alloc, c->size, c->roff, &b);
        T_OK(ipcp_irecv(comm, p, c->size, 0, TAG_DATA, &req));
        long spins = poll_done(req, &info);
        T_EQ_U64(info.nbytes, c->size);
        check_path(c, &info, "polled irecv");
        t_verify(p, c->size, seed, "received data");
        api_buf_check_guards(&b, "receive buffer");
        printf("rank 1: receive done after %ld polls\n", spins);
    }
    T_OK(ipcp_barrier(comm));
    api_buf_free(comm, &b);
}

/* Three threads a rank, each a blocking ping-pong of 8-byte messages on
 * its own tag, fresh values checked every round.  Run with
 * IPCPIPE_SPIN_US=0, the progress thread sleeps between messages: a
 * command it sees announced but does not take (its lock held by another
 * thread) must not wait for the poll timeout, a second. */
#define THREADS_N       3
#define THREADS_WORST_S 0.9

typedef struct thr_arg {
    ipcp_comm_t *comm;
    int tag;
    long count;
    uint64_t seed;
    double worst;
} thr_arg_t;

static void *thr_pingpong(void *p)
{
    thr_arg_t *a = p;
    int rank = ipcp_comm_rank(a->comm);
    for (long i = 0; i < a->count; i++) {
        uint64_t v = a->seed ^ ((uint64_t)a->tag << 40) ^ (uint64_t)i, got = 0;
        double t0 = api_now();
        if (rank == 0) {
            T_OK(ipcp_send(a->comm, &v, 8, 1, a->tag));
            T_OK(ipcp_recv(a->comm, &got, 8, 1, a->tag, NULL));
            if (got != ~v)
                T_FAIL("tag %d round %ld: echo %#llx, want %#llx", a->tag, i,
                       (unsigned long long)got, (unsigned long long)~v);
        } else {
            T_OK(ipcp_recv(a->comm, &got, 8, 0, a->tag, NULL));
            if (got != v)
                T_FAIL("tag %d round %ld: got %#llx, want %#llx", a->tag, i,
                       (unsigned long long)got, (unsigned long long)v);
            got = ~got;
            T_OK(ipcp_send(a->comm, &got, 8, 0, a->tag));
        }
        double d = api_now() - t0;
        if (d > a->worst)
            a->worst = d;
    }
    return NULL;
}

static void run_threads(ipcp_comm_t *comm, const cfg_t *c)
{
    int rank = ipcp_comm_rank(comm);
    uint64_t seed = 0;
    pthread_t th[THREADS_N];
    thr_arg_t a[THREADS_N];
    if (rank == 0) {
        seed = t_fresh_seed();
        api_ctl_send(comm, 1, TAG_SEED, &seed, 8);
    } else if (rank == 1) {
        api_ctl_recv(comm, 0, TAG_SEED, &seed, 8);
    }
    for (int i = 0; rank < 2 && i < THREADS_N; i++) {
        a[i] = (thr_arg_t){comm, TAG_MANY0 + i, c->count, seed, 0};
        if (pthread_create(&th[i], NULL, thr_pingpong, &a[i]) != 0)
            T_FAIL("pthread_create failed");
    }
    for (int i = 0; rank < 2 && i < THREADS_N; i++) {
        pthread_join(th[i], NULL);
        printf("rank %d, tag %d: %ld round trips, the longest %.3f s\n", rank,
               a[i].tag, c->count, a[i].worst);
        if (a[i].worst > THREADS_WORST_S)
            T_FAIL("tag %d: a round trip of 8 bytes took %.3f s (> %.1f s): "
                   "the progress thread slept with work pending",
                   a[i].tag, a[i].worst, THREADS_WORST_S);
    }
    T_OK(ipcp_barrier(comm));
}

static int rank_main(int argc, char **argv)
{
    cfg_t c = parse(argc, argv);
    /* Direct into malloc memory needs process_vm_writev between ranks. */
    if (c.path == IPCP_PATH_DIRECT && c.alloc == API_ALLOC_MALLOC &&
        (c.pvm_off || !api_pvm_permitted())) {
        fprintf(stderr, "skip: process_vm_writev between processes is not "
                        "permitted here, direct into malloc memory cannot "
                        "work\n");
        return T_SKIP;
    }
    /* t_rank comes from the launcher's environment. */
    ipcp_comm_t *comm =
        api_init(c.recv_only && t_rank != 1 ? IPCP_PATH_AUTO : c.path, c.how);
    T_EQ_INT(ipcp_comm_size(comm), c.nranks);
    if (strcmp(c.pattern, "oneway") == 0)
        run_oneway(comm, &c);
    else if (strcmp(c.pattern, "ring") == 0)
        run_ring(comm, &c);
    else if (strcmp(c.pattern, "alltoall") == 0)
        run_alltoall(comm, &c);
    else if (strcmp(c.pattern, "many") == 0)
        run_many(comm, &c);
    else if (strcmp(c.pattern, "poll") == 0)
        run_poll(comm, &c);
    else if (strcmp(c.pattern, "threads") == 0)
        run_threads(comm, &c);
    else if (strcmp(c.pattern, "crossing") == 0)
        run_crossing(comm, &c);
    else
        T_FAIL("unknown --pattern \"%s\"", c.pattern);
    api_finalize(comm);
    return 0;
}

int main(int argc, char **argv)
{
    cfg_t c = parse(argc, argv);
    if (strcmp(c.how, "env") == 0)
        setenv("IPCPIPE_PATH", api_opt(argc, argv, "--path", "auto"), 1);
    if (c.pvm_off)
        setenv("IPCPIPE_PVM", "off", 1);
    double timeout = c.size > ((size_t)1 << 30) ? 300 : 120;
    return t_mp_main(argc, argv, c.nranks, timeout, rank_main);
}
