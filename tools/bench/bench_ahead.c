/* ipcpipe-bench --ahead: after a one-way case's timed repetitions on host
 * memory, N windows after one barrier, each posted as soon as the one
 * before completed on its rank.  The sender completes its eager sends at
 * once, so it runs windows ahead of its receiver and messages come before
 * their receives, as in a program that sends without waiting for its
 * peer; the stepped repetitions, each behind a barrier, never show that.
 *
 * Each window but the last rewrites only the first word of each source
 * slot: a fill of fresh data (~3 GB/s on one core) between the windows
 * bounded them from 16 KiB on, Open MPI's rows as ours (H100 machine,
 * W=64: 2.0-2.4 GB/s against 7-11 in the stepped repetitions).  The last
 * is filled whole, for its check, and not timed. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>

#include "bench_ctx.h"
#include "pattern.h"

int bench_ahead_case(const bench_ctx_t *ctx, const bench_case_t *c)
{
    return ctx->o->ahead >= 2 && ctx->mem == BENCH_MEM_HOST &&
           !c->path->bidir && !c->path->stream;
}

/* Each window after the first but the last timed from the end of the one
 * before (the receiver's clock); the last one's data checked. */
int bench_recv_ahead(bench_ctx_t *ctx, const bench_case_t *c, int i,
                     bench_result_t *res)
{
    int n = ctx->o->ahead, w = res->window, ok = 1;
    int slots = bench_case_slots(ctx->o, c->size);
    double *t = calloc((size_t)n, sizeof(*t));
    if (ctx->o->verify)
        bench_poison(ctx, (size_t)slots * c->size, res);
    if (bench_barrier(ctx) < 0) {
        free(t);
        return -1;
    }
    for (int r = 0; r < n; r++) {
        const char *what = "run ahead";
        ipcp_status_t st =
            bench_xfer_window(ctx, c->size, w, 0, slots,
                              bench_case_tag(i, T_DATA), 0, res, &what);
        if (t)
            t[r] = bench_now_s();
        if (st != IPCP_OK) {
            bench_set_reason(res, bench_classify(c, st), "receive run ahead",
                             st);
            ok = 0; /* keep receiving: the sender sends them all */
        }
    }
    if (ok && ctx->o->verify)
        bench_check_ahead(ctx, res, c->size, w, bench_case_seed(ctx, i, 3));
    if (ok && t) {
        bench_result_t fig; /* the figures as of a repetition's */
        for (int r = 1; r < n - 1; r++)
            t[r - 1] = t[r] - t[r - 1];
        bench_set_gbps(&fig, (double)w * (double)c->size, t, n - 2);
        res->ahead_gbps = fig.gbps;
        res->ahead_min = fig.gbps_min;
        res->ahead_max = fig.gbps_max;
    }
    free(t);
    return 0;
}

/* Each window's slots written right before it is sent, as a program sends
 * what it just wrote: their first words (above), the last window's whole,
 * with the data rank 0 checks. */
int bench_send_ahead(bench_ctx_t *ctx, const bench_case_t *c, int i)
{
    int reported = 0, n = ctx->o->ahead, w = bench_window(ctx->o, c->size);
    if (bench_barrier(ctx) < 0)
        return -1;
    uint64_t seed = bench_case_seed(ctx, i, 3);
    for (int r = 0; r < n; r++) {
        const char *what = "send";
        if (r == n - 1 && ctx->o->verify)
            bench_fill_window(ctx, c->size, seed, NULL);
        else
            ipcp_pattern_stamp_slots(ctx->src.ptr, c->size,
                                     bench_src_slots(ctx, c->size),
                                     seed + (uint64_t)r + 1);
        ipcp_status_t st = bench_xfer_window(
            ctx, c->size, 0, w, 1, 0, bench_case_tag(i, T_DATA), NULL, &what);
        if (st != IPCP_OK)
            bench_send_report(c, "send run ahead", st, &reported);
    }
    return 0;
}
