/* ipcpipe-bench: the data checks of received bytes against the pattern
 * they were sent with, and the testing aid that makes them fail. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_ctx.h"
#include "pattern.h"

/* Testing aid (IPCP_BENCH_CORRUPT, tools.bench.corrupt): flips the
 * middle byte of a host buffer before it is checked, so that the check is
 * seen to fail.  "1": before every check; "window": the windows' checks
 * only (warm-up, timed, bidir, --ahead); "ahead": the --ahead windows'
 * check alone; "pingpong": every round of the host ping-pong;
 * "pingpong:N": its round N alone (from 0, warm-up rounds first).  Not an
 * IPCPIPE_* setting: the library knows nothing of it. */
enum {
    CORRUPT_OFF,
    CORRUPT_ALL,
    CORRUPT_WINDOW,
    CORRUPT_AHEAD,
    CORRUPT_PINGPONG
};
/* The round corrupt_for_test is told of a window's check, and of the
 * --ahead windows' one. */
#define ROUND_WINDOW (-1)
#define ROUND_AHEAD  (-2)

static int corrupt_mode(long *round)
{
    static int mode = -1;
    static long want = -1;
    if (mode < 0) {
        const char *v = getenv("IPCP_BENCH_CORRUPT");
        char *end = NULL;
        mode = CORRUPT_OFF;
        if (!v || !*v)
            ;
        else if (strcmp(v, "1") == 0)
            mode = CORRUPT_ALL;
        else if (strcmp(v, "window") == 0)
            mode = CORRUPT_WINDOW;
        else if (strcmp(v, "ahead") == 0)
            mode = CORRUPT_AHEAD;
        else if (strcmp(v, "pingpong") == 0)
            mode = CORRUPT_PINGPONG;
        else if (strncmp(v, "pingpong:", 9) == 0 &&
                 (want = strtol(v + 9, &end, 10)) >= 0 && end != v + 9 &&
                 *end == '\0')
            mode = CORRUPT_PINGPONG;
        else
            fprintf(stderr,
                    "ipcpipe-bench: IPCP_BENCH_CORRUPT=%s: not 1, window, "
                    "ahead, pingpong or pingpong:N; nothing corrupted\n",
                    v);
    }
    *round = want;
    return mode;
}

/* round: the ping-pong round being checked, or ROUND_WINDOW, ROUND_AHEAD. */
static void corrupt_for_test(bench_buf_t *b, size_t off, size_t len, long round)
{
    long want;
    int mode = corrupt_mode(&want), on = 0;
    if (mode == CORRUPT_ALL)
        on = 1;
    else if (mode == CORRUPT_WINDOW)
        on = round < 0;
    else if (mode == CORRUPT_AHEAD)
        on = round == ROUND_AHEAD;
    else if (mode == CORRUPT_PINGPONG)
        on = round >= 0 && (want < 0 || want == round);
    if (on && len && b->device < 0)
        ((unsigned char *)b->ptr)[off + len / 2] ^= 0xff;
}

static void check_buf(bench_ctx_t *ctx, bench_buf_t *b, bench_result_t *res,
                      size_t off, size_t len, uint64_t seed, const char *what)
{
    char err[BENCH_REASON_MAX];
    unsigned char got = 0;
    size_t bad = bench_buf_check(b, off, len, seed, ctx->staging, &got, err,
                                 sizeof(err));
    if (bad == len)
        return;
    res->verified = 0;
    if (bad == (size_t)-1) {
        bench_set_error(res, what, err);
        return;
    }
    if (res->reason[0] == '\0')
        bench_fmt(res->reason, sizeof(res->reason),
                  "%s: byte %zu of %zu is 0x%02x, expected 0x%02x", what, bad,
                  len, got, ipcp_pattern_byte(seed, bad));
}

void bench_check_buf(bench_ctx_t *ctx, bench_buf_t *b, bench_result_t *res,
                     size_t off, size_t len, uint64_t seed, const char *what)
{
    corrupt_for_test(b, off, len, ROUND_WINDOW);
    check_buf(ctx, b, res, off, len, seed, what);
}

/* The last transfer of a window of w (receive slot (w - 1) % slots, sent
 * from source slot (w - 1) % source slots). */
static void check_last(bench_ctx_t *ctx, bench_result_t *res, size_t size,
                       int w, uint64_t seed, long round, const char *what)
{
    int slots = bench_case_slots(ctx->o, size);
    uint64_t k = (uint64_t)((w - 1) % bench_src_slots(ctx, size));
    size_t off = (size_t)((w - 1) % slots) * size;
    corrupt_for_test(&ctx->dst, off, size, round);
    check_buf(ctx, &ctx->dst, res, off, size, ipcp_pattern_slot_seed(seed, k),
              what);
}

void bench_check_last(bench_ctx_t *ctx, bench_result_t *res, size_t size, int w,
                      uint64_t seed)
{
    check_last(ctx, res, size, w, seed, ROUND_WINDOW, "last");
}

void bench_check_ahead(bench_ctx_t *ctx, bench_result_t *res, size_t size,
                       int w, uint64_t seed)
{
    check_last(ctx, res, size, w, seed, ROUND_AHEAD, "run ahead, last");
}

void bench_check_data(bench_ctx_t *ctx, bench_result_t *res, size_t off,
                      size_t len, uint64_t seed, const char *what)
{
    bench_check_buf(ctx, &ctx->dst, res, off, len, seed, what);
}

void bench_check_round(bench_ctx_t *ctx, bench_result_t *res, size_t len,
                       uint64_t seed, int round)
{
    char what[40];
    bench_fmt(what, sizeof(what), "ping-pong round %d", round);
    corrupt_for_test(&ctx->dst, 0, len, round);
    check_buf(ctx, &ctx->dst, res, 0, len, seed, what);
}
