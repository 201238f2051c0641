/* ipcpipe-bench-mpi: the figures of ipcpipe-bench's host cases, measured
 * with MPI between two ranks, for the "ompi" rows of ipcpipe-bench
 * --compare.  ipcpipe-bench starts it under mpirun and decides every
 * parameter (sizes, windows, slots, repetitions, rounds, seed, CPUs); this
 * program only runs them the way bench_run.c runs ipcpipe's cases and
 * writes one JSON object a line to --out:
 *
 *   bandwidth  rank 1 sends, rank 0 receives and times.  Warm-up transfers
 *              one at a time, the first checked; then each repetition
 *              starts at a barrier, W MPI_Isend / MPI_Irecv (the k-th from
 *              source slot k % slots into receive slot k % slots) and
 *              MPI_Waitall, timed from the later of the two ranks' barrier
 *              exits to rank 0's completion; the median repetition gives
 *              GB/s, and the last one's last slot is checked (every source
 *              slot rewritten before each repetition, poisoned receive
 *              slots).
 *   run ahead  (AHEAD windows) the same windows after one barrier, back
 *              to back, each timed on rank 0 from the end of the one
 *              before (the first and the last not timed); each source
 *              slot's first word rewritten before each window, the last
 *              window's slots whole, and that window checked.
 *   latency    half of an MPI_Send / MPI_Recv round trip, median of the
 *              rounds after the warm-up ones, the last round checked.
 *
 * It does not link ipcpipe: only MPI and the tools' header-only helpers. */
#include <mpi.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json.h"
#include "pattern.h"

#define MAX_CASES  64
#define REASON_MAX 256
#define POISON     0xa5

/* Tags of case i: 4 * i + one of these, so that nothing of one case can
 * match a receive of another. */
enum { T_DATA = 0, T_PING = 1, T_PONG = 2, T_TIMES = 3 };

typedef struct mcase {
    size_t size;
    int window, slots, reps, rounds; /* rounds 0: no latency */
    int ahead;                       /* windows back to back; 0: none */
} mcase_t;

typedef struct mopts {
    const char *out;
    uint64_t seed;
    int warmup, verify;
    cpu_set_t cpus[2]; /* what ipcpipe's rank r may run on */
    int have_cpus[2];
    mcase_t cs[MAX_CASES];
    int n;
} mopts_t;

/* One rank's state: its buffers hold the largest case (both ranks have a
 * source and the receive slots, as ipcpipe-bench's ranks do). */
typedef struct mrun {
    const mopts_t *o;
    int rank;
    unsigned char *src, *dst;
    MPI_Request *reqs;
} mrun_t;

typedef struct mres {
    const char *status; /* "ok" or "waived" */
    double gbps, latency_us, first_us, skew_us;
    double gbps_min, gbps_max, latency_min_us, latency_max_us;
    double ahead_gbps, ahead_min, ahead_max;
    int iters;
    int verified; /* 1 every checked byte right, 0 not, -1 off */
    char reason[REASON_MAX];
} mres_t;

static const char usage_text[] =
    "usage: mpirun -np 2 ipcpipe-bench-mpi --out FILE --case "
    "SIZE,W,SLOTS,REPS,ROUNDS,AHEAD\n"
    "           [--case ...] [--seed HEX] [--warmup N] [--no-verify]\n"
    "           [--cpus0 LIST] [--cpus1 LIST]\n"
    "Started by ipcpipe-bench --compare --mem host, which chooses every\n"
    "parameter: per case the size, W transfers per repetition landing in\n"
    "SLOTS slots, REPS timed repetitions, ROUNDS ping-pong rounds (0:\n"
    "none) and AHEAD windows back to back after one barrier (0: none).\n"
    "Rank r binds itself to the CPUs of --cpus<r> (a Linux CPU\n"
    "list, as ipcpipe's rank r had).  One JSON object per line goes to\n"
    "FILE, from rank 0.\n";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    if (n <= 0)
        return NAN;
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- arguments ----------------------------------------------------------- */

/* "0-3,8,10-11" into set; 0, or -1 when malformed. */
static int parse_cpulist(const char *s, cpu_set_t *set)
{
    CPU_ZERO(set);
    while (*s) {
        char *end;
        errno = 0;
        unsigned long a = strtoul(s, &end, 10), b = a;
        if (errno || end == s || a >= CPU_SETSIZE)
            return -1;
        if (*end == '-') {
            const char *p = end + 1;
            b = strtoul(p, &end, 10);
            if (errno || end == p || b < a || b >= CPU_SETSIZE)
                return -1;
        }
        for (unsigned long c = a; c <= b; c++)
            CPU_SET((int)c, set);
        if (*end && *end != ',')
            return -1;
        s = *end ? end + 1 : end;
    }
    return CPU_COUNT(set) > 0 ? 0 : -1;
}

static int parse_ulong(const char **s, unsigned long long max,
                       unsigned long long *out, int last)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(*s, &end, 10);
    if (errno || end == *s || v > max || (last ? *end != '\0' : *end != ','))
        return -1;
    *out = v;
    *s = last ? end : end + 1;
    return 0;
}

/* "SIZE,W,SLOTS,REPS,ROUNDS,AHEAD", each a decimal integer. */
static int parse_case(const char *s, mcase_t *c)
{
    unsigned long long v[6];
    static const unsigned long long max[6] = {SIZE_MAX, 1 << 20, 1 << 20,
                                              1000000,  1000000, 1000000};
    for (int k = 0; k < 6; k++)
        if (parse_ulong(&s, max[k], &v[k], k == 5) < 0)
            return -1;
    if (v[0] == 0 || v[1] == 0 || v[2] == 0 || v[2] > v[1] || v[3] == 0 ||
        v[5] == 1)
        return -1;
    *c = (mcase_t){(size_t)v[0], (int)v[1], (int)v[2],
                   (int)v[3],    (int)v[4], (int)v[5]};
    return 0;
}

/* Applies option name with value val; 0, or -1 when the value is bad. */
static int apply_opt(mopts_t *o, const char *name, const char *val)
{
    char *end;
    if (strcmp(name, "--out") == 0) {
        o->out = val;
        return *val ? 0 : -1;
    }
    if (strcmp(name, "--seed") == 0) {
        errno = 0;
        o->seed = strtoull(val, &end, 16);
        return errno || end == val || *end ? -1 : 0;
    }
    if (strcmp(name, "--warmup") == 0) {
        errno = 0;
        long v = strtol(val, &end, 10);
        o->warmup = (int)v;
        return errno || end == val || *end || v < 0 || v > 1000000 ? -1 : 0;
    }
    if (strcmp(name, "--cpus0") == 0 || strcmp(name, "--cpus1") == 0) {
        int r = name[6] - '0';
        o->have_cpus[r] = 1;
        return parse_cpulist(val, &o->cpus[r]);
    }
    if (strcmp(name, "--case") == 0)
        return o->n < MAX_CASES ? parse_case(val, &o->cs[o->n++]) : -1;
    return -1;
}

/* 0, 1 after --help, or 2 with a message in err. */
static int parse_args(int argc, char **argv, mopts_t *o, char *err, size_t elen)
{
    *o = (mopts_t){.warmup = 2, .verify = 1};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0)
            return 1;
        if (strcmp(argv[i], "--no-verify") == 0) {
            o->verify = 0;
            continue;
        }
        if (i + 1 == argc || apply_opt(o, argv[i], argv[i + 1]) < 0) {
            snprintf(err, elen, "bad option or value: %s%s%s", argv[i],
                     i + 1 < argc ? " " : "", i + 1 < argc ? argv[i + 1] : "");
            return 2;
        }
        i++;
    }
    if (!o->out || o->n == 0) {
        snprintf(err, elen, "--out and at least one --case are needed");
        return 2;
    }
    return 0;
}

/* ---- the cases ------------------------------------------------------------
 */

/* Seed of checked transfer k of case i (0/1: first/last of the bandwidth
 * part, 2: ping-pong): every check has its own data. */
static uint64_t case_seed(const mopts_t *o, int i, int k)
{
    return ipcp_pattern_word(o->seed, (uint64_t)i * 8 + (uint64_t)k);
}

static int case_tag(int i, int kind)
{
    return 4 * i + kind;
}

/* Checks len bytes at p against seed; a mismatch clears verified and
 * names the first bad byte (the first one found is kept). */
static void check_bytes(mres_t *res, const unsigned char *p, size_t len,
                        uint64_t seed, const char *what)
{
    size_t bad = ipcp_pattern_check(p, len, seed, 0);
    if (bad == len)
        return;
    if (res->verified != 0)
        snprintf(res->reason, sizeof(res->reason),
                 "%s: byte %zu of %zu is 0x%02x, expected 0x%02x", what, bad,
                 len, p[bad], ipcp_pattern_byte(seed, bad));
    res->verified = 0;
}

/* W transfers of the case: receives into the slots on rank 0, sends of
 * the source on rank 1; returns when all of this rank's are done. */
static void xfer_window(mrun_t *m, const mcase_t *c, int i, int w, int slots)
{
    int tag = case_tag(i, T_DATA), cnt = (int)c->size;
    for (int k = 0; k < w; k++) {
        if (m->rank == 0)
            MPI_Irecv(m->dst + (size_t)(k % slots) * c->size, cnt, MPI_BYTE, 1,
                      tag, MPI_COMM_WORLD, &m->reqs[k]);
        else
            MPI_Isend(m->src + (size_t)(k % slots) * c->size, cnt, MPI_BYTE, 0,
                      tag, MPI_COMM_WORLD, &m->reqs[k]);
    }
    MPI_Waitall(w, m->reqs, MPI_STATUSES_IGNORE);
}

static void bw_warmup(mrun_t *m, const mcase_t *c, int i, mres_t *res)
{
    const mopts_t *o = m->o;
    if (m->rank == 1 && o->verify)
        ipcp_pattern_fill(m->src, c->size, case_seed(o, i, 0), 0);
    for (int w = 0; w < o->warmup; w++) {
        int check = w == 0 && o->verify && m->rank == 0;
        if (check)
            memset(m->dst, POISON, c->size);
        double a = now_s();
        xfer_window(m, c, i, 1, 1);
        if (w == 0)
            res->first_us = (now_s() - a) * 1e6;
        if (check)
            check_bytes(res, m->dst, c->size, case_seed(o, i, 0), "warm-up");
    }
}

/* GB/s of windows of bytes from their n times t (sorted here): the
 * median one's, the slowest's and the fastest's. */
static void gbps_of(double bytes, double *t, int n, double *med, double *lo,
                    double *hi)
{
    double m = median(t, n);
    *med = m > 0 ? bytes / m / 1e9 : NAN;
    *lo = n > 0 && t[n - 1] > 0 ? bytes / t[n - 1] / 1e9 : NAN;
    *hi = n > 0 && t[0] > 0 ? bytes / t[0] / 1e9 : NAN;
}

/* Rank 0: GB/s from the median repetition, each timed from the later of
 * both ranks' barrier exits (t0: rank 0's, peer: rank 1's) to t1. */
static void bw_figures(const mcase_t *c, double *t0, double *t1,
                       const double *peer, mres_t *res)
{
    int n = c->reps;
    double *skew = malloc((size_t)n * sizeof(*skew));
    for (int r = 0; r < n; r++) {
        if (skew)
            skew[r] = peer[r] - t0[r];
        t1[r] -= peer[r] > t0[r] ? peer[r] : t0[r];
    }
    res->skew_us = skew ? median(skew, n) * 1e6 : NAN;
    gbps_of((double)c->window * (double)c->size, t1, n, &res->gbps,
            &res->gbps_min, &res->gbps_max);
    free(skew);
}

/* Rank 0: the last transfer of a window (receive slot (w - 1) % slots,
 * sent from the same source slot), against seed's data. */
static void check_last(mrun_t *m, const mcase_t *c, mres_t *res, uint64_t seed,
                       const char *what)
{
    int k = (c->window - 1) % c->slots;
    check_bytes(res, m->dst + (size_t)k * c->size, c->size,
                ipcp_pattern_slot_seed(seed, (uint64_t)k), what);
}

static int bw_timed(mrun_t *m, const mcase_t *c, int i, mres_t *res)
{
    const mopts_t *o = m->o;
    int n = c->reps, w = c->window, slots = c->slots;
    double *t0 = malloc((size_t)n * sizeof(*t0));
    double *t1 = malloc((size_t)n * sizeof(*t1));
    double *peer = malloc((size_t)n * sizeof(*peer));
    if (!t0 || !t1 || !peer) {
        free(t0);
        free(t1);
        free(peer);
        return -1;
    }
    for (int r = 0; r < n; r++) {
        int last = r == n - 1 && o->verify;
        if (last && m->rank == 0)
            memset(m->dst, POISON, (size_t)slots * c->size);
        /* Fresh data in every source slot before each repetition, as
         * ipcpipe-bench writes its host sends: a source sent unchanged
         * again and again would sit in the receiver's cache after the
         * first read, which only a single-copy read gains from. */
        if (m->rank == 1)
            ipcp_pattern_fill_slots(m->src, c->size, slots,
                                    case_seed(o, i, 1) + (last ? 0 : r + 1u));
        MPI_Barrier(MPI_COMM_WORLD);
        t0[r] = now_s();
        xfer_window(m, c, i, w, slots);
        t1[r] = now_s();
    }
    if (m->rank == 1) {
        MPI_Send(t0, n, MPI_DOUBLE, 0, case_tag(i, T_TIMES), MPI_COMM_WORLD);
    } else {
        MPI_Recv(peer, n, MPI_DOUBLE, 1, case_tag(i, T_TIMES), MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        bw_figures(c, t0, t1, peer, res);
        if (o->verify)
            check_last(m, c, res, case_seed(o, i, 1), "last");
    }
    free(t0);
    free(t1);
    free(peer);
    return 0;
}

/* As ipcpipe-bench --ahead: c->ahead windows after one barrier, each
 * posted as soon as this rank's one before completed, rank 1 writing each
 * window's source slots right before it (their first words; the last
 * window's whole); rank 0 times every window after the first but the last
 * from the end of the one before, and checks the last. */
static int bw_ahead(mrun_t *m, const mcase_t *c, int i, mres_t *res)
{
    const mopts_t *o = m->o;
    int n = c->ahead, w = c->window, slots = c->slots;
    uint64_t seed = case_seed(o, i, 3);
    double *t = malloc((size_t)n * sizeof(*t));
    if (!t)
        return -1;
    if (m->rank == 0 && o->verify)
        memset(m->dst, POISON, (size_t)slots * c->size);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int r = 0; r < n; r++) {
        int last = r == n - 1 && o->verify;
        if (m->rank == 1 && last)
            ipcp_pattern_fill_slots(m->src, c->size, slots, seed);
        else if (m->rank == 1)
            ipcp_pattern_stamp_slots(m->src, c->size, slots, seed + r + 1u);
        xfer_window(m, c, i, w, slots);
        t[r] = now_s();
    }
    if (m->rank == 0) {
        for (int r = 1; r < n - 1; r++)
            t[r - 1] = t[r] - t[r - 1];
        gbps_of((double)w * (double)c->size, t, n - 2, &res->ahead_gbps,
                &res->ahead_min, &res->ahead_max);
        if (o->verify)
            check_last(m, c, res, seed, "run ahead, last");
    }
    free(t);
    return 0;
}

/* Half round trips: rank 0 sends its source and receives the echo; rank 1
 * echoes what it received.  As ipcpipe-bench's ping-pong does: fresh data
 * every round into poisoned buffers on both ranks, checked after it, none
 * of it timed (data written just before it is sent sits dirty in the
 * sender's cache; one fill for all rounds would let later rounds copy
 * lines both caches share). */
static int pingpong(mrun_t *m, const mcase_t *c, int i, mres_t *res)
{
    const mopts_t *o = m->o;
    int total = o->warmup + c->rounds, cnt = (int)c->size, n = 0;
    int ping = case_tag(i, T_PING), pong = case_tag(i, T_PONG);
    double *t = malloc((size_t)c->rounds * sizeof(*t));
    if (!t)
        return -1;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int k = 0; k < total; k++) {
        if (m->rank == 1) {
            if (o->verify)
                memset(m->dst, POISON, c->size);
            MPI_Recv(m->dst, cnt, MPI_BYTE, 0, ping, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            MPI_Send(m->dst, cnt, MPI_BYTE, 0, pong, MPI_COMM_WORLD);
            continue;
        }
        uint64_t seed = ipcp_pattern_word(case_seed(o, i, 2), (uint64_t)k);
        if (o->verify) {
            ipcp_pattern_fill(m->src, c->size, seed, 0);
            memset(m->dst, POISON, c->size);
        }
        double a = now_s();
        MPI_Send(m->src, cnt, MPI_BYTE, 1, ping, MPI_COMM_WORLD);
        MPI_Recv(m->dst, cnt, MPI_BYTE, 1, pong, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        double b = now_s();
        if (k >= o->warmup)
            t[n++] = 0.5 * (b - a);
        if (o->verify)
            check_bytes(res, m->dst, c->size, seed, "ping-pong");
    }
    res->latency_us = m->rank == 0 ? median(t, n) * 1e6 : NAN;
    res->latency_min_us = m->rank == 0 && n > 0 ? t[0] * 1e6 : NAN;
    res->latency_max_us = m->rank == 0 && n > 0 ? t[n - 1] * 1e6 : NAN;
    free(t);
    return 0;
}

/* ---- output ---------------------------------------------------------------
 */

static void json_num(FILE *f, const char *key, double v)
{
    if (isfinite(v) && v >= 0)
        fprintf(f, ", \"%s\": %.9g", key, v);
    else
        fprintf(f, ", \"%s\": null", key);
}

static void write_case(FILE *f, const mcase_t *c, const mres_t *res)
{
    fprintf(f, "{\"size\": %zu, \"window\": %d, \"slots\": %d, \"iters\": %d",
            c->size, c->window, c->slots, res->iters);
    fprintf(f, ", \"rounds\": %d, \"status\": ", c->rounds);
    ipcp_json_str(f, res->status);
    json_num(f, "gbps", res->gbps);
    json_num(f, "gbps_min", res->gbps_min);
    json_num(f, "gbps_max", res->gbps_max);
    json_num(f, "latency_us", res->latency_us);
    json_num(f, "latency_min_us", res->latency_min_us);
    json_num(f, "latency_max_us", res->latency_max_us);
    json_num(f, "first_us", res->first_us);
    json_num(f, "ahead_gbps", res->ahead_gbps);
    json_num(f, "ahead_gbps_min", res->ahead_min);
    json_num(f, "ahead_gbps_max", res->ahead_max);
    /* negative skews are real (rank 1 left first): written as they are */
    if (isfinite(res->skew_us))
        fprintf(f, ", \"skew_us\": %.9g", res->skew_us);
    else
        fprintf(f, ", \"skew_us\": null");
    fprintf(f, ", \"verified\": %s, \"reason\": ",
            res->verified < 0 ? "null"
            : res->verified   ? "true"
                              : "false");
    ipcp_json_str(f, res->reason);
    fprintf(f, "}\n");
    fflush(f);
}

/* ---- the run --------------------------------------------------------------
 */

/* One case on this rank; rank 0 writes its line.  0, or -1 when out of
 * memory (the ranks then stop). */
static int run_case(mrun_t *m, int i, FILE *out)
{
    const mcase_t *c = &m->o->cs[i];
    mres_t res = {.status = "ok",
                  .gbps = NAN,
                  .gbps_min = NAN,
                  .gbps_max = NAN,
                  .latency_us = NAN,
                  .latency_min_us = NAN,
                  .latency_max_us = NAN,
                  .first_us = NAN,
                  .skew_us = NAN,
                  .ahead_gbps = NAN,
                  .ahead_min = NAN,
                  .ahead_max = NAN,
                  .iters = c->reps,
                  .verified = m->o->verify ? 1 : -1};
    /* Every rank sees the same case, so they skip it together. */
    if (c->size > INT_MAX) {
        res.status = "waived";
        res.verified = -1;
        snprintf(res.reason, sizeof(res.reason),
                 "MPI counts bytes in an int: sizes above %d are not sent "
                 "in one message",
                 INT_MAX);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        bw_warmup(m, c, i, &res);
        if (bw_timed(m, c, i, &res) < 0 ||
            (c->ahead > 0 && bw_ahead(m, c, i, &res) < 0) ||
            (c->rounds > 0 && pingpong(m, c, i, &res) < 0))
            return -1;
    }
    if (m->rank == 0)
        write_case(out, c, &res);
    return 0;
}

/* Buffers for the largest case, touched now so that no timed transfer
 * pays for first-touch page faults (ipcpipe's buffers are touched too). */
static int alloc_buffers(mrun_t *m)
{
    size_t src = 0, dst = 0;
    int w = 1;
    for (int i = 0; i < m->o->n; i++) {
        const mcase_t *c = &m->o->cs[i];
        if (c->size > INT_MAX)
            continue;
        size_t win = (size_t)c->slots * c->size;
        src = win > src ? win : src;
        dst = win > dst ? win : dst;
        w = c->window > w ? c->window : w;
    }
    void *a = NULL, *b = NULL;
    m->reqs = malloc((size_t)w * sizeof(*m->reqs));
    if (!m->reqs || posix_memalign(&a, 4096, src ? src : 1) ||
        posix_memalign(&b, 4096, dst ? dst : 1)) {
        fprintf(stderr,
                "ipcpipe-bench-mpi [rank %d]: out of memory for buffers of "
                "%zu and %zu bytes\n",
                m->rank, src, dst);
        free(a);
        free(m->reqs);
        m->reqs = NULL;
        return -1;
    }
    m->src = a;
    m->dst = b;
    memset(m->src, 0, src);
    memset(m->dst, 0, dst);
    return 0;
}

/* Binds this rank to the CPUs its ipcpipe counterpart had. */
static int bind_self(const mopts_t *o, int rank)
{
    if (!o->have_cpus[rank])
        return 0;
    if (sched_setaffinity(0, sizeof(o->cpus[rank]), &o->cpus[rank]) == 0)
        return 0;
    fprintf(stderr,
            "ipcpipe-bench-mpi [rank %d]: cannot bind to --cpus%d: %s\n", rank,
            rank, strerror(errno));
    return -1;
}

/* Rank 0: the results file, opened with the MPI library's name first. */
static FILE *open_out(const char *path)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "ipcpipe-bench-mpi: cannot write %s: %s\n", path,
                strerror(errno));
        return NULL;
    }
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, "\r\n")] = '\0';
    fprintf(f, "{\"library\": ");
    ipcp_json_str(f, lib);
    fprintf(f, "}\n");
    return f;
}

static int run_all(const mopts_t *o, int rank)
{
    mrun_t m = {.o = o, .rank = rank};
    FILE *out = NULL;
    int ok = bind_self(o, rank) == 0 && alloc_buffers(&m) == 0;
    if (ok && rank == 0)
        ok = (out = open_out(o->out)) != NULL;
    /* Both ranks learn whether both can run before the first case. */
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    for (int i = 0; all && i < o->n; i++) {
        if (run_case(&m, i, out) < 0) {
            fprintf(stderr, "ipcpipe-bench-mpi [rank %d]: out of memory\n",
                    rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    if (out && fclose(out) != 0) {
        fprintf(stderr, "ipcpipe-bench-mpi: writing %s: %s\n", o->out,
                strerror(errno));
        all = 0;
    }
    free(m.src);
    free(m.dst);
    free(m.reqs);
    return all ? 0 : 1;
}

int main(int argc, char **argv)
{
    mopts_t o;
    char err[256];
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* Every rank parses the same arguments and comes to the same end. */
    int rc = parse_args(argc, argv, &o, err, sizeof(err));
    if (rc == 1) {
        if (rank == 0)
            fputs(usage_text, stdout);
        MPI_Finalize();
        return 0;
    }
    if (rc == 2 && rank == 0)
        fprintf(stderr, "ipcpipe-bench-mpi: %s (see --help)\n", err);
    if (rc == 0 && size != 2) {
        if (rank == 0)
            fprintf(stderr,
                    "ipcpipe-bench-mpi: needs exactly 2 ranks "
                    "(mpirun -np 2), has %d\n",
                    size);
        rc = 2;
    }
    if (rc == 0)
        rc = run_all(&o, rank);
    MPI_Finalize();
    return rc;
}
