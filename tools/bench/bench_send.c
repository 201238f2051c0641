/* ipcpipe-bench: rank 1, the sender of every case (and the receiver of the
 * other direction in the bidir case). */
#include "bench.h"

#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "bench_ctx.h"
#include "ipcpipe_cuda.h"
#include "pattern.h"

/* ---- rank 1 (and the others) ------------------------------------------- */

/* Waits for req while watching for rank 0's verdict: when the receiver
 * gave up on the case, req may never be matched and is left behind (its
 * tag belongs to this case only).  Returns 1 when req completed (status in
 * *st), 0 when it was abandoned. */
static int await_req(ipcp_request_t *req, ipcp_request_t **vreq,
                     int32_t *verdict, ipcp_status_t *st)
{
    for (long spins = 0;; spins++) {
        int done = 0;
        *st = ipcp_test(req, &done, NULL);
        if (done)
            return 1;
        if (*vreq) {
            ipcp_status_t vs = ipcp_test(*vreq, &done, NULL);
            if (done) {
                *vreq = NULL;
                if (vs != IPCP_OK || !*verdict)
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
    /* A failed fill is reported and the sends still go out: the
     * receiver waits for them, and its check will fail. */
    if (ctx->o->verify)
        bench_fill_src(ctx, c->size, bench_case_seed(ctx, i, 0), NULL);
    /* The stream case sends as it times: the small-message lane
     * (IPCPIPE_SMALL) carries stream-ordered sends only, and its receives
     * take messages in order. */
    ipcp_stream_t us = (ipcp_stream_t)ctx->ustream;
    for (int w = 0; w < ctx->o->warmup; w++) {
        ipcp_request_t *sreq;
        ipcp_status_t st =
            us ? ipcp_isend_on_stream(ctx->comm, ctx->src.ptr, c->size, RECV,
                                      bench_case_tag(i, T_DATA), us, &sreq)
               : ipcp_isend(ctx->comm, ctx->src.ptr, c->size, RECV,
                            bench_case_tag(i, T_DATA), &sreq);
        if (st != IPCP_OK)
            return 0;
        if (!await_req(sreq, vreq, verdict, &st) || st != IPCP_OK)
            return 0;
    }
    return 1;
}

void bench_send_report(const bench_case_t *c, const char *what,
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
    int reported = 0, w = bench_window(ctx->o, c->size);
    double *starts = calloc((size_t)iters, sizeof(double));
    for (int r = 0; r < iters; r++) {
        const char *what = "send";
        bench_fill_rep(ctx, c->size, bench_case_seed(ctx, i, 1), r, iters,
                       NULL);
        if (bench_barrier(ctx) < 0) {
            free(starts);
            return -1;
        }
        if (starts)
            starts[r] = bench_now_s();
        ipcp_status_t st = bench_xfer_window(
            ctx, c->size, 0, w, 1, 0, bench_case_tag(i, T_DATA), NULL, &what);
        if (st != IPCP_OK)
            bench_send_report(c, "timed send", st, &reported);
    }
    bench_send_starts(ctx, bench_case_tag(i, T_PEER_TIMES), starts, iters);
    free(starts);
    return 0;
}

/* Echoes every ping; receives on the case's path like rank 0 does. */
static int send_pingpong(bench_ctx_t *ctx, const bench_case_t *c, int i)
{
    int reported = 0, rounds = bench_lat_rounds(ctx->o, c->size);
    ipcp_status_t st = ipcp_comm_set_path(ctx->comm, c->path->path);
    if (st != IPCP_OK)
        bench_send_report(c, "ipcp_comm_set_path", st, &reported);
    if (bench_barrier(ctx) < 0)
        return -1;
    if (ctx->ustream && st == IPCP_OK) {
        int nb = (rounds + ctx->o->stream_batch - 1) / ctx->o->stream_batch;
        if (bench_stream_pingpong(ctx, c, i, 1 + nb, NULL, NULL, &st, NULL) < 0)
            bench_send_report(c, "stream ping-pong", st, &reported);
        ipcp_comm_set_path(ctx->comm, IPCP_PATH_AUTO);
        return 0;
    }
    for (int k = 0; k < ctx->o->warmup + rounds && st == IPCP_OK; k++) {
        /* Poisoned before each ping: an echo of the last round's bytes
         * cannot pass rank 0's check. */
        if (ctx->o->verify && bench_poison(ctx, c->size, NULL) < 0)
            st = IPCP_ERR_INVALID;
        if (st == IPCP_OK)
            st = ipcp_recv(ctx->comm, ctx->dst.ptr, c->size, RECV,
                           bench_case_tag(i, T_PING), NULL);
        if (st == IPCP_OK)
            st = ipcp_send(ctx->comm, ctx->dst.ptr, c->size, RECV,
                           bench_case_tag(i, T_PONG));
        if (st != IPCP_OK)
            bench_send_report(c, "ping-pong", st, &reported);
    }
    ipcp_comm_set_path(ctx->comm, IPCP_PATH_AUTO);
    return 0;
}

int bench_send_peer_msg(bench_ctx_t *ctx, int tag, const bench_result_t *lr)
{
    peer_msg_t m = {lr->outcome == BENCH_OK, lr->verified, ""};
    bench_fmt(m.reason, sizeof(m.reason), "%s", lr->reason);
    ipcp_status_t st = ipcp_send(ctx->comm, &m, sizeof(m), RECV, tag);
    if (st != IPCP_OK)
        fprintf(stderr, "ipcpipe-bench [rank 1]: report to rank 0: %s: %s\n",
                ipcp_strerror(st), ipcp_last_error());
    return st == IPCP_OK ? 0 : -1;
}

/* Rank 1's half of a bidir warm-up: every transfer is waited for while
 * watching the verdict; a failed one is noted and the rest still run, so
 * rank 0's matching ones complete.  Its outcome goes to rank 0. */
static void bidir1_warmup(bench_ctx_t *ctx, const bench_case_t *c, int i,
                          ipcp_request_t **vreq, int32_t *verdict)
{
    bench_result_t lr = {.outcome = BENCH_OK,
                         .verified = ctx->o->verify ? 1 : -1};
    bench_fill_src(ctx, c->size, bench_case_seed(ctx, i, 0), &lr);
    for (int w = 0; w < ctx->o->warmup; w++) {
        int check = w == 0 && ctx->o->verify;
        ipcp_request_t *rq[2];
        ipcp_status_t st[2];
        if (check)
            bench_poison(ctx, c->size, &lr);
        st[0] = ipcp_irecv(ctx->comm, ctx->dst.ptr, c->size, RECV,
                           bench_case_tag(i, T_REV), &rq[0]);
        st[1] = ipcp_isend(ctx->comm, ctx->src.ptr, c->size, RECV,
                           bench_case_tag(i, T_DATA), &rq[1]);
        for (int k = 0; k < 2; k++) {
            if (st[k] == IPCP_OK && !await_req(rq[k], vreq, verdict, &st[k]))
                return; /* rank 0 gave up the case */
            if (st[k] != IPCP_OK)
                bench_set_reason(&lr, BENCH_ERROR,
                                 k ? "warm-up send" : "warm-up receive", st[k]);
        }
        if (check && st[0] == IPCP_OK)
            bench_check_data(ctx, &lr, 0, c->size, bench_case_seed(ctx, i, 3),
                             "warm-up");
    }
    bench_send_peer_msg(ctx, bench_case_tag(i, T_PEER_WARM), &lr);
}

static int bidir1_timed(bench_ctx_t *ctx, const bench_case_t *c, int i,
                        int iters)
{
    bench_result_t lr = {.outcome = BENCH_OK,
                         .verified = ctx->o->verify ? 1 : -1};
    int w = bench_window(ctx->o, c->size),
        slots = bench_case_slots(ctx->o, c->size);
    double *starts = calloc((size_t)iters, sizeof(double));
    double *end = calloc((size_t)iters, sizeof(double));
    if (!end)
        bench_set_error(&lr, "rank 1", "out of memory");
    for (int r = 0; r < iters; r++) {
        int check = r == iters - 1 && ctx->o->verify;
        const char *what = "timed";
        if (check)
            bench_poison(ctx, (size_t)slots * c->size, &lr);
        bench_fill_rep(ctx, c->size, bench_case_seed(ctx, i, 1), r, iters, &lr);
        if (bench_barrier(ctx) < 0) {
            free(starts);
            free(end);
            return -1;
        }
        if (starts)
            starts[r] = bench_now_s();
        ipcp_status_t st = bench_xfer_window(
            ctx, c->size, w, w, slots, bench_case_tag(i, T_REV),
            bench_case_tag(i, T_DATA), &lr, &what);
        if (end)
            end[r] = st == IPCP_OK ? bench_now_s() : NAN;
        if (st != IPCP_OK) {
            char w2[64];
            bench_fmt(w2, sizeof(w2), "timed %s", what);
            bench_set_reason(&lr, BENCH_ERROR, w2, st);
            continue;
        }
        if (check)
            bench_check_last(ctx, &lr, c->size, w, bench_case_seed(ctx, i, 4));
    }
    int rc = bench_send_peer_msg(ctx, bench_case_tag(i, T_PEER_REPORT), &lr);
    if (rc == 0) {
        double dummy = NAN;
        ipcp_status_t st =
            ipcp_send(ctx->comm, end ? (void *)end : (void *)&dummy,
                      end ? (size_t)iters * sizeof(double) : sizeof(dummy),
                      RECV, bench_case_tag(i, T_PEER_TIMES));
        if (st != IPCP_OK)
            fprintf(stderr,
                    "ipcpipe-bench [rank 1]: times to rank 0: %s: "
                    "%s\n",
                    ipcp_strerror(st), ipcp_last_error());
        else /* then its barrier exits, on the same tag (in order) */
            bench_send_starts(ctx, bench_case_tag(i, T_PEER_TIMES), starts,
                              iters);
    }
    free(starts);
    free(end);
    return 0;
}

/* Rank 1, and (with nothing to send) ranks 2 and up. */
static int run_sender_case(bench_ctx_t *ctx, const bench_case_t *c, int i)
{
    int32_t verdict = 0;
    ipcp_request_t *vreq = NULL;
    if (bench_barrier(ctx) < 0)
        return -1;
    ipcp_status_t st = ipcp_irecv(ctx->comm, &verdict, sizeof(verdict), RECV,
                                  bench_case_tag(i, T_VERDICT), &vreq);
    /* Without a stream of its own (it failed to make one) this rank still
     * answers with the plain calls, which match the same way: rank 0 is
     * never left waiting for sends that do not come. */
    if (c->path->stream)
        (void)bench_stream_begin(ctx, NULL);
    /* Rank 0 waives the stream case on host memory: nothing is posted that
     * it would leave unmatched (an eager send's buffer is read when the
     * progress thread takes it, which may be after the buffers went). */
    int post = !(c->path->stream && ctx->mem != BENCH_MEM_CUDA);
    if (st == IPCP_OK && ctx->rank == SEND && c->size <= ctx->cap && post) {
        if (c->path->bidir)
            bidir1_warmup(ctx, c, i, &vreq, &verdict);
        else
            send_warmup(ctx, c, i, &vreq, &verdict);
    }
    if (st == IPCP_OK && vreq)
        st = ipcp_wait(vreq, NULL);
    if (st != IPCP_OK) {
        fprintf(stderr, "ipcpipe-bench [rank %d]: verdict: %s: %s\n", ctx->rank,
                ipcp_strerror(st), ipcp_last_error());
        return -1;
    }
    if (!verdict)
        return 0;
    int iters = bench_reps(ctx->o, c->size);
    if (ctx->rank == SEND) {
        if (c->path->bidir)
            return bidir1_timed(ctx, c, i, iters);
        if (send_timed(ctx, c, i, iters) < 0)
            return -1;
        if (bench_ahead_case(ctx, c) && bench_send_ahead(ctx, c, i) < 0)
            return -1;
        if (bench_lat_case(ctx, c))
            return send_pingpong(ctx, c, i);
        return 0;
    }
    for (int r = 0;
         r < iters + bench_ahead_case(ctx, c) + bench_lat_case(ctx, c); r++)
        if (bench_barrier(ctx) < 0)
            return -1;
    return 0;
}

int bench_run_sender(bench_ctx_t *ctx, const bench_case_t *c, int i)
{
    /* Both ranks receive in bidir: both force its path (before the case's
     * first barrier, as rank 0 does). */
    int force =
        c->path->bidir && ctx->rank == SEND && c->path->path != IPCP_PATH_AUTO;
    if (force && ipcp_comm_set_path(ctx->comm, c->path->path) != IPCP_OK)
        fprintf(stderr, "ipcpipe-bench [rank 1] %s: ipcp_comm_set_path: %s\n",
                c->name, ipcp_last_error());
    int rc = run_sender_case(ctx, c, i);
    if (force)
        ipcp_comm_set_path(ctx->comm, IPCP_PATH_AUTO);
    ctx->ustream = NULL;
    return rc;
}
