/* ipcpipe-bench: the transfers.  Rank 0 receives and times, rank 1 sends,
 * the other ranks take part in the barriers only.  Every rank follows the
 * same schedule of barriers; the one decision that changes it (whether a
 * case runs after its warm-up) is sent by rank 0 to every rank. */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "pattern.h"

#define RECV   0
#define SEND   1
#define POISON 0xa5
#define MIB    ((size_t)1 << 20)
/* Left free for the library's rings, the page tables and everyone else. */
#define MEM_SLACK (256 * MIB)

enum { TAG_SETUP = 1, TAG_ALLOC = 2, TAG_ALLOC_OK = 3, TAG_CASE0 = 16 };
/* Tags of case i: TAG_CASE0 + 8 * i + one of these, so that a transfer
 * abandoned in one case can never match a receive of another. */
enum { T_DATA = 0, T_VERDICT = 1, T_PING = 2, T_PONG = 3 };

struct bench_ctx {
    ipcp_comm_t *comm;
    const bench_opts_t *o;
    int rank, size;
    uint64_t seed;
    size_t cap;
    uint64_t usable;   /* rank 0: memory it judged free for buffers */
    size_t failed_cap; /* rank 0: smallest cap whose allocation failed */
    unsigned char *src, *dst;
    size_t src_len, dst_len;
    double *times;
    int ntimes;
};

typedef struct setup_msg {
    uint64_t seed;
    uint64_t cap;
} setup_msg_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t fresh_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return mix64((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
           mix64((uint64_t)getpid());
}

/* Seed of transfer k of case i: every checked transfer gets its own data,
 * so bytes left over from an earlier one cannot pass for new ones. */
static uint64_t case_seed(const bench_ctx_t *ctx, int i, int k)
{
    return mix64(ctx->seed ^ ((uint64_t)(i * 4 + k) * 0x9e3779b97f4a7c15ULL));
}

static int case_tag(int i, int kind)
{
    return TAG_CASE0 + 8 * i + kind;
}

double bench_median(double *v, int n)
{
    if (n <= 0)
        return NAN;
    for (int i = 1; i < n; i++) { /* insertion sort: n <= a few thousand */
        double x = v[i];
        int j = i - 1;
        for (; j >= 0 && v[j] > x; j--)
            v[j + 1] = v[j];
        v[j + 1] = x;
    }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- memory ----------------------------------------------------------- */

static uint64_t read_u64_file(const char *path)
{
    FILE *f = fopen(path, "r");
    unsigned long long v = 0;
    if (!f)
        return UINT64_MAX;
    int ok = fscanf(f, "%llu", &v) == 1;
    fclose(f);
    return ok ? v : UINT64_MAX; /* "max" reads as no limit */
}

/* Bytes this job may still take: MemAvailable, the cgroup's limit, and
 * /dev/shm's free space (shared memory may live there; a full tmpfs turns a
 * page fault into SIGBUS rather than an error). */
static uint64_t mem_available(void)
{
    uint64_t avail = UINT64_MAX;
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    while (f && fgets(line, sizeof(line), f)) {
        unsigned long long kb;
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            avail = kb * 1024;
    }
    if (f)
        fclose(f);
    uint64_t max = read_u64_file("/sys/fs/cgroup/memory.max");
    uint64_t cur = read_u64_file("/sys/fs/cgroup/memory.current");
    if (max != UINT64_MAX && cur != UINT64_MAX && max > cur &&
        max - cur < avail)
        avail = max - cur;
    struct statvfs sv;
    if (statvfs("/dev/shm", &sv) == 0 && sv.f_blocks > 0) {
        uint64_t shm = (uint64_t)sv.f_bavail * sv.f_frsize;
        avail = shm < avail ? shm : avail;
    }
    return avail;
}

/* Largest size of the run below `below` whose buffers (two on the
 * receiver, one on the sender) fit with room to spare; 0 if none does.
 * Only the sizes that will run are candidates, so that no memory is taken
 * for sizes nobody asked for. */
static size_t mem_cap(const bench_case_t *cs, int n, size_t below,
                      uint64_t *usable_out)
{
    uint64_t avail = mem_available();
    uint64_t usable = avail / 10 * 8;
    usable = usable > MEM_SLACK ? usable - MEM_SLACK : 0;
    size_t cap = 0;
    for (int i = 0; i < n; i++) {
        size_t s = cs[i].size;
        int fits = avail == UINT64_MAX || (uint64_t)s * 3 <= usable;
        if (s < below && s > cap && fits)
            cap = s;
    }
    *usable_out = usable;
    return cap;
}

static void free_buffers(bench_ctx_t *ctx)
{
    if (ctx->src)
        ipcp_mem_free(ctx->comm, ctx->src);
    if (ctx->dst)
        ipcp_mem_free(ctx->comm, ctx->dst);
    ctx->src = ctx->dst = NULL;
}

/* Allocates this rank's buffers for sizes up to cap and touches every page,
 * so no timed transfer pays for first-touch faults. */
static int alloc_buffers(bench_ctx_t *ctx)
{
    if (ctx->rank > SEND || ctx->cap == 0)
        return 0;
    size_t lat = ctx->o->lat_max < ctx->cap ? ctx->o->lat_max : ctx->cap;
    ctx->src_len = ctx->cap;
    ctx->dst_len = ctx->rank == RECV ? ctx->cap : (lat ? lat : 1);
    void *s = NULL, *d = NULL;
    ipcp_status_t st = ipcp_mem_alloc(ctx->comm, ctx->src_len, NULL, &s);
    if (st == IPCP_OK) {
        ctx->src = s;
        st = ipcp_mem_alloc(ctx->comm, ctx->dst_len, NULL, &d);
    }
    if (st != IPCP_OK) {
        /* Said here: rank 0 only learns that this rank failed. */
        fprintf(stderr, "ipcpipe-bench [rank %d]: ipcp_mem_alloc: %s: %s\n",
                ctx->rank, ipcp_strerror(st), ipcp_last_error());
        free_buffers(ctx);
        return -1;
    }
    ctx->dst = d;
    memset(ctx->src, 0, ctx->src_len);
    memset(ctx->dst, POISON, ctx->dst_len);
    return 0;
}

/* One round of agreeing on a cap: rank 0 proposes, ranks 0 and 1 try to
 * allocate, rank 0 tells everyone whether both succeeded. */
static int setup_round(bench_ctx_t *ctx, int *agreed)
{
    setup_msg_t m = {ctx->seed, ctx->cap};
    int32_t mine, theirs = 0, all;
    ipcp_status_t st = IPCP_OK;
    if (ctx->rank == RECV) {
        for (int r = 1; r < ctx->size && st == IPCP_OK; r++)
            st = ipcp_send(ctx->comm, &m, sizeof(m), r, TAG_SETUP);
    } else {
        st = ipcp_recv(ctx->comm, &m, sizeof(m), RECV, TAG_SETUP, NULL);
        ctx->seed = m.seed;
        ctx->cap = (size_t)m.cap;
    }
    mine = st == IPCP_OK ? alloc_buffers(ctx) == 0 : 0;
    if (st == IPCP_OK && ctx->rank == SEND)
        st = ipcp_send(ctx->comm, &mine, sizeof(mine), RECV, TAG_ALLOC);
    if (st == IPCP_OK && ctx->rank == RECV)
        st = ipcp_recv(ctx->comm, &theirs, sizeof(theirs), SEND, TAG_ALLOC,
                       NULL);
    all = mine && theirs;
    if (ctx->rank == RECV) {
        for (int r = 1; r < ctx->size && st == IPCP_OK; r++)
            st = ipcp_send(ctx->comm, &all, sizeof(all), r, TAG_ALLOC_OK);
    } else if (st == IPCP_OK) {
        st = ipcp_recv(ctx->comm, &all, sizeof(all), RECV, TAG_ALLOC_OK, NULL);
    }
    if (st != IPCP_OK) {
        fprintf(stderr, "ipcpipe-bench [rank %d]: set-up: %s: %s\n", ctx->rank,
                ipcp_strerror(st), ipcp_last_error());
        return -1;
    }
    *agreed = all;
    return 0;
}

bench_ctx_t *bench_ctx_create(ipcp_comm_t *comm, const bench_opts_t *o,
                              const bench_case_t *cs, int n)
{
    bench_ctx_t *ctx = calloc(1, sizeof(*ctx));
    if (!ctx)
        return NULL;
    ctx->comm = comm;
    ctx->o = o;
    ctx->rank = ipcp_comm_rank(comm);
    ctx->size = ipcp_comm_size(comm);
    if (ctx->rank == RECV) {
        ctx->seed = fresh_seed();
        ctx->cap = mem_cap(cs, n, SIZE_MAX, &ctx->usable);
    }
    for (;;) {
        int agreed;
        if (setup_round(ctx, &agreed) < 0) {
            bench_ctx_destroy(ctx);
            return NULL;
        }
        if (agreed || ctx->cap == 0)
            break;
        /* The estimate was too hopeful (limits, other jobs): try the next
         * smaller size (rank 0 decides; the others hear it next round). */
        free_buffers(ctx);
        if (ctx->rank == RECV) {
            ctx->failed_cap = ctx->cap;
            ctx->cap = mem_cap(cs, n, ctx->cap, &ctx->usable);
        }
    }
    return ctx;
}

void bench_ctx_destroy(bench_ctx_t *ctx)
{
    if (!ctx)
        return;
    free_buffers(ctx);
    free(ctx->times);
    free(ctx);
}

size_t bench_ctx_cap(const bench_ctx_t *ctx)
{
    return ctx->cap;
}

uint64_t bench_ctx_seed(const bench_ctx_t *ctx)
{
    return ctx->seed;
}

static double *times_buf(bench_ctx_t *ctx, int n)
{
    if (n > ctx->ntimes) {
        double *t = realloc(ctx->times, (size_t)n * sizeof(*t));
        if (!t)
            return NULL;
        ctx->times = t;
        ctx->ntimes = n;
    }
    return ctx->times;
}

/* ---- ceiling ---------------------------------------------------------- */

/* Through a volatile pointer so the compiler cannot fold repeated copies of
 * the same bytes into one. */
static void *(*volatile copy_fn)(void *, const void *, size_t) = memcpy;

double bench_ceiling(bench_ctx_t *ctx, size_t size, int reps)
{
    if (ctx->rank != RECV || size > ctx->cap || size == 0)
        return 0;
    double *t = times_buf(ctx, reps);
    if (!t)
        return 0;
    /* Small copies are batched: one clock read costs more than the copy. */
    size_t batch = size >= MIB ? 1 : MIB / size;
    batch = batch > 65536 ? 65536 : batch;
    for (size_t b = 0; b < batch; b++)
        copy_fn(ctx->dst, ctx->src, size);
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        for (size_t b = 0; b < batch; b++)
            copy_fn(ctx->dst, ctx->src, size);
        t[r] = (now_s() - t0) / (double)batch;
    }
    double med = bench_median(t, reps);
    return med > 0 ? (double)size / med / 1e9 : 0;
}

/* ---- one case ----------------------------------------------------------- */

static void set_reason(bench_result_t *res, bench_outcome_t outcome,
                       const char *what, ipcp_status_t st)
{
    if (res->outcome != BENCH_OK)
        return; /* keep the first cause */
    res->outcome = outcome;
    snprintf(res->reason, sizeof(res->reason), "%s: %s: %s", what,
             ipcp_strerror(st), ipcp_last_error());
}

/* A forced path the machine cannot serve is waived; so is any case that
 * runs out of memory.  Everything else is a failure. */
static bench_outcome_t classify(const bench_case_t *c, ipcp_status_t st)
{
    if (st == IPCP_ERR_NOMEM)
        return BENCH_WAIVED;
    if (c->path->path != IPCP_PATH_AUTO &&
        (st == IPCP_ERR_UNSUPPORTED || st == IPCP_ERR_PERMISSION))
        return BENCH_WAIVED;
    return BENCH_ERROR;
}

static void check_data(bench_result_t *res, const unsigned char *buf,
                       size_t len, uint64_t seed, const char *what)
{
    size_t bad = ipcp_pattern_check(buf, len, seed, 0);
    if (bad == len)
        return;
    res->verified = 0;
    if (res->reason[0] == '\0')
        snprintf(res->reason, sizeof(res->reason),
                 "%s: byte %zu of %zu is 0x%02x, expected 0x%02x", what, bad,
                 len, buf[bad], ipcp_pattern_byte(seed, bad));
}

static ipcp_status_t recv_one(bench_ctx_t *ctx, const bench_case_t *c, int tag,
                              bench_result_t *res)
{
    ipcp_xfer_info_t info = {0};
    ipcp_status_t st =
        ipcp_recv(ctx->comm, ctx->dst, c->size, SEND, tag, &info);
    if (st == IPCP_OK) {
        res->path_used = info.path;
        if (info.nbytes != c->size) {
            res->verified = ctx->o->verify ? 0 : res->verified;
            res->outcome = BENCH_ERROR;
            snprintf(res->reason, sizeof(res->reason),
                     "received %zu bytes, expected %zu", info.nbytes, c->size);
        }
    }
    return st;
}

/* Receiver's warm-up; the first transfer is checked (it is the one that
 * sets up mappings and rings, where mistakes show first). */
static int recv_warmup(bench_ctx_t *ctx, const bench_case_t *c, int i,
                       bench_result_t *res)
{
    ipcp_status_t st = ipcp_comm_set_path(ctx->comm, c->path->path);
    if (st != IPCP_OK) {
        set_reason(res, classify(c, st), "ipcp_comm_set_path", st);
        return 0;
    }
    for (int w = 0; w < ctx->o->warmup; w++) {
        int check = w == 0 && ctx->o->verify;
        if (check)
            memset(ctx->dst, POISON, c->size);
        st = recv_one(ctx, c, case_tag(i, T_DATA), res);
        if (st != IPCP_OK) {
            set_reason(res, classify(c, st), "warm-up receive", st);
            return 0;
        }
        if (check)
            check_data(res, ctx->dst, c->size, case_seed(ctx, i, 0), "warm-up");
    }
    return res->outcome == BENCH_OK;
}

static int bcast_verdict(bench_ctx_t *ctx, int i, int32_t ok)
{
    for (int r = 1; r < ctx->size; r++) {
        ipcp_status_t st =
            ipcp_send(ctx->comm, &ok, sizeof(ok), r, case_tag(i, T_VERDICT));
        if (st != IPCP_OK) {
            fprintf(stderr, "ipcpipe-bench: verdict to rank %d: %s: %s\n", r,
                    ipcp_strerror(st), ipcp_last_error());
            return -1;
        }
    }
    return 0;
}

static int barrier(bench_ctx_t *ctx)
{
    ipcp_status_t st = ipcp_barrier(ctx->comm);
    if (st != IPCP_OK)
        fprintf(stderr, "ipcpipe-bench [rank %d]: barrier: %s: %s\n", ctx->rank,
                ipcp_strerror(st), ipcp_last_error());
    return st == IPCP_OK ? 0 : -1;
}

/* Timed repetitions: each starts at a barrier; the receiver's clock runs
 * from leaving it to the completion of its receive. */
static int recv_timed(bench_ctx_t *ctx, const bench_case_t *c, int i,
                      bench_result_t *res)
{
    double *t = times_buf(ctx, res->iters);
    int n = 0;
    for (int r = 0; r < res->iters; r++) {
        int check = r == res->iters - 1 && ctx->o->verify;
        if (check)
            memset(ctx->dst, POISON, c->size);
        if (barrier(ctx) < 0)
            return -1;
        double t0 = now_s();
        ipcp_status_t st = recv_one(ctx, c, case_tag(i, T_DATA), res);
        double t1 = now_s();
        if (st != IPCP_OK) {
            set_reason(res, classify(c, st), "timed receive", st);
            continue; /* keep receiving: the sender sends them all */
        }
        if (t)
            t[n++] = t1 - t0;
        if (check)
            check_data(res, ctx->dst, c->size, case_seed(ctx, i, 1), "last");
    }
    double med = t ? bench_median(t, n) : NAN;
    res->gbps = med > 0 ? (double)c->size / med / 1e9 : NAN;
    return 0;
}

/* Ping-pong, started by rank 0: half of each round trip, median. */
static void recv_pingpong(bench_ctx_t *ctx, const bench_case_t *c, int i,
                          bench_result_t *res)
{
    uint64_t seed = case_seed(ctx, i, 2);
    int warm = ctx->o->warmup, rounds = res->iters;
    double *t = times_buf(ctx, rounds);
    int n = 0;
    ipcp_pattern_fill(ctx->src, c->size, seed, 0);
    for (int k = 0; k < warm + rounds; k++) {
        int check = k == warm + rounds - 1 && ctx->o->verify;
        if (check)
            memset(ctx->dst, POISON, c->size);
        double t0 = now_s();
        ipcp_status_t st =
            ipcp_send(ctx->comm, ctx->src, c->size, SEND, case_tag(i, T_PING));
        if (st == IPCP_OK)
            st = ipcp_recv(ctx->comm, ctx->dst, c->size, SEND,
                           case_tag(i, T_PONG), NULL);
        double t1 = now_s();
        if (st != IPCP_OK) {
            set_reason(res, BENCH_ERROR, "ping-pong", st);
            return;
        }
        if (k >= warm && t)
            t[n++] = 0.5 * (t1 - t0);
        if (check)
            check_data(res, ctx->dst, c->size, seed, "ping-pong");
    }
    double med = t ? bench_median(t, n) : NAN;
    res->latency_us = med * 1e6;
}

static int lat_case(const bench_ctx_t *ctx, const bench_case_t *c)
{
    return c->size <= ctx->o->lat_max && c->size <= ctx->cap;
}

static int run_receiver(bench_ctx_t *ctx, const bench_case_t *c, int i,
                        bench_result_t *res)
{
    char sz[24], cap[24];
    int ok = 0;
    if (barrier(ctx) < 0)
        return -1;
    if (c->size > ctx->cap) {
        bench_format_size(c->size, sz, sizeof(sz));
        bench_format_size(ctx->cap, cap, sizeof(cap));
        res->outcome = BENCH_WAIVED;
        if (ctx->failed_cap && c->size >= ctx->failed_cap)
            snprintf(res->reason, sizeof(res->reason),
                     "not enough memory (allocating buffers of %s failed; "
                     "largest size that fits: %s)",
                     sz, cap);
        else
            snprintf(res->reason, sizeof(res->reason),
                     "not enough memory (3 buffers of %s, %.1f GiB usable; "
                     "largest size that fits: %s)",
                     sz, (double)ctx->usable / (double)(1u << 30), cap);
    } else {
        ok = recv_warmup(ctx, c, i, res);
    }
    if (bcast_verdict(ctx, i, ok) < 0)
        return -1;
    if (ok && recv_timed(ctx, c, i, res) < 0)
        return -1;
    if (ok && lat_case(ctx, c)) {
        if (barrier(ctx) < 0)
            return -1;
        recv_pingpong(ctx, c, i, res);
    }
    ipcp_comm_set_path(ctx->comm, IPCP_PATH_AUTO);
    if (res->outcome != BENCH_OK)
        res->gbps = res->latency_us = NAN;
    return 0;
}

/* Waits for a warm-up send while watching for rank 0's verdict: when the
 * receiver gave up on the case, this send may never be matched, and the
 * request is left behind (its tag belongs to this case only).  Returns 1 when
 * the send completed, 0 when it failed or was abandoned. */
static int send_await(ipcp_request_t *sreq, ipcp_request_t **vreq,
                      int32_t *verdict)
{
    for (long spins = 0;; spins++) {
        int done = 0;
        ipcp_status_t st = ipcp_test(sreq, &done, NULL);
        if (done)
            return st == IPCP_OK;
        if (*vreq) {
            st = ipcp_test(*vreq, &done, NULL);
            if (done) {
                *vreq = NULL;
                if (st != IPCP_OK || !*verdict)
                    return 0;
            }
        }
        /* The warm-up is not timed: back off so the progress thread and the
         * copy workers keep the cores. */
        if (spins < 1000) {
            sched_yield();
        } else {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
}

static int send_warmup(bench_ctx_t *ctx, const bench_case_t *c, int i,
                       ipcp_request_t **vreq, int32_t *verdict)
{
    if (ctx->o->verify)
        ipcp_pattern_fill(ctx->src, c->size, case_seed(ctx, i, 0), 0);
    for (int w = 0; w < ctx->o->warmup; w++) {
        ipcp_request_t *sreq;
        if (ipcp_isend(ctx->comm, ctx->src, c->size, RECV, case_tag(i, T_DATA),
                       &sreq) != IPCP_OK)
            return 0;
        if (!send_await(sreq, vreq, verdict))
            return 0;
    }
    return 1;
}

static void send_report(const bench_case_t *c, const char *what,
                        ipcp_status_t st, int *reported)
{
    if (*reported)
        return;
    *reported = 1;
    fprintf(stderr, "ipcpipe-bench [rank 1] %s: %s: %s: %s\n", c->name, what,
            ipcp_strerror(st), ipcp_last_error());
}

static int send_timed(bench_ctx_t *ctx, const bench_case_t *c, int i, int iters)
{
    int reported = 0;
    for (int r = 0; r < iters; r++) {
        if (r == iters - 1 && ctx->o->verify)
            ipcp_pattern_fill(ctx->src, c->size, case_seed(ctx, i, 1), 0);
        if (barrier(ctx) < 0)
            return -1;
        ipcp_status_t st =
            ipcp_send(ctx->comm, ctx->src, c->size, RECV, case_tag(i, T_DATA));
        if (st != IPCP_OK)
            send_report(c, "timed send", st, &reported);
    }
    return 0;
}

/* Echoes every ping; receives on the case's path like rank 0 does. */
static int send_pingpong(bench_ctx_t *ctx, const bench_case_t *c, int i,
                         int iters)
{
    int reported = 0;
    ipcp_status_t st = ipcp_comm_set_path(ctx->comm, c->path->path);
    if (st != IPCP_OK)
        send_report(c, "ipcp_comm_set_path", st, &reported);
    if (barrier(ctx) < 0)
        return -1;
    for (int k = 0; k < ctx->o->warmup + iters && st == IPCP_OK; k++) {
        st = ipcp_recv(ctx->comm, ctx->dst, c->size, RECV, case_tag(i, T_PING),
                       NULL);
        if (st == IPCP_OK)
            st = ipcp_send(ctx->comm, ctx->dst, c->size, RECV,
                           case_tag(i, T_PONG));
        if (st != IPCP_OK)
            send_report(c, "ping-pong", st, &reported);
    }
    ipcp_comm_set_path(ctx->comm, IPCP_PATH_AUTO);
    return 0;
}

/* Rank 1, and (with nothing to send) ranks 2 and up. */
static int run_sender(bench_ctx_t *ctx, const bench_case_t *c, int i)
{
    int32_t verdict = 0;
    ipcp_request_t *vreq = NULL;
    if (barrier(ctx) < 0)
        return -1;
    ipcp_status_t st = ipcp_irecv(ctx->comm, &verdict, sizeof(verdict), RECV,
                                  case_tag(i, T_VERDICT), &vreq);
    if (st == IPCP_OK && ctx->rank == SEND && c->size <= ctx->cap)
        send_warmup(ctx, c, i, &vreq, &verdict);
    if (st == IPCP_OK && vreq)
        st = ipcp_wait(vreq, NULL);
    if (st != IPCP_OK) {
        fprintf(stderr, "ipcpipe-bench [rank %d]: verdict: %s: %s\n", ctx->rank,
                ipcp_strerror(st), ipcp_last_error());
        return -1;
    }
    if (!verdict)
        return 0;
    int iters = bench_iters(ctx->o, c->size);
    if (ctx->rank == SEND) {
        if (send_timed(ctx, c, i, iters) < 0)
            return -1;
        if (lat_case(ctx, c))
            return send_pingpong(ctx, c, i, iters);
        return 0;
    }
    for (int r = 0; r < iters + lat_case(ctx, c); r++)
        if (barrier(ctx) < 0)
            return -1;
    return 0;
}

int bench_run_case(bench_ctx_t *ctx, const bench_case_t *c, int i,
                   bench_result_t *res)
{
    if (ctx->rank != RECV)
        return run_sender(ctx, c, i);
    *res = (bench_result_t){
        .c = c,
        .outcome = BENCH_OK,
        .gbps = NAN,
        .latency_us = -1,
        .verified = ctx->o->verify ? 1 : -1,
        .iters = bench_iters(ctx->o, c->size),
        .path_used = c->path->path,
    };
    return run_receiver(ctx, c, i, res);
}
