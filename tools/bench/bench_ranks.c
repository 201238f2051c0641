/* ipcpipe-bench-ranks: many ranks of one node moving data at once, each
 * flow's figure with the others running beside its figure alone, measured
 * in the same run, and the aggregate beside the sum of the flows alone.
 *
 *   ipcpipe-bench-ranks [--ranks N] [--pattern ring|pairs|all2all|all]
 *                       [--mem host|cuda] [--sizes LIST] [--reps N]
 *                       [--window W] [--pin] [--timeout S]
 *
 * Without a launcher it re-runs itself as N ranks (ipcp_launch, --pin
 * binding rank i to one CPU as mpirun and srun do); under mpirun, srun or
 * torchrun it takes rank and size from ipcp_init.  A flow is W messages of
 * one size from one rank to another, each into its own slot:
 *   ring     rank r to r+1 (mod N), every rank at once;
 *   pairs    rank 2k to 2k+1 (N even): disjoint pairs at once;
 *   all2all  every rank to every other.
 * A repetition times each flow alone (the other ranks wait at the
 * barrier), then all of the pattern's flows together.  A flow is timed
 * from the earlier of its two ranks' exits from the barrier to its
 * receiver's last message (neither rank's lead on the other counted out
 * of it); the aggregate is every flow's bytes over the span from the
 * first rank's start to the last rank's end (CLOCK_MONOTONIC, one clock
 * for the processes of one machine).  Medians of the repetitions with min-max.
 * Each size's source data is fresh, and the last repetition of each flow alone
 * and of the pattern together is checked in every slot (poisoned before).
 *
 * Device memory: rank r's buffers on GPU r mod (the GPUs visible), from
 * cuMemAlloc; ranks that share a GPU are named in the header line. */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_nccl.h"
#include "bench_ranks.h"
#include "ipcpipe.h"
#include "ipcpipe_diag.h"
#include "launch.h"
#include "pattern.h"
#include "sizes.h"
#include "slots.h"
#include "stat3.h"
#ifdef IPCP_HAVE_CUDA
#include "tool_cuda.h"
#endif

static int me = -1, nranks;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ipcpipe-bench-ranks");
    if (me >= 0)
        fprintf(stderr, " [rank %d]", me);
    fprintf(stderr, ": ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

#define OK(call)                                                               \
    do {                                                                       \
        ipcp_status_t st_ = (call);                                            \
        if (st_ != IPCP_OK)                                                    \
            die("%s: %s (%s)", #call, ipcp_strerror(st_), ipcp_last_error());  \
    } while (0)

#ifdef IPCP_HAVE_CUDA
#define CU(call) TOOL_CU_OR(die, call)
#endif

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- Flows ------------------------------------------------------------ */

typedef struct flow {
    int src, dst;
} flow_t;

/* The pattern's flows into f (room for N * (N - 1)); their count. */
static int pattern_flows(int pat, int n, flow_t *f)
{
    int k = 0;
    for (int s = 0; s < n; s++)
        for (int d = 0; d < n; d++) {
            int in = pat == PAT_ALL2ALL ? s != d
                     : pat == PAT_RING  ? d == (s + 1) % n
                                        : s % 2 == 0 && d == s + 1;
            if (in)
                f[k++] = (flow_t){s, d};
        }
    return k;
}

/* ---- Buffers ---------------------------------------------------------- */

/* W slots of size bytes, one allocation: host (malloc) or device. */
typedef struct rbuf {
    int dev;
    size_t size;
    int w;
    unsigned char *p;
} rbuf_t;

static int gpu_of_rank = -1; /* the GPU of this rank's device buffers */

static void rbuf_alloc(rbuf_t *b, int dev, size_t size, int w)
{
    size_t n = size * (size_t)w;
    b->dev = dev;
    b->size = size;
    b->w = w;
#ifdef IPCP_HAVE_CUDA
    if (dev) {
        CUdeviceptr d;
        CUresult r = TOOL_CU(cuMemAlloc)(&d, n ? n : 1);
        char e[160];
        if (r != CUDA_SUCCESS)
            die("%d slots of %zu bytes on GPU %d: %s", w, size, gpu_of_rank,
                tool_cu_strerror(r, e, sizeof(e)));
        b->p = (unsigned char *)(uintptr_t)d;
        return;
    }
#endif
    if (!(b->p = malloc(n ? n : 1)))
        die("no memory for %d slots of %zu bytes", w, size);
}

static void rbuf_free(rbuf_t *b)
{
#ifdef IPCP_HAVE_CUDA
    if (b->dev) {
        TOOL_CU(cuMemFree)((CUdeviceptr)(uintptr_t)b->p);
        return;
    }
#endif
    free(b->p);
}

static unsigned char *slot(const rbuf_t *b, int i)
{
    return b->p + (size_t)i * b->size;
}

/* Every slot: slot i the stream of seed at offset i * size, or a poison
 * byte (seed 0).  tmp: size bytes of host memory for device slots. */
static void rbuf_fill(rbuf_t *b, uint64_t seed, unsigned char *tmp)
{
    char err[256];
    for (int i = 0; i < b->w; i++)
        if (tool_slot_fill(slot(b, i), b->dev, b->size, seed,
                           (uint64_t)i * b->size, tmp, err, sizeof(err)))
            die("filling slot %d of %zu bytes: %s", i, b->size, err);
}

/* Testing aid (IPCP_BENCH_CORRUPT=1, tools.bench_ranks.corrupt): the
 * middle byte of each flow's last slot flipped as it is read for the
 * check, so that the check is seen to fail.  Not an IPCPIPE_* setting:
 * the library knows nothing of it. */
static int corrupt_for_test(void)
{
    static int on = -1;
    if (on < 0) {
        const char *v = getenv("IPCP_BENCH_CORRUPT");
        on = v && !strcmp(v, "1");
    }
    return on;
}

/* Dies naming the first slot and byte that do not hold the stream of
 * seed. */
static void rbuf_check(rbuf_t *b, uint64_t seed, unsigned char *tmp,
                       const char *what, const flow_t *f)
{
    char err[256];
    for (int i = 0; i < b->w; i++) {
        unsigned char *h =
            tool_slot_read(slot(b, i), b->dev, b->size, tmp, err, sizeof(err));
        if (!h)
            die("reading slot %d of %zu bytes: %s", i, b->size, err);
        uint64_t off = (uint64_t)i * b->size;
        if (i == b->w - 1 && corrupt_for_test())
            h[b->size / 2] ^= 0xff;
        size_t at = ipcp_pattern_check(h, b->size, seed, off);
        if (at != b->size)
            die("%s, flow %d -> %d, %zu bytes: slot %d byte %zu is 0x%02x, "
                "expected 0x%02x",
                what, f->src, f->dst, b->size, i, at, h[at],
                ipcp_pattern_byte(seed, off + at));
    }
}

/* ---- One size of one pattern ------------------------------------------ */

/* This rank's part of a size: its source slots (sent to each of its
 * flows) and, for each flow it receives, the slots and the times. */
typedef struct rsize {
    size_t size;
    int w, nflows, reps;
    const flow_t *flows;
    rbuf_t src;
    rbuf_t *rx; /* [nflows]: allocated where this rank receives */
    /* This rank's stamps (CLOCK_MONOTONIC, s), in one block for rank 0:
     * [A0] a flow alone: its start here (ranks of the flow), [AE] its end
     * (its receiver), [TE] its end with the others (its receiver), each
     * nflows * reps; [T0] the start of all together, [TL] this rank's
     * last completion then, each reps. */
    double *tm;
    int ntm;
    int *path; /* [nflows]: the path of the flow's last message here */
    uint64_t seed;
    unsigned char *tmp;
} rsize_t;

enum { TM_A0, TM_AE, TM_TE };
/* Stamp kind of flow f, repetition k. */
static double *tm_flow(const rsize_t *z, double *tm, int kind, int f, int k)
{
    return tm + (size_t)kind * z->nflows * z->reps + (size_t)f * z->reps + k;
}

/* The start of all together (last 0) or this rank's last completion then
 * (last 1), repetition k. */
static double *tm_all(const rsize_t *z, double *tm, int last, int k)
{
    return tm + (size_t)3 * z->nflows * z->reps + (size_t)last * z->reps + k;
}

static uint64_t src_seed(const rsize_t *z, int rank)
{
    return ipcp_pattern_slot_seed(z->seed, (uint64_t)rank + 1);
}

/* Posts this rank's part of the flows whose bit is set in sel (all:
 * NULL), waits for them, polling, and stamps each received flow's end in
 * end[f]; the time of this rank's last completion. */
static double run_flows(ipcp_comm_t *c, rsize_t *z, const char *sel,
                        double *end)
{
    int max = z->w * 2 * (nranks - 1), n = 0;
    ipcp_request_t **r = calloc((size_t)max, sizeof(*r));
    int *of = calloc((size_t)max, sizeof(int)), *left;
    left = calloc((size_t)z->nflows, sizeof(int));
    if (!r || !of || !left)
        die("no memory for %d requests", max);
    for (int f = 0; f < z->nflows; f++) {
        const flow_t *fl = &z->flows[f];
        if ((sel && !sel[f]) || (fl->src != me && fl->dst != me))
            continue;
        for (int i = 0; i < z->w; i++, n++) {
            of[n] = fl->dst == me ? f : -1;
            if (fl->dst == me)
                OK(ipcp_irecv(c, slot(&z->rx[f], i), z->size, fl->src, T_DATA,
                              &r[n]));
            else
                OK(ipcp_isend(c, slot(&z->src, i), z->size, fl->dst, T_DATA,
                              &r[n]));
        }
        left[f] = fl->dst == me ? z->w : 0;
    }
    double last = now();
    for (int pending = n; pending > 0;) {
        for (int k = 0; k < n; k++) {
            ipcp_xfer_info_t info;
            int done = 0;
            if (!r[k])
                continue;
            ipcp_status_t st = ipcp_test(r[k], &done, &info);
            if (!done)
                continue;
            if (st != IPCP_OK)
                die("a transfer of %zu bytes: %s (%s)", z->size,
                    ipcp_strerror(st), ipcp_last_error());
            r[k] = NULL;
            pending--;
            last = now();
            if (of[k] >= 0) {
                if (info.nbytes != z->size)
                    die("a receive of %zu bytes took %zu", z->size,
                        info.nbytes);
                z->path[of[k]] = (int)info.path;
                if (--left[of[k]] == 0)
                    end[of[k]] = last;
            }
        }
    }
    free(r);
    free(of);
    free(left);
    return last;
}

static double gbs(size_t size, int w, double s)
{
    return s > 0 ? (double)size * w / s / 1e9 : 0;
}

/* The receive slots of the flows in sel (NULL: all) that end here
 * poisoned, so that the repetition after is checked against fresh data. */
static void poison(rsize_t *z, const char *sel)
{
    for (int f = 0; f < z->nflows; f++)
        if (z->flows[f].dst == me && (!sel || sel[f]))
            rbuf_fill(&z->rx[f], 0, z->tmp);
}

static void check_rx(rsize_t *z, const char *sel, const char *what)
{
    for (int f = 0; f < z->nflows; f++)
        if (z->flows[f].dst == me && (!sel || sel[f]))
            rbuf_check(&z->rx[f], src_seed(z, z->flows[f].src), z->tmp, what,
                       &z->flows[f]);
}

/* Repetition k: each flow alone, then all of them together; the stamps
 * of this rank's part. */
static void run_rep(ipcp_comm_t *c, rsize_t *z, int k, char *sel, double *end)
{
    int last = k == z->reps - 1;
    for (int f = 0; f < z->nflows; f++) {
        const flow_t *fl = &z->flows[f];
        memset(sel, 0, (size_t)z->nflows);
        sel[f] = 1;
        if (last)
            poison(z, sel);
        OK(ipcp_barrier(c));
        *tm_flow(z, z->tm, TM_A0, f, k) = now();
        run_flows(c, z, sel, end);
        if (fl->dst == me)
            *tm_flow(z, z->tm, TM_AE, f, k) = end[f];
        if (last)
            check_rx(z, sel, "alone");
    }
    if (last)
        poison(z, NULL);
    OK(ipcp_barrier(c));
    *tm_all(z, z->tm, 0, k) = now();
    *tm_all(z, z->tm, 1, k) = run_flows(c, z, NULL, end);
    for (int f = 0; f < z->nflows; f++)
        if (z->flows[f].dst == me)
            *tm_flow(z, z->tm, TM_TE, f, k) = end[f];
    if (last)
        check_rx(z, NULL, "together");
}

/* ---- Results at rank 0 ------------------------------------------------ */

/* Decimals for a figure in GB/s: small messages' figures keep three
 * significant digits (8 B x64 in 10 ms is 0.0000512). */
static int prec(double v)
{
    int d = 2;
    for (double x = v; x > 0 && x < 1 && d < 9; x *= 10)
        d++;
    return d;
}

static void fmt_stat(char *buf, size_t len, stat3_t s)
{
    snprintf(buf, len, "%.*f [%.*f-%.*f]", prec(s.med), s.med, prec(s.min),
             s.min, prec(s.max), s.max);
}

static double min2(double a, double b)
{
    return a < b ? a : b;
}

/* Flow f's figures from every rank's stamps (all: rank r's block at
 * r * ntm): from the earlier start of its two ranks to its receiver's
 * end, alone (into a) and with the others (into t), one a repetition. */
static void flow_figures(const rsize_t *z, double *all, int f, double *a,
                         double *t)
{
    double *s = all + (size_t)z->flows[f].src * z->ntm,
           *d = all + (size_t)z->flows[f].dst * z->ntm;
    for (int k = 0; k < z->reps; k++) {
        double a0 =
            min2(*tm_flow(z, s, TM_A0, f, k), *tm_flow(z, d, TM_A0, f, k));
        double t0 = min2(*tm_all(z, s, 0, k), *tm_all(z, d, 0, k));
        a[k] = gbs(z->size, z->w, *tm_flow(z, d, TM_AE, f, k) - a0);
        t[k] = gbs(z->size, z->w, *tm_flow(z, d, TM_TE, f, k) - t0);
    }
}

/* Every flow's bytes over the span from the first rank's start to the
 * last rank's end, one a repetition, into g. */
static void aggregate(const rsize_t *z, double *all, double *g)
{
    for (int k = 0; k < z->reps; k++) {
        double first = *tm_all(z, all, 0, k), end = *tm_all(z, all, 1, k);
        for (int r = 1; r < nranks; r++) {
            double *x = all + (size_t)r * z->ntm;
            first = min2(first, *tm_all(z, x, 0, k));
            end = *tm_all(z, x, 1, k) > end ? *tm_all(z, x, 1, k) : end;
        }
        g[k] = gbs(z->size, z->w * z->nflows, end - first);
    }
}

/* Rank 0: the pattern's table of one size from every rank's stamps and
 * the receivers' paths: each flow alone and with the others, the
 * aggregate beside the sum of the flows alone. */
static double print_table(const rsize_t *z, int pat, double *all,
                          const int *paths)
{
    double sum = 0, *a = calloc((size_t)z->reps * 2, sizeof(double)),
           *t = a ? a + z->reps : NULL;
    if (!a)
        die("no memory for the results");
    printf("%s, %d ranks, %zu bytes x%d a flow\n", ranks_pat_names[pat], nranks,
           z->size, z->w);
    printf("  %-12s %-8s %-24s %-24s %s\n", "flow", "path", "alone GB/s",
           "together GB/s", "together/alone");
    for (int f = 0; f < z->nflows; f++) {
        char name[32], as[32], ts[32];
        flow_figures(z, all, f, a, t);
        stat3_t sa = ipcp_tool_stats(a, z->reps),
                st = ipcp_tool_stats(t, z->reps);
        snprintf(name, sizeof(name), "%d -> %d", z->flows[f].src,
                 z->flows[f].dst);
        fmt_stat(as, sizeof(as), sa);
        fmt_stat(ts, sizeof(ts), st);
        printf("  %-12s %-8s %-24s %-24s %.2f\n", name,
               ipcp_path_name((ipcp_path_t)paths[f]), as, ts,
               sa.med > 0 ? st.med / sa.med : 0);
        sum += sa.med;
    }
    aggregate(z, all, a);
    stat3_t g = ipcp_tool_stats(a, z->reps);
    char as[32], ts[32];
    snprintf(as, sizeof(as), "%.*f (sum)", prec(sum), sum);
    fmt_stat(ts, sizeof(ts), g);
    printf("  %-12s %-8s %-24s %-24s %.2f\n", "aggregate", "", as, ts,
           sum > 0 ? g.med / sum : 0);
    printf("  data: the last repetition of each flow alone and of all "
           "together checked in every slot\n");
    fflush(stdout);
    free(a);
    return g.med;
}

/* Every rank's stamps and its flows' paths to rank 0, which prints the
 * table; there the aggregate's median (GB/s), elsewhere 0. */
static double report(ipcp_comm_t *c, rsize_t *z, int pat)
{
    size_t bytes = sizeof(double) * (size_t)z->ntm;
    if (me != 0) {
        OK(ipcp_send(c, z->tm, bytes, 0, T_RESULT));
        OK(ipcp_send(c, z->path, sizeof(int) * (size_t)z->nflows, 0, T_RESULT));
        return 0;
    }
    double *all = malloc(bytes * (size_t)nranks);
    int *paths = malloc(sizeof(int) * (size_t)z->nflows),
        *got = malloc(sizeof(int) * (size_t)z->nflows);
    if (!all || !paths || !got)
        die("no memory for the results");
    memcpy(all, z->tm, bytes);
    memcpy(paths, z->path, sizeof(int) * (size_t)z->nflows);
    for (int r = 1; r < nranks; r++) {
        OK(ipcp_recv(c, all + (size_t)r * z->ntm, bytes, r, T_RESULT, NULL));
        OK(ipcp_recv(c, got, sizeof(int) * (size_t)z->nflows, r, T_RESULT,
                     NULL));
        for (int f = 0; f < z->nflows; f++)
            if (z->flows[f].dst == r)
                paths[f] = got[f];
    }
    double g = print_table(z, pat, all, paths);
    free(all);
    free(paths);
    free(got);
    return g;
}

/* ---- NCCL's grouped send/recv of the same pattern ---------------------- */

/* The communicator of every rank (--mem cuda, --nccl on), else NULL and,
 * on rank 0, why. */
static bench_nccl_t *nccl;
static char nccl_why[256];

typedef struct nmsg {
    int ok;
    char why[240];
} nmsg_t;

/* m from rank 0 to every rank. */
static void bcast_msg(ipcp_comm_t *c, nmsg_t *m)
{
    for (int r = 1; r < nranks && me == 0; r++)
        OK(ipcp_send(c, m, sizeof(*m), r, T_RESULT));
    if (me != 0)
        OK(ipcp_recv(c, m, sizeof(*m), 0, T_RESULT, NULL));
}

/* Whether this rank may run on one CPU only (--pin, or a launcher's
 * binding): then NCCL's waits yield to its proxy thread. */
static int one_cpu(void)
{
    cpu_set_t set;
    return sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) == 1;
}

/* NCCL's communicator of all ranks, each on its GPU, from rank 0's id;
 * all ranks have it or none (the first failure's reason at rank 0). */
static void nccl_open(ipcp_comm_t *c, const ropts_t *o)
{
    unsigned char id[BENCH_NCCL_ID_BYTES];
    nmsg_t m = {1, ""}, x;
    if (me == 0 && bench_nccl_unique_id(id, m.why, sizeof(m.why)) < 0)
        m.ok = 0;
    bcast_msg(c, &m);
    if (m.ok && me == 0)
        for (int r = 1; r < nranks; r++)
            OK(ipcp_send(c, id, sizeof(id), r, T_RESULT));
    else if (m.ok)
        OK(ipcp_recv(c, id, sizeof(id), 0, T_RESULT, NULL));
    if (m.ok) {
        /* Init is collective: a rank that failed leaves the others
         * waiting until this. */
        double t = o->timeout_s > 0 && o->timeout_s < 120 ? o->timeout_s : 120;
        nccl =
            bench_nccl_init(id, me, nranks, one_cpu(), t, m.why, sizeof(m.why));
        m.ok = nccl != NULL;
        if (me != 0)
            OK(ipcp_send(c, &m, sizeof(m), 0, T_RESULT));
        for (int r = 1; r < nranks && me == 0; r++) {
            OK(ipcp_recv(c, &x, sizeof(x), r, T_RESULT, NULL));
            if (!x.ok && m.ok)
                snprintf(m.why, sizeof(m.why), "rank %d: %.200s", r, x.why);
            m.ok &= x.ok;
        }
        bcast_msg(c, &m);
    }
    if (!m.ok) {
        bench_nccl_destroy(nccl);
        nccl = NULL;
        snprintf(nccl_why, sizeof(nccl_why), "%s", m.why);
    }
}

/* The pattern through NCCL, every flow's W messages in one group on each
 * rank: a warm-up, then reps timed from each rank's exit from the barrier
 * to its stream's end (this rank's into st, two a repetition); the last
 * checked in every slot. */
static void nccl_reps(ipcp_comm_t *c, rsize_t *z, double timeout_s, double *st)
{
    int max = z->w * 2 * (nranks - 1), n = 0;
    bench_nccl_op_t *ops = calloc((size_t)max, sizeof(*ops));
    char err[256];
    if (!ops)
        die("no memory for %d NCCL calls", max);
    for (int f = 0; f < z->nflows; f++) {
        const flow_t *fl = &z->flows[f];
        for (int i = 0; i < z->w && (fl->src == me || fl->dst == me); i++)
            ops[n++] =
                fl->dst == me
                    ? (bench_nccl_op_t){0, fl->src, slot(&z->rx[f], i), z->size}
                    : (bench_nccl_op_t){1, fl->dst, slot(&z->src, i), z->size};
    }
    for (int k = -1; k < z->reps; k++) {
        if (k == z->reps - 1)
            poison(z, NULL);
        OK(ipcp_barrier(c));
        double t0 = now();
        if (bench_nccl_post_group(nccl, ops, n, err, sizeof(err)) < 0 ||
            bench_nccl_wait(nccl, timeout_s, err, sizeof(err)) < 0)
            die("NCCL, %zu bytes x%d a flow: %s", z->size, z->w, err);
        if (k >= 0) {
            st[2 * k] = t0;
            st[2 * k + 1] = now();
        }
    }
    check_rx(z, NULL, "NCCL");
    free(ops);
}

/* NCCL's run of the size; rank 0 prints its aggregate (every flow's bytes
 * from the first rank's start to the last rank's end, as ipcpipe's) beside
 * ipcpipe's, ipc_g. */
static void nccl_size(ipcp_comm_t *c, rsize_t *z, double timeout_s,
                      double ipc_g)
{
    size_t n = (size_t)2 * z->reps;
    double *st = calloc(n * (size_t)nranks, sizeof(double));
    if (!st)
        die("no memory for the NCCL stamps");
    nccl_reps(c, z, timeout_s, st);
    if (me != 0) {
        OK(ipcp_send(c, st, sizeof(double) * n, 0, T_RESULT));
        free(st);
        return;
    }
    for (int r = 1; r < nranks; r++)
        OK(ipcp_recv(c, st + (size_t)r * n, sizeof(double) * n, r, T_RESULT,
                     NULL));
    for (int k = 0; k < z->reps; k++) {
        double first = st[2 * k], end = st[2 * k + 1];
        for (int r = 1; r < nranks; r++) {
            first = min2(first, st[(size_t)r * n + 2 * (size_t)k]);
            if (st[(size_t)r * n + 2 * (size_t)k + 1] > end)
                end = st[(size_t)r * n + 2 * (size_t)k + 1];
        }
        st[k] = gbs(z->size, z->w * z->nflows, end - first);
    }
    stat3_t g = ipcp_tool_stats(st, z->reps);
    char gs[32];
    fmt_stat(gs, sizeof(gs), g);
    printf("  %-12s %-8s %-24s %-24s %s %.2f\n", "NCCL", "grouped", "", gs,
           "ipcpipe/NCCL", g.med > 0 ? ipc_g / g.med : 0);
    printf("  data: NCCL's last repetition checked in every slot\n");
    fflush(stdout);
    free(st);
}

/* One size of one pattern: buffers, the repetitions, the table. */
static void run_size(ipcp_comm_t *c, const ropts_t *o, int pat, size_t size,
                     uint64_t seed)
{
    static flow_t flows[IPCP_LAUNCH_MAX_RANKS * IPCP_LAUNCH_MAX_RANKS];
    rsize_t z;
    memset(&z, 0, sizeof(z));
    z.size = size;
    z.w = o->window            ? o->window
          : size <= (64 << 10) ? 64
          : size <= (1 << 20)  ? 16
          : size <= (64 << 20) ? 4
                               : 2;
    z.reps = o->reps;
    z.nflows = pattern_flows(pat, nranks, flows);
    z.flows = flows;
    z.seed = seed;
    z.rx = calloc((size_t)z.nflows, sizeof(rbuf_t));
    z.ntm = (3 * z.nflows + 2) * z.reps;
    z.tm = calloc((size_t)z.ntm, sizeof(double));
    z.path = calloc((size_t)z.nflows, sizeof(int));
    z.tmp = malloc(size ? size : 1);
    double *end = calloc((size_t)z.nflows, sizeof(double));
    char *sel = calloc((size_t)z.nflows, 1);
    if (!z.rx || !z.tm || !z.path || !z.tmp || !end || !sel)
        die("no memory for %d flows", z.nflows);
    rbuf_alloc(&z.src, o->cuda, size, z.w);
    rbuf_fill(&z.src, src_seed(&z, me), z.tmp);
    for (int f = 0; f < z.nflows; f++)
        if (flows[f].dst == me)
            rbuf_alloc(&z.rx[f], o->cuda, size, z.w);
    OK(ipcp_barrier(c));
    run_flows(c, &z, NULL, end); /* warm-up: mappings, slots, pages */
    for (int k = 0; k < z.reps; k++)
        run_rep(c, &z, k, sel, end);
    double g = report(c, &z, pat);
    if (nccl)
        nccl_size(c, &z, o->timeout_s > 0 ? o->timeout_s : 86400, g);
    for (int f = 0; f < z.nflows; f++)
        if (flows[f].dst == me)
            rbuf_free(&z.rx[f]);
    rbuf_free(&z.src);
    free(z.rx);
    free(z.tm);
    free(z.path);
    free(z.tmp);
    free(end);
    free(sel);
}

/* Device buffers: this rank's GPU (rank mod the GPUs visible) made
 * current; the header line's note on ranks that share one. */
static void cuda_open(char *note, size_t len)
{
#ifdef IPCP_HAVE_CUDA
    char err[256];
    static ipcp_diag_gpus_t g; /* large: kept off the stack */
    CUdevice dev;
    CUcontext ctx;
    if (ipcp_diag_gpus(&g) != IPCP_OK || g.ndev < 1)
        die("--mem cuda: %s", ipcp_last_error());
    if (tool_cu_load(err, sizeof(err)) != 0)
        die("--mem cuda: %s", err);
    gpu_of_rank = me % g.ndev;
    CU(TOOL_CU(cuDeviceGet)(&dev, gpu_of_rank));
    CU(TOOL_CU(cuDevicePrimaryCtxRetain)(&ctx, dev));
    CU(TOOL_CU(cuCtxSetCurrent)(ctx));
    if (nranks > g.ndev)
        snprintf(note, len,
                 "; rank r on GPU r mod %d: %d ranks share a GPU (their "
                 "figures are not those of ranks on GPUs of their own)",
                 g.ndev, (nranks + g.ndev - 1) / g.ndev);
    else
        snprintf(note, len, "; rank r on GPU r");
#else
    (void)note;
    (void)len;
    die("--mem cuda: built without the CUDA headers");
#endif
}

static int rank_main(const ropts_t *o)
{
    ipcp_comm_t *c = NULL;
    char note[160] = "";
    OK(ipcp_init(NULL, &c));
    me = ipcp_comm_rank(c);
    nranks = ipcp_comm_size(c);
    if (nranks != o->nranks && o->nranks_set)
        die("--ranks %d, but the launcher started %d", o->nranks, nranks);
    if (nranks < 2 || nranks > IPCP_LAUNCH_MAX_RANKS)
        die("runs with 2 to %d ranks, not %d", IPCP_LAUNCH_MAX_RANKS, nranks);
    if (o->pats[PAT_PAIRS] && nranks % 2 && o->pats_set)
        die("--pattern pairs needs an even number of ranks, not %d", nranks);
    if (o->cuda)
        cuda_open(note, sizeof(note));
    uint64_t seed = (uint64_t)(now() * 1e9) | 1;
    OK(ipcp_barrier(c));
    if (me == 0) {
        for (int r = 1; r < nranks; r++)
            OK(ipcp_send(c, &seed, sizeof(seed), r, T_RESULT));
    } else {
        OK(ipcp_recv(c, &seed, sizeof(seed), 0, T_RESULT, NULL));
    }
    if (me == 0)
        printf("ipcpipe %s, %d ranks, %s memory%s; medians of %d "
               "repetitions [min-max]\n",
               ipcp_version_string(), nranks, o->cuda ? "device" : "host", note,
               o->reps);
    if (o->cuda && o->nccl) {
        char lib[160];
        nccl_open(c, o);
        bench_nccl_describe(lib, sizeof(lib));
        if (me == 0 && nccl)
            printf("NCCL (%s): each pattern also as ncclSend/ncclRecv, all of "
                   "a rank's in one group\n",
                   lib);
        else if (me == 0)
            printf("NCCL: not run: %s\n", nccl_why);
        fflush(stdout);
    }
    for (int p = 0; p < NPATS; p++) {
        if (!o->pats[p])
            continue;
        if (p == PAT_PAIRS && nranks % 2) {
            if (me == 0)
                printf("pairs: left out (%d ranks, an odd number)\n", nranks);
            continue;
        }
        for (int i = 0; i < o->nsizes; i++)
            run_size(c, o, p, o->sizes[i], seed + (uint64_t)(p * 64 + i));
    }
    bench_nccl_destroy(nccl);
    OK(ipcp_finalize(c));
    return 0;
}

int main(int argc, char **argv)
{
    ropts_t o;
    ranks_parse(argc, argv, &o);
    if (ipcp_launch_is_rank())
        return rank_main(&o);
    if (o.pats_set && o.pats[PAT_PAIRS] && o.nranks % 2)
        die("--pattern pairs needs an even number of ranks, not %d", o.nranks);
    ipcp_launch_opts_t lo = {
        .nranks = o.nranks,
        .timeout_s = o.timeout_s,
        .argv_self = argv,
        .pin = o.pin,
    };
    ipcp_launch_result_t res;
    if (ipcp_launch(&lo, &res) != 0)
        die("cannot start %d ranks: %s", o.nranks, strerror(errno));
    return ipcp_launch_exit_code(&res);
}
