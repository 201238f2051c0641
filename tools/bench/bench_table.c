/* ipcpipe-bench: a case's row of the table, with the notes under it (the
 * spread of its repetitions, one-time costs, the enqueue cost). */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void fmt_gbps(char *buf, size_t len, double v)
{
    if (!(v > 0) || !isfinite(v))
        snprintf(buf, len, "-");
    else if (v >= 100)
        snprintf(buf, len, "%.1f", v);
    else if (v >= 1)
        snprintf(buf, len, "%.2f", v);
    else if (v >= 0.01)
        snprintf(buf, len, "%.3f", v);
    else
        snprintf(buf, len, "%.5f", v);
}

void bench_path_label(const bench_result_t *r, char *buf, size_t len)
{
    const bench_path_t *p = r->c->path;
    if (p->kind == BENCH_KIND_LOCAL) {
        snprintf(buf, len, "%s (1 process)", p->name);
        return;
    }
    if (p->kind == BENCH_KIND_NAIVE) {
        snprintf(buf, len, "%s (seed)", p->name);
        return;
    }
    /* Show what moved the data when the library chose, and when it used
     * another path than the one forced (which it should not). */
    if (p->kind == BENCH_KIND_IPCP && r->outcome == BENCH_OK &&
        (p->path == IPCP_PATH_AUTO || r->path_used != p->path))
        snprintf(buf, len, "%s (%s)", p->name, ipcp_path_name(r->path_used));
    else
        snprintf(buf, len, "%s", p->name);
}

static const char *verified_word(const bench_result_t *r)
{
    return r->verified == -2 ? "-"
           : r->verified < 0 ? "off"
           : r->verified     ? "yes"
                             : "NO";
}

/* Under a row: the spread of its repetitions beside the median (GB/s of
 * the slowest and the fastest) and of its half round trips. */
static void print_spread(const bench_result_t *r)
{
    char g[80] = "", l[80] = "";
    if (r->gbps_min > 0 && r->gbps_max > 0)
        snprintf(g, sizeof(g), "GB/s %.4g-%.4g over %d repetitions",
                 r->gbps_min, r->gbps_max, r->iters);
    if (r->latency_min_us >= 0 && r->latency_max_us >= 0)
        snprintf(l, sizeof(l), "half round trip %.2f-%.2f us",
                 r->latency_min_us, r->latency_max_us);
    if (g[0] || l[0])
        printf("%10s  ^ min-max: %s%s%s\n", "", g, g[0] && l[0] ? "; " : "", l);
}

/* Under a row with --ahead: its windows posted back to back. */
static void print_ahead(const bench_opts_t *o, const bench_result_t *r)
{
    char g[24], lo[24], hi[24];
    if (!(r->ahead_gbps > 0))
        return;
    fmt_gbps(g, sizeof(g), r->ahead_gbps);
    fmt_gbps(lo, sizeof(lo), r->ahead_min);
    fmt_gbps(hi, sizeof(hi), r->ahead_max);
    printf("%10s  ^ run ahead: %s GB/s (min-max %s-%s) a window, %d windows "
           "posted back to back with no barrier between them (the first "
           "and the last not timed)\n",
           "", g, lo, hi, o->ahead);
}

/* Under a host row: every copy its ceiling is the fastest of; under a
 * striped one, its ceiling and the copy engine's. */
static void print_ceilings(const bench_result_t *r)
{
    char line[160] = "", v[24];
    size_t used = 0;
    if (r->ncand < 2 || !(r->ceiling_gbps > 0))
        return;
    for (int i = 0; i < r->ncand && used < sizeof(line); i++) {
        fmt_gbps(v, sizeof(v), r->cand_gbps[i]);
        used += (size_t)snprintf(line + used, sizeof(line) - used, "%s%s %s",
                                 i ? ", " : "",
                                 bench_ceil_name(r->cand_kind[i]), v);
    }
    if (r->ceiling_kind == BENCH_CEIL_STRIPED && r->cand_gbps[1] > 0)
        printf("%10s  ^ ceilings: %s GB/s; the row's is striped (both paths "
               "at once in one process), the row %.1f%% of d2d\n",
               "", line, 100.0 * r->gbps / r->cand_gbps[1]);
    else
        printf("%10s  ^ ceilings: %s GB/s; the row's is the fastest\n", "",
               line);
}

void bench_table_row(const bench_opts_t *o, const bench_result_t *r)
{
    char size[24], path[32], gbps[24], ceil[24], ratio[24], lat[24], w[16];
    bench_format_size(r->c->size, size, sizeof(size));
    bench_path_label(r, path, sizeof(path));
    if (r->outcome != BENCH_OK) {
        printf(BENCH_ROW_LEAD "%s: %s\n", size, path,
               r->outcome == BENCH_WAIVED ? "waived" : "FAILED", r->reason);
        return;
    }
    snprintf(w, sizeof(w), "%d", r->window);
    fmt_gbps(gbps, sizeof(gbps), r->gbps);
    fmt_gbps(ceil, sizeof(ceil), r->ceiling_gbps);
    if (r->gbps > 0 && r->ceiling_gbps > 0)
        snprintf(ratio, sizeof(ratio), "%.1f",
                 100.0 * r->gbps / r->ceiling_gbps);
    else
        snprintf(ratio, sizeof(ratio), "-");
    if (r->latency_us >= 0 && isfinite(r->latency_us))
        snprintf(lat, sizeof(lat), "%.2f", r->latency_us);
    else
        snprintf(lat, sizeof(lat), "-");
    printf(BENCH_ROW_FMT, size, path, w, gbps, ceil,
           r->ceiling_gbps > 0 ? bench_ceil_name(r->ceiling_kind) : "-", ratio,
           lat, verified_word(r));
    if (r->verified == 0)
        printf("%10s  ^ %s\n", "", r->reason);
    print_spread(r);
    print_ahead(o, r);
    print_ceilings(r);
    /* One-time costs apart from the steady state: the first transfer
     * against one transfer's share of the timed median. */
    if (r->first_us >= 0 && isfinite(r->first_us) && r->gbps > 0)
        printf("%10s  ^ first transfer %.1f us, steady %.1f us: %.1f us of "
               "one-time costs (mappings, imports, pinning, device start)\n",
               "", r->first_us, (double)r->c->size / r->gbps / 1e3,
               r->first_us - (double)r->c->size / r->gbps / 1e3);
    if (r->post_us >= 0 && isfinite(r->post_us))
        printf("%10s  ^ the calls took %.2f us each to enqueue (CPU); %s; "
               "%d round trip%s a stream wait\n",
               "", r->post_us,
               o->stream_reqs_every
                   ? "a request on every call"
                   : "requests on each batch's last send and receive",
               o->stream_batch, o->stream_batch == 1 ? "" : "s");
}
