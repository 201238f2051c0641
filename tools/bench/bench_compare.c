/* ipcpipe-bench --compare: the reference points a user would otherwise
 * pick, run between the same two ranks, on the same buffers, with the same
 * window and the same clock as ipcpipe's cases (GPU memory; Open MPI's
 * rows on host memory are bench_ompi.c's, dispatched from here):
 *
 *   nccl   ncclSend on rank 1, ncclRecv on rank 0 into the window's slots,
 *          each window's calls in one ncclGroupStart/ncclGroupEnd;
 *   nccl-ungrouped  the same calls outside any group, each its own kernel
 *          after the previous one on the stream (what grouping gains);
 *   naive  the forum post's pattern (examples/seed.c run_naive) with rank 0
 *          driving: rank 1's buffer opened while rank 0's device is current,
 *          chunks D2H through pinned memory, H2D on rank 1's device;
 *   d2d, d2h, h2d, striped  the single-process copies the ceilings
 *          measure, as rows (striped from BENCH_STRIPED_MIN, on one device
 *          too: there its direct part is a copy within the device).
 *
 * Every case keeps the schedule of the others: a barrier to start, rank
 * 0's verdict to every rank after the warm-up, one barrier per timed
 * repetition.  Rank 0 decides whether a case can run and says so first
 * (hello); rank 1 answers with its side's readiness.  A case the machine
 * cannot run is waived with the reason. */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench_ctx.h"

/* Rank 0 -> 1: whether the case runs, and the NCCL id when the
 * communicator is still to be made. */
typedef struct cmp_hello {
    int32_t go;
    int32_t init;
    unsigned char id[BENCH_NCCL_ID_BYTES];
} cmp_hello_t;

/* Rank 1 -> 0: ready or why not (waive: the machine cannot, rather than a
 * failure), and the naive case's IPC handle. */
typedef struct cmp_answer {
    int32_t ok;
    int32_t waive;
    unsigned char handle[BENCH_IPC_HANDLE_BYTES];
    char reason[BENCH_REASON_MAX];
} cmp_answer_t;

/* How long an NCCL wait may last: half of IPCPIPE_TIMEOUT, so that a rank
 * whose peer failed gives up before the peer's next barrier does. */
static double nccl_timeout_s(void)
{
    for (int i = 0; i < ipcp_settings_count(); i++) {
        ipcp_setting_info_t si;
        if (ipcp_setting_get(i, &si) != IPCP_OK ||
            strcmp(si.name, "IPCPIPE_TIMEOUT") != 0)
            continue;
        char *end;
        double v = strtod(si.value, &end);
        if (end != si.value && v > 0)
            return v / 2 > 5 ? v / 2 : 5;
    }
    return 30;
}

static int send_msg(bench_ctx_t *ctx, const void *m, size_t len, int peer,
                    int tag, const char *what)
{
    ipcp_status_t st = ipcp_send(ctx->comm, m, len, peer, tag);
    if (st != IPCP_OK)
        fprintf(stderr, "ipcpipe-bench [rank %d]: %s: %s: %s\n", ctx->rank,
                what, ipcp_strerror(st), ipcp_last_error());
    return st == IPCP_OK ? 0 : -1;
}

static int recv_msg(bench_ctx_t *ctx, void *m, size_t len, int peer, int tag,
                    const char *what)
{
    ipcp_status_t st = ipcp_recv(ctx->comm, m, len, peer, tag, NULL);
    if (st != IPCP_OK)
        fprintf(stderr, "ipcpipe-bench [rank %d]: %s: %s: %s\n", ctx->rank,
                what, ipcp_strerror(st), ipcp_last_error());
    return st == IPCP_OK ? 0 : -1;
}

/* Both ranks send their peer_msg_t and receive the other's, at once. */
static int swap_msgs(bench_ctx_t *ctx, int i, const peer_msg_t *mine,
                     peer_msg_t *theirs)
{
    int peer = ctx->rank == RECV ? SEND : RECV;
    int stag = bench_case_tag(i, ctx->rank == RECV ? T_CMP_INIT0 : T_CMP_INIT1);
    int rtag = bench_case_tag(i, ctx->rank == RECV ? T_CMP_INIT1 : T_CMP_INIT0);
    ipcp_request_t *req;
    ipcp_status_t st =
        ipcp_isend(ctx->comm, mine, sizeof(*mine), peer, stag, &req);
    if (st == IPCP_OK) {
        ipcp_status_t rs =
            ipcp_recv(ctx->comm, theirs, sizeof(*theirs), peer, rtag, NULL);
        st = ipcp_wait(req, NULL);
        st = rs != IPCP_OK ? rs : st;
    }
    if (st != IPCP_OK) {
        fprintf(stderr,
                "ipcpipe-bench [rank %d]: NCCL set-up exchange: %s: %s\n",
                ctx->rank, ipcp_strerror(st), ipcp_last_error());
        return -1;
    }
    theirs->reason[sizeof(theirs->reason) - 1] = '\0';
    return 0;
}

static void set_outcome(bench_result_t *res, bench_outcome_t o,
                        const char *prefix, const char *b)
{
    if (res->outcome != BENCH_OK)
        return;
    res->outcome = o;
    bench_fmt(res->reason, sizeof(res->reason), "%s%s", prefix, b);
}

/* ---- single-process rows ------------------------------------------------- */

static void local_row(bench_ctx_t *ctx, const bench_case_t *c,
                      bench_result_t *res)
{
    int k = c->path->local;
    res->verified = -2; /* a copy within rank 0, nothing moved between ranks */
    if (bench_size_waived(ctx, c, res))
        return;
    if (k == BENCH_CEIL_STRIPED && c->size < BENCH_STRIPED_MIN) {
        char min[24];
        bench_format_size(BENCH_STRIPED_MIN, min, sizeof(min));
        set_outcome(res, BENCH_WAIVED, "the striped copy is measured from ",
                    min);
        return;
    }
    res->iters = ctx->ceil_reps;
    if (ctx->ceil_size == c->size && ctx->ceil_val[k] > 0) {
        res->gbps = ctx->ceil_val[k];
        return;
    }
    set_outcome(res, BENCH_ERROR, "not measured: ",
                ctx->ceil_err[k][0] ? ctx->ceil_err[k] : "no ceiling state");
}

/* ---- nccl ---------------------------------------------------------------- */

static void nccl_break(bench_ctx_t *ctx, const char *why)
{
    if (!ctx->nccl_broken)
        bench_fmt(ctx->nccl_why, sizeof(ctx->nccl_why), "%s", why);
    ctx->nccl_broken = 1;
}

/* One rank's window: post n transfers, wait.  0, or -1 with the
 * communicator aborted and the reason in err. */
static int nccl_window(bench_ctx_t *ctx, const bench_case_t *c, int send, int n,
                       int slots, char *err, size_t elen)
{
    size_t size = c->size;
    void *buf = send ? ctx->src.ptr : ctx->dst.ptr;
    int peer = send ? RECV : SEND;
    if (!bench_nccl_usable(ctx->nccl)) {
        bench_fmt(err, elen, "NCCL communicator aborted earlier: %s",
                  ctx->nccl_why);
        return -1;
    }
    if (bench_nccl_post(ctx->nccl, send, buf, size, n, slots,
                        !c->path->ungrouped, peer, err, elen) < 0 ||
        bench_nccl_wait(ctx->nccl, nccl_timeout_s(), err, elen) < 0) {
        nccl_break(ctx, err);
        return -1;
    }
    return 0;
}

/* Whether the NCCL case of c also measures a ping-pong (both ranks ask):
 * not the ungrouped one, whose round trips (one call a group) would be the
 * grouped row's again. */
static int nccl_lat_case(const bench_ctx_t *ctx, const bench_case_t *c)
{
    return !c->path->ungrouped && c->size <= ctx->o->lat_max &&
           c->size <= ctx->cap;
}

/* One round trip's calls on this rank's stream: rank 0 sends its source
 * and receives into its buffer, rank 1 receives and sends what it got
 * back; each call its own group (the pong cannot go before the ping). */
static int nccl_round(bench_ctx_t *ctx, size_t size, char *err, size_t elen)
{
    int r0 = ctx->rank == RECV, peer = r0 ? SEND : RECV;
    void *out = r0 ? ctx->src.ptr : ctx->dst.ptr; /* rank 1 echoes */
    for (int k = 0; k < 2; k++) {
        int send = (k == 0) == r0;
        if (bench_nccl_post(ctx->nccl, send, send ? out : ctx->dst.ptr, size, 1,
                            1, 1, peer, err, elen) < 0)
            return -1;
    }
    return 0;
}

/* NCCL's ping-pong, timed as the stream case's (bench_stream_pingpong): a
 * warm-up batch, then batches of --stream-batch round trips enqueued back
 * to back, the stream waited for after each; half a round trip is a
 * batch's time over twice its rounds (--stream-batch 1: the host waits
 * for every round trip).  Fresh data into poisoned buffers every batch,
 * checked on rank 0.  res: rank 0's result, NULL on rank 1.  0, or -1
 * when the ranks can no longer talk. */
static int nccl_pingpong(bench_ctx_t *ctx, const bench_case_t *c, int i,
                         bench_result_t *res)
{
    bench_result_t lr = {.outcome = BENCH_OK, .verified = -1};
    bench_result_t *rr = res ? res : &lr;
    int batch = ctx->o->stream_batch, r0 = ctx->rank == RECV;
    int nb = (bench_lat_rounds(ctx->o, c->size) + batch - 1) / batch, n = 0;
    double *t = calloc((size_t)nb, sizeof(*t));
    char err[BENCH_REASON_MAX];
    for (int b = -1; b < nb && rr->outcome == BENCH_OK; b++) {
        uint64_t seed = bench_pingpong_seed(ctx, i, b + 1);
        if (ctx->o->verify &&
            ((r0 && bench_fill_src(ctx, c->size, seed, rr) < 0) ||
             bench_poison(ctx, c->size, rr) < 0))
            break;
        double t0 = bench_now_s();
        int rc = 0;
        for (int k = 0; k < batch && rc == 0; k++)
            rc = nccl_round(ctx, c->size, err, sizeof(err));
        if (rc == 0)
            rc = bench_nccl_wait(ctx->nccl, nccl_timeout_s(), err, sizeof(err));
        double t1 = bench_now_s();
        if (rc < 0) {
            nccl_break(ctx, err);
            bench_set_error(rr, "NCCL ping-pong", err);
            break;
        }
        if (r0 && ctx->o->verify)
            bench_check_data(ctx, rr, 0, c->size, seed, "NCCL ping-pong");
        if (b >= 0 && t)
            t[n++] = (t1 - t0) / (2.0 * batch);
    }
    if (res && t && n == nb)
        bench_set_latency(res, t, n);
    free(t);
    return 0;
}

/* Rank 0: can the case run here?  Fills the hello (and res when not). */
static void nccl_hello0(bench_ctx_t *ctx, const bench_case_t *c, cmp_hello_t *h,
                        bench_result_t *res)
{
    const bench_setup_info_t *in = &ctx->info;
    char err[BENCH_REASON_MAX];
    if (bench_size_waived(ctx, c, res))
        return;
    if (ctx->nccl_broken) {
        set_outcome(res, BENCH_ERROR,
                    "NCCL communicator aborted earlier: ", ctx->nccl_why);
    } else if (in->bus[0][0] && strcasecmp(in->bus[0], in->bus[1]) == 0) {
        set_outcome(res, BENCH_WAIVED,
                    "NCCL needs a GPU per rank; both ranks are on ",
                    in->bus[0]);
    } else if (bench_nccl_load(err, sizeof(err)) < 0) {
        set_outcome(res, BENCH_WAIVED, "", err);
    } else if (!ctx->nccl) {
        h->init = 1;
        if (bench_nccl_unique_id(h->id, err, sizeof(err)) < 0)
            set_outcome(res, BENCH_ERROR, "", err);
    }
    h->go = res->outcome == BENCH_OK;
}

/* Both ranks: make the communicator (collective).  Returns 1 when both
 * have it, 0 when not (reason in res on rank 0), -1 when the ranks lost
 * step. */
static int nccl_make(bench_ctx_t *ctx, int i, const cmp_hello_t *h,
                     bench_result_t *res)
{
    peer_msg_t mine = {1, -1, ""}, theirs;
    ctx->nccl =
        bench_nccl_init(h->id, ctx->rank, 2, bench_stream_poll(),
                        nccl_timeout_s(), mine.reason, sizeof(mine.reason));
    mine.ok = ctx->nccl != NULL;
    if (swap_msgs(ctx, i, &mine, &theirs) < 0)
        return -1;
    if (mine.ok && theirs.ok)
        return 1;
    /* One side's communicator is no use without the other's. */
    bench_nccl_destroy(ctx->nccl);
    ctx->nccl = NULL;
    /* The cause: a side that failed, rather than one that gave up waiting
     * for it. */
    const peer_msg_t *cause = &mine;
    int who = ctx->rank;
    if (mine.ok || (!theirs.ok && strstr(mine.reason, " not done after "))) {
        cause = &theirs;
        who = 1 - ctx->rank;
    }
    char why[BENCH_REASON_MAX];
    bench_fmt(why, sizeof(why), "rank %d: %s", who, cause->reason);
    if (res)
        set_outcome(res, BENCH_ERROR, "", why);
    nccl_break(ctx, why);
    return 0;
}

static int nccl0_warmup(bench_ctx_t *ctx, const bench_case_t *c, int i,
                        bench_result_t *res)
{
    char err[BENCH_REASON_MAX];
    for (int w = 0; w < ctx->o->warmup; w++) {
        int check = w == 0 && ctx->o->verify;
        /* A failure still waits for rank 1's report below: it has sends
         * posted, and reports once they are done or given up. */
        if (check && bench_poison(ctx, c->size, res) < 0)
            break;
        if (nccl_window(ctx, c, 0, 1, 1, err, sizeof(err)) < 0) {
            bench_set_error(res, "warm-up ncclRecv", err);
            break;
        }
        if (check)
            bench_check_buf(ctx, &ctx->dst, res, 0, c->size,
                            bench_case_seed(ctx, i, 0), "warm-up");
    }
    peer_msg_t m;
    if (bench_recv_peer_msg(ctx, bench_case_tag(i, T_CMP_WARM), &m, res) < 0)
        return 0;
    return res->outcome == BENCH_OK;
}

static int nccl0_timed(bench_ctx_t *ctx, const bench_case_t *c, int i,
                       bench_result_t *res)
{
    char err[BENCH_REASON_MAX];
    int w = res->window, slots = bench_case_slots(ctx->o, c->size);
    double *t0 = calloc((size_t)res->iters, sizeof(*t0));
    double *t1 = calloc((size_t)res->iters, sizeof(*t1));
    for (int r = 0; r < res->iters; r++) {
        int check = r == res->iters - 1 && ctx->o->verify;
        if (check)
            bench_poison(ctx, (size_t)slots * c->size, res);
        if (bench_barrier(ctx) < 0) {
            free(t0);
            free(t1);
            return -1;
        }
        double a = bench_now_s();
        int rc = nccl_window(ctx, c, 0, w, slots, err, sizeof(err));
        double b = bench_now_s();
        if (t0 && t1) {
            t0[r] = a;
            t1[r] = rc < 0 ? NAN : b;
        }
        if (rc < 0) {
            bench_set_error(res, "timed ncclRecv", err);
            continue; /* keep the barriers: rank 1 keeps them too */
        }
        if (check)
            bench_check_buf(ctx, &ctx->dst, res,
                            (size_t)((w - 1) % slots) * c->size, c->size,
                            bench_case_seed(ctx, i, 1), "last");
    }
    peer_msg_t m;
    bench_recv_peer_msg(ctx, bench_case_tag(i, T_CMP_REPORT), &m, res);
    /* timed as ipcpipe's rows are: from both ranks out of the barrier */
    bench_time_reps(ctx, bench_case_tag(i, T_CMP_REPORT), t0 && t1 ? t0 : NULL,
                    t1, res->iters, (double)w * (double)c->size, res);
    free(t0);
    free(t1);
    return 0;
}

static int nccl_rank0(bench_ctx_t *ctx, const bench_case_t *c, int i,
                      bench_result_t *res)
{
    cmp_hello_t h = {0};
    cmp_answer_t a;
    int ok = 0;
    nccl_hello0(ctx, c, &h, res);
    if (send_msg(ctx, &h, sizeof(h), SEND, bench_case_tag(i, T_CMP_HELLO),
                 "hello to rank 1") < 0)
        return -1;
    if (h.go) {
        if (recv_msg(ctx, &a, sizeof(a), SEND, bench_case_tag(i, T_CMP_ANSWER),
                     "rank 1's answer") < 0)
            return -1;
        a.reason[sizeof(a.reason) - 1] = '\0';
        if (!a.ok)
            set_outcome(res, a.waive ? BENCH_WAIVED : BENCH_ERROR,
                        "rank 1: ", a.reason);
        int made = a.ok && h.init ? nccl_make(ctx, i, &h, res) : a.ok;
        if (made < 0)
            return -1;
        ok = made && nccl0_warmup(ctx, c, i, res);
    }
    if (bench_bcast_verdict(ctx, i, ok) < 0)
        return -1;
    if (!ok)
        return 0;
    if (nccl0_timed(ctx, c, i, res) < 0)
        return -1;
    return nccl_lat_case(ctx, c) ? nccl_pingpong(ctx, c, i, res) : 0;
}

/* Rank 1's side: readiness, then sends; its outcome goes to rank 0. */
static void nccl1_ready(bench_ctx_t *ctx, cmp_answer_t *a)
{
    a->ok = 0;
    if (ctx->nccl_broken) {
        bench_fmt(a->reason, sizeof(a->reason),
                  "NCCL communicator aborted earlier: %s", ctx->nccl_why);
    } else if (bench_nccl_load(a->reason, sizeof(a->reason)) < 0) {
        a->waive = 1;
    } else {
        a->ok = 1;
    }
}

static void nccl1_warmup(bench_ctx_t *ctx, const bench_case_t *c, int i)
{
    bench_result_t lr = {.outcome = BENCH_OK, .verified = -1};
    char err[BENCH_REASON_MAX];
    if (ctx->o->verify)
        bench_fill_src(ctx, c->size, bench_case_seed(ctx, i, 0), &lr);
    for (int w = 0; w < ctx->o->warmup && lr.outcome == BENCH_OK; w++)
        if (nccl_window(ctx, c, 1, 1, 1, err, sizeof(err)) < 0)
            bench_set_error(&lr, "warm-up ncclSend", err);
    bench_send_peer_msg(ctx, bench_case_tag(i, T_CMP_WARM), &lr);
}

static int nccl1_timed(bench_ctx_t *ctx, const bench_case_t *c, int i)
{
    bench_result_t lr = {.outcome = BENCH_OK, .verified = -1};
    char err[BENCH_REASON_MAX];
    int iters = bench_reps(ctx->o, c->size), w = bench_window(ctx->o, c->size);
    double *starts = calloc((size_t)iters, sizeof(double));
    for (int r = 0; r < iters; r++) {
        if (r == iters - 1 && ctx->o->verify)
            bench_fill_src(ctx, c->size, bench_case_seed(ctx, i, 1), &lr);
        if (bench_barrier(ctx) < 0) {
            free(starts);
            return -1;
        }
        if (starts)
            starts[r] = bench_now_s();
        if (nccl_window(ctx, c, 1, w, 1, err, sizeof(err)) < 0)
            bench_set_error(&lr, "timed ncclSend", err);
    }
    /* the report, then the start times on the same tag (in order) */
    bench_send_peer_msg(ctx, bench_case_tag(i, T_CMP_REPORT), &lr);
    bench_send_starts(ctx, bench_case_tag(i, T_CMP_REPORT), starts, iters);
    free(starts);
    return 0;
}

/* ---- naive (the forum post's pattern) --------------------------------------
 */

/* Rank 0: the peer's device as it numbers it, and the pattern's streams
 * and pinned memory (made once). */
static void naive_hello0(bench_ctx_t *ctx, const bench_case_t *c,
                         cmp_hello_t *h, bench_result_t *res)
{
    char err[BENCH_REASON_MAX];
    if (bench_size_waived(ctx, c, res))
        return;
    int b = bench_cuda_find_bus(ctx->info.bus[1]);
    if (b < 0) {
        set_outcome(res, BENCH_WAIVED,
                    "the pattern needs both GPUs in one process, and rank "
                    "1's device is not visible to rank 0: ",
                    ctx->info.bus[1]);
    } else if (!ctx->naive) {
        int nomem;
        ctx->naive = bench_naive_create(ctx->device, b, ctx->dst_len, &nomem,
                                        err, sizeof(err));
        if (!ctx->naive)
            set_outcome(res, nomem ? BENCH_WAIVED : BENCH_ERROR, "", err);
    }
    h->go = res->outcome == BENCH_OK;
}

/* W transfers; returns 0 or -1 (reason in res). */
static int naive_window(bench_ctx_t *ctx, size_t size, int w, int slots,
                        bench_result_t *res, const char *what)
{
    char err[BENCH_REASON_MAX];
    if (bench_naive_window(ctx->naive, ctx->src.ptr, size, w, slots, err,
                           sizeof(err)) == 0)
        return 0;
    bench_set_error(res, what, err);
    return -1;
}

static int naive0_cases(bench_ctx_t *ctx, const bench_case_t *c, int i,
                        bench_buf_t *dst, bench_result_t *res)
{
    char err[BENCH_REASON_MAX];
    int ok = res->outcome == BENCH_OK;
    if (ok && ctx->o->verify)
        ok = bench_fill_src(ctx, c->size, bench_case_seed(ctx, i, 0), res) == 0;
    for (int w = 0; ok && w < ctx->o->warmup; w++) {
        int check = w == 0 && ctx->o->verify;
        if (check && bench_buf_poison(dst, 0, c->size, err, sizeof(err)) < 0) {
            bench_set_error(res, "poisoning rank 1's buffer", err);
            ok = 0;
        } else if (naive_window(ctx, c->size, 1, 1, res, "warm-up") < 0) {
            ok = 0;
        } else if (check) {
            bench_check_buf(ctx, dst, res, 0, c->size,
                            bench_case_seed(ctx, i, 0), "warm-up");
        }
    }
    if (bench_bcast_verdict(ctx, i, ok) < 0)
        return -1;
    if (!ok)
        return 0;
    int w = res->window, slots = bench_case_slots(ctx->o, c->size), n = 0;
    double *t = calloc((size_t)res->iters, sizeof(*t));
    for (int r = 0; r < res->iters; r++) {
        int check = r == res->iters - 1 && ctx->o->verify;
        if (check && (bench_fill_src(ctx, c->size, bench_case_seed(ctx, i, 1),
                                     res) < 0 ||
                      bench_buf_poison(dst, 0, (size_t)slots * c->size, err,
                                       sizeof(err)) < 0)) {
            bench_set_error(res, "poisoning rank 1's buffer", err);
            check = 0;
        }
        if (bench_barrier(ctx) < 0) {
            free(t);
            return -1;
        }
        double t0 = bench_now_s();
        int rc = naive_window(ctx, c->size, w, slots, res, "timed");
        double t1 = bench_now_s();
        if (rc == 0 && t)
            t[n++] = t1 - t0;
        if (rc == 0 && check)
            bench_check_buf(ctx, dst, res, (size_t)((w - 1) % slots) * c->size,
                            c->size, bench_case_seed(ctx, i, 1), "last");
    }
    bench_set_gbps(res, (double)w * (double)c->size, t, t ? n : 0);
    free(t);
    return 0;
}

static int naive_rank0(bench_ctx_t *ctx, const bench_case_t *c, int i,
                       bench_result_t *res)
{
    cmp_hello_t h = {0};
    cmp_answer_t a = {0};
    char err[BENCH_REASON_MAX];
    naive_hello0(ctx, c, &h, res);
    if (send_msg(ctx, &h, sizeof(h), SEND, bench_case_tag(i, T_CMP_HELLO),
                 "hello to rank 1") < 0)
        return -1;
    if (h.go &&
        recv_msg(ctx, &a, sizeof(a), SEND, bench_case_tag(i, T_CMP_ANSWER),
                 "rank 1's answer") < 0)
        return -1;
    a.reason[sizeof(a.reason) - 1] = '\0';
    if (h.go && !a.ok)
        set_outcome(res, a.waive ? BENCH_WAIVED : BENCH_ERROR,
                    "rank 1: ", a.reason);
    void *mapped = NULL;
    if (res->outcome == BENCH_OK &&
        bench_naive_open(ctx->naive, a.handle, &mapped, err, sizeof(err)) < 0)
        set_outcome(
            res,
            bench_cuda_peer(ctx->device, bench_cuda_find_bus(ctx->info.bus[1]))
                ? BENCH_ERROR
                : BENCH_WAIVED,
            "", err);
    /* The slots of rank 1's buffer, through the mapping (its size is
     * dst_len, as rank 0's receive slots). */
    bench_buf_t dst = {mapped, ctx->dst_len, ctx->device, BENCH_ALLOC_PLAIN,
                       NULL};
    int rc = naive0_cases(ctx, c, i, &dst, res);
    bench_naive_close(ctx->naive);
    /* Rank 1 keeps its buffer until rank 0 is done with it. */
    if (rc == 0 && h.go && a.ok)
        rc = send_msg(ctx, &rc, sizeof(rc), SEND, bench_case_tag(i, T_CMP_DONE),
                      "done to rank 1");
    return rc;
}

/* Rank 1: its receive buffer for the pattern, made once (cuMemAlloc, as
 * the seed's cudaMalloc: legacy IPC exports only such memory). */
static void naive1_ready(bench_ctx_t *ctx, cmp_answer_t *a)
{
    int nomem = 0;
    a->ok = 0;
    if (!ctx->naive_buf.ptr &&
        bench_cuda_buf_alloc(ctx->comm, ctx->dst_len, ctx->device,
                             BENCH_ALLOC_PLAIN, &ctx->naive_buf, &nomem,
                             a->reason, sizeof(a->reason)) < 0) {
        a->waive = nomem;
        return;
    }
    if (bench_cuda_ipc_handle(ctx->naive_buf.ptr, a->handle, a->reason,
                              sizeof(a->reason)) == 0)
        a->ok = 1;
}

/* ---- the ranks -------------------------------------------------------------
 */

static int rank0(bench_ctx_t *ctx, const bench_case_t *c, int i,
                 bench_result_t *res)
{
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
        .path_used = IPCP_PATH_AUTO,
    };
    int rc = 0;
    if (bench_barrier(ctx) < 0)
        return -1;
    if (c->path->kind == BENCH_KIND_LOCAL)
        local_row(ctx, c, res);
    else if (c->path->kind == BENCH_KIND_MPI)
        rc = bench_ompi_rank0(ctx, c, i, res);
    else if (c->path->kind == BENCH_KIND_NCCL)
        rc = nccl_rank0(ctx, c, i, res);
    else
        rc = naive_rank0(ctx, c, i, res);
    if (res->outcome != BENCH_OK)
        res->gbps = res->gbps_min = res->gbps_max = NAN;
    bench_pick_ceiling(ctx, c, res);
    return rc;
}

/* Rank 1 and the others: hello, answer, the verdict's schedule. */
static int rank_other(bench_ctx_t *ctx, const bench_case_t *c, int i)
{
    int32_t verdict = 0;
    cmp_hello_t h = {0};
    cmp_answer_t a = {0};
    int kind = c->path->kind, one = ctx->rank == SEND, answered = 0;
    if (bench_barrier(ctx) < 0)
        return -1;
    if (kind == BENCH_KIND_LOCAL)
        return 0;
    if (kind == BENCH_KIND_MPI)
        return bench_ompi_other(ctx, c, i);
    if (one) {
        if (recv_msg(ctx, &h, sizeof(h), RECV, bench_case_tag(i, T_CMP_HELLO),
                     "hello from rank 0") < 0)
            return -1;
        if (h.go) {
            if (kind == BENCH_KIND_NCCL)
                nccl1_ready(ctx, &a);
            else
                naive1_ready(ctx, &a);
            if (send_msg(ctx, &a, sizeof(a), RECV,
                         bench_case_tag(i, T_CMP_ANSWER),
                         "answer to rank 0") < 0)
                return -1;
            answered = a.ok;
        }
        if (answered && kind == BENCH_KIND_NCCL) {
            int made = h.init ? nccl_make(ctx, i, &h, NULL) : 1;
            if (made < 0)
                return -1;
            if (made)
                nccl1_warmup(ctx, c, i);
        }
    }
    if (recv_msg(ctx, &verdict, sizeof(verdict), RECV,
                 bench_case_tag(i, T_VERDICT), "verdict") < 0)
        return -1;
    if (verdict && one && kind == BENCH_KIND_NCCL) {
        if (nccl1_timed(ctx, c, i) < 0 ||
            (nccl_lat_case(ctx, c) && nccl_pingpong(ctx, c, i, NULL) < 0))
            return -1;
    } else if (verdict) {
        for (int r = 0; r < bench_reps(ctx->o, c->size); r++)
            if (bench_barrier(ctx) < 0)
                return -1;
    }
    if (answered && kind == BENCH_KIND_NAIVE) {
        int done;
        if (recv_msg(ctx, &done, sizeof(done), RECV,
                     bench_case_tag(i, T_CMP_DONE), "done from rank 0") < 0)
            return -1;
    }
    return 0;
}

int bench_cmp_run(bench_ctx_t *ctx, const bench_case_t *c, int i,
                  bench_result_t *res)
{
    /* The library only carries this case's control messages (rank 0
     * chooses the paths, as for the other cases). */
    if (ctx->rank == RECV)
        ipcp_comm_set_path(ctx->comm, IPCP_PATH_AUTO);
    return ctx->rank == RECV ? rank0(ctx, c, i, res) : rank_other(ctx, c, i);
}

void bench_cmp_destroy(bench_ctx_t *ctx)
{
    bench_nccl_destroy(ctx->nccl);
    ctx->nccl = NULL;
    bench_naive_destroy(ctx->naive);
    ctx->naive = NULL;
    if (ctx->naive_buf.ptr)
        bench_cuda_buf_free(ctx->comm, &ctx->naive_buf);
    memset(&ctx->naive_buf, 0, sizeof(ctx->naive_buf));
    bench_ompi_destroy(ctx);
}
