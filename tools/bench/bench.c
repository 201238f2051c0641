/* ipcpipe-bench: bandwidth and latency of ipcpipe's paths between two ranks,
 * on host or GPU memory, each figure next to a ceiling measured in the same
 * run (memcpy on host memory; single-process CUDA copies on GPU memory).
 *
 * Without a launcher it re-runs itself as --ranks ranks (ipcp_launch); under
 * mpirun, srun or torchrun it takes rank and size from ipcp_init.  Rank 0
 * receives, times and prints; rank 1 sends; other ranks only keep pace. */
#include "bench.h"
#include "sizes.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "launch.h"

/* --compare's references come first within a size, so that each row of
 * ipcpipe can be set against them as it is printed.  Their ceilings: d2d
 * for what moves device to device (NCCL goes over P2P where it can), the
 * pinned copies for what stages through host memory, memcpy for Open MPI
 * (host memory, as ipcpipe's host rows). */
const bench_path_t bench_paths[] = {
    {"d2d", IPCP_PATH_AUTO, 0, BENCH_KIND_LOCAL, BENCH_CEIL_D2D, BENCH_CEIL_D2D,
     0, 0},
    {"d2h", IPCP_PATH_AUTO, 0, BENCH_KIND_LOCAL, BENCH_CEIL_STAGED,
     BENCH_CEIL_D2H, 0, 0},
    {"h2d", IPCP_PATH_AUTO, 0, BENCH_KIND_LOCAL, BENCH_CEIL_STAGED,
     BENCH_CEIL_H2D, 0, 0},
    {"striped", IPCP_PATH_AUTO, 0, BENCH_KIND_LOCAL, BENCH_CEIL_STRIPED,
     BENCH_CEIL_STRIPED, 0, 0},
    {"nccl", IPCP_PATH_AUTO, 0, BENCH_KIND_NCCL, BENCH_CEIL_D2D, 0, 0, 0},
    {"nccl-ungrouped", IPCP_PATH_AUTO, 0, BENCH_KIND_NCCL, BENCH_CEIL_D2D, 0, 0,
     1},
    {"naive", IPCP_PATH_AUTO, 0, BENCH_KIND_NAIVE, BENCH_CEIL_STAGED, 0, 0, 0},
    {"ompi", IPCP_PATH_AUTO, 0, BENCH_KIND_MPI, BENCH_CEIL_MEMCPY, 0, 0, 0},
    {"direct", IPCP_PATH_DIRECT, 0, BENCH_KIND_IPCP, 0, 0, 0, 0},
    {"staged", IPCP_PATH_STAGED, 0, BENCH_KIND_IPCP, 0, 0, 0, 0},
    {"bounce", IPCP_PATH_BOUNCE, 0, BENCH_KIND_IPCP, 0, 0, 0, 0},
    {"auto", IPCP_PATH_AUTO, 0, BENCH_KIND_IPCP, 0, 0, 0, 0},
    {"bidir", IPCP_PATH_AUTO, 1, BENCH_KIND_IPCP, 0, 0, 0, 0},
    {"bidir-direct", IPCP_PATH_DIRECT, 1, BENCH_KIND_IPCP, 0, 0, 0, 0},
    {"stream", IPCP_PATH_AUTO, 0, BENCH_KIND_IPCP, 0, 0, 1, 0},
};
const int bench_npaths = (int)(sizeof(bench_paths) / sizeof(bench_paths[0]));

/* Whether the first len bytes of pat name a path exactly. */
static int names_a_path(const char *pat, size_t len)
{
    for (int p = 0; p < bench_npaths; p++)
        if (strlen(bench_paths[p].name) == len &&
            strncmp(bench_paths[p].name, pat, len) == 0)
            return 1;
    return 0;
}

/* A path's name selects that path alone (nccl, not nccl-ungrouped; bidir,
 * not bidir-direct); any other prefix the paths it begins. */
static int pattern_matches(const char *pat, const bench_case_t *c)
{
    if (strpbrk(pat, "*?["))
        return fnmatch(pat, c->name, 0) == 0 ||
               fnmatch(pat, c->path->name, 0) == 0;
    const char *colon = strchr(pat, ':');
    size_t plen = colon ? (size_t)(colon - pat) : strlen(pat);
    if (plen == 0 || strncmp(c->path->name, pat, plen) != 0)
        return 0;
    if (strlen(c->path->name) != plen && names_a_path(pat, plen))
        return 0;
    if (!colon)
        return 1;
    size_t want;
    return bench_parse_size(colon + 1, &want, NULL) == 0 && want == c->size;
}

/* Builds the selected cases, size-major so that the table groups the paths
 * of one size.  Returns the count, or -1 when a --case matched nothing. */
static int build_cases(const bench_opts_t *o, bench_case_t **out)
{
    bench_case_t *cs =
        calloc((size_t)o->nsizes * (size_t)bench_npaths, sizeof(*cs));
    int used[BENCH_MAX_PATTERNS] = {0}, n = 0;
    if (!cs)
        return -1;
    for (int s = 0; s < o->nsizes; s++) {
        for (int p = 0; p < bench_npaths; p++) {
            bench_case_t *c = &cs[n];
            if (bench_paths[p].kind != BENCH_KIND_IPCP && !o->compare)
                continue;
            char sz[24];
            c->path = &bench_paths[p];
            c->size = o->sizes[s];
            bench_format_size(c->size, sz, sizeof(sz));
            snprintf(c->name, sizeof(c->name), "%s:%s", c->path->name, sz);
            int sel = o->npatterns == 0;
            for (int i = 0; i < o->npatterns; i++)
                if (pattern_matches(o->patterns[i], c))
                    sel = used[i] = 1;
            n += sel;
        }
    }
    for (int i = 0; i < o->npatterns; i++) {
        if (!used[i]) {
            fprintf(stderr,
                    "ipcpipe-bench: no case matches \"%s\" (see --list%s)\n",
                    o->patterns[i],
                    o->compare ? ""
                               : "; nccl, nccl-ungrouped, naive, d2d, "
                                 "d2h, h2d, striped and ompi need --compare");
            free(cs);
            return -1;
        }
    }
    *out = cs;
    return n;
}

static int spawn_ranks(const bench_opts_t *o, char **argv)
{
    ipcp_launch_opts_t lo = {
        .nranks = o->nranks,
        .timeout_s = o->timeout_s,
        .argv_self = argv,
        .pin = o->pin,
    };
    ipcp_launch_result_t res;
    if (ipcp_launch(&lo, &res) != 0) {
        fprintf(stderr, "ipcpipe-bench: cannot start %d ranks: %s\n", o->nranks,
                strerror(errno));
        return 1;
    }
    return ipcp_launch_exit_code(&res);
}

/* Joins a note to the ones before it. */
static void add_note(char *note, size_t len, const char *text)
{
    size_t used = strlen(note);
    bench_fmt(note + used, len - used, "%s%s", used ? "; " : "", text);
}

/* The cases that run: --compare's GPU references on GPU memory only, Open
 * MPI's rows on host memory only and where it is installed (rank 0 finds
 * out and tells the others; every rank knows the memory once the context
 * exists, and drops the same ones).  Returns the count, or -1 when the
 * ranks lost step; note says what was left out and why (rank 0). */
static int runnable_cases(bench_ctx_t *ctx, const bench_case_t *all, int nall,
                          bench_case_t *out, char *note, size_t nlen)
{
    int host = bench_ctx_mem(ctx) != BENCH_MEM_CUDA, any_mpi = 0;
    int n = 0, gpu_out = 0, mpi_out = 0, bounce_out = 0;
    char why[BENCH_REASON_MAX], text[2 * BENCH_REASON_MAX];
    for (int i = 0; i < nall; i++)
        any_mpi |= all[i].path->kind == BENCH_KIND_MPI;
    int mpi = any_mpi && host ? bench_ompi_select(ctx, why, sizeof(why)) : 0;
    if (mpi < 0)
        return -1;
    for (int i = 0; i < nall; i++) {
        bench_kind_t k = all[i].path->kind;
        if (k != BENCH_KIND_IPCP && k != BENCH_KIND_MPI && host)
            gpu_out++;
        else if (all[i].path->path == IPCP_PATH_BOUNCE && host)
            bounce_out++;
        else if (k == BENCH_KIND_MPI && !mpi)
            mpi_out++;
        else
            out[n++] = all[i];
    }
    note[0] = '\0';
    if (gpu_out) {
        bench_fmt(text, sizeof(text),
                  "--compare's GPU references (NCCL, the forum post's "
                  "staged pattern, single-process GPU copies) need GPU "
                  "memory; %d case%s left out",
                  gpu_out, gpu_out == 1 ? "" : "s");
        add_note(note, nlen, text);
    }
    if (bounce_out) {
        bench_fmt(text, sizeof(text),
                  "the bounce path moves GPU memory only; %d case%s left out",
                  bounce_out, bounce_out == 1 ? "" : "s");
        add_note(note, nlen, text);
    }
    if (mpi_out && host)
        bench_fmt(text, sizeof(text), "--compare has no ompi rows: %s", why);
    else if (mpi_out)
        bench_fmt(text, sizeof(text),
                  "--compare's ompi reference runs on host memory only "
                  "(--mem host); %d case%s left out",
                  mpi_out, mpi_out == 1 ? "" : "s");
    if (mpi_out)
        add_note(note, nlen, text);
    return n;
}

static void plot_subtitle(const bench_ctx_t *ctx, char *buf, size_t len)
{
    const bench_setup_info_t *in = bench_ctx_info(ctx);
    if (in->mem != BENCH_MEM_CUDA || in->dev[0] < 0)
        bench_fmt(buf, len, "ipcpipe %s, host memory, between two processes",
                  ipcp_version_string());
    else
        bench_fmt(buf, len,
                  "ipcpipe %s, GPU memory: rank 1 on %s (%s) -> rank 0 on "
                  "%s (%s)",
                  ipcp_version_string(), in->dev_name[1], in->bus[1],
                  in->dev_name[0], in->bus[0]);
}

/* Rank 0, after the run; returns 0 or 1 (not written). */
static int write_plot(const bench_opts_t *o, const bench_ctx_t *ctx,
                      const bench_result_t *rs, int n)
{
    char sub[320], err[BENCH_REASON_MAX];
    if (!rs) {
        fprintf(stderr, "ipcpipe-bench: --plot %s: out of memory\n", o->plot);
        return 1;
    }
    plot_subtitle(ctx, sub, sizeof(sub));
    if (bench_plot_write(o->plot, o->plot_log, rs, n, sub, err, sizeof(err)) ==
        0)
        return 0;
    fprintf(stderr, "ipcpipe-bench: --plot %s: %s\n", o->plot, err);
    return 1;
}

/* Runs every case on this rank; returns the number of failed cases on rank
 * 0 (0 elsewhere), or -1 when the ranks lost step with each other. */
static int run_cases(ipcp_comm_t *comm, const bench_opts_t *o,
                     const bench_case_t *all, int nall)
{
    bench_case_t *cs = calloc((size_t)nall, sizeof(*cs));
    bench_ctx_t *ctx = cs ? bench_ctx_create(comm, o, all, nall) : NULL;
    if (!ctx) {
        free(cs);
        return -1;
    }
    int rank = ipcp_comm_rank(comm), nfailed = 0;
    char note[3 * BENCH_REASON_MAX];
    int n = runnable_cases(ctx, all, nall, cs, note, sizeof(note));
    if (n < 0) {
        bench_ctx_destroy(ctx);
        free(cs);
        return -1;
    }
    bench_result_t *rs =
        rank == 0 && o->plot ? calloc((size_t)n + 1, sizeof(*rs)) : NULL;
    if (rank == 0)
        bench_report_begin(o, comm, ctx, n, note[0] ? note : NULL);
    for (int i = 0; i < n; i++) {
        bench_result_t res;
        if (rank == 0) {
            if (i == 0 || cs[i].size != cs[i - 1].size) {
                char what[64];
                bench_fmt(what, sizeof(what), "%s (ceilings first)",
                          cs[i].name);
                bench_report_progress(o, i, n, what);
                bench_ceilings_measure(ctx, cs, n, i);
            }
            bench_report_progress(o, i, n, cs[i].name);
        }
        if (bench_run_case(ctx, &cs[i], i, &res) < 0) {
            nfailed = -1;
            break;
        }
        if (rank != 0)
            continue;
        bench_report_case(o, ctx, &res);
        nfailed += res.outcome == BENCH_ERROR || res.verified == 0;
        if (rs)
            rs[i] = res;
    }
    if (rank == 0) {
        bench_report_end(o, nfailed);
        if (o->plot && nfailed >= 0)
            nfailed += write_plot(o, ctx, rs, n);
    }
    /* Sends left behind when rank 0 gave up on a case are taken by the
     * progress threads before their buffers go (commands run in order). */
    if (nfailed >= 0)
        (void)ipcp_barrier(comm);
    bench_ctx_destroy(ctx);
    free(rs);
    free(cs);
    return nfailed;
}

static int rank_main(const bench_opts_t *o, const bench_case_t *cs, int n)
{
    ipcp_comm_t *comm;
    double t0 = bench_now_s();
    ipcp_status_t st = ipcp_init(NULL, &comm);
    double init_ms = (bench_now_s() - t0) * 1e3;
    if (st != IPCP_OK) {
        fprintf(stderr, "ipcpipe-bench: ipcp_init: %s: %s\n", ipcp_strerror(st),
                ipcp_last_error());
        return 1;
    }
    int rc = 0;
    if (ipcp_comm_size(comm) < 2) {
        if (ipcp_comm_rank(comm) == 0)
            fprintf(stderr, "ipcpipe-bench: needs at least 2 ranks (have %d)\n",
                    ipcp_comm_size(comm));
        rc = 2;
    } else {
        int nfailed = run_cases(comm, o, cs, n);
        rc = nfailed != 0 ? 1 : 0;
    }
    int rank = ipcp_comm_rank(comm);
    t0 = bench_now_s();
    st = ipcp_finalize(comm);
    double fin_ms = (bench_now_s() - t0) * 1e3;
    if (st != IPCP_OK) {
        fprintf(stderr, "ipcpipe-bench: ipcp_finalize: %s: %s\n",
                ipcp_strerror(st), ipcp_last_error());
        rc = rc ? rc : 1;
    }
    /* Start and stop, apart from the cases (the first transfer of each
     * carries its own one-time costs, CUDA's start-up included). */
    if (rank == 0 && st == IPCP_OK) {
        char note[160];
        bench_fmt(note, sizeof(note),
                  "rank 0: ipcp_init %.1f ms (the bootstrap waits for every "
                  "rank), ipcp_finalize %.1f ms",
                  init_ms, fin_ms);
        bench_report_note(o, note);
    }
    return rc;
}

int main(int argc, char **argv)
{
    bench_opts_t o;
    if (argc > 1 && strcmp(argv[1], "--load-worker") == 0)
        return bench_load_worker_main(argc, argv);
    int rc = bench_parse_args(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (o.tune)
        return bench_tune();
    bench_case_t *cs = NULL;
    int n = build_cases(&o, &cs);
    if (n < 0)
        return 2;
    if (o.list) {
        for (int i = 0; i < n; i++)
            printf("%s\n", cs[i].name);
        free(cs);
        return 0;
    }
    if (n == 0) {
        fprintf(stderr, "ipcpipe-bench: no case selected\n");
        free(cs);
        return 2;
    }
    char why[BENCH_REASON_MAX];
    if (o.mem == BENCH_MEM_CUDA && !bench_cuda_usable(why, sizeof(why))) {
        /* Asked for GPU memory: a run of waived rows would pass for one. */
        fprintf(stderr,
                "ipcpipe-bench: --mem cuda: no GPU can be used here: %s "
                "(--mem auto runs on host memory then)\n",
                why);
        free(cs);
        return 2;
    }
    if (o.trace && !ipcp_launch_is_rank()) {
        /* The ranks read IPCPIPE_TRACE when they start; one case keeps the
         * timeline (and its overlap ratio) about one thing. */
        if (n != 1) {
            fprintf(stderr,
                    "ipcpipe-bench: --trace needs exactly one case "
                    "(e.g. --case staged:256M); %d selected\n",
                    n);
            free(cs);
            return 2;
        }
        setenv("IPCPIPE_TRACE", o.trace, 1);
    } else if (o.trace && (!getenv("IPCPIPE_TRACE") ||
                           strcmp(getenv("IPCPIPE_TRACE"), o.trace) != 0)) {
        /* Ranks this program spawned find it set already. */
        fprintf(stderr, "ipcpipe-bench: under a launcher, set IPCPIPE_TRACE "
                        "for the ranks instead of --trace\n");
        free(cs);
        return 2;
    }
    rc = ipcp_launch_is_rank() ? rank_main(&o, cs, n) : spawn_ranks(&o, argv);
    free(cs);
    return rc;
}
