/* ipcpipe-bench: the table, the JSON and the progress line (rank 0). */
#include "json.h"
#include "bench.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

static struct {
    int progress;   /* a progress line may be on stderr */
    int first_json; /* no JSON object printed yet */
    int measured, waived, failed;
} rep;

#define ROW_FMT "%10s  %-16s  %4s  %10s  %12s  %-14s  %7s  %10s  %8s\n"

static const char *mem_name(bench_mem_t m)
{
    return m == BENCH_MEM_CUDA ? "cuda" : "host";
}

static const char *alloc_name(bench_alloc_t a)
{
    return a == BENCH_ALLOC_PLAIN ? "plain" : "ipcp";
}

static void header_memory(const bench_setup_info_t *in)
{
    if (in->mem != BENCH_MEM_CUDA) {
        printf("# memory: host, from %s%s%s\n",
               in->alloc == BENCH_ALLOC_PLAIN
                   ? "posix_memalign (private: no peer can map it)"
                   : "ipcp_mem_alloc (shared memory peers can map)",
               in->mem_note[0] ? "; " : "", in->mem_note);
        return;
    }
    printf("# memory: cuda, from %s\n",
           in->alloc == BENCH_ALLOC_PLAIN
               ? "cuMemAlloc (the library's legacy IPC path)"
               : "ipcp_mem_alloc (VMM, exported as file descriptors)");
    for (int r = 0; r < 2; r++) {
        if (in->dev[r] < 0)
            continue;
        printf("#   rank %d (%s) on device %d: %s, %s\n", r,
               r ? "sender" : "receiver", in->dev[r], in->dev_name[r],
               in->bus[r]);
    }
}

static void header_ceilings(const bench_setup_info_t *in)
{
    if (in->mem != BENCH_MEM_CUDA) {
        printf("# ceilings, measured in this run with the same W, median: "
               "memcpy = one thread's memcpy of W*size bytes in the\n"
               "#   receiving process (single-threaded); memcpy-bidir = two "
               "threads of the receiving process copying at once, "
               "aggregate\n");
        return;
    }
    int a = in->ceil_dev[0], b = in->ceil_dev[1];
    if (a < 0) {
        printf("# ceilings (d2d, min(d2h,h2d), d2d-bidir): none measured, "
               "no device buffers\n");
        return;
    }
    printf("# ceilings, measured in this run by the receiving process alone, "
           "CUDA events, same W, median; devices as it numbers them:\n"
           "#   d2d = cuMemcpyAsync device %d -> device %d (buffers on the "
           "sender's and the receiver's device);\n"
           "#   min(d2h,h2d) = min of pinned D2H on device %d and pinned H2D "
           "on device %d;\n"
           "#   d2d-bidir = %d -> %d and %d -> %d at once on two streams, "
           "aggregate; 2*min(d2h,h2d) for bidir over the staged path\n",
           a, b, a, b, a, b, b, a);
    if (in->ceil_note && in->ceil_note[0])
        printf("#   note: %s\n", in->ceil_note);
}

void bench_report_begin(const bench_opts_t *o, ipcp_comm_t *comm,
                        const bench_ctx_t *ctx, int ncases)
{
    /* A progress line only helps someone watching; in a pipe or a log it
     * would be noise. */
    rep.progress = !o->json && isatty(STDERR_FILENO);
    rep.first_json = 1;
    if (o->json) {
        printf("[");
        fflush(stdout);
        return;
    }
    char cap[24];
    if (bench_ctx_cap(ctx))
        bench_format_size(bench_ctx_cap(ctx), cap, sizeof(cap));
    else
        snprintf(cap, sizeof(cap), "none");
    printf("# ipcpipe-bench %s: %d ranks (rank 0 receives, rank 1 sends; "
           "both in bidir), job %s\n",
           ipcp_version_string(), ipcp_comm_size(comm), ipcp_comm_job(comm));
    header_memory(bench_ctx_info(ctx));
    printf("# %d cases, verify %s (seed 0x%016llx), warm-up %d, buffers up "
           "to %s\n",
           ncases, o->verify ? "on" : "off",
           (unsigned long long)bench_ctx_seed(ctx), o->warmup, cap);
    printf("# GB/s = 1e9 bytes/s, median of the timed repetitions; a "
           "repetition posts W transfers back to back and moves W*size "
           "bytes,\n"
           "#   timed by the receiver from a barrier to its last receive's "
           "completion; bidir: both ranks send W and receive W at once,\n"
           "#   2*W*size bytes to the last completion on either rank\n");
    header_ceilings(bench_ctx_info(ctx));
    printf("# latency = half a ping-pong round trip, median; ratio = GB/s "
           "over the ceiling GB/s\n");
    printf(ROW_FMT, "size", "path", "W", "GB/s", "ceiling GB/s", "ceiling",
           "ratio %", "latency us", "verified");
    fflush(stdout);
}

void bench_report_progress(const bench_opts_t *o, int done, int total,
                           const char *name)
{
    if (!rep.progress)
        return;
    fprintf(stderr, "\r\033[K[%d/%d] %s ...", done + 1, total, name);
    fflush(stderr);
}

/* Enough digits for 8-byte figures without hiding a 400 GB/s one. */
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

static void path_label(const bench_result_t *r, char *buf, size_t len)
{
    /* Show what moved the data when the library chose, and when it used
     * another path than the one forced (which it should not). */
    if (r->outcome == BENCH_OK && (r->c->path->path == IPCP_PATH_AUTO ||
                                   r->path_used != r->c->path->path))
        snprintf(buf, len, "%s (%s)", r->c->path->name,
                 ipcp_path_name(r->path_used));
    else
        snprintf(buf, len, "%s", r->c->path->name);
}

static void table_row(const bench_result_t *r)
{
    char size[24], path[32], gbps[24], ceil[24], ratio[24], lat[24], w[16];
    bench_format_size(r->c->size, size, sizeof(size));
    path_label(r, path, sizeof(path));
    if (r->outcome != BENCH_OK) {
        printf("%10s  %-16s  %s: %s\n", size, path,
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
    printf(ROW_FMT, size, path, w, gbps, ceil,
           r->ceiling_gbps > 0 ? bench_ceil_name(r->ceiling_kind) : "-", ratio,
           lat,
           r->verified < 0 ? "off"
           : r->verified   ? "yes"
                           : "NO");
    if (r->verified == 0)
        printf("%10s  ^ %s\n", "", r->reason);
}

static void json_str(const char *s)
{
    ipcp_json_str(stdout, s);
}

static void json_num(const char *key, double v, int valid)
{
    printf(", \"%s\": ", key);
    if (valid && isfinite(v))
        printf("%.6g", v);
    else
        printf("null");
}

static void json_devices(const bench_setup_info_t *in)
{
    if (in->mem != BENCH_MEM_CUDA || in->dev[0] < 0) {
        printf(", \"devices\": null, \"ceiling_devices\": null");
        return;
    }
    printf(", \"devices\": {\"receiver\": %d, \"sender\": %d, "
           "\"receiver_bus\": ",
           in->dev[0], in->dev[1]);
    json_str(in->bus[0]);
    printf(", \"sender_bus\": ");
    json_str(in->bus[1]);
    printf("}, \"ceiling_devices\": ");
    if (in->ceil_dev[0] >= 0)
        printf("{\"from\": %d, \"to\": %d}", in->ceil_dev[0], in->ceil_dev[1]);
    else
        printf("null");
}

static void json_obj(const bench_ctx_t *ctx, const bench_result_t *r)
{
    const bench_setup_info_t *in = bench_ctx_info(ctx);
    static const char *const outcome[] = {"ok", "waived", "failed"};
    int ok = r->outcome == BENCH_OK;
    printf("%s\n  {\"case\": ", rep.first_json ? "" : ",");
    rep.first_json = 0;
    json_str(r->c->name);
    printf(", \"size\": %zu, \"path\": ", r->c->size);
    json_str(r->c->path->name);
    printf(", \"path_used\": ");
    if (ok)
        json_str(ipcp_path_name(r->path_used));
    else
        printf("null");
    printf(", \"mem\": \"%s\", \"alloc\": \"%s\"", mem_name(in->mem),
           alloc_name(in->alloc));
    json_devices(in);
    printf(", \"window\": %d", r->window);
    json_num("gbps", r->gbps, ok && r->gbps > 0);
    json_num("ceiling_gbps", r->ceiling_gbps, r->ceiling_gbps > 0);
    printf(", \"ceiling_kind\": ");
    if (r->ceiling_gbps > 0)
        json_str(bench_ceil_name(r->ceiling_kind));
    else
        printf("null");
    json_num("ratio", r->gbps / r->ceiling_gbps,
             ok && r->gbps > 0 && r->ceiling_gbps > 0);
    json_num("latency_us", r->latency_us, ok && r->latency_us >= 0);
    printf(
        ", \"verified\": %s, \"iters\": %d, \"status\": \"%s\", \"reason\": ",
        !ok || r->verified < 0 ? "null"
        : r->verified          ? "true"
                               : "false",
        r->iters, outcome[r->outcome]);
    if (r->reason[0])
        json_str(r->reason);
    else
        printf("null");
    printf("}");
}

void bench_report_case(const bench_opts_t *o, const bench_ctx_t *ctx,
                       const bench_result_t *r)
{
    if (rep.progress)
        fprintf(stderr, "\r\033[K");
    if (r->outcome == BENCH_WAIVED)
        rep.waived++;
    else if (r->outcome == BENCH_ERROR || r->verified == 0)
        rep.failed++;
    else
        rep.measured++;
    if (o->json)
        json_obj(ctx, r);
    else
        table_row(r);
    fflush(stdout);
}

void bench_report_end(const bench_opts_t *o, int nfailed)
{
    if (rep.progress)
        fprintf(stderr, "\r\033[K");
    if (o->json) {
        printf("\n]\n");
    } else {
        printf("# %d measured, %d waived, %d failed%s\n", rep.measured,
               rep.waived, rep.failed,
               nfailed < 0 ? " (stopped: the ranks lost step)" : "");
    }
    fflush(stdout);
}
