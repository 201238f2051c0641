/* ipcpipe-bench: the transfers.  Rank 0 receives and times, rank 1 sends
 * (and receives too in the bidir case), the other ranks take part in the
 * barriers only.  Every rank follows the same schedule of barriers; the one
 * decision that changes it (whether a case runs after its warm-up) is sent
 * by rank 0 to every rank.
 *
 * A repetition posts a window of W transfers back to back; the k-th lands
 * in slot k % slots of the receiving buffer, so that the last transfer's
 * bytes can be told from the others' and checked alone.  On host memory
 * it is read from source slot k % slots too, each rewritten before every
 * repetition (bench_src_slots). */
#include "bench.h"

#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "bench_ctx.h"
#include "pattern.h"
#include "ipcpipe_cuda.h"

#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)

double bench_now_s(void)
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

uint64_t bench_fresh_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return mix64((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
           mix64((uint64_t)getpid());
}

/* Seed of checked transfer k of case i (0/1: first/last from rank 1, 2:
 * ping, 3/4: first/last from rank 0 in bidir): every checked transfer gets
 * its own data, so bytes left over from an earlier one cannot pass for new
 * ones. */
uint64_t bench_case_seed(const bench_ctx_t *ctx, int i, int k)
{
    return mix64(ctx->seed ^ ((uint64_t)(i * 8 + k) * 0x9e3779b97f4a7c15ULL));
}

uint64_t bench_pingpong_seed(const bench_ctx_t *ctx, int i, int round)
{
    return mix64(bench_case_seed(ctx, i, 2) +
                 (uint64_t)(round + 1) * 0xbf58476d1ce4e5b9ULL);
}

int bench_case_tag(int i, int kind)
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

void bench_set_gbps(bench_result_t *res, double bytes, double *t, int n)
{
    double med = n > 0 ? bench_median(t, n) : NAN;
    res->gbps = med > 0 ? bytes / med / 1e9 : NAN;
    res->gbps_min = n > 0 && t[n - 1] > 0 ? bytes / t[n - 1] / 1e9 : NAN;
    res->gbps_max = n > 0 && t[0] > 0 ? bytes / t[0] / 1e9 : NAN;
}

void bench_set_latency(bench_result_t *res, double *t, int n)
{
    res->latency_us = n > 0 ? bench_median(t, n) * 1e6 : NAN;
    res->latency_min_us = n > 0 ? t[0] * 1e6 : NAN;
    res->latency_max_us = n > 0 ? t[n - 1] * 1e6 : NAN;
}

/* Distinct slots of a window: all W when they fit in the window's bytes
 * (always with the default W), else as many as fit, reused in turn. */
int bench_case_slots(const bench_opts_t *o, size_t size)
{
    int w = bench_window(o, size);
    size_t fit = BENCH_WINDOW_BYTES / size;
    fit = fit < 1 ? 1 : fit;
    return (size_t)w < fit ? w : (int)fit;
}

/* Bytes of the slots of the largest window among the sizes up to cap. */
size_t bench_window_len(const bench_opts_t *o, const bench_case_t *cs, int n,
                        size_t cap)
{
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        size_t s = cs[i].size;
        size_t l = s * (size_t)bench_case_slots(o, s);
        if (s <= cap && l > len)
            len = l;
    }
    return len;
}

/* ---- pieces of a case ---------------------------------------------------- */

void bench_set_reason(bench_result_t *res, bench_outcome_t outcome,
                      const char *what, ipcp_status_t st)
{
    if (res->outcome != BENCH_OK)
        return; /* keep the first cause */
    res->outcome = outcome;
    bench_fmt(res->reason, sizeof(res->reason), "%s: %s: %s", what,
              ipcp_strerror(st), ipcp_last_error());
}

void bench_set_error(bench_result_t *res, const char *what, const char *msg)
{
    if (res->outcome != BENCH_OK)
        return;
    res->outcome = BENCH_ERROR;
    bench_fmt(res->reason, sizeof(res->reason), "%s: %s", what, msg);
}

/* A forced path the machine cannot serve is waived; so is any case that
 * runs out of memory.  Everything else is a failure. */
bench_outcome_t bench_classify(const bench_case_t *c, ipcp_status_t st)
{
    if (st == IPCP_ERR_NOMEM)
        return BENCH_WAIVED;
    if (c->path->path != IPCP_PATH_AUTO &&
        (st == IPCP_ERR_UNSUPPORTED || st == IPCP_ERR_PERMISSION))
        return BENCH_WAIVED;
    return BENCH_ERROR;
}

int bench_poison(bench_ctx_t *ctx, size_t len, bench_result_t *res)
{
    char err[BENCH_REASON_MAX];
    if (bench_buf_poison(&ctx->dst, 0, len, err, sizeof(err)) == 0)
        return 0;
    if (res)
        bench_set_error(res, "poisoning the receive buffer", err);
    else
        fprintf(stderr,
                "ipcpipe-bench [rank %d]: poisoning the receive buffer: %s\n",
                ctx->rank, err);
    return -1;
}

/* Fills [off, off + len) of the send buffer with seed's stream; 0 or -1
 * (reported in res, else on stderr). */
static int fill_at(bench_ctx_t *ctx, size_t off, size_t len, uint64_t seed,
                   bench_result_t *res)
{
    char err[BENCH_REASON_MAX];
    if (bench_buf_fill(&ctx->src, off, len, seed, ctx->staging, err,
                       sizeof(err)) == 0)
        return 0;
    if (res)
        bench_set_error(res, "filling the send buffer", err);
    else
        fprintf(stderr,
                "ipcpipe-bench [rank %d]: filling the send buffer: "
                "%s\n",
                ctx->rank, err);
    return -1;
}

int bench_fill_src(bench_ctx_t *ctx, size_t len, uint64_t seed,
                   bench_result_t *res)
{
    return fill_at(ctx, 0, len, seed, res);
}

int bench_src_slots(const bench_ctx_t *ctx, size_t size)
{
    return ctx->mem == BENCH_MEM_HOST ? bench_case_slots(ctx->o, size) : 1;
}

int bench_fill_window(bench_ctx_t *ctx, size_t size, uint64_t seed,
                      bench_result_t *res)
{
    int n = bench_src_slots(ctx, size);
    for (int k = 0; k < n; k++)
        if (fill_at(ctx, (size_t)k * size, size,
                    ipcp_pattern_slot_seed(seed, (uint64_t)k), res) < 0)
            return -1;
    return 0;
}

void bench_fill_rep(bench_ctx_t *ctx, size_t size, uint64_t seed, int r,
                    int iters, bench_result_t *res)
{
    int last = r == iters - 1 && ctx->o->verify;
    if (ctx->mem == BENCH_MEM_HOST || last)
        bench_fill_window(ctx, size, seed + (last ? 0 : (uint64_t)r + 1), res);
}

/* Posts nrecv receives (the k-th into slot k % slots) and nsend sends of
 * size bytes to or from the other one of ranks 0 and 1, then waits for all
 * of them.  Returns the first failure, with *what naming it. */
ipcp_status_t bench_xfer_window(bench_ctx_t *ctx, size_t size, int nrecv,
                                int nsend, int slots, int rtag, int stag,
                                bench_result_t *res, const char **what)
{
    int peer = ctx->rank == RECV ? SEND : RECV, n = 0, nr;
    unsigned char *dst = ctx->dst.ptr, *src = ctx->src.ptr;
    int sslots = bench_src_slots(ctx, size);
    ipcp_status_t first = IPCP_OK, st;
    ipcp_stream_t us = (ipcp_stream_t)ctx->ustream;
    for (int k = 0; k < nrecv && first == IPCP_OK; k++) {
        void *b = dst + (size_t)(k % slots) * size;
        st = us ? ipcp_irecv_on_stream(ctx->comm, b, size, peer, rtag, us,
                                       &ctx->reqs[n])
                : ipcp_irecv(ctx->comm, b, size, peer, rtag, &ctx->reqs[n]);
        if (st == IPCP_OK)
            n++;
        else
            first = st, *what = "ipcp_irecv";
    }
    nr = n;
    for (int k = 0; k < nsend && first == IPCP_OK; k++) {
        void *b = src + (size_t)(k % sslots) * size;
        st = us ? ipcp_isend_on_stream(ctx->comm, b, size, peer, stag, us,
                                       &ctx->reqs[n])
                : ipcp_isend(ctx->comm, b, size, peer, stag, &ctx->reqs[n]);
        if (st == IPCP_OK)
            n++;
        else
            first = st, *what = "ipcp_isend";
    }
    for (int j = 0; j < n; j++) {
        ipcp_xfer_info_t info = {0};
        st = ipcp_wait(ctx->reqs[j], &info);
        if (st != IPCP_OK && first == IPCP_OK) {
            first = st;
            *what = j < nr ? "receive" : "send";
        } else if (st == IPCP_OK && j < nr && res) {
            res->path_used = info.path;
            if (info.nbytes != size && res->outcome == BENCH_OK) {
                res->outcome = BENCH_ERROR;
                bench_fmt(res->reason, sizeof(res->reason),
                          "received %zu bytes, expected %zu", info.nbytes,
                          size);
            }
        }
    }
    /* Stream-ordered: done once the user's stream has gone past them. */
    char err[BENCH_REASON_MAX];
    if (us && bench_cuda_stream_sync(us, err, sizeof(err)) < 0 &&
        first == IPCP_OK) {
        first = IPCP_ERR_CUDA;
        *what = "cuStreamSynchronize";
    }
    return first;
}

/* The stream case's ping-pong: batches of round trips enqueued back to
 * back on each rank's stream (rank 0: send, receive; rank 1: receive, send
 * back), then the stream waited for; half a round trip is the batch's time
 * over twice its rounds.  Returns the per-batch figures in t (NULL on rank
 * 1), or -1 with *st set. */
int bench_stream_pingpong(bench_ctx_t *ctx, const bench_case_t *c, int i,
                          int nbatches, double *t, double *tpost,
                          ipcp_status_t *st, bench_result_t *res)
{
    ipcp_stream_t us = (ipcp_stream_t)ctx->ustream;
    int r0 = ctx->rank == RECV, peer = r0 ? SEND : RECV;
    int calls = 2 * ctx->o->stream_batch;
    char err[BENCH_REASON_MAX];
    for (int b = 0; b < nbatches; b++) {
        int n = 0;
        /* Fresh data and poisoned receive buffers every batch, on both
         * ranks (rank 1 echoes what it received), checked after it. */
        uint64_t seed = bench_pingpong_seed(ctx, i, b);
        if (ctx->o->verify &&
            ((r0 && bench_fill_src(ctx, c->size, seed, res) < 0) ||
             bench_poison(ctx, c->size, res) < 0)) {
            *st = IPCP_ERR_INVALID;
            return -1;
        }
        double t0 = bench_now_s();
        *st = IPCP_OK;
        /* Ping then pong: rank 0 sends the first and receives the
         * second, rank 1 the reverse, echoing what it received. */
        for (int k = 0; k < calls && *st == IPCP_OK; k++) {
            int ping = k % 2 == 0, send = ping == r0;
            int tag = bench_case_tag(i, ping ? T_PING : T_PONG);
            void *buf = send && r0 ? ctx->src.ptr : ctx->dst.ptr;
            /* A request per call costs it 0.6-1 us on an H200 VM (see
             * NOTES.md); --stream-reqs every measures that case. */
            int track = ctx->o->stream_reqs_every || k >= calls - 2;
            ipcp_request_t **rq = track ? &ctx->reqs[n] : NULL;
            *st = send ? ipcp_isend_on_stream(ctx->comm, buf, c->size, peer,
                                              tag, us, rq)
                       : ipcp_irecv_on_stream(ctx->comm, buf, c->size, peer,
                                              tag, us, rq);
            if (*st == IPCP_OK && track)
                n++;
        }
        double tp = bench_now_s();
        if (bench_cuda_stream_sync(us, err, sizeof(err)) < 0 && *st == IPCP_OK)
            *st = IPCP_ERR_CUDA;
        double t1 = bench_now_s();
        for (int j = 0; j < n; j++) {
            ipcp_status_t s = ipcp_wait(ctx->reqs[j], NULL);
            if (s != IPCP_OK && *st == IPCP_OK)
                *st = s;
        }
        if (*st != IPCP_OK)
            return -1;
        if (r0 && ctx->o->verify)
            bench_check_data(ctx, res, 0, c->size, seed, "stream ping-pong");
        if (t)
            t[b] = (t1 - t0) / calls;
        if (tpost)
            tpost[b] = (tp - t0) / calls;
    }
    return 0;
}

int bench_bcast_verdict(bench_ctx_t *ctx, int i, int32_t ok)
{
    for (int r = 1; r < ctx->size; r++) {
        ipcp_status_t st = ipcp_send(ctx->comm, &ok, sizeof(ok), r,
                                     bench_case_tag(i, T_VERDICT));
        if (st != IPCP_OK) {
            fprintf(stderr, "ipcpipe-bench: verdict to rank %d: %s: %s\n", r,
                    ipcp_strerror(st), ipcp_last_error());
            return -1;
        }
    }
    return 0;
}

int bench_barrier(bench_ctx_t *ctx)
{
    ipcp_status_t st = ipcp_barrier(ctx->comm);
    if (st != IPCP_OK)
        fprintf(stderr, "ipcpipe-bench [rank %d]: barrier: %s: %s\n", ctx->rank,
                ipcp_strerror(st), ipcp_last_error());
    return st == IPCP_OK ? 0 : -1;
}

int bench_lat_case(const bench_ctx_t *ctx, const bench_case_t *c)
{
    return c->path->kind == BENCH_KIND_IPCP && !c->path->bidir &&
           c->size <= ctx->o->lat_max && c->size <= ctx->cap;
}

/* ---- rank 0, one direction -------------------------------------------- */

/* Receiver's warm-up, one transfer at a time; the first is checked (it is
 * the one that sets up mappings and rings, where mistakes show first). */
static int recv_warmup(bench_ctx_t *ctx, const bench_case_t *c, int i,
                       bench_result_t *res)
{
    for (int w = 0; w < ctx->o->warmup; w++) {
        int check = w == 0 && ctx->o->verify;
        const char *what = "warm-up";
        if (check && bench_poison(ctx, c->size, res) < 0)
            return 0;
        double a = bench_now_s();
        ipcp_status_t st = bench_xfer_window(
            ctx, c->size, 1, 0, 1, bench_case_tag(i, T_DATA), 0, res, &what);
        if (w == 0 && st == IPCP_OK)
            res->first_us = (bench_now_s() - a) * 1e6;
        if (st != IPCP_OK) {
            bench_set_reason(res, bench_classify(c, st), "warm-up receive", st);
            return 0;
        }
        if (check)
            bench_check_data(ctx, res, 0, c->size, bench_case_seed(ctx, i, 0),
                             "warm-up");
    }
    return res->outcome == BENCH_OK;
}

/* Timed repetitions: each starts at a barrier; the receiver's clock runs
 * from leaving it to the completion of the window's last receive. */
static int recv_timed(bench_ctx_t *ctx, const bench_case_t *c, int i,
                      bench_result_t *res)
{
    int w = res->window, slots = bench_case_slots(ctx->o, c->size);
    double *t0 = calloc((size_t)res->iters, sizeof(*t0));
    double *t1 = calloc((size_t)res->iters, sizeof(*t1));
    for (int r = 0; r < res->iters; r++) {
        int check = r == res->iters - 1 && ctx->o->verify;
        const char *what = "timed";
        if (check)
            bench_poison(ctx, (size_t)slots * c->size, res);
        if (bench_barrier(ctx) < 0) {
            free(t0);
            free(t1);
            return -1;
        }
        double a = bench_now_s();
        ipcp_status_t st =
            bench_xfer_window(ctx, c->size, w, 0, slots,
                              bench_case_tag(i, T_DATA), 0, res, &what);
        double b = bench_now_s();
        if (t0 && t1) {
            t0[r] = a;
            t1[r] = st == IPCP_OK ? b : NAN;
        }
        if (st != IPCP_OK) {
            bench_set_reason(res, bench_classify(c, st), "timed receive", st);
            continue; /* keep receiving: the sender sends them all */
        }
        if (check)
            bench_check_last(ctx, res, c->size, w, bench_case_seed(ctx, i, 1));
    }
    bench_time_reps(ctx, bench_case_tag(i, T_PEER_TIMES), t0 && t1 ? t0 : NULL,
                    t1, res->iters, (double)w * (double)c->size, res);
    free(t0);
    free(t1);
    return 0;
}

/* Ping-pong, started by rank 0: half of each round trip, median. */
static void recv_pingpong(bench_ctx_t *ctx, const bench_case_t *c, int i,
                          bench_result_t *res)
{
    int warm = ctx->o->warmup, rounds = bench_lat_rounds(ctx->o, c->size);
    double *t = calloc((size_t)rounds, sizeof(*t));
    int n = 0;
    if (ctx->ustream) {
        /* The calls' own time too: the GPUs run the batch while it is
         * enqueued, and calls slower than a half round trip would set
         * the pace. */
        int nb = (rounds + ctx->o->stream_batch - 1) / ctx->o->stream_batch;
        double *tp = calloc((size_t)nb, sizeof(*tp));
        ipcp_status_t st = IPCP_OK;
        if (!t || !tp ||
            bench_stream_pingpong(ctx, c, i, 1, NULL, NULL, &st, res) < 0 ||
            bench_stream_pingpong(ctx, c, i, nb, t, tp, &st, res) < 0) {
            bench_set_reason(res, BENCH_ERROR, "stream ping-pong",
                             t && tp ? st : IPCP_ERR_NOMEM);
            free(t);
            free(tp);
            return;
        }
        bench_set_latency(res, t, nb);
        res->post_us = bench_median(tp, nb) * 1e6;
        free(t);
        free(tp);
        return;
    }
    for (int k = 0; k < warm + rounds; k++) {
        /* Fresh data every round, into a poisoned buffer (rank 1 poisons
         * its own too), checked after it: a round that moved nothing, or
         * the last round's bytes, cannot pass.  Not timed. */
        int check = ctx->o->verify;
        uint64_t seed = bench_pingpong_seed(ctx, i, k);
        if (check && (bench_fill_src(ctx, c->size, seed, res) < 0 ||
                      bench_poison(ctx, c->size, res) < 0))
            break;
        double t0 = bench_now_s();
        ipcp_status_t st = ipcp_send(ctx->comm, ctx->src.ptr, c->size, SEND,
                                     bench_case_tag(i, T_PING));
        if (st == IPCP_OK)
            st = ipcp_recv(ctx->comm, ctx->dst.ptr, c->size, SEND,
                           bench_case_tag(i, T_PONG), NULL);
        double t1 = bench_now_s();
        if (st != IPCP_OK) {
            bench_set_reason(res, BENCH_ERROR, "ping-pong", st);
            free(t);
            return;
        }
        if (k >= warm && t)
            t[n++] = 0.5 * (t1 - t0);
        if (check)
            bench_check_round(ctx, res, c->size, seed, k);
    }
    bench_set_latency(res, t, t ? n : 0);
    free(t);
}

/* ---- rank 0, both directions (bidir) ------------------------------------ */

/* A repetition's clock starts when both ranks have left its barrier.
 * Rank 0 releases the barrier and leaves at once; rank 1 leaves when the
 * release reaches it (a message and a thread's wake-up: tens of us in
 * these VMs), and no transfer can start before that, so timing from rank
 * 0's exit alone charged that hop to every transfer.  Processes of one
 * machine read the same CLOCK_MONOTONIC: rank 1 sends the times it left
 * at after the repetitions, and rank 0 starts each from the later one.
 * How much later rank 1 left is reported (skew_us), not timed. */
int bench_send_starts(bench_ctx_t *ctx, int tag, const double *starts, int n)
{
    double none = NAN;
    ipcp_status_t st = ipcp_send(
        ctx->comm, starts ? starts : &none,
        starts ? (size_t)n * sizeof(double) : sizeof(none), RECV, tag);
    if (st != IPCP_OK)
        fprintf(stderr,
                "ipcpipe-bench [rank 1]: start times to rank 0: %s: "
                "%s\n",
                ipcp_strerror(st), ipcp_last_error());
    return st == IPCP_OK ? 0 : -1;
}

void bench_time_reps(bench_ctx_t *ctx, int tag, const double *starts,
                     double *ends, int n, double bytes, bench_result_t *res)
{
    double *peer = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    double *skew = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    int m = 0, k = 0;
    for (int r = 0; peer && r < n; r++)
        peer[r] = NAN;
    ipcp_status_t st =
        peer ? ipcp_recv(ctx->comm, peer, (size_t)n * sizeof(double), SEND, tag,
                         NULL)
             : IPCP_ERR_NOMEM;
    if (st != IPCP_OK)
        bench_set_reason(res, BENCH_ERROR, "rank 1's start times", st);
    for (int r = 0; starts && ends && r < n; r++) {
        if (!isfinite(ends[r]))
            continue;
        double s = starts[r];
        if (peer && isfinite(peer[r])) {
            if (skew)
                skew[k++] = peer[r] - s;
            if (peer[r] > s)
                s = peer[r];
        }
        ends[m++] = ends[r] - s;
    }
    res->skew_us = k ? bench_median(skew, k) * 1e6 : NAN;
    bench_set_gbps(res, bytes, ends, ends ? m : 0);
    free(peer);
    free(skew);
}

int bench_recv_peer_msg(bench_ctx_t *ctx, int tag, peer_msg_t *m,
                        bench_result_t *res)
{
    ipcp_status_t st = ipcp_recv(ctx->comm, m, sizeof(*m), SEND, tag, NULL);
    if (st != IPCP_OK) {
        bench_set_reason(res, BENCH_ERROR, "rank 1's report", st);
        return -1;
    }
    m->reason[sizeof(m->reason) - 1] = '\0';
    if (!m->ok)
        bench_set_error(res, "rank 1", m->reason);
    else if (m->verified == 0 && res->verified != 0) {
        res->verified = 0;
        if (!res->reason[0])
            bench_fmt(res->reason, sizeof(res->reason), "rank 1: %s",
                      m->reason);
    }
    return 0;
}

static int bidir0_warmup(bench_ctx_t *ctx, const bench_case_t *c, int i,
                         bench_result_t *res)
{
    if (bench_fill_src(ctx, c->size, bench_case_seed(ctx, i, 3), res) < 0)
        return 0;
    for (int w = 0; w < ctx->o->warmup; w++) {
        int check = w == 0 && ctx->o->verify;
        const char *what = "warm-up";
        if (check && bench_poison(ctx, c->size, res) < 0)
            return 0;
        ipcp_status_t st =
            bench_xfer_window(ctx, c->size, 1, 1, 1, bench_case_tag(i, T_DATA),
                              bench_case_tag(i, T_REV), res, &what);
        if (st != IPCP_OK) {
            char w2[64];
            bench_fmt(w2, sizeof(w2), "warm-up %s", what);
            bench_set_reason(res, bench_classify(c, st), w2, st);
            return 0;
        }
        if (check)
            bench_check_data(ctx, res, 0, c->size, bench_case_seed(ctx, i, 0),
                             "warm-up");
    }
    if (res->outcome != BENCH_OK)
        return 0;
    peer_msg_t m;
    if (bench_recv_peer_msg(ctx, bench_case_tag(i, T_PEER_WARM), &m, res) < 0)
        return 0;
    return res->outcome == BENCH_OK;
}

/* Aggregate: 2 * W * size bytes from rank 0 leaving the barrier to the
 * last completion on either rank (CLOCK_MONOTONIC is one clock for every
 * process of the machine). */
static int bidir0_timed(bench_ctx_t *ctx, const bench_case_t *c, int i,
                        bench_result_t *res)
{
    int w = res->window, slots = bench_case_slots(ctx->o, c->size),
        iters = res->iters;
    double *t0 = calloc((size_t)iters, sizeof(double));
    double *t1 = calloc((size_t)iters, sizeof(double));
    double *peer = calloc((size_t)iters, sizeof(double)); /* rank 1's ends */
    int rc = 0;
    for (int r = 0; r < iters; r++) {
        int check = r == iters - 1 && ctx->o->verify;
        const char *what = "timed";
        if (check)
            bench_poison(ctx, (size_t)slots * c->size, res);
        bench_fill_rep(ctx, c->size, bench_case_seed(ctx, i, 4), r, iters, res);
        if (bench_barrier(ctx) < 0) {
            rc = -1;
            goto out;
        }
        double a = bench_now_s();
        ipcp_status_t st = bench_xfer_window(
            ctx, c->size, w, w, slots, bench_case_tag(i, T_DATA),
            bench_case_tag(i, T_REV), res, &what);
        double b = bench_now_s();
        if (t0 && t1) {
            t0[r] = a;
            t1[r] = st == IPCP_OK ? b : NAN;
        }
        if (st != IPCP_OK) {
            char w2[64];
            bench_fmt(w2, sizeof(w2), "timed %s", what);
            bench_set_reason(res, bench_classify(c, st), w2, st);
            continue;
        }
        if (check)
            bench_check_last(ctx, res, c->size, w, bench_case_seed(ctx, i, 1));
    }
    peer_msg_t m;
    if (bench_recv_peer_msg(ctx, bench_case_tag(i, T_PEER_REPORT), &m, res) < 0)
        goto out;
    double dummy;
    ipcp_status_t st =
        ipcp_recv(ctx->comm, peer ? (void *)peer : (void *)&dummy,
                  peer ? (size_t)iters * sizeof(double) : sizeof(dummy), SEND,
                  bench_case_tag(i, T_PEER_TIMES), NULL);
    if (st != IPCP_OK) {
        bench_set_reason(res, BENCH_ERROR, "rank 1's times", st);
        goto out;
    }
    /* To the last completion on either rank, from both out of the barrier
     * (rank 1's exits follow its ends on the same tag). */
    for (int r = 0; t0 && t1 && peer && r < iters; r++)
        t1[r] = isfinite(t1[r]) && isfinite(peer[r])
                    ? (t1[r] > peer[r] ? t1[r] : peer[r])
                    : NAN;
    bench_time_reps(ctx, bench_case_tag(i, T_PEER_TIMES),
                    t0 && t1 && peer ? t0 : NULL, t1, iters,
                    2.0 * w * (double)c->size, res);
out:
    free(t0);
    free(t1);
    free(peer);
    return rc;
}

int bench_size_waived(const bench_ctx_t *ctx, const bench_case_t *c,
                      bench_result_t *res)
{
    char sz[24], cap[24];
    if (c->size <= ctx->cap)
        return 0;
    bench_format_size(c->size, sz, sizeof(sz));
    bench_format_size(ctx->cap, cap, sizeof(cap));
    res->outcome = BENCH_WAIVED;
    if (ctx->waive[0])
        bench_fmt(res->reason, sizeof(res->reason), "%s", ctx->waive);
    else if (ctx->failed_cap && c->size >= ctx->failed_cap)
        bench_fmt(res->reason, sizeof(res->reason),
                  "not enough memory (allocating buffers of %s failed; "
                  "largest size that fits: %s)",
                  sz, cap);
    else
        bench_fmt(res->reason, sizeof(res->reason),
                  "not enough memory (buffers of %s need %.1f GiB of "
                  "host memory, %.1f GiB usable; largest size that fits: "
                  "%s)",
                  sz, (double)bench_host_need(ctx, c->size) / (double)GIB,
                  (double)ctx->usable / (double)GIB, cap);
    return 1;
}

/* The stream case: GPU memory and a stream, else waived (res != NULL:
 * rank 0, which says why).  Returns 1 when it can run. */
int bench_stream_begin(bench_ctx_t *ctx, bench_result_t *res)
{
    char err[BENCH_REASON_MAX];
    if (ctx->mem != BENCH_MEM_CUDA) {
        if (res) {
            res->outcome = BENCH_WAIVED;
            bench_fmt(res->reason, sizeof(res->reason),
                      "the stream-ordered calls take GPU memory");
        }
        return 0;
    }
    ctx->ustream = bench_cuda_stream(err, sizeof(err));
    if (!ctx->ustream && res) {
        res->outcome = BENCH_ERROR;
        bench_fmt(res->reason, sizeof(res->reason), "%s", err);
    }
    return ctx->ustream != NULL;
}

static int run_receiver(bench_ctx_t *ctx, const bench_case_t *c, int i,
                        bench_result_t *res)
{
    int ok = 0;
    /* Set before the barrier, so that the sender's first transfer already
     * sees the forced path (peers learn of it at a synchronization). */
    ipcp_status_t pst = ipcp_comm_set_path(ctx->comm, c->path->path);
    if (bench_barrier(ctx) < 0)
        return -1;
    if (bench_size_waived(ctx, c, res)) {
        /* reason set */
    } else if (c->path->stream && !bench_stream_begin(ctx, res)) {
        /* reason set */
    } else if (pst != IPCP_OK) {
        bench_set_reason(res, bench_classify(c, pst), "ipcp_comm_set_path",
                         pst);
    } else {
        ok = c->path->bidir ? bidir0_warmup(ctx, c, i, res)
                            : recv_warmup(ctx, c, i, res);
    }
    if (bench_bcast_verdict(ctx, i, ok) < 0)
        return -1;
    if (ok && (c->path->bidir ? bidir0_timed(ctx, c, i, res)
                              : recv_timed(ctx, c, i, res)) < 0)
        return -1;
    if (ok && bench_ahead_case(ctx, c) && bench_recv_ahead(ctx, c, i, res) < 0)
        return -1;
    if (ok && bench_lat_case(ctx, c)) {
        if (bench_barrier(ctx) < 0)
            return -1;
        recv_pingpong(ctx, c, i, res);
    }
    ctx->ustream = NULL;
    ipcp_comm_set_path(ctx->comm, IPCP_PATH_AUTO);
    if (res->outcome != BENCH_OK)
        res->gbps = res->latency_us = res->post_us = NAN;
    if (res->outcome != BENCH_OK)
        res->gbps_min = res->gbps_max = res->latency_min_us =
            res->latency_max_us = NAN;
    bench_pick_ceiling(ctx, c, res);
    return 0;
}

int bench_run_case(bench_ctx_t *ctx, const bench_case_t *c, int i,
                   bench_result_t *res)
{
    if (c->path->kind != BENCH_KIND_IPCP)
        return bench_cmp_run(ctx, c, i, res);
    if (ctx->rank != RECV)
        return bench_run_sender(ctx, c, i);
    *res = (bench_result_t){
        .c = c,
        .outcome = BENCH_OK,
        .gbps = NAN,
        .gbps_min = NAN,
        .gbps_max = NAN,
        .latency_us = -1,
        .latency_min_us = NAN,
        .latency_max_us = NAN,
        .first_us = -1,
        .post_us = -1,
        .skew_us = NAN,
        .verified = ctx->o->verify ? 1 : -1,
        .iters = bench_reps(ctx->o, c->size),
        .window = bench_window(ctx->o, c->size),
        .path_used = c->path->path,
    };
    return run_receiver(ctx, c, i, res);
}
